import { Module } from '@nestjs/common';
import { AppMigrations } from './app-migrations.js';

@Module({ providers: [AppMigrations] })
export class DatabaseModule {}
