import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import type pg from 'pg';
import { readSql } from '../schema/sql-files.js';
import { CliError, EXIT_FAILED, EXIT_OK, EXIT_USAGE } from './cli-error.js';
import { connect } from './connect.js';
import { migrateCommand } from './migrate.command.js';
import { statusCommand } from './status.command.js';

const USAGE = `Usage: cyclone <command> [options]

Commands:
  migrate [--dry-run]   apply pending migrations (--dry-run prints their SQL instead)
  schema                print the whole current schema as SQL
  status [--json]       migrations, queue backlogs, paused queues, stranded leases

Options:
  --url <url>           PostgreSQL URL; default CYCLONE_DATABASE_URL, else DATABASE_URL
  -h, --help            this help
  -v, --version         the version of cyclone-nestjs
`;

const COMMANDS: Record<string, readonly string[]> = {
  migrate: ['dry-run', 'url'],
  schema: [],
  status: ['json', 'url'],
};

/** Runs the CLI; returns the exit code. Every failure is one line on stderr. */
export async function main(argv: string[], out = process.stdout, err = process.stderr): Promise<number> {
  let client: pg.Client | undefined;
  try {
    const { values, positionals } = parse(argv);
    if (values.version) {
      const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
      out.write(`${pkg.version}\n`);
      return EXIT_OK;
    }
    const [command, ...extra] = positionals;
    if (values.help || command === undefined) {
      (command === undefined && !values.help ? err : out).write(USAGE);
      return command === undefined && !values.help ? EXIT_USAGE : EXIT_OK;
    }
    const allowed = COMMANDS[command];
    if (!allowed) throw new CliError(`unknown command "${command}"; the commands are ${Object.keys(COMMANDS).join(', ')}`, EXIT_USAGE);
    if (extra.length > 0) throw new CliError(`unexpected argument "${extra[0]}"`, EXIT_USAGE);
    for (const name of Object.keys(values)) {
      if (!allowed.includes(name)) throw new CliError(`option --${name} does not apply to ${command}`, EXIT_USAGE);
    }
    if (command === 'schema') {
      out.write(readSql('sql/schema.sql'));
      return EXIT_OK;
    }
    client = await connect(values.url);
    if (command === 'migrate') await migrateCommand(client, values['dry-run'] === true, out);
    else await statusCommand(client, values.json === true, out);
    return EXIT_OK;
  } catch (error) {
    const code = error instanceof CliError ? error.exitCode : EXIT_FAILED;
    const message = error instanceof Error ? error.message : String(error);
    err.write(`cyclone: ${message.split('\n')[0]}\n`);
    if (code === EXIT_USAGE) err.write('Run `cyclone --help` for usage.\n');
    return code;
  } finally {
    await client?.end().catch(() => undefined);
  }
}

function parse(argv: string[]) {
  try {
    return parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: {
        url: { type: 'string' },
        'dry-run': { type: 'boolean' },
        json: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
        version: { type: 'boolean', short: 'v' },
      },
    });
  } catch (error) {
    throw new CliError((error as Error).message, EXIT_USAGE);
  }
}
