import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The package's root: this file is `src/schema/` or `dist/schema/` below it. */
const PACKAGE_ROOT = fileURLToPath(new URL('../../', import.meta.url));

/**
 * Reads a SQL file of the package (`migrations/…`, `sql/…`) with psql's
 * `\ir` includes expanded in place, so a migration that names a function's
 * file runs that file's live definition, and the same file runs under psql.
 */
export function readSql(relativePath: string): string {
  return expand(resolve(PACKAGE_ROOT, relativePath));
}

function expand(path: string): string {
  const text = readFileSync(path, 'utf8');
  return text.replace(/^\\ir\s+(\S+)[ \t]*$/gm, (_line, include: string) =>
    expand(resolve(dirname(path), include)).trimEnd(),
  );
}
