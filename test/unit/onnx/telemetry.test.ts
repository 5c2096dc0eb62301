// ONNX Runtime's telemetry is off in Turnwise's processes: a session created through the onnx
// layer runs with ORT_DISABLE_TELEMETRY=1 in force and leaves no `mat-debug-<pid>.log` in the
// temporary folder, while the user's explicit ORT_DISABLE_TELEMETRY=0 is kept. Whether the runtime
// then writes its log depends on the machine (it does on some Debian machines, not on others), so
// the second case checks the value in force, not the file. Each case runs in a child process of its
// own, since ONNX Runtime reads the variable once per process, at its first session.
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { disableOrtTelemetry } from '../../../src/onnx/telemetry';

const ONNX = path.resolve(__dirname, '../../../src/onnx');

/**
 * Creates a CPU session on the probe model in a child whose temporary folder is `tmp`; returns the
 * telemetry variable in force in that child after the session ran, and the log files it left there.
 */
function sessionInChild(tmp: string, telemetryEnv: string | undefined): { inForce: string | undefined; logs: string[] } {
  const env: NodeJS.ProcessEnv = { ...process.env, TMPDIR: tmp };
  delete env.ORT_DISABLE_TELEMETRY;
  if (telemetryEnv !== undefined) env.ORT_DISABLE_TELEMETRY = telemetryEnv;
  const program = `
    const { OnnxSession, probeModel } = require(${JSON.stringify(ONNX)});
    OnnxSession.create(probeModel(), { provider: 'cpu' }).then(
      (s) => s.run({ X: { dtype: 'float32', dims: [2], data: new Float32Array([1, 2]) } }),
    ).then((out) => console.log(JSON.stringify({ y: Array.from(out.Y.data), inForce: process.env.ORT_DISABLE_TELEMETRY })));`;
  const r = spawnSync(process.execPath, ['--require', 'tsx/cjs', '-e', program], { encoding: 'utf8', env, timeout: 120_000 });
  assert.equal(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout.trim()) as { y: number[]; inForce?: string };
  assert.deepEqual(out.y, [2, 4], 'the session ran');
  return { inForce: out.inForce, logs: fs.readdirSync(tmp).filter((f) => f.startsWith('mat-debug-')) };
}

describe('onnx runtime: telemetry', () => {
  let tmp: string;
  beforeEach(() => (tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-ort-telemetry-'))));
  afterEach(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it('a session runs with telemetry off and leaves no mat-debug log in the temporary folder', () => {
    assert.deepEqual(sessionInChild(tmp, undefined), { inForce: '1', logs: [] });
  });

  it("the user's own ORT_DISABLE_TELEMETRY=0 is kept", () => {
    assert.equal(sessionInChild(tmp, '0').inForce, '0');
  });

  it('sets the variable only where it is unset or empty', () => {
    const unset: NodeJS.ProcessEnv = {};
    assert.equal(disableOrtTelemetry(unset), '1');
    assert.equal(unset.ORT_DISABLE_TELEMETRY, '1');
    assert.equal(disableOrtTelemetry({ ORT_DISABLE_TELEMETRY: '' }), '1');
    assert.equal(disableOrtTelemetry({ ORT_DISABLE_TELEMETRY: '0' }), '0');
  });
});
