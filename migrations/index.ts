import { CycloneInit1764403200000 } from './1764403200000-cyclone-init.js';
import { CycloneRecovery1764489600000 } from './1764489600000-cyclone-recovery.js';
import { CycloneBatchCompletion1764576000000 } from './1764576000000-cyclone-batch-completion.js';
import { CycloneWorkflows1764662400000 } from './1764662400000-cyclone-workflows.js';
import { CycloneIndexPredicates1764748800000 } from './1764748800000-cyclone-index-predicates.js';

/**
 * Cyclone's migrations in order. Add them to your own DataSource's
 * `migrations` to migrate with TypeORM, or let `CycloneModule` apply them.
 */
export const CYCLONE_MIGRATIONS = [
  CycloneInit1764403200000,
  CycloneRecovery1764489600000,
  CycloneBatchCompletion1764576000000,
  CycloneWorkflows1764662400000,
  CycloneIndexPredicates1764748800000,
] as const;

export type CycloneMigration = (typeof CYCLONE_MIGRATIONS)[number];
