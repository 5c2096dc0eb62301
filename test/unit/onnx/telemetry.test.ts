// ONNX Runtime's telemetry is off in Turnwise's processes: a session created through the onnx
// layer leaves no `mat-debug-<pid>.log` in the temporary folder, while the same session with the
// user's explicit ORT_DISABLE_TELEMETRY=0 does (which shows the check can see the file at all).
// Each case runs in a child process of its own, since ONNX Runtime reads the variable once per
// process, at its first session.
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { disableOrtTelemetry } from '../../../src/onnx/telemetry';

const ONNX = path.resolve(__dirname, '../../../src/onnx');

/** Creates a CPU session on the probe model in a child whose temporary folder is `tmp`; returns the files it left there. */
function filesLeftBySession(tmp: string, telemetryEnv: string | undefined): string[] {
  const env: NodeJS.ProcessEnv = { ...process.env, TMPDIR: tmp };
  delete env.ORT_DISABLE_TELEMETRY;
  if (telemetryEnv !== undefined) env.ORT_DISABLE_TELEMETRY = telemetryEnv;
  const program = `
    const { OnnxSession, probeModel } = require(${JSON.stringify(ONNX)});
    OnnxSession.create(probeModel(), { provider: 'cpu' }).then(
      (s) => s.run({ X: { dtype: 'float32', dims: [2], data: new Float32Array([1, 2]) } }),
    ).then((out) => console.log(JSON.stringify(Array.from(out.Y.data))));`;
  const r = spawnSync(process.execPath, ['--require', 'tsx/cjs', '-e', program], { encoding: 'utf8', env, timeout: 120_000 });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout.trim(), '[2,4]', 'the session ran');
  return fs.readdirSync(tmp).filter((f) => f.startsWith('mat-debug-'));
}

describe('onnx runtime: telemetry', () => {
  let tmp: string;
  beforeEach(() => (tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-ort-telemetry-'))));
  afterEach(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it('a session leaves no mat-debug log in the temporary folder', () => {
    assert.deepEqual(filesLeftBySession(tmp, undefined), []);
  });

  it("the user's own ORT_DISABLE_TELEMETRY=0 is kept (and then the runtime does write its log)", () => {
    assert.equal(filesLeftBySession(tmp, '0').length, 1);
  });

  it('sets the variable only where it is unset or empty', () => {
    const unset: NodeJS.ProcessEnv = {};
    assert.equal(disableOrtTelemetry(unset), '1');
    assert.equal(unset.ORT_DISABLE_TELEMETRY, '1');
    assert.equal(disableOrtTelemetry({ ORT_DISABLE_TELEMETRY: '' }), '1');
    assert.equal(disableOrtTelemetry({ ORT_DISABLE_TELEMETRY: '0' }), '0');
  });
});
