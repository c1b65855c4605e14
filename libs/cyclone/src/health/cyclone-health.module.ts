import { Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { CycloneHealthIndicator } from './cyclone.health-indicator.js';

/** Provides `CycloneHealthIndicator`; import it beside `CycloneModule.forRoot(...)`. */
@Module({
  imports: [TerminusModule],
  providers: [CycloneHealthIndicator],
  exports: [CycloneHealthIndicator],
})
export class CycloneHealthModule {}
