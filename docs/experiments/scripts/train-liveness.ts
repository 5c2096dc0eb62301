// Memory a training graph holds in the order ONNX Runtime runs it: builds the LoRA training graph
// at a bench shape (one row, recomputed layers), lets ONNX Runtime optimize it and save the
// result (its topological order, the one its sequential executor runs), then walks that order
// freeing each value after its last reader. Prints, as JSON, the peak of live values, the peak
// in build order, and what is alive at the runtime's peak (values ONNX Runtime created are not
// counted: a lower bound). No weights are loaded or run.
//   npx tsx docs/experiments/scripts/train-liveness.ts [--shape llama3.2-1b] [--seq 1024] [--layers N] [--r 16]
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import * as ort from 'onnxruntime-node';
import { toModelProto } from '../../../src/onnx';
import { BENCH_SHAPES } from '../../../src/bench/model';
import { LORA_MODULES } from '../../../src/policy/files/lora';
import { buildTrainGraph } from '../../../src/policy/training/graphs';
import { peakLiveBytes, readModelNodes, valueBytes } from '../../../test/unit/onnx/model-reader';

const { values } = parseArgs({
  options: {
    shape: { type: 'string', default: 'llama3.2-1b' },
    seq: { type: 'string', default: '1024' },
    layers: { type: 'string' },
    r: { type: 'string', default: '16' },
  },
});
const base = BENCH_SHAPES[values.shape!];
if (!base) throw new Error(`unknown shape ${values.shape}: one of ${Object.keys(BENCH_SHAPES).join(', ')}`);
const c = { ...base, ...(values.layers ? { num_hidden_layers: Number(values.layers) } : {}) };
const T = Number(values.seq);
const MB = 2 ** 20;

async function main(): Promise<void> {
  const g = buildTrainGraph(c, {
    batch: 1,
    seq: T,
    loss: 'ppo-token',
    recomputeLayers: true,
    lora: { r: Number(values.r), lora_alpha: 2 * Number(values.r), use_rslora: false, target_modules: [...LORA_MODULES] },
  });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'turnwise-liveness-'));
  const file = path.join(dir, 'optimized.onnx');
  const s = await ort.InferenceSession.create(toModelProto(g), {
    executionProviders: ['cpu'],
    graphOptimizationLevel: 'all',
    optimizedModelFilePath: file,
    logSeverityLevel: 3,
  });
  await s.release();
  const size = valueBytes(g);
  const runtime = peakLiveBytes(readModelNodes(fs.readFileSync(file)), size);
  const built = peakLiveBytes(
    g.liveNodes().map((n) => ({ inputs: n.inputs.flatMap((v) => (v ? [v.name] : [])), outputs: n.outputs.map((v) => v.name) })),
    size,
  );
  fs.rmSync(dir, { recursive: true, force: true });
  const byOp = new Map<string, number>();
  for (const [name, b] of runtime.atPeak) byOp.set(size.get(name)!.op, (byOp.get(size.get(name)!.op) ?? 0) + b);
  console.log(
    JSON.stringify(
      {
        shape: values.shape,
        layers: c.num_hidden_layers,
        seq: T,
        lora_r: Number(values.r),
        runtime_order_peak_mb: Math.round(runtime.peak / MB),
        build_order_peak_mb: Math.round(built.peak / MB),
        alive_at_runtime_peak_mb_by_op: Object.fromEntries(
          [...byOp]
            .sort((a, b) => b[1] - a[1])
            .slice(0, 8)
            .map(([k, v]) => [k, Math.round(v / MB)]),
        ),
      },
      null,
      2,
    ),
  );
}

void main();
