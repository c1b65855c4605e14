import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { AppModule } from './app.module.js';

/**
 * The example app. `CYCLONE_ROLE=worker` starts it without HTTP, as a
 * worker-only process; otherwise it serves the API on PORT (default 3000).
 */
async function bootstrap(): Promise<void> {
  const logger = new Logger('Example');
  if (process.env.CYCLONE_ROLE === 'worker') {
    const app = await NestFactory.createApplicationContext(AppModule);
    app.enableShutdownHooks();
    logger.log(`Worker ${process.pid} ready`);
    return;
  }
  const app = await NestFactory.create(AppModule);
  app.enableShutdownHooks();
  const port = Number(process.env.PORT ?? 3000);
  await app.listen(port);
  logger.log(`Listening on http://localhost:${port} (try GET /health, POST /reports, POST /onboarding; the dashboard is at /cyclone)`);
}

void bootstrap();
