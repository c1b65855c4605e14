import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DashboardAssetsMissingError } from '../errors/dashboard-assets-missing.error.js';

export interface DashboardAsset {
  body: string;
  contentType: string;
}

const CONTENT_TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
};

/**
 * Where the built front end is: `dist/dashboard/assets/` of the package,
 * beside this file once built, or below the package root when this file
 * runs from its source (the repository's tests).
 */
const CANDIDATES = [new URL('./assets/', import.meta.url), new URL('../../dist/dashboard/assets/', import.meta.url)].map((url) =>
  fileURLToPath(url),
);

/**
 * The dashboard's front end, shipped in the package and read into memory
 * once at startup: a request never touches the file system, and only files
 * of this folder can be asked for by name.
 */
export class DashboardAssets {
  private constructor(
    private readonly files: ReadonlyMap<string, DashboardAsset>,
    /** A hash of every file: links to assets carry it, so a new version is never served from a stale cache. */
    readonly version: string,
  ) {}

  static load(): DashboardAssets {
    const dir = CANDIDATES.find((candidate) => existsSync(join(candidate, 'main.js')));
    if (dir === undefined) throw new DashboardAssetsMissingError(CANDIDATES);
    const files = new Map<string, DashboardAsset>();
    const hash = createHash('sha256');
    for (const name of readdirSync(dir).sort()) {
      const contentType = CONTENT_TYPES[extname(name)];
      if (contentType === undefined) continue;
      const body = readFileSync(join(dir, name), 'utf8');
      hash.update(name).update(body);
      files.set(name, { body, contentType });
    }
    return new DashboardAssets(files, hash.digest('hex').slice(0, 12));
  }

  get(name: string): DashboardAsset | undefined {
    return this.files.get(name);
  }

  get names(): string[] {
    return [...this.files.keys()];
  }
}
