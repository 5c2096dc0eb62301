import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { TurnwiseError } from '../../../src/core/errors';
import { SWAP_MARKER } from '../../../src/core/fs';
import { initPolicyDir } from '../../../src/policy';
import { loadCheckpoint, saveCheckpoint, snapshotCheckpoint, zeroOptimizerState } from '../../../src/policy/files/checkpoint';
import { configToJson, paramSpecs } from '../../../src/policy/model/config';
import { byteLevelTokenizerConfig, byteLevelTokenizerJson } from '../../../src/policy/files/tokenizer';
import { initWeights } from '../../../src/policy/model/weights';
import { SMALL_CONFIG } from './helpers';

const BYTE_CONFIG = { ...SMALL_CONFIG, vocab_size: 260, tie_word_embeddings: false };

function bits(a: Float32Array): Uint32Array {
  return new Uint32Array(a.slice().buffer);
}

describe('policy/checkpoint', () => {
  let tmp: string;
  beforeEach(() => (tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-ckpt-'))));
  afterEach(() => fs.rmSync(tmp, { recursive: true, force: true }));

  function save(dir: string, seed: number) {
    const weights = initWeights(BYTE_CONFIG, seed);
    const optimizer = zeroOptimizerState(BYTE_CONFIG);
    optimizer.step = 7;
    optimizer.expAvg.get('model.norm.weight')![3] = 0.125;
    optimizer.expAvgSq.get('lm_head.weight')![0] = 1e-30;
    saveCheckpoint(dir, { weights, optimizer, tokenizerJson: byteLevelTokenizerJson(), tokenizerConfig: byteLevelTokenizerConfig() });
    return { weights, optimizer };
  }

  it('round-trips weights and optimizer state bit-exactly, with Hugging Face file names', () => {
    const dir = path.join(tmp, 'ck');
    const { weights } = save(dir, 11);
    assert.deepEqual(fs.readdirSync(dir).sort(), [
      'config.json',
      'model.safetensors',
      'optimizer.safetensors',
      'tokenizer.json',
      'tokenizer_config.json',
    ]);
    const back = loadCheckpoint(dir);
    // The file records the family and the dtype it holds: the loaded config names both.
    assert.deepEqual(back.weights.config, { ...BYTE_CONFIG, model_type: 'qwen2', torch_dtype: 'float32' });
    for (const p of paramSpecs(BYTE_CONFIG))
      assert.deepEqual(bits(back.weights.tensors.get(p.name)!), bits(weights.tensors.get(p.name)!), p.name);
    assert.equal(back.optimizer!.step, 7);
    assert.equal(back.optimizer!.expAvg.get('model.norm.weight')![3], 0.125);
    assert.equal(back.optimizer!.expAvgSq.get('lm_head.weight')![0], Math.fround(1e-30));
    assert.deepEqual(back.tokenizer.encode('ok'), [111, 107]);
    // Saving what was loaded gives identical bytes.
    const dir2 = path.join(tmp, 'ck2');
    saveCheckpoint(dir2, back);
    for (const f of ['model.safetensors', 'optimizer.safetensors', 'config.json'])
      assert.ok(fs.readFileSync(path.join(dir, f)).equals(fs.readFileSync(path.join(dir2, f))), f);
  });

  /** The state a crash right after replaceDirAtomic's first rename leaves: the marked previous directory beside a missing target. */
  function interruptAfterFirstRename(dir: string, n: number): string {
    const old = `${dir}.turnwise-old-999-${n}`;
    fs.writeFileSync(path.join(dir, SWAP_MARKER), JSON.stringify({ schema: 'turnwise/swap@1', target: path.basename(dir), pid: 999 }));
    fs.renameSync(dir, old);
    return old;
  }

  it('a save interrupted between its two renames leaves the previous checkpoint loadable; loading renames nothing', () => {
    const dir = path.join(tmp, 'ck');
    const { weights } = save(dir, 11);
    const old = interruptAfterFirstRename(dir, 0);
    const back = loadCheckpoint(dir);
    const name = 'model.layers.0.mlp.up_proj.weight';
    assert.deepEqual(bits(back.weights.tensors.get(name)!), bits(weights.tensors.get(name)!));
    assert.equal(back.optimizer!.step, 7);
    assert.equal(back.dir, dir);
    assert.deepEqual(fs.readdirSync(tmp), [path.basename(old)], 'a read-only load renames nothing');
    // The next save puts it back, replaces it normally and leaves nothing behind.
    save(dir, 12);
    assert.deepEqual(fs.readdirSync(tmp), ['ck']);
    assert.ok(!fs.readdirSync(dir).includes(SWAP_MARKER));
  });

  it("never takes a user's folder for an interrupted swap: <name>.old-*, or a Turnwise-like name without the marker", () => {
    const dir = path.join(tmp, 'model');
    for (const sib of ['model.old-v1', 'model.old-backup', 'model.turnwise-old-1-0']) {
      fs.mkdirSync(path.join(tmp, sib));
      fs.writeFileSync(path.join(tmp, sib, 'w.bin'), 'mine');
    }
    assert.throws(() => loadCheckpoint(dir), /does not exist/);
    save(dir, 1);
    for (const sib of ['model.old-v1', 'model.old-backup', 'model.turnwise-old-1-0'])
      assert.equal(fs.readFileSync(path.join(tmp, sib, 'w.bin'), 'utf8'), 'mine', sib);
    assert.deepEqual(fs.readdirSync(tmp).sort(), ['model', 'model.old-backup', 'model.old-v1', 'model.turnwise-old-1-0']);
  });

  it('same seed → same weights; different seed → different weights', () => {
    const a = initWeights(BYTE_CONFIG, 5).tensors.get('model.layers.0.mlp.up_proj.weight')!;
    const b = initWeights(BYTE_CONFIG, 5).tensors.get('model.layers.0.mlp.up_proj.weight')!;
    const c = initWeights(BYTE_CONFIG, 6).tensors.get('model.layers.0.mlp.up_proj.weight')!;
    assert.deepEqual(a, b);
    assert.notDeepEqual(a, c);
    let s2 = 0;
    for (const x of a) s2 += x * x;
    assert.ok(Math.abs(Math.sqrt(s2 / a.length) - 0.02) < 0.002, 'std 0.02');
  });

  it('overwriting replaces the whole directory and leaves no temp dirs', () => {
    const dir = path.join(tmp, 'ck');
    save(dir, 1);
    const { weights } = save(dir, 2);
    assert.deepEqual(
      loadCheckpoint(dir).weights.tensors.get('model.embed_tokens.weight'),
      weights.tensors.get('model.embed_tokens.weight'),
    );
    assert.deepEqual(fs.readdirSync(tmp), ['ck']);
  });

  it('a failed write leaves the previous checkpoint as it was', () => {
    const dir = path.join(tmp, 'ck');
    const { weights } = save(dir, 1);
    const broken = initWeights(BYTE_CONFIG, 2);
    broken.tensors.set('model.norm.weight', new Float32Array(3)); // wrong size: encoding throws midway
    assert.throws(() => saveCheckpoint(dir, { weights: broken, tokenizerJson: byteLevelTokenizerJson() }), TurnwiseError);
    assert.deepEqual(
      loadCheckpoint(dir).weights.tensors.get('model.embed_tokens.weight'),
      weights.tensors.get('model.embed_tokens.weight'),
    );
    assert.deepEqual(fs.readdirSync(tmp), ['ck']);
  });

  it('refuses a corrupt checkpoint with the file named, while an older one stays loadable', () => {
    const old = path.join(tmp, '1');
    const cur = path.join(tmp, '2');
    save(old, 1);
    save(cur, 2);
    const model = path.join(cur, 'model.safetensors');
    const buf = fs.readFileSync(model);
    fs.writeFileSync(model, buf.subarray(0, buf.length - 100));
    assert.throws(
      () => loadCheckpoint(cur),
      (e: unknown) => e instanceof TurnwiseError && e.code === 'invalid-file' && e.message.includes(model) && /truncated/.test(e.message),
    );
    assert.equal(loadCheckpoint(old).optimizer!.step, 7);
  });

  it('validates names, shapes and dtypes against config.json', () => {
    const dir = path.join(tmp, 'ck');
    save(dir, 1);
    // A config with a different hidden size: every weight shape mismatches.
    fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify(configToJson({ ...BYTE_CONFIG, intermediate_size: 64 })));
    assert.throws(() => loadCheckpoint(dir), /model.layers.0.mlp.gate_proj.weight has shape \[48,32\], the config needs \[64,32\]/);
    // Tied config: lm_head.weight may be present (ignored), but an unknown tensor is refused.
    fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify(configToJson({ ...BYTE_CONFIG, num_hidden_layers: 1 })));
    assert.throws(() => loadCheckpoint(dir), /unexpected tensor model.layers.1.input_layernorm.weight/);
    // A byte-order mark before the JSON (some editors write one) is skipped.
    fs.writeFileSync(path.join(dir, 'config.json'), '\uFEFF' + JSON.stringify(configToJson(BYTE_CONFIG)));
    assert.equal(loadCheckpoint(dir).weights.config.hidden_size, BYTE_CONFIG.hidden_size);
    fs.writeFileSync(path.join(dir, 'config.json'), '{"hidden_size": ');
    assert.throws(() => loadCheckpoint(dir), /config.json is not valid JSON/);
    fs.rmSync(path.join(dir, 'config.json'));
    assert.throws(() => loadCheckpoint(dir), /cannot read .*config.json: ENOENT/);
    assert.throws(() => loadCheckpoint(path.join(tmp, 'nope')), /does not exist/);
  });

  it('refuses an optimizer file that belongs to another model', () => {
    const dir = path.join(tmp, 'ck');
    save(dir, 1);
    const other = path.join(tmp, 'other');
    const small = { ...BYTE_CONFIG, num_hidden_layers: 1 };
    saveCheckpoint(other, {
      weights: initWeights(small, 1),
      optimizer: zeroOptimizerState(small),
      tokenizerJson: byteLevelTokenizerJson(),
    });
    fs.copyFileSync(path.join(other, 'optimizer.safetensors'), path.join(dir, 'optimizer.safetensors'));
    assert.throws(() => loadCheckpoint(dir), /optimizer.safetensors does not match the model:\n {2}missing tensor exp_avg.model.layers.1/);
    assert.equal(loadCheckpoint(dir, { optimizer: false }).optimizer, undefined);
  });
});

