import { existsSync, mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser } from 'playwright-core';

/**
 * Chromium for the browser tests: Debian's `chromium` package (which
 * `.ci/run` installs), or the one CYCLONE_TEST_CHROMIUM names. Playwright
 * never downloads a browser of its own here.
 */
export const CHROMIUM = process.env.CYCLONE_TEST_CHROMIUM ?? '/usr/bin/chromium';

export const chromiumInstalled = (): boolean => existsSync(CHROMIUM);

/** Where the browser tests save a screenshot of each page (git-ignored). */
export const SCREENSHOTS = fileURLToPath(new URL('../../.artifacts/dashboard/', import.meta.url));

/**
 * Whether the browser tests can run here. Without Chromium they are skipped
 * and say so plainly; with CYCLONE_TEST_REQUIRE_BROWSER set (CI), a missing
 * browser fails the run instead.
 */
export function browserTestsEnabled(): boolean {
  if (chromiumInstalled()) return true;
  const missing =
    `no Chromium at ${CHROMIUM}. Install Debian's chromium package (apt-get install -y chromium) ` +
    'or set CYCLONE_TEST_CHROMIUM to a Chromium binary.';
  if (process.env.CYCLONE_TEST_REQUIRE_BROWSER) throw new Error(`The browser tests cannot run (CYCLONE_TEST_REQUIRE_BROWSER is set): ${missing}`);
  process.stderr.write(`\n[cyclone tests] Browser tests skipped: ${missing}\n`);
  return false;
}

/** Headless Chromium as root on a machine with no network beyond loopback. */
export async function launchChromium(): Promise<Browser> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  // Playwright gives each launch a fresh, empty user data directory.
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}
