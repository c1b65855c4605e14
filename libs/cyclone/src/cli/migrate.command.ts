import type pg from 'pg';
import { applyMigrations, planMigrations } from '../schema/migrator.js';
import { messages } from '../cyclone.messages.js';
import { CliError } from './cli-error.js';

/**
 * `cyclone migrate`: applies pending migrations under the module's advisory
 * lock, in one transaction. With `--dry-run`, prints the SQL it would run
 * and changes nothing.
 */
export async function migrateCommand(client: pg.Client, dryRun: boolean, out: NodeJS.WritableStream): Promise<void> {
  const plan = await planMigrations(client);
  if (plan.unknown.length > 0) throw new CliError(messages.schemaFromOtherVersion(plan.unknown));
  if (dryRun) {
    if (plan.pending.length === 0) {
      out.write('-- The schema is up to date: nothing to apply.\n');
      return;
    }
    out.write('BEGIN;\nSELECT pg_advisory_xact_lock(7482001771);\n\n');
    for (const migration of plan.pending) {
      out.write(`-- ${migration.name} (version ${migration.version})\n${migration.up.trim()}\n\n`);
    }
    out.write('COMMIT;\n');
    return;
  }
  const applied = await applyMigrations(client);
  if (applied.length === 0) out.write('The schema is up to date: nothing to apply.\n');
  for (const migration of applied) out.write(`Applied ${migration.name} (version ${migration.version})\n`);
}
