// Reads the node list of an ONNX model file (the graph's nodes in file order, with their input
// and output names): enough to see the order ONNX Runtime saves an optimized model in, and the
// memory of live values in that order. Tests and experiment scripts only.
import type { Graph } from '../../../src/onnx';

function varint(b: Uint8Array, i: number): [number, number] {
  let r = 0;
  let mul = 1;
  for (;;) {
    const x = b[i++];
    r += (x & 0x7f) * mul;
    mul *= 128;
    if (x < 128) return [r, i];
  }
}

/** The (field number, bytes) pairs of a message; varint and fixed fields are skipped. */
function* fields(b: Uint8Array): Generator<[number, Uint8Array]> {
  let i = 0;
  while (i < b.length) {
    let key: number;
    [key, i] = varint(b, i);
    const wire = key & 7;
    if (wire === 0) [, i] = varint(b, i);
    else if (wire === 1) i += 8;
    else if (wire === 5) i += 4;
    else if (wire === 2) {
      let len: number;
      [len, i] = varint(b, i);
      yield [key >>> 3, b.subarray(i, i + len)];
      i += len;
    } else throw new Error(`wire type ${wire} in an ONNX model`);
  }
}

export interface ReadNode {
  op: string;
  name: string;
  inputs: string[];
  outputs: string[];
}

/** The main graph's nodes (ModelProto.graph = 7, GraphProto.node = 1, NodeProto input 1, output 2, name 3, op_type 4). */
export function readModelNodes(model: Uint8Array): ReadNode[] {
  const text = new TextDecoder();
  const nodes: ReadNode[] = [];
  for (const [f, graph] of fields(model)) {
    if (f !== 7) continue;
    for (const [gf, node] of fields(graph)) {
      if (gf !== 1) continue;
      const n: ReadNode = { op: '', name: '', inputs: [], outputs: [] };
      for (const [nf, v] of fields(node)) {
        if (nf === 1) n.inputs.push(text.decode(v));
        else if (nf === 2) n.outputs.push(text.decode(v));
        else if (nf === 3) n.name = text.decode(v);
        else if (nf === 4) n.op = text.decode(v);
      }
      nodes.push(n);
    }
  }
  return nodes;
}

/** Bytes of every value of `g` (and what op made it) whose shape is fully known. */
export function valueBytes(g: Graph): Map<string, { bytes: number; op: string }> {
  const m = new Map<string, { bytes: number; op: string }>();
  const el: Record<string, number> = { float32: 4, int64: 8, bool: 1 };
  for (const n of g.nodes) {
    for (const o of n.outputs)
      if (o.shape.every((d) => typeof d === 'number'))
        m.set(o.name, { bytes: (o.shape as number[]).reduce((a, b) => a * b, el[o.dtype] ?? 4), op: n.op });
  }
  return m;
}

/**
 * Runs `order` (node input and output names) freeing each value after its last reader: the peak
 * bytes of live values and what is alive then. Values without a size in `size` (those ONNX
 * Runtime created) are not counted, nor values nothing reads.
 */
export function peakLiveBytes(
  order: readonly Pick<ReadNode, 'inputs' | 'outputs'>[],
  size: ReadonlyMap<string, { bytes: number }>,
): { peak: number; atPeak: [string, number][] } {
  const last = new Map<string, number>();
  order.forEach((n, i) => n.inputs.forEach((x) => last.set(x, i)));
  const alive = new Map<string, number>();
  let live = 0;
  let peak = 0;
  let atPeak: [string, number][] = [];
  order.forEach((n, i) => {
    for (const o of n.outputs) {
      const s = size.get(o);
      if (s && last.has(o)) {
        alive.set(o, s.bytes);
        live += s.bytes;
      }
    }
    if (live > peak) {
      peak = live;
      atPeak = [...alive];
    }
    for (const x of n.inputs) {
      if (last.get(x) === i && alive.has(x)) {
        live -= alive.get(x)!;
        alive.delete(x);
      }
    }
  });
  return { peak, atPeak };
}
