/** Exit codes of the `cyclone` command. */
export const EXIT_OK = 0;
export const EXIT_FAILED = 1;
export const EXIT_USAGE = 2;

/** A failure the CLI reports as one line and an exit code, never a stack trace. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: typeof EXIT_FAILED | typeof EXIT_USAGE = EXIT_FAILED,
  ) {
    super(message);
  }
}
