import { readFileSync } from 'node:fs';

/** The installed version of a peer (bench/peers/node_modules, linked beside the compiled runners). */
export function peerVersion(name: string): string {
  const manifest = new URL(`./node_modules/${name}/package.json`, import.meta.url);
  return (JSON.parse(readFileSync(manifest, 'utf8')) as { version: string }).version;
}