describe('policy/checkpoint: snapshotCheckpoint', () => {
  it('copies a whole checkpoint with the files beside it (warmstart.json), the optimizer only when asked', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-ckpt-snapshot-'));
    try {
      const src = path.join(dir, 'src');
      initPolicyDir(src, { seed: 1 });
      fs.writeFileSync(path.join(src, 'warmstart.json'), JSON.stringify({ demonstrationTaskIds: ['t1'] }));
      await snapshotCheckpoint(src, path.join(dir, 'a'));
      assert.deepEqual(JSON.parse(fs.readFileSync(path.join(dir, 'a', 'warmstart.json'), 'utf8')), { demonstrationTaskIds: ['t1'] });
      assert.ok(fs.existsSync(path.join(dir, 'a', 'model.safetensors')));
      assert.ok(!fs.existsSync(path.join(dir, 'a', 'optimizer.safetensors')));
      assert.deepEqual(fs.readFileSync(path.join(dir, 'a', 'model.safetensors')), fs.readFileSync(path.join(src, 'model.safetensors')));
      if (fs.existsSync(path.join(src, 'optimizer.safetensors'))) {
        await snapshotCheckpoint(src, path.join(dir, 'b'), { optimizer: true });
        assert.ok(fs.existsSync(path.join(dir, 'b', 'optimizer.safetensors')));
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
