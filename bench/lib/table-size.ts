/**
 * Bytes of a partitioned table with its indexes and TOAST, as a SQL expression:
 * the parent holds nothing, its partitions hold it all.
 */
export function totalBytesSql(table: 'cyclone_runs' | 'cyclone_steps'): string {
  return `(SELECT sum(pg_total_relation_size(relid)) FROM pg_partition_tree('${table}'))::bigint`;
}
