// Where ONNX Runtime puts each node of a graph on a provider. A node the provider has no kernel
// for runs on the CPU without a word (its tensors copied off the device and back on every run),
// and only the session's verbose log says so: sessions are created in a child process whose
// stderr carries that log, one graph after the other, and the log is read with parsePlacements.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parsePlacements } from './ops';
import './telemetry';

export interface GraphPlacements {
  graph: string;
  /** Provider name as ONNX Runtime spells it (WebGpuExecutionProvider, CUDAExecutionProvider, CPUExecutionProvider) → its nodes. */
  providers: Record<string, { count: number; nodes: string[] }>;
  /** How many nodes run on the CPU provider, and which ("OpType (node name)"; none listed when the log says all of them). */
  cpuNodes: number;
  onCpu: string[];
  /** Why the session could not be created on the provider. */
  error?: string;
}

/**
 * Nodes of each model (ONNX bytes) as the provider places them; a model the provider cannot
 * open says why. One child process per model: ONNX Runtime's log lines reach stderr behind the
 * process's own writes, so one process's log cannot be split between several sessions.
 */
export function nodePlacements(
  provider: 'cpu' | 'cuda' | 'webgpu',
  models: { name: string; bytes: Uint8Array }[],
  timeoutMs = 600_000,
): GraphPlacements[] {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'turnwise-placements-'));
  try {
    return models.map((m) => {
      const file = path.join(dir, 'model.onnx');
      fs.writeFileSync(file, m.bytes);
      const program = `
        const ort = require(${JSON.stringify(require.resolve('onnxruntime-node'))});
        ort.InferenceSession.create(${JSON.stringify(file)}, { executionProviders: [${JSON.stringify(provider)}], logSeverityLevel: 0, logVerbosityLevel: 0 })
          .then((s) => s.release())
          .catch((e) => { process.stdout.write(String((e && e.message) || e).split('\\n')[0]); process.exitCode = 3; });`;
      const r = spawnSync(process.execPath, ['-e', program], { encoding: 'utf8', timeout: timeoutMs, maxBuffer: 1 << 30 });
      const providers = Object.fromEntries(parsePlacements(r.stderr ?? ''));
      const cpu = providers.CPUExecutionProvider;
      const cut = Object.entries(providers).find(([, v]) => v.nodes.length > 0 && v.nodes.length !== v.count);
      const error =
        r.status === 3
          ? r.stdout.trim()
          : r.status !== 0
            ? `the session process ended with ${r.status ?? r.signal}${r.error ? `: ${r.error.message}` : ''}`
            : Object.keys(providers).length === 0
              ? 'the session log names no node placement'
              : cut
                ? `the session log lists ${cut[1].nodes.length} of the ${cut[1].count} nodes on ${cut[0]}`
                : undefined;
      return { graph: m.name, providers, cpuNodes: cpu?.count ?? 0, onCpu: cpu?.nodes ?? [], ...(error ? { error } : {}) };
    });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
