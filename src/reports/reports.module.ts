import { Module } from '@nestjs/common';
import { ReportAlerts, ReportSteps } from './report.steps.js';
import { ReportsController } from './reports.controller.js';

@Module({ providers: [ReportSteps, ReportAlerts], controllers: [ReportsController] })
export class ReportsModule {}
