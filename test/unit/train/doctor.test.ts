// The checks each layer contributes to `turnwise doctor`, each shown passing and failing
// (the Docker ones are in test/docker/doctor.test.ts).
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { doctorReport, failedCheck, formatDoctorReport, nodeCheck, notChecked } from '../../../src/core/doctor';
import { TurnwiseError } from '../../../src/core/errors';
import { grammarCheck } from '../../../src/ast/doctor';
import type { GrammarName } from '../../../src/ast/treesitter';
import { providerChecks } from '../../../src/onnx/doctor';
import type { ExecutionProviderName } from '../../../src/onnx/runtime';
import { saveCheckpoint } from '../../../src/policy/files/checkpoint';
import { byteLevelTokenizerConfig, byteLevelTokenizerJson } from '../../../src/policy/files/tokenizer';
import { initWeights } from '../../../src/policy/model/weights';
import { embeddedPolicyCheck } from '../../../src/train/embedded';
import { SMALL_CONFIG } from '../policy/helpers';

describe('doctor checks', () => {
  describe('core: node, the report and its text', () => {
    it('fails a Node older than the minimum, with the version to install', () => {
      assert.equal(nodeCheck(20, '20.1.0').status, 'ok');
      const old = nodeCheck(20, '18.19.0');
      assert.deepEqual(old, { name: 'node', status: 'fail', detail: 'Node 18.19.0 is too old', fix: 'install Node 20 or newer' });
    });

    it('a report fails on any fail, not on a warn; the text marks each line and says what to do', () => {
      const warnOnly = doctorReport([
        { name: 'a', status: 'ok', detail: 'fine', fix: 'never shown' },
        { name: 'b', status: 'warn', detail: 'absent', fix: 'optional' },
      ]);
      assert.equal(warnOnly.schema, 'turnwise/doctor@1');
      assert.equal(warnOnly.ok, true);
      assert.equal(
        formatDoctorReport(warnOnly),
        '✓ a: fine\n! b: absent\n    fix: optional\nEnvironment ready (1 optional item(s) unavailable).',
      );
      const failing = doctorReport([
        failedCheck('c', new TurnwiseError('not-found', 'gone', { hint: 'bring it back' })),
        notChecked('d', 'c is gone', 'c'),
      ]);
      assert.equal(failing.ok, false);
      assert.equal(
        formatDoctorReport(failing),
        '✗ c: gone\n    fix: bring it back\n✗ d: not checked: c is gone\n    fix: fix the c check first\n2 problem(s) must be fixed before a run.',
      );
    });

    it('a failed check from a plain error has no fix unless one is given, and no undefined key in JSON', () => {
      assert.deepEqual(failedCheck('x', new Error('boom')), { name: 'x', status: 'fail', detail: 'boom' });
      assert.deepEqual(failedCheck('x', 'boom', 'try again'), { name: 'x', status: 'fail', detail: 'boom', fix: 'try again' });
    });
  });

  describe('onnx: execution providers', () => {
    const probe = (failing: ExecutionProviderName[]) => async (ep: ExecutionProviderName) =>
      failing.includes(ep)
        ? { provider: ep, ok: false, bundled: false, ms: 0, error: `/src/x.cc:1 f() cond was false. ${ep} is broken` }
        : { provider: ep, ok: true, bundled: true, ms: 12.3 };

    it('one line per provider, each ok when its session runs', async () => {
      const checks = await providerChecks(probe([]), [
        { kind: 'hardware', name: 'NVIDIA H100', driver: 'libGLX_nvidia.so.0', memoryBytes: 80 * 2 ** 30 },
      ]);
      assert.deepEqual(
        checks.map((c) => [c.name, c.status, c.detail]),
        [
          ...['cpu', 'cuda', 'webgpu'].map((ep) => [`onnxruntime ${ep}`, 'ok', 'session created and ran (12 ms)']),
          ['webgpu adapter', 'ok', 'NVIDIA H100, 80 GiB, GPU [libGLX_nvidia.so.0]'],
        ],
      );
    });

    it('a missing CPU provider fails the report; a missing GPU provider only warns', async () => {
      const checks = await providerChecks(probe(['cpu', 'cuda', 'webgpu']), []);
      assert.deepEqual(
        checks.map((c) => c.status),
        ['fail', 'warn', 'warn', 'warn'],
      );
      assert.equal(checks[0].detail, 'not available: cpu is broken');
      assert.match(checks[0].fix ?? '', /reinstall onnxruntime-node/);
      assert.match(checks[1].fix ?? '', /^optional\. For CUDA/);
      assert.match(checks[2].fix ?? '', /^optional\. WebGPU/);
      assert.equal(doctorReport(checks).ok, false);
      assert.equal(doctorReport(checks.slice(1)).ok, true);
    });

    it('a software adapter only (lavapipe) is a warning that names it', async () => {
      const [, , , a] = await providerChecks(probe([]), [{ kind: 'software', name: 'Mesa lavapipe', driver: 'libvulkan_lvp.so' }]);
      assert.equal(a.status, 'warn');
      assert.match(a.detail, /^no GPU: Mesa lavapipe, software \(runs on the CPU\) \[libvulkan_lvp\.so\]$/);
      assert.match(a.fix ?? '', /slower than the cpu provider/);
    });
  });

  describe('ast: tree-sitter grammars', () => {
    it('loads and parses with every grammar', async () => {
      const c = await grammarCheck();
      assert.equal(c.status, 'ok', c.detail);
      assert.equal(c.detail, 'bash, python, javascript, typescript, tsx, go');
    });

    it('fails naming the grammar that does not load', async () => {
      const c = await grammarCheck(['bash', 'cobol' as GrammarName]);
      assert.equal(c.status, 'fail');
      assert.match(c.detail, /^cannot load: cobol \(tree-sitter file tree-sitter-cobol\.wasm not found/);
      assert.match(c.fix ?? '', /npm run build/);
    });
  });

  describe('train: the embedded policy', () => {
    let tmp: string;
    beforeEach(() => (tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-doctor-policy-'))));
    afterEach(() => fs.rmSync(tmp, { recursive: true, force: true }));
    const config = { ...SMALL_CONFIG, vocab_size: 260, tie_word_embeddings: false };
    const save = (dir: string) =>
      saveCheckpoint(dir, {
        weights: initWeights(config, 1),
        tokenizerJson: byteLevelTokenizerJson(),
        tokenizerConfig: byteLevelTokenizerConfig(),
      });

    it('loads a checkpoint as a run would and describes it', () => {
      const dir = path.join(tmp, 'tiny');
      save(dir);
      const c = embeddedPolicyCheck(dir);
      assert.equal(c.status, 'ok', c.detail);
      assert.match(
        c.detail,
        new RegExp(`^tiny: 0\\.\\dM parameters, 2 layers, 260 tokens, at ${dir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`),
      );
    });

    it('fails on a missing checkpoint, with what to do', () => {
      const c = embeddedPolicyCheck(path.join(tmp, 'nowhere'));
      assert.equal(c.status, 'fail');
      assert.match(c.detail, /does not exist/);
      assert.ok(c.fix);
    });

    it('fails on truncated weights', () => {
      const dir = path.join(tmp, 'tiny');
      save(dir);
      const file = path.join(dir, 'model.safetensors');
      fs.writeFileSync(file, fs.readFileSync(file).subarray(0, 1000));
      const c = embeddedPolicyCheck(dir);
      assert.equal(c.status, 'fail');
      assert.match(c.detail, /model\.safetensors/);
    });

    it('the shipped policy, where this checkout has it, loads', function () {
      const c = embeddedPolicyCheck();
      if (c.status === 'fail' && /is missing \(looked in/.test(c.detail)) this.skip();
      assert.equal(c.status, 'ok', c.detail);
    });
  });
});
