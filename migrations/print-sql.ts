import { CYCLONE_MIGRATIONS } from './index.js';

/** Prints every migration's SQL, for teams that migrate with other tools. */
for (const migration of CYCLONE_MIGRATIONS) {
  process.stdout.write(`-- ${migration.name} (version ${migration.version})\n${migration.up.trim()}\n\n`);
}
