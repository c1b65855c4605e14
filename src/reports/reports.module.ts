import { Module } from '@nestjs/common';
import { ReportSteps } from './report.steps.js';
import { ReportsController } from './reports.controller.js';

@Module({ providers: [ReportSteps], controllers: [ReportsController] })
export class ReportsModule {}
