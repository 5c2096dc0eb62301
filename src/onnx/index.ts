/**
 * The onnx layer: a typed ONNX graph builder (opset 17, IR 8), a protobuf writer, reverse-mode
 * autodiff that emits standard ONNX ops, AdamW as graph ops, and ONNX Runtime sessions with
 * execution-provider fallback. Imports only core.
 *
 * Usage:
 * ```ts
 * import { Graph, toModelProto, OnnxSession } from './';
 *
 * const g = Graph.create('mlp');
 * const x = g.input('x', 'float32', ['B', 4]);        // symbolic batch dim 'B'
 * const w = g.input('w', 'float32', [4, 3]);
 * const b = g.input('b', 'float32', [3]);
 * const ids = g.input('ids', 'int64', ['B']);
 * const logits = g.add(g.matmul(x, w), b);             // broadcasting Add
 * const logp = g.logSoftmax(logits, -1);
 * const picked = g.gatherElements(logp, g.unsqueeze(ids, [1]), 1); // [B,1]
 * const loss = g.neg(g.reduceMean(picked));            // scalar
 * g.output(loss, 'loss');
 * g.output(g.tanh(logits), 'h');                        // outputs may be renamed
 * // Other ops: g.node('OpType', [inputs], { attr: 1, alpha: { f: 0.5 } }, { outputs: [{ dtype, shape }] })
 *
 * const session = await OnnxSession.create(toModelProto(g), { provider: 'auto' });
 * const out = await session.run({
 *   x: { dtype: 'float32', dims: [2, 4], data: new Float32Array(8) },
 *   w: ..., b: ..., ids: { dtype: 'int64', dims: [2], data: BigInt64Array.of(0n, 2n) },
 * });
 * out.loss.data; // Float32Array [1]
 * ```
 * Gradients: `gradients(g, loss, [w, b])` appends the backward pass to `g` (see autodiff.ts).
 * Training graphs: `buildTrainingGraph` / `Trainer` in training.ts.
 */
export * from './graph';
export { toModelProto, type ExternalPlacement, type ExternalTensor } from './model';
export { ProtoWriter } from './protobuf';
export * from './runtime';
export { gradients, unbroadcast, shapeTensor, DIFFERENTIABLE_OPS } from './autodiff';
export * from './optim';
export * from './training';
