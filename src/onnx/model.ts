// Serializes a Graph into ONNX ModelProto bytes (field numbers from onnx.proto, IR version 8).
import { Attr, ConstTensor, DTYPE_CODE, Graph, IR_VERSION, OPSET, Shape, Value } from './graph';
import { ProtoWriter } from './protobuf';

// AttributeProto.AttributeType
const A_FLOAT = 1;
const A_INT = 2;
const A_STRING = 3;
const A_TENSOR = 4;
const A_GRAPH = 5;
const A_FLOATS = 6;
const A_INTS = 7;

/** Where an initializer's bytes are kept outside the model: a byte range of a file beside it (ONNX external data). */
export interface ExternalTensor {
  /** The file's name, relative to the model file's folder. */
  location: string;
  offset: number;
  length: number;
}

/** Picks the initializers kept outside the model, and where; undefined keeps one inside. */
export type ExternalPlacement = (name: string, t: ConstTensor) => ExternalTensor | undefined;

function writeTensor(w: ProtoWriter, t: ConstTensor, name?: string, external?: ExternalTensor): void {
  for (const d of t.dims) w.int(1, d);
  w.int(2, DTYPE_CODE[t.dtype]);
  if (name !== undefined) w.string(8, name);
  if (external) {
    // external_data (13) key/value entries, data_location (14) = EXTERNAL
    for (const [k, v] of [
      ['location', external.location],
      ['offset', String(external.offset)],
      ['length', String(external.length)],
    ])
      w.message(13, (e) => e.string(1, k).string(2, v));
    w.int(14, 1);
    return;
  }
  const d = t.data;
  w.bytes(9, new Uint8Array(d.buffer, d.byteOffset, d.byteLength)); // raw_data, little-endian
}

function writeShape(w: ProtoWriter, shape: Shape): void {
  for (const d of shape) {
    w.message(1, (dim) => {
      if (typeof d === 'number') dim.int(1, d);
      else if (!d.startsWith('?')) dim.string(2, d);
    });
  }
}

function writeValueInfo(w: ProtoWriter, v: Value, withShape: boolean): void {
  w.string(1, v.name).message(2, (t) =>
    t.message(1, (tt) => {
      tt.int(1, DTYPE_CODE[v.dtype]);
      if (withShape) tt.message(2, (s) => writeShape(s, v.shape));
    }),
  );
}

function writeAttr(w: ProtoWriter, name: string, a: Attr): void {
  w.string(1, name);
  if (typeof a === 'number') w.int(3, a).int(20, A_INT);
  else if (typeof a === 'string') w.string(4, a).int(20, A_STRING);
  else if (a instanceof Graph) w.message(6, (g) => writeGraph(g, a)).int(20, A_GRAPH);
  else if (Array.isArray(a)) w.packedInts(8, a as number[]).int(20, A_INTS);
  else if ('f' in a) w.float(2, a.f).int(20, A_FLOAT);
  else if ('floats' in a) w.packedFloats(7, a.floats).int(20, A_FLOATS);
  else if ('tensor' in a) w.message(5, (t) => writeTensor(t, a.tensor)).int(20, A_TENSOR);
}

function writeGraph(w: ProtoWriter, g: Graph, external?: ExternalPlacement): void {
  for (const n of g.liveNodes()) {
    w.message(1, (nw) => {
      for (const i of n.inputs) nw.string(1, i ? i.name : '');
      for (const o of n.outputs) nw.string(2, o.name);
      nw.string(3, n.name).string(4, n.op);
      for (const [k, a] of Object.entries(n.attrs)) nw.message(5, (aw) => writeAttr(aw, k, a));
      if (n.domain) nw.string(7, n.domain);
    });
  }
  w.string(2, g.name);
  if (!g.parent) for (const i of g.initializers) w.message(5, (t) => writeTensor(t, i.tensor, i.name, external?.(i.name, i.tensor)));
  // Subgraph outputs get no shapes: their dims are often loop-varying or only known outside.
  for (const v of g.inputs) w.message(11, (x) => writeValueInfo(x, v, true));
  for (const v of g.outputs) w.message(12, (x) => writeValueInfo(x, v, !g.parent));
}

/**
 * ModelProto bytes for a root graph (opset 17, IR version 8). `external` keeps the initializers it
 * places outside the model: their bytes must then be at those places, in files beside the model
 * file the session is created from.
 */
export function toModelProto(g: Graph, opts: { producer?: string; docString?: string; external?: ExternalPlacement } = {}): Uint8Array {
  if (g.parent) throw new Error('toModelProto needs the root graph');
  const w = new ProtoWriter()
    .int(1, IR_VERSION)
    .string(2, opts.producer ?? 'turnwise')
    .string(3, '0.1');
  if (opts.docString) w.string(6, opts.docString);
  w.message(7, (gw) => writeGraph(gw, g, opts.external));
  w.message(8, (o) => o.string(1, '').int(2, OPSET));
  // ONNX Runtime's own operators (MatMulNBits) are in its contrib domain, version 1.
  const domains = new Set<string>();
  const collect = (x: Graph): void => {
    for (const n of x.liveNodes()) {
      if (n.domain) domains.add(n.domain);
      for (const a of Object.values(n.attrs)) if (a instanceof Graph) collect(a);
    }
  };
  collect(g);
  for (const d of domains) w.message(8, (o) => o.string(1, d).int(2, 1));
  return w.finish();
}
