/**
 * What a pass of a code workflow returns when it ended without an outcome
 * for the execution to record: `suspended` (its node is waiting, written by
 * the pass's last statement), `lease_lost` (a write of it matched nothing:
 * the node is no longer this pass's), or `unrecorded` (a write failed: the
 * lease expires and the sweep makes the node available again, without an
 * attempt counted). None leaves anything for the execution to write.
 */
export class PassEnded {
  constructor(readonly reason: 'suspended' | 'lease_lost' | 'unrecorded') {}
}
