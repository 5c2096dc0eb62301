import * as assert from 'node:assert/strict';
import { buildStepGraph } from '../../../src/policy/model/graphs';
import { Policy } from '../../../src/policy/inference/policy';
import { logSoftmax, sampleToken } from '../../../src/policy/inference/sampling';
import { referenceLogits } from '../../support/reference-forward';
import { initWeights, SeededRandom } from '../../../src/policy/model/weights';
import { formulaWeights, GOLDEN_CONFIG, maxAbsDiff, SMALL_CONFIG } from './helpers';

describe('policy/inference: ONNX forward, KV cache, sampling', function () {
  this.timeout(60000);
  const weights = initWeights(SMALL_CONFIG, 7, 0.3);
  let policy: Policy;
  before(() => (policy = new Policy(weights, undefined, { provider: 'cpu' })));
  after(() => policy.dispose());

  it('ONNX logits equal the float64 reference (1e-4), GQA and untied head included', async () => {
    const golden = new Policy(formulaWeights(GOLDEN_CONFIG), undefined, { provider: 'cpu' });
    const ids = [3, 7, 1, 10, 0, 5];
    const [got] = await golden.logits([ids]);
    assert.ok(maxAbsDiff(got, referenceLogits(formulaWeights(GOLDEN_CONFIG), ids)) < 1e-4);
    await golden.dispose();
    const seq = Array.from({ length: 37 }, (_, i) => (i * 7 + 3) % SMALL_CONFIG.vocab_size);
    const [mine] = await policy.logits([seq]);
    const ref = referenceLogits(weights, seq);
    const diff = maxAbsDiff(mine, ref);
    assert.ok(diff < 1e-4, `max diff ${diff}`);
  });

  it('a left-padded batch gives each row the logits it gets alone', async () => {
    const a = [1, 2, 3, 4, 5, 6, 7, 8];
    const b = [9, 10, 11];
    const [la, lb] = await policy.logits([a, b]);
    assert.ok(maxAbsDiff(lb, referenceLogits(weights, b)) < 1e-4);
    assert.ok(maxAbsDiff(la, referenceLogits(weights, a)) < 1e-4);
  });

  it('KV-cache decode logits equal full recomputation (1e-4), batched with padding', async () => {
    const prompts = [
      [1, 2, 3, 4, 5],
      [6, 7],
    ];
    const opts = { maxNewTokens: 12, temperature: 0, stopIds: [] };
    const withKv = await policy.generateIds(prompts, { ...opts, kvCache: true });
    const noKv = await policy.generateIds(prompts, { ...opts, kvCache: false });
    assert.deepEqual(
      withKv.map((r) => r.tokenIds),
      noKv.map((r) => r.tokenIds),
    );
    for (let b = 0; b < 2; b++) {
      assert.equal(withKv[b].tokenIds.length, 12);
      // Each sampled token's log-prob equals the reference model's on the full sequence.
      const full = [...prompts[b], ...withKv[b].tokenIds];
      const ref = referenceLogits(weights, full);
      const V = SMALL_CONFIG.vocab_size;
      for (let t = 0; t < 12; t++) {
        const pos = prompts[b].length - 1 + t;
        const lp = logSoftmax(ref.subarray(pos * V, (pos + 1) * V));
        const want = withKv[b].tokenIds[t];
        assert.ok(Math.abs(lp[want] - withKv[b].logprobs[t]) < 1e-4, `row ${b} token ${t}`);
        assert.equal(want, lp.indexOf(Math.max(...lp)), 'greedy picks the argmax');
      }
    }
  });

  it('sampling is seeded; top-p keeps only the nucleus; log-probs use the temperature', async () => {
    const a = await policy.generateIds([[1, 2, 3]], { maxNewTokens: 10, temperature: 1.5, seed: 42, stopIds: [] });
    const b = await policy.generateIds([[1, 2, 3]], { maxNewTokens: 10, temperature: 1.5, seed: 42, stopIds: [] });
    const c = await policy.generateIds([[1, 2, 3]], { maxNewTokens: 10, temperature: 1.5, seed: 43, stopIds: [] });
    assert.deepEqual(a, b);
    assert.notDeepEqual(a[0].tokenIds, c[0].tokenIds);
    const row = [2, 1, 0.5, -3];
    const rng = new SeededRandom(1);
    const seen = new Set<number>();
    // p = .626, .230, .140, .004: nucleus 0.6 is {0}; nucleus 0.85 is {0, 1}; 1.0 reaches 2 as well.
    for (let i = 0; i < 200; i++) seen.add(sampleToken(row, 1, 0.6, rng).id);
    assert.deepEqual([...seen], [0]);
    seen.clear();
    for (let i = 0; i < 400; i++) seen.add(sampleToken(row, 1, 0.85, rng).id);
    assert.deepEqual([...seen].sort(), [0, 1]);
    seen.clear();
    for (let i = 0; i < 400; i++) seen.add(sampleToken(row, 1, 1, rng).id);
    assert.ok(seen.has(2));
    const t2 = sampleToken(row, 2, 1, new SeededRandom(3));
    assert.ok(Math.abs(t2.logprob - logSoftmax(row.map((x) => x / 2))[t2.id]) < 1e-12);
  });

  it("a row's sample depends on the seed and its own index, not on the other rows of the batch", async () => {
    const opts = { maxNewTokens: 16, temperature: 1.5, seed: 7, stopIds: [] };
    const alone = await policy.generateIds([[5, 6, 7]], opts);
    const withOther = await policy.generateIds(
      [
        [5, 6, 7],
        [9, 9, 9],
      ],
      opts,
    );
    const withAnother = await policy.generateIds(
      [
        [5, 6, 7],
        [1, 2, 3],
      ],
      opts,
    );
    assert.deepEqual(withOther[0].tokenIds, alone[0].tokenIds);
    assert.deepEqual(withAnother[0].tokenIds, alone[0].tokenIds);
    // Rows of one batch draw from different streams: the same prompt twice gives two samples.
    const twice = await policy.generateIds(
      [
        [5, 6, 7],
        [5, 6, 7],
      ],
      opts,
    );
    assert.notDeepEqual(twice[0].tokenIds, twice[1].tokenIds);
  });

  it('stops at a stop token and reports why', async () => {
    const free = await policy.generateIds([[1, 2, 3]], { maxNewTokens: 8, temperature: 0, stopIds: [] });
    const stopAt = free[0].tokenIds[2];
    const firstIdx = free[0].tokenIds.indexOf(stopAt);
    const r = await policy.generateIds([[1, 2, 3]], { maxNewTokens: 8, temperature: 0, stopIds: [stopAt] });
    assert.equal(r[0].finishReason, 'stop');
    assert.deepEqual(r[0].tokenIds, free[0].tokenIds.slice(0, firstIdx + 1));
    assert.equal(free[0].finishReason, 'length');
  });

  it('refuses ids outside the vocabulary', async () => {
    await assert.rejects(policy.logits([[1, 99]]), /token id 99 is outside the vocabulary/);
  });

  it("the decode graph reads the cache in place: it takes the cache and returns only this step's keys and values", () => {
    const g = buildStepGraph(SMALL_CONFIG, 'decode');
    const d = SMALL_CONFIG.hidden_size / SMALL_CONFIG.num_attention_heads;
    const key0 = g.inputs.find((v) => v.name === 'cache.0.key')!;
    assert.deepEqual(key0.shape, ['B', SMALL_CONFIG.num_key_value_heads, 'C', d]);
    assert.deepEqual(g.inputs.find((v) => v.name === 'cache.0.value')!.shape, ['B', SMALL_CONFIG.num_key_value_heads, d, 'C']);
    for (const o of g.outputs) assert.ok(!o.shape.includes('C'), `${o.name} [${o.shape}] is cache-sized`);
    assert.deepEqual(g.outputs.find((o) => o.name === 'new.0.key')!.shape, ['B', SMALL_CONFIG.num_key_value_heads, 'T', d]);
    assert.deepEqual(g.outputs.find((o) => o.name === 'new.0.value')!.shape, ['B', SMALL_CONFIG.num_key_value_heads, d, 'T']);
  });

  it('generation up to max_position_embeddings fills the cache exactly; KV decode = full recomputation there too', async () => {
    const max = SMALL_CONFIG.max_position_embeddings;
    const long = Array.from({ length: max - 4 }, (_, i) => (i * 3 + 1) % SMALL_CONFIG.vocab_size);
    const short = [5, 6, 7];
    const opts = { maxNewTokens: 50, temperature: 0, stopIds: [] };
    const kv = await policy.generateIds([long, short], { ...opts, kvCache: true });
    const full = await policy.generateIds([long, short], { ...opts, kvCache: false });
    assert.equal(kv[0].tokenIds.length, 4, 'the budget is what the context has left');
    assert.deepEqual(
      kv.map((r) => r.tokenIds),
      full.map((r) => r.tokenIds),
    );
    for (let b = 0; b < 2; b++) assert.ok(maxAbsDiff(kv[b].logprobs, full[b].logprobs) < 1e-4);
  });
});
