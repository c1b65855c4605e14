import { createServer, type Server } from 'node:http';
import type { INestApplicationContext } from '@nestjs/common';
import { CycloneHealthIndicator } from 'cyclone-nestjs/health';
import { CycloneMetrics } from 'cyclone-nestjs/metrics';

/**
 * `GET /metrics` and `GET /health` on a port of their own, for a worker-only
 * process, which has no HTTP app: each replica's counters are its own, so
 * Prometheus scrapes every replica, and a container's healthcheck asks each
 * replica whether its database, leases and loops are sound (503 when down).
 */
export function serveWorkerEndpoints(app: INestApplicationContext, port: number): Server {
  const metrics = app.get(CycloneMetrics);
  const health = app.get(CycloneHealthIndicator, { strict: false });
  return createServer((req, res) => {
    const answer = (status: number, type: string, body: string) => res.writeHead(status, { 'Content-Type': type }).end(body);
    const failed = (err: Error) => answer(500, 'text/plain', err.message);
    if (req.method === 'GET' && req.url === '/metrics') {
      metrics.metrics().then((text) => answer(200, metrics.contentType, text), failed);
    } else if (req.method === 'GET' && req.url === '/health') {
      health
        .isHealthy('cyclone', { maxQueueAge: '2m' })
        .then((result) => answer(result.cyclone.status === 'down' ? 503 : 200, 'application/json', JSON.stringify(result)), failed);
    } else {
      res.writeHead(404).end();
    }
  }).listen(port);
}
