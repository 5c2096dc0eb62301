// Which operators a graph uses, and which of them an execution provider has no kernel for. ONNX
// Runtime places such a node on the CPU without a word (each placement costs a copy to the host
// and back), so the generated graphs are checked against the providers' kernel lists.
import { Graph } from './graph';

/** Operator type → node count, over the graph and every subgraph (Loop and If bodies). */
export function opTypes(g: Graph): Map<string, number> {
  const out = new Map<string, number>();
  const walk = (h: Graph) => {
    for (const n of h.nodes) {
      const op = n.domain ? `${n.domain}.${n.op}` : n.op;
      out.set(op, (out.get(op) ?? 0) + 1);
      for (const a of Object.values(n.attrs)) if (a instanceof Graph) walk(a);
    }
  };
  walk(g);
  return new Map([...out].sort(([a], [b]) => a.localeCompare(b)));
}

/**
 * The ai.onnx operators with a kernel on each GPU provider, among those the graph builder can
 * emit (src/onnx/graph.ts), at the opset the graphs are written in (17). CUDA's from ONNX
 * Runtime's registrations (docs/OperatorKernels.md's CUDAExecutionProvider table); WebGPU's as
 * ONNX Runtime 1.30's WebGPU provider places them (the webgpu test tier reads the placements of
 * the training, prefill and decode graphs from the session log: every float op there is on the
 * GPU; the Loop node and a few small shape ops stay on the CPU by ONNX Runtime's own choice).
 */
const CUDA_KERNELS: readonly string[] = [
  'Abs',
  'Add',
  'And',
  'ArgMax',
  'Cast',
  'Clip',
  'Concat',
  'ConstantOfShape',
  'Cos',
  'CumSum',
  'Div',
  'Equal',
  'Exp',
  'Expand',
  'Gather',
  'GatherElements',
  'Gemm',
  'Greater',
  'GreaterOrEqual',
  'Identity',
  'If',
  'Less',
  'LessOrEqual',
  'Log',
  'LogSoftmax',
  'Loop',
  'MatMul',
  'Max',
  'Min',
  'Mod',
  'Mul',
  'Neg',
  'Not',
  'Or',
  'Pad',
  'Pow',
  'Range',
  'Reciprocal',
  'ReduceMax',
  'ReduceMean',
  'ReduceMin',
  'ReduceProd',
  'ReduceSum',
  'ReduceSumSquare',
  'Relu',
  'Reshape',
  'ScatterElements',
  'ScatterND',
  'Shape',
  'Sigmoid',
  'Sin',
  'Slice',
  'Softmax',
  'Split',
  'Sqrt',
  'Squeeze',
  'Sub',
  'Tanh',
  'Transpose',
  'Trilu',
  'Unsqueeze',
  'Where',
];

/**
 * Not on WebGPU: Loop (control flow, run by the CPU provider), Mod, LogSoftmax, ConstantOfShape,
 * Trilu, And/Or; Range for float and int32 only.
 */
const NOT_ON_WEBGPU: ReadonlySet<string> = new Set(['And', 'ConstantOfShape', 'LogSoftmax', 'Loop', 'Mod', 'Or', 'Range', 'Trilu']);

export const PROVIDER_KERNELS: Record<'cuda' | 'webgpu', ReadonlySet<string>> = {
  cuda: new Set(CUDA_KERNELS),
  webgpu: new Set(CUDA_KERNELS.filter((op) => !NOT_ON_WEBGPU.has(op))),
};

/** The operators of `g` a provider has no kernel for (they run on the CPU), with their node counts. */
export function opsWithoutKernel(g: Graph, provider: keyof typeof PROVIDER_KERNELS): Map<string, number> {
  const have = PROVIDER_KERNELS[provider];
  return new Map([...opTypes(g)].filter(([op]) => !have.has(op)));
}

/**
 * Node placements from ONNX Runtime's verbose session log (logSeverityLevel 0, printed to the
 * process's stderr while the session is created): "All nodes placed on [EP]. Number of nodes: N",
 * or per provider "Node(s) placed on [EP]. Number of nodes: N" followed by "  OpType (name)" lines.
 * Returns provider → node count and the nodes listed; empty when the log has no placements.
 */
export function parsePlacements(log: string): Map<string, { count: number; nodes: string[] }> {
  const out = new Map<string, { count: number; nodes: string[] }>();
  let current: { count: number; nodes: string[] } | undefined;
  for (const raw of log.split('\n')) {
    const at = raw.indexOf('VerifyEachNodeIsAssignedToAnEp]');
    if (at < 0) {
      current = undefined;
      continue;
    }
    const line = raw.slice(at + 'VerifyEachNodeIsAssignedToAnEp]'.length);
    const head = /(All nodes|Node\(s\)) placed on \[(\w+)\]\. Number of nodes: (\d+)/.exec(line);
    if (head) {
      current = { count: Number(head[3]), nodes: [] };
      out.set(head[2], current);
      continue;
    }
    const node = /^\s+(\S+) \((.*)\)\s*$/.exec(line);
    if (node && current) current.nodes.push(`${node[1]} (${node[2]})`);
  }
  return out;
}
