import { ConfigurableModuleBuilder } from '@nestjs/common';
import type { CycloneModuleOptions } from '../options/cyclone-module-options.interface.js';

export const {
  ConfigurableModuleClass: CycloneConfigurableModule,
  MODULE_OPTIONS_TOKEN: CYCLONE_MODULE_OPTIONS,
  OPTIONS_TYPE: CYCLONE_OPTIONS_TYPE,
  ASYNC_OPTIONS_TYPE: CYCLONE_ASYNC_OPTIONS_TYPE,
} = new ConfigurableModuleBuilder<CycloneModuleOptions>()
  .setClassMethodName('forRoot')
  .setExtras({ isGlobal: true }, (definition, extras) => ({ ...definition, global: extras.isGlobal }))
  .build();
