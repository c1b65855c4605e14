import { Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { CycloneHealthModule } from '../../libs/cyclone/src/health/index.js';
import { HealthController } from './health.controller.js';

@Module({ imports: [TerminusModule, CycloneHealthModule], controllers: [HealthController] })
export class HealthModule {}
