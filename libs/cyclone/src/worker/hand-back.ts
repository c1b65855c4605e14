import type { CycloneDatabase } from '../database/cyclone-database.js';
import type { ClaimedStep } from '../sql/claim.sql.js';
import { HAND_BACK } from '../sql/lease.sql.js';

/**
 * Hands claimed steps back, available at once with nothing counted against
 * them, each only while it is still this attempt's (owner and generation).
 * Returns how many were handed back.
 */
export async function handBack(database: CycloneDatabase, owner: string, steps: ClaimedStep[]): Promise<number> {
  const { rows } = await database.query(HAND_BACK, [
    steps.map((s) => s.run_id),
    steps.map((s) => s.id),
    owner,
    steps.map((s) => s.lease_generation),
  ]);
  return rows[0].handed;
}
