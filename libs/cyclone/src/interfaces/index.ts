export * from './enqueue-options.interface.js';
export * from './run-info.interface.js';
export * from './step-context.interface.js';
export * from './step-options.interface.js';
export * from './workflow-options.interface.js';
export * from './step-event.interface.js';
export * from './schedule-info.interface.js';
