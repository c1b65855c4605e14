import { Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { CycloneHealthModule } from 'cyclone-nestjs/health';
import { HealthController } from './health.controller.js';

@Module({ imports: [TerminusModule, CycloneHealthModule], controllers: [HealthController] })
export class HealthModule {}
