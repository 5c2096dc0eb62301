// Where a decode step's time goes: random weights at a bench shape, a context of --context
// tokens, then --steps sampled tokens at --batch rows with ONNX Runtime's profiler on the
// sessions; prints the wall time per token and the time per op type and the slowest nodes of
// the decode session, as JSON.
//   npx tsx docs/experiments/scripts/profile-decode.ts [--shape qwen2.5-0.5b] [--context 1024] [--steps 16] [--batch 1]
//     [--precision float32|int8|int4] [--no-profile]
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import { BENCH_SHAPES, randomWeights } from '../../../src/bench/model';
import { OnnxSession } from '../../../src/onnx';
import { Policy } from '../../../src/policy/inference/policy';
import { SeededRandom } from '../../../src/policy/model/weights';

const { values } = parseArgs({
  options: {
    shape: { type: 'string', default: 'qwen2.5-0.5b' },
    context: { type: 'string', default: '1024' },
    steps: { type: 'string', default: '16' },
    batch: { type: 'string', default: '1' },
    precision: { type: 'string', default: 'float32' },
    threads: { type: 'string', default: '0' },
    top: { type: 'string', default: '20' },
    'no-profile': { type: 'boolean', default: false },
  },
});

interface TraceEvent {
  cat: string;
  name: string;
  dur: number;
  ts: number;
  args?: { op_name?: string };
}

// Time inside OnnxSession.run as JavaScript sees it (the native run and the tensors' conversion),
// against the whole step: what is left is the host's own work per step.
let inRun = 0;
const run = OnnxSession.prototype.run;
OnnxSession.prototype.run = async function (this: OnnxSession, ...args: Parameters<typeof run>) {
  const t = performance.now();
  try {
    return await run.apply(this, args);
  } finally {
    inRun += performance.now() - t;
  }
};

async function main(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'turnwise-profile-decode-'));
  const config = BENCH_SHAPES[values.shape];
  const policy = new Policy(randomWeights(config, 0), undefined, {
    threads: Number(values.threads),
    rolloutPrecision: values.precision as 'float32' | 'int8' | 'int4',
    ...(!values['no-profile'] ? { profile: path.join(dir, 'decode') } : {}),
  });
  const rng = new SeededRandom(1);
  const ctx = policy.newSequence(Array.from({ length: Number(values.context) }, () => Math.floor(rng.next() * 256)));
  await policy.extend([{ seq: ctx }]);
  const gen = { temperature: 1, topP: 1, stopIds: [] as number[] };
  const rows = Number(values.batch);
  const steps = Number(values.steps);
  const decode = async (n: number) => {
    const seqs = Array.from({ length: rows }, () => ctx.fork());
    const t = performance.now();
    await policy.sample(seqs.map((seq, b) => ({ seq, seed: 10 + b, maxNewTokens: n, ...gen })));
    return performance.now() - t;
  };
  await decode(2);
  inRun = 0;
  const calls = [await decode(steps), await decode(steps), await decode(steps)];
  const runMs = inRun / 3 / steps;
  const ms = [...calls].sort((a, b) => a - b)[1];
  await policy.dispose(); // writes the profiles
  const out: Record<string, unknown> = {
    shape: values.shape,
    precision: values.precision,
    batch: rows,
    steps,
    ms_per_step: Math.round((ms / steps) * 10) / 10,
    tokens_per_s: Math.round(((rows * steps) / ms) * 1000 * 100) / 100,
    session_run_ms_per_step: Math.round(runMs * 10) / 10,
    host_ms_per_step: Math.round((calls.reduce((a, b) => a + b, 0) / 3 / steps - runMs) * 10) / 10,
  };
  if (!values['no-profile']) {
    // The decode session's profile: the one with the most runs.
    let best: { runs: number; events: TraceEvent[] } | undefined;
    for (const f of fs.readdirSync(dir).filter((x) => x.endsWith('.json'))) {
      const events = JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8')) as TraceEvent[];
      const runs = events.filter((e) => e.cat === 'Session' && e.name === 'model_run').length;
      if (!best || runs > best.runs) best = { runs, events };
    }
    if (!best) throw new Error(`no profile written in ${dir}`);
    const runs = best.events.filter((e) => e.cat === 'Session' && e.name === 'model_run').slice(2);
    const first = runs[0].ts;
    const nodes = best.events.filter((e) => e.cat === 'Node' && e.name.endsWith('_kernel_time') && e.ts >= first);
    const per = (us: number) => Math.round(us / runs.length / 10) / 100;
    const byOp = new Map<string, number>();
    const byNode = new Map<string, number>();
    for (const n of nodes) {
      const op = n.args?.op_name ?? '?';
      byOp.set(op, (byOp.get(op) ?? 0) + n.dur);
      const name = n.name.replace(/_kernel_time$/, '');
      byNode.set(name, (byNode.get(name) ?? 0) + n.dur);
    }
    const runUs = runs.reduce((s, r) => s + r.dur, 0);
    const nodeUs = nodes.reduce((s, r) => s + r.dur, 0);
    out.profiled_runs = runs.length;
    out.run_ms = per(runUs);
    out.nodes_ms = per(nodeUs);
    out.by_op_ms = Object.fromEntries([...byOp].sort((a, b) => b[1] - a[1]).map(([k, v]) => [k, per(v)]));
    out.top_nodes_ms = Object.fromEntries(
      [...byNode]
        .sort((a, b) => b[1] - a[1])
        .slice(0, Number(values.top))
        .map(([k, v]) => [k, per(v)]),
    );
  }
  fs.rmSync(dir, { recursive: true, force: true });
  process.stdout.write(JSON.stringify(out, null, 1) + '\n');
}

void main();
