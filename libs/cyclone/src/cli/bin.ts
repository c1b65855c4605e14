#!/usr/bin/env node
import { main } from './main.js';

// A reader that stops early (`cyclone status | head -1`) closes the pipe: the
// rest of the output has nowhere to go, which is the reader's choice, not a
// failure. The command still finishes (a migration is not cut short) and
// exits with its own code; writes after the close are dropped.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code !== 'EPIPE' && error.code !== 'ERR_STREAM_DESTROYED') throw error;
});

process.exitCode = await main(process.argv.slice(2));
