import { createServer, type Server } from 'node:http';
import type { CycloneMetrics } from 'cyclone-nestjs/metrics';

/**
 * `GET /metrics` on a port of its own, for a worker-only process, which has
 * no HTTP app: each replica's counters are its own, so Prometheus scrapes
 * every replica.
 */
export function serveMetrics(metrics: CycloneMetrics, port: number): Server {
  return createServer((req, res) => {
    if (req.method !== 'GET' || req.url !== '/metrics') {
      res.writeHead(404).end();
      return;
    }
    metrics.metrics().then(
      (text) => res.writeHead(200, { 'Content-Type': metrics.contentType }).end(text),
      (err: Error) => res.writeHead(500, { 'Content-Type': 'text/plain' }).end(err.message),
    );
  }).listen(port);
}
