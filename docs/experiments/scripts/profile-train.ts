// Where a training step's time goes: runs `bench train`'s step (turnwise-tiny, ppo-token) with
// ONNX Runtime's profiler and prints the time per op type and the slowest nodes, as JSON.
//   npx tsx docs/experiments/scripts/profile-train.ts [--batch 4] [--seq 128] [--steps 5] [--threads 0] [--k 1]
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import { presetConfig } from '../../../src/policy/model/config';
import { PolicyTrainer, type TrainBatch } from '../../../src/policy/training/trainer';
import { initWeights, SeededRandom } from '../../../src/policy/model/weights';

const { values } = parseArgs({
  options: {
    batch: { type: 'string', default: '4' },
    seq: { type: 'string', default: '128' },
    steps: { type: 'string', default: '5' },
    threads: { type: 'string', default: '0' },
    k: { type: 'string', default: '1' },
    top: { type: 'string', default: '25' },
    matmuls: { type: 'boolean', default: false },
  },
});
const B = Number(values.batch);
const T = Number(values.seq);
const K = Number(values.k);

interface TraceEvent {
  cat: string;
  name: string;
  dur: number;
  args?: { op_name?: string; provider?: string; output_type_shape?: Record<string, number[]>[] };
}

async function main(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'turnwise-profile-'));
  const c = presetConfig('tiny');
  const trainer = new PolicyTrainer(initWeights(c, 0), undefined, { threads: Number(values.threads), profile: path.join(dir, 'train') });
  const rng = new SeededRandom(1);
  const ids = Array.from({ length: B * T }, () => Math.floor(rng.next() * 256));
  const batch: TrainBatch = {
    inputIds: ids,
    lossMask: ids.map((_, i) => (i % T >= T / 2 ? 1 : 0)),
    oldLogp: ids.map(() => -5.5),
    advantages: ids.map(() => rng.next() * 2 - 1),
  };
  const batches = new Array<TrainBatch>(K).fill(batch);
  const wall: number[] = [];
  for (let i = 0; i < Number(values.steps) + 1; i++) {
    const t0 = performance.now();
    await trainer.train({ loss: 'ppo-token', batch: B, seq: T }, batches, { lr: 1e-4 });
    wall.push(performance.now() - t0);
  }
  await trainer.dispose(); // writes the profile
  const file = fs.readdirSync(dir).find((f) => f.endsWith('.json'));
  if (!file) throw new Error(`no profile written in ${dir}`);
  const events = JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8')) as TraceEvent[];
  const runs = events.filter((e) => e.cat === 'Session' && e.name === 'model_run');
  const nodes = events.filter((e) => e.cat === 'Node' && e.name.endsWith('_kernel_time'));
  const timedRuns = runs.slice(1); // the first run allocates
  const perRun = (us: number) => Math.round(us / Math.max(1, timedRuns.length) / 10) / 100; // ms per run
  const skip = nodes.length - Math.round((nodes.length * timedRuns.length) / runs.length);
  const timed = nodes.slice(skip);
  const byOp = new Map<string, { ms: number; count: number }>();
  for (const e of timed) {
    const op = e.args?.op_name ?? '?';
    const r = byOp.get(op) ?? { ms: 0, count: 0 };
    r.ms += e.dur;
    r.count++;
    byOp.set(op, r);
  }
  const byPhase = new Map<string, number>();
  for (const e of timed) {
    const name = e.name.replace(/_kernel_time$/, '');
    const phase = name.includes('/') ? name.split('/')[0] : 'other';
    const key = `${phase} ${e.args?.op_name ?? '?'}`;
    byPhase.set(phase, (byPhase.get(phase) ?? 0) + e.dur);
    byPhase.set(key, (byPhase.get(key) ?? 0) + e.dur);
  }
  const byNode = new Map<string, number>();
  const shape = (e: TraceEvent) => (e.args?.output_type_shape ?? []).map((o) => `[${Object.values(o)[0]}]`).join(',');
  for (const e of timed) {
    if (!values['matmuls'] && /MatMul|Gemm/.test(e.args?.op_name ?? '')) continue;
    const key = `${e.args?.op_name} ${e.name.replace(/_kernel_time$/, '')} → ${shape(e)}`;
    byNode.set(key, (byNode.get(key) ?? 0) + e.dur);
  }
  const kernelUs = timed.reduce((s, e) => s + e.dur, 0);
  const runUs = timedRuns.reduce((s, e) => s + e.dur, 0);
  const out = {
    batch: B,
    seq: T,
    k: K,
    wall_ms_per_call: wall.slice(1).map((x) => Math.round(x)),
    run_ms: perRun(runUs),
    kernel_ms: perRun(kernelUs),
    nodes_per_run: Math.round(timed.length / Math.max(1, timedRuns.length)),
    by_phase: [...byPhase.entries()]
      .filter(([k]) => !k.includes(' '))
      .sort((a, b) => b[1] - a[1])
      .map(([phase, us]) => ({
        phase,
        ms: perRun(us),
        top_ops: [...byPhase.entries()]
          .filter(([k]) => k.startsWith(`${phase} `))
          .sort((a, b) => b[1] - a[1])
          .slice(0, 6)
          .map(([k, u]) => `${k.split(' ')[1]} ${perRun(u)}`),
      })),
    by_op: [...byOp.entries()]
      .sort((a, b) => b[1].ms - a[1].ms)
      .map(([op, r]) => ({
        op,
        ms: perRun(r.ms),
        nodes: Math.round(r.count / timedRuns.length),
        share: Math.round((r.ms / kernelUs) * 1000) / 10,
      })),
    slowest_nodes: [...byNode.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, Number(values.top))
      .map(([n, us]) => ({ node: n, ms: perRun(us) })),
  };
  process.stdout.write(JSON.stringify(out, null, 1) + '\n');
  fs.rmSync(dir, { recursive: true, force: true });
}
main().catch((e) => {
  console.error(e);
  process.exit(1);
});
