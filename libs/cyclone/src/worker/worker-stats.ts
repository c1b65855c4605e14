/** Counters of one client's workers, read by the health indicator. */
export class WorkerStats {
  heartbeatFailures = 0;
  leasesLost = 0;
  claimFailures = 0;
  lastClaimError: string | null = null;
}
