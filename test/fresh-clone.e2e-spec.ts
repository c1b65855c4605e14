import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFile, execFileSync } from 'node:child_process';
import { appendFileSync, cpSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The repository as a newcomer gets it: its files in a directory of their
 * own (no node_modules, nothing built), then `npm install`. Right after
 * that, `npx cyclone` must run this package's CLI, never the unrelated
 * `cyclone` on the registry; the README's `npm pack` works from there; and
 * a second build of the example app (as a second `npm start` runs it)
 * compiles nothing.
 */

const ROOT = fileURLToPath(new URL('..', import.meta.url));

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a command without the environment `npm test` gave this process (npm_* settings of this workspace). */
function run(command: string, args: string[], cwd: string, timeoutMs = 600_000): Promise<Run> {
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('npm_')));
  return new Promise((resolve) => {
    execFile(command, args, { cwd, env, timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }),
    );
  });
}

async function succeed(command: string, args: string[], cwd: string): Promise<string> {
  const result = await run(command, args, cwd);
  if (result.code !== 0) throw new Error(`${command} ${args.join(' ')} failed (${result.code}):\n${result.stderr || result.stdout}`);
  return result.stdout;
}

let clone: string;
const library = () => join(clone, 'libs/cyclone');
const mtime = (path: string) => statSync(join(clone, path)).mtimeMs;

beforeAll(async () => {
  clone = mkdtempSync(join(tmpdir(), 'cyclone-clone-'));
  // What a clone holds: the files git tracks (and new ones it does not ignore), nothing built or installed.
  const files = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: ROOT, encoding: 'utf8' })
    .split('\0')
    .filter((file) => file !== '' && existsSync(join(ROOT, file)));
  for (const file of files) {
    mkdirSync(dirname(join(clone, file)), { recursive: true });
    cpSync(join(ROOT, file), join(clone, file));
  }
  expect(existsSync(join(library(), 'dist'))).toBe(false);
  await succeed('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund'], clone);
}, 900_000);

afterAll(() => {
  if (clone) rmSync(clone, { recursive: true, force: true });
});

describe('a fresh clone', () => {
  it('npm install links the cyclone command to a file of this package, before anything is built', () => {
    const link = join(clone, 'node_modules/.bin/cyclone');
    expect(lstatSync(link).isSymbolicLink()).toBe(true);
    expect(realpathSync(link)).toBe(join(realpathSync(library()), 'bin/cyclone.js'));
    expect(existsSync(join(library(), 'dist'))).toBe(false);
  });

  it('npx cyclone runs this package’s CLI right after npm install: the first call builds the library, the next ones run the build', async () => {
    const help = await run('npx', ['--no-install', 'cyclone', '--help'], clone);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^Usage: cyclone <command> \[options\]\n/);
    expect(help.stderr).toContain('cyclone: building cyclone-nestjs first');
    expect(existsSync(join(library(), 'dist/cli/bin.js'))).toBe(true);

    const { version } = JSON.parse(readFileSync(join(library(), 'package.json'), 'utf8')) as { version: string };
    expect(await run('npx', ['--no-install', 'cyclone', '--version'], clone)).toEqual({ code: 0, stdout: `${version}\n`, stderr: '' });
  }, 600_000);

  it('npm pack in libs/cyclone, the README’s route until the package is on the registry, builds afresh and packs the CLI', async () => {
    const [packed] = JSON.parse(await succeed('npm', ['pack', '--json'], library())) as { filename: string; files: { path: string }[] }[];
    const paths = packed.files.map((f) => f.path);
    expect(paths).toEqual(expect.arrayContaining(['bin/cyclone.js', 'dist/cli/bin.js', 'dist/index.js', 'dist/dashboard/assets/main.js']));
    // Neither the build info of the incremental builds nor the sources.
    expect(paths.filter((p) => /tsbuildinfo|^src\/|^ui\//.test(p))).toEqual([]);
  }, 600_000);

  it('a second build of the example app, as a second npm start runs it, compiles nothing; a changed file is compiled again', async () => {
    await succeed('npm', ['run', 'build:example'], clone);
    const outputs = ['dist/src/main.js', 'dist/src/app.module.js', 'libs/cyclone/dist/index.js', 'libs/cyclone/dist/index.d.ts', 'libs/cyclone/dist/dashboard/assets/main.js'];
    const before = outputs.map(mtime);
    await succeed('npm', ['run', 'build:example'], clone);
    expect(outputs.map(mtime)).toEqual(before);

    // Not a build that skips everything: the app's changed file, and only its own output, is written again.
    appendFileSync(join(clone, 'src/main.ts'), '// changed\n');
    await succeed('npm', ['run', 'build:example'], clone);
    expect(mtime('dist/src/main.js')).toBeGreaterThan(before[0]);
    expect(outputs.slice(1).map(mtime)).toEqual(before.slice(1));
  }, 600_000);
});
