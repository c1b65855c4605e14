#!/usr/bin/env node
// The `cyclone` command. This file is committed rather than built, so that
// `npm install` in a fresh clone of the repository links it at once: `npx
// cyclone` then runs this package's CLI, never the unrelated `cyclone` on the
// registry. The published package ships dist/; a clone builds it on first use.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';

const entry = new URL('../dist/cli/bin.js', import.meta.url);
const source = new URL('../src/cli/bin.ts', import.meta.url);

if (!existsSync(entry) && existsSync(source)) {
  // The build's own output goes to stderr: stdout is the command's (`cyclone schema > schema.sql`).
  process.stderr.write('cyclone: building cyclone-nestjs first (this checkout has no dist/ yet)\n');
  const built = spawnSync('npm', ['run', 'build'], {
    cwd: new URL('..', import.meta.url),
    stdio: ['ignore', process.stderr, process.stderr],
    shell: process.platform === 'win32',
  });
  if (built.status !== 0) {
    process.stderr.write('cyclone: the build failed (see above); run `npm run build` in libs/cyclone and try again\n');
    process.exit(1);
  }
}

await import(entry.href);
