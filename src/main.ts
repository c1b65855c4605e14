import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { AppModule } from './app.module.js';
import { serveWorkerEndpoints } from './metrics/worker-endpoints.js';

/**
 * The example app. `CYCLONE_ROLE=worker` starts it without HTTP, as a
 * worker-only process (with METRICS_PORT, it serves only GET /metrics and
 * GET /health there); otherwise it serves the API on PORT (default 3000),
 * GET /metrics included.
 */
async function bootstrap(): Promise<void> {
  const logger = new Logger('Example');
  if (process.env.CYCLONE_ROLE === 'worker') {
    const app = await NestFactory.createApplicationContext(AppModule.register());
    app.enableShutdownHooks();
    const metricsPort = process.env.METRICS_PORT;
    if (metricsPort) serveWorkerEndpoints(app, Number(metricsPort));
    logger.log(`Worker ${process.pid} ready${metricsPort ? `; GET /metrics and /health on :${metricsPort}` : ''}`);
    return;
  }
  const app = await NestFactory.create(AppModule.register());
  app.enableShutdownHooks();
  const port = Number(process.env.PORT ?? 3000);
  await app.listen(port);
  logger.log(
    `Listening on http://localhost:${port} (try GET /health, GET /metrics, POST /users, POST /orders, POST /reports, ` +
      'POST /onboarding, POST /exports; the dashboard is at /cyclone)',
  );
}

void bootstrap();
