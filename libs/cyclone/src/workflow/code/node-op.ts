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
export function opJson(op: NodeOp, observed: number | null): string {
  let json = JSON.stringify({ op: op.op, name: op.name, ...op.fields, observed });
  if (op.input !== undefined) json = `${json.slice(0, -1)},"input":${op.input}}`;
  if (op.output !== undefined) json = `${json.slice(0, -1)},"output":${op.output}}`;
  return json;
}

/** Roughly the JSON size of an op: batches are cut to keep a statement's text within reason. */
export function opBytes(op: NodeOp): number {
  return 200 + (op.input?.length ?? 0) + (op.output?.length ?? 0);
}
