// `turnwise policy init | logits | generate` through main(), on a small model directory.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { main } from '../../../src/cli/main';
import { escapeControlChars } from '../../../src/core/text';
import { loadCheckpoint } from '../../../src/policy/files/checkpoint';
import { referenceLogits } from '../../support/reference-forward';

async function run(argv: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(argv, { out: (t) => out.push(t), err: (t) => err.push(t) });
  return { code, out: out.join('\n'), err: err.join('\n') };
}

describe('cli: turnwise policy', function () {
  this.timeout(60000);
  let tmp: string;
  before(() => (tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-policy-cli-'))));
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it('init writes turnwise-tiny; same seed → same bytes; refuses a non-empty dir without --force', async () => {
    const a = path.join(tmp, 'a');
    const r = await run(['policy', 'init', '--out', a, '--seed', '5', '--json']);
    assert.equal(r.code, 0, r.err);
    const j = JSON.parse(r.out);
    assert.equal(j.ok, true);
    assert.equal(j.config.vocab_size, 260);
    assert.ok(j.parameters > 2e6);
    const b = path.join(tmp, 'b');
    assert.equal((await run(['policy', 'init', '--out', b, '--seed', '5'])).code, 0);
    assert.ok(fs.readFileSync(path.join(a, 'model.safetensors')).equals(fs.readFileSync(path.join(b, 'model.safetensors'))));
    const again = await run(['policy', 'init', '--out', a]);
    assert.equal(again.code, 1);
    assert.match(again.err, /already holds a checkpoint/);
    assert.equal((await run(['policy', 'init', '--out', a, '--seed', '6', '--force'])).code, 0);
    assert.ok(!fs.readFileSync(path.join(a, 'model.safetensors')).equals(fs.readFileSync(path.join(b, 'model.safetensors'))));
    const file = path.join(tmp, 'a-file');
    fs.writeFileSync(file, 'x');
    const onFile = await run(['policy', 'init', '--out', file]);
    assert.equal(onFile.code, 1);
    assert.match(onFile.err, /exists and is a file, not a directory/);
    assert.equal(fs.readFileSync(file, 'utf8'), 'x');
  });

  it('logits --json prints every position, equal to the reference forward', async () => {
    const dir = path.join(tmp, 'b');
    const r = await run(['policy', 'logits', '--model', dir, '--ids', '72,105,33', '--json']);
    assert.equal(r.code, 0, r.err);
    const j = JSON.parse(r.out);
    assert.equal(j.logits.length, 3);
    assert.equal(j.logits[0].length, 260);
    const ref = referenceLogits(loadCheckpoint(dir).weights, [72, 105, 33]);
    let d = 0;
    for (let t = 0; t < 3; t++) for (let v = 0; v < 260; v++) d = Math.max(d, Math.abs(j.logits[t][v] - ref[t * 260 + v]));
    assert.ok(d < 1e-4, `max diff ${d}`);
  });

  it('generate returns text, ids and log-probs; bad input is a clear error, not a stack trace', async () => {
    const dir = path.join(tmp, 'b');
    const r = await run(['policy', 'generate', '--model', dir, '--prompt', 'ls', '--max-tokens', '5', '--seed', '1', '--json']);
    assert.equal(r.code, 0, r.err);
    const j = JSON.parse(r.out);
    assert.ok(j.token_ids.length >= 1 && j.token_ids.length <= 5);
    assert.equal(j.logprobs.length, j.token_ids.length);
    assert.ok(j.logprobs.every((x: number) => x <= 0 && Number.isFinite(x)));
    const bad = await run(['policy', 'logits', '--model', dir, '--ids', '1,999']);
    assert.equal(bad.code, 1);
    assert.match(bad.err, /token id 999 is outside the vocabulary/);
    assert.doesNotMatch(bad.err, /at .*\.ts:\d+/);
    const missing = await run(['policy', 'logits', '--model', path.join(tmp, 'nope'), '--ids', '1']);
    assert.equal(missing.code, 1);
    assert.match(missing.err, /does not exist[\s\S]*policy init/);
    assert.equal((await run(['policy', 'logits', '--model', dir, '--ids', 'a,b'])).code, 2);
  });

  it('generate prints control bytes an untrained model emits as escapes, never raw to the terminal', async () => {
    const dir = path.join(tmp, 'b');
    // eslint-disable-next-line no-control-regex -- the output must hold no control character
    const control = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/;
    let seed = 0;
    let text = '';
    // A random byte-level model emits a control byte in most 64-token samples; find one that does.
    for (; seed < 20 && !control.test(text); seed++) {
      const j = await run(['policy', 'generate', '--model', dir, '--prompt', 'ls', '--seed', String(seed), '--json']);
      text = JSON.parse(j.out).text;
    }
    assert.match(text, control, 'no sample with a control byte in 20 seeds');
    const human = await run(['policy', 'generate', '--model', dir, '--prompt', 'ls', '--seed', String(seed - 1)]);
    assert.equal(human.code, 0, human.err);
    assert.doesNotMatch(human.out, control);
    assert.equal(human.out, escapeControlChars(text));
  });

  it('a prompt that fills the whole context generates nothing and says why (no internal error)', async () => {
    const dir = path.join(tmp, 'b');
    const { config } = loadCheckpoint(dir).weights;
    const full = 'a'.repeat(config.max_position_embeddings);
    const j = await run(['policy', 'generate', '--model', dir, '--prompt', full, '--json']);
    assert.equal(j.code, 0, j.err);
    const out = JSON.parse(j.out);
    assert.deepEqual([out.text, out.token_ids, out.finish_reason], ['', [], 'length']);
    const human = await run(['policy', 'generate', '--model', dir, '--prompt', full]);
    assert.equal(human.code, 0, human.err);
    assert.match(human.err, /0 tokens .*\(length\)\nthe prompt fills the model's context \(max_position_embeddings \d+\)/);
    const over = await run(['policy', 'generate', '--model', dir, '--prompt', full + 'a']);
    assert.equal(over.code, 1);
    assert.match(over.err, /exceeds max_position_embeddings/);
  });
});
