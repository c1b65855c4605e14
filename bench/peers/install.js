// @ts-check
/**
 * Installs what `npm run bench` needs beyond the repository's own install, on
 * first use and again only when a lockfile changes:
 *   - bench/node: the Node the bench runs on (a Node 22 binary from npm), since
 *     the peers need Node 22 while the repository stays on Node 20;
 *   - bench/peers: the systems the bench compares Cyclone with, installed by npm
 *     running on that Node, as their engines ask.
 * Each is a private package with its own lockfile, installed with `npm ci`, so
 * neither the root install nor `npm test` ever sees them. Last, the compiled
 * runners of the peers are linked to the installed packages, so that Node
 * resolves `pg-boss` & co. from bench/peers/node_modules.
 *
 *   node bench/peers/install.js      (npm run bench does this first)
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, lstatSync, mkdirSync, readFileSync, readlinkSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { delimiter, dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const peers = dirname(fileURLToPath(import.meta.url));
const bench = resolve(peers, '..');
const nodeDir = join(bench, 'node');
/** Where `node` of bench/node is linked (npm links a package's `bin` there). */
const BENCH_NODE_BIN = join(nodeDir, 'node_modules', '.bin');
/** The compiled peer runners (tsconfig.bench.json's outDir + bench/peers). */
const compiledPeers = join(bench, '..', '.build-bench', 'bench', 'peers');

/**
 * `npm ci` in `dir` unless its node_modules was installed from the same lockfile.
 * @param {string} dir
 * @param {NodeJS.ProcessEnv} env
 */
function install(dir, env) {
  const digest = createHash('sha256').update(readFileSync(join(dir, 'package-lock.json'))).digest('hex');
  const stamp = join(dir, 'node_modules', '.installed-from-lockfile');
  if (existsSync(stamp) && readFileSync(stamp, 'utf8') === digest) return;
  process.stdout.write(`Installing ${relative(process.cwd(), dir) || dir} (npm ci)\n`);
  const run = spawnSync('npm', ['ci', '--no-audit', '--no-fund'], { cwd: dir, env, stdio: 'inherit' });
  if (run.status !== 0) throw new Error(`npm ci in ${dir} failed (exit ${run.status ?? run.signal})`);
  writeFileSync(stamp, digest);
}

/** The environment of a child npm: none of the calling npm's own settings (a workspace, a prefix). */
function cleanEnv() {
  return Object.fromEntries(Object.entries(process.env).filter(([name]) => !/^npm_/i.test(name)));
}

/**
 * Links `link` to the directory `target`, replacing whatever is there.
 * @param {string} link
 * @param {string} target
 */
function linkDir(link, target) {
  mkdirSync(dirname(link), { recursive: true });
  const wanted = relative(dirname(link), target);
  try {
    const stat = lstatSync(link);
    if (stat.isSymbolicLink() && readlinkSync(link) === wanted) return;
    rmSync(link, { recursive: true, force: true });
  } catch {
    // Nothing there yet.
  }
  symlinkSync(wanted, link, 'dir');
}

function installBenchPeers() {
  install(nodeDir, cleanEnv());
  // npm's launcher starts `node` from PATH: with bench/node first, the peers' install runs on Node 22.
  const env = cleanEnv();
  env.PATH = `${BENCH_NODE_BIN}${delimiter}${env.PATH ?? ''}`;
  const version = spawnSync(join(BENCH_NODE_BIN, 'node'), ['--version'], { encoding: 'utf8' });
  if (version.status !== 0) throw new Error(`the Node of bench/node does not start: ${version.stderr || version.error}`);
  install(peers, env);
  linkDir(join(compiledPeers, 'node_modules'), join(peers, 'node_modules'));
}

try {
  installBenchPeers();
} catch (err) {
  process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
}
