import type { NodeType } from '../../sql/names.js';

/**
 * A durable call for cyclone_record_nodes to write (one element of its
 * p_ops): its fields, and its input and output as JSON texts already checked
 * (and measured) when the call was made, spliced in as they are.
 */
export interface NodeOp {
  op: Exclude<NodeType, 'workflow'>;
  name: string;
  fields: Record<string, unknown>;
  input?: string;
  output?: string;
  /**
   * Whether writing it finishes a call of the method (an inline call's
   * result, a child run started): it then takes its place in the order the
   * run learns of results, and `written` hands the method its result.
   */
  finishes: boolean;
  /** After the write committed, with its place in that order (null when it does not finish a call). */
  written?: (observed: number | null) => void;
}

/** One op as JSON, with its place in the order when it has one. */
function opJson(op: NodeOp, observed: number | null): string {
  let json = JSON.stringify({ op: op.op, name: op.name, ...op.fields, observed });
  if (op.input !== undefined) json = `${json.slice(0, -1)},"input":${op.input}}`;
  if (op.output !== undefined) json = `${json.slice(0, -1)},"output":${op.output}}`;
  return json;
}

/** Roughly the JSON size of an op: batches are cut to keep a statement's text within reason. */
function opBytes(op: NodeOp): number {
  return 200 + (op.input?.length ?? 0) + (op.output?.length ?? 0);
}

/** What one statement records at most: a fan-out of thousands goes in a few. */
const MAX_OPS_PER_WRITE = 1_000;
const MAX_BYTES_PER_WRITE = 8 * 1024 * 1024;

/**
 * The next batch of `ops` (taken from it) as cyclone_record_nodes's p_ops:
 * the ops that finish a call numbered from `next` in the order they were
 * made. Returns the batch, its JSON, each op's number, and the next free one.
 */
export function takeBatch(ops: NodeOp[], next: number): { batch: NodeOp[]; json: string; numbered: (number | null)[]; next: number } {
  let bytes = 0;
  let count = 0;
  while (count < ops.length && count < MAX_OPS_PER_WRITE) {
    bytes += opBytes(ops[count]);
    if (count > 0 && bytes > MAX_BYTES_PER_WRITE) break;
    count += 1;
  }
  const batch = ops.splice(0, count);
  const numbered = batch.map((op) => (op.finishes ? next++ : null));
  return { batch, json: `[${batch.map((op, i) => opJson(op, numbered[i])).join(',')}]`, numbered, next };
}
