import { Module } from '@nestjs/common';
import { ExportSteps } from './export.steps.js';
import { ExportsController } from './exports.controller.js';

@Module({ providers: [ExportSteps], controllers: [ExportsController] })
export class ExportsModule {}
