import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { initAdapter, parseLoraConfig } from '../../../src/policy/files/lora';
import { PACK_MIN_WEIGHT_BYTES, packsDecodeWeights } from '../../../src/policy/model/memory';
import { Policy, type GeneratedRow } from '../../../src/policy/inference/policy';
import { logSoftmax } from '../../../src/policy/inference/sampling';
import { referenceLogits } from '../../support/reference-forward';
import { initWeights, SeededRandom } from '../../../src/policy/model/weights';
import { SMALL_CONFIG } from './helpers';

const V = SMALL_CONFIG.vocab_size;
const ids = (n: number, k: number) => Array.from({ length: n }, (_, i) => (i * k + 3) % V);

describe('policy/sequences: per-sequence KV caches, batched ragged extend and sample', function () {
  this.timeout(60000);
  const weights = initWeights(SMALL_CONFIG, 11, 0.3);
  let policy: Policy;
  before(() => (policy = new Policy(weights, undefined, { provider: 'cpu' })));
  after(() => policy.dispose());

  /** Each sampled token's log-prob (at `temperature`) against the float64 reference on the full sequence. */
  function checkAgainstReference(tokens: number[], start: number, row: GeneratedRow, temperature: number, greedy: boolean): void {
    const ref = referenceLogits(weights, tokens.slice(0, start + row.tokenIds.length));
    row.tokenIds.forEach((id, t) => {
      const pos = start - 1 + t;
      assert.equal(tokens[start + t], id, 'the sampled tokens are part of the sequence');
      const lp = logSoftmax(ref.subarray(pos * V, (pos + 1) * V), temperature > 0 ? temperature : 1);
      assert.ok(Math.abs(lp[id] - row.logprobs[t]) < 1e-4, `token ${t}: ${row.logprobs[t]} vs reference ${lp[id]}`);
      if (greedy) assert.equal(id, lp.indexOf(Math.max(...lp)), `token ${t} is the argmax`);
    });
  }

  it('turn by turn (sample, extend with an observation, sample) equals the reference forward of the whole conversation', async () => {
    const seq = policy.newSequence(ids(9, 5));
    let start = seq.length;
    const r1 = (await policy.sample([{ seq, maxNewTokens: 6, temperature: 0, stopIds: [] }]))[0];
    assert.equal(r1.tokenIds.length, 6);
    assert.equal(seq.length, 15);
    checkAgainstReference(seq.tokens, start, r1, 0, true);
    await policy.extend([{ seq, ids: ids(13, 7) }]);
    assert.equal(seq.length, 28);
    assert.equal(seq.pending, 1, 'only the last token waits for the next sample');
    start = seq.length;
    const r2 = (await policy.sample([{ seq, maxNewTokens: 5, temperature: 0, stopIds: [] }]))[0];
    checkAgainstReference(seq.tokens, start, r2, 0, true);
    // An observation given to sample is fed in its first run; temperature sampling too.
    start = seq.length + 4;
    const r3 = (await policy.sample([{ seq, ids: ids(4, 3), seed: 5, maxNewTokens: 7, temperature: 1.3, stopIds: [] }]))[0];
    assert.deepEqual(seq.tokens.slice(start - 4, start), ids(4, 3));
    checkAgainstReference(seq.tokens, start, r3, 1.3, false);
    // One appended without a run is fed by the next sample the same way.
    seq.append(ids(3, 2));
    start = seq.length;
    const r4 = (await policy.sample([{ seq, maxNewTokens: 3, temperature: 0, stopIds: [] }]))[0];
    checkAgainstReference(seq.tokens, start, r4, 0, true);
  });

  it('a sequence samples the same tokens and log-probs alone or batched with sequences of other lengths, at any batch position', async () => {
    const prompts = [ids(5, 3), ids(40, 7), ids(17, 11), ids(2, 13)];
    const observations = [ids(3, 2), ids(20, 9), [], ids(11, 5)];
    const seeds = [101, 202, 303, 404];
    // Two turns per sequence: sample, then an observation, then sample again.
    const run = async (order: number[]) => {
      const seqs = order.map((i) => policy.newSequence(prompts[i]));
      // Budgets far apart: rows finish at different steps and the batch is regathered smaller.
      const req = (turn: number) =>
        seqs.map((seq, k) => ({
          seq,
          seed: seeds[order[k]] + turn,
          maxNewTokens: [3, 20, 2, 12][order[k]],
          temperature: 1.2,
          topP: 0.95,
          stopIds: [],
        }));
      const first = await policy.sample(req(0));
      await policy.extend(seqs.map((seq, k) => ({ seq, ids: observations[order[k]] })));
      const second = await policy.sample(req(1));
      const out = new Map<number, { rows: GeneratedRow[]; tokens: number[] }>();
      order.forEach((i, k) => out.set(i, { rows: [first[k], second[k]], tokens: seqs[k].tokens }));
      return out;
    };
    const batched = await run([0, 1, 2, 3]);
    const reversed = await run([3, 2, 1, 0]);
    for (let i = 0; i < prompts.length; i++) {
      const alone = (await run([i])).get(i)!;
      for (const other of [batched.get(i)!, reversed.get(i)!]) {
        assert.deepEqual(other.tokens, alone.tokens, `sequence ${i}`);
        for (let t = 0; t < 2; t++) {
          const d = Math.max(...other.rows[t].logprobs.map((x, j) => Math.abs(x - alone.rows[t].logprobs[j])));
          assert.ok(d < 1e-5, `sequence ${i} turn ${t}: log-probs differ by ${d}`);
        }
      }
    }
    // The two turns of each sequence are real continuations of the whole sequence.
    const { rows, tokens } = batched.get(1)!;
    checkAgainstReference(tokens, 40, rows[0], 1.2, false);
    checkAgainstReference(tokens, 40 + rows[0].tokenIds.length + 20, rows[1], 1.2, false);
  });

  it('batched greedy decode of sequences of different lengths equals full recomputation', async () => {
    const prompts = [ids(30, 7), ids(3, 5), ids(12, 3)];
    const seqs = prompts.map((p) => policy.newSequence(p));
    const rows = await policy.sample(seqs.map((seq) => ({ seq, maxNewTokens: 10, temperature: 0, stopIds: [] })));
    for (let b = 0; b < prompts.length; b++) {
      const [full] = await policy.logits([seqs[b].tokens]);
      rows[b].tokenIds.forEach((id, t) => {
        const pos = prompts[b].length - 1 + t;
        const lp = logSoftmax(full.subarray(pos * V, (pos + 1) * V));
        assert.equal(id, lp.indexOf(Math.max(...lp)));
        assert.ok(Math.abs(lp[id] - rows[b].logprobs[t]) < 1e-4);
      });
    }
  });

  it('stops per row: its own stop ids and budget; a full context gives nothing and says length', async () => {
    const free = (await policy.sample([{ seq: policy.newSequence(ids(4, 3)), maxNewTokens: 8, temperature: 0, stopIds: [] }]))[0];
    const stopAt = free.tokenIds[3];
    const a = policy.newSequence(ids(4, 3));
    const b = policy.newSequence(ids(4, 3));
    const [ra, rb] = await policy.sample([
      { seq: a, maxNewTokens: 8, temperature: 0, stopIds: [stopAt] },
      { seq: b, maxNewTokens: 2, temperature: 0, stopIds: [] },
    ]);
    assert.equal(ra.finishReason, 'stop');
    assert.deepEqual(ra.tokenIds, free.tokenIds.slice(0, free.tokenIds.indexOf(stopAt) + 1));
    assert.deepEqual(rb, { tokenIds: free.tokenIds.slice(0, 2), logprobs: rb.logprobs, finishReason: 'length' });
    const max = SMALL_CONFIG.max_position_embeddings;
    const full = policy.newSequence(ids(max - 2, 3));
    const [rf] = await policy.sample([{ seq: full, maxNewTokens: 10, temperature: 0, stopIds: [] }]);
    assert.equal(rf.tokenIds.length, 2, 'the budget is what the context has left');
    assert.equal(full.length, max);
    const [none] = await policy.sample([{ seq: full, maxNewTokens: 10, temperature: 0, stopIds: [] }]);
    assert.deepEqual(none, { tokenIds: [], logprobs: [], finishReason: 'length' });
    await assert.rejects(policy.extend([{ seq: full, ids: [1] }]), /exceeds max_position_embeddings/);
    assert.equal(full.length, max, 'a refused extend changes nothing');
  });

  it('reset to a re-rendered context keeps the common prefix and continues like a fresh sequence', async () => {
    const seq = policy.newSequence(ids(20, 3));
    await policy.sample([{ seq, maxNewTokens: 6, temperature: 0, stopIds: [] }]);
    await policy.extend([{ seq, ids: ids(10, 7) }]);
    const rendered = [...ids(12, 3), ...ids(9, 5)]; // shares 12 tokens with the old context
    seq.reset(rendered);
    assert.deepEqual(seq.tokens, rendered);
    assert.equal(seq.pending, 9);
    const fresh = policy.newSequence(rendered);
    const [a, b] = await policy.sample([
      { seq, seed: 9, maxNewTokens: 6, temperature: 1, stopIds: [] },
      { seq: fresh, seed: 9, maxNewTokens: 6, temperature: 1, stopIds: [] },
    ]);
    assert.deepEqual(a.tokenIds, b.tokenIds);
    assert.ok(Math.max(...a.logprobs.map((x, i) => Math.abs(x - b.logprobs[i]))) < 1e-5);
    seq.truncate(5);
    assert.deepEqual(seq.tokens, rendered.slice(0, 5));
    assert.equal(seq.pending, 1);
  });

  it('a cache computed under old weights is recomputed after the weights change', async () => {
    const p = new Policy(weights, undefined, { provider: 'cpu' });
    try {
      const seq = p.newSequence(ids(15, 7));
      await p.sample([{ seq, maxNewTokens: 4, temperature: 0, stopIds: [] }]);
      const other = initWeights(SMALL_CONFIG, 12, 0.3);
      p.setWeights(other);
      const start = seq.length;
      const [r] = await p.sample([{ seq, maxNewTokens: 4, temperature: 0, stopIds: [] }]);
      const ref = referenceLogits(other, seq.tokens);
      r.tokenIds.forEach((id, t) => {
        const pos = start - 1 + t;
        const lp = logSoftmax(ref.subarray(pos * V, (pos + 1) * V));
        assert.ok(Math.abs(lp[id] - r.logprobs[t]) < 1e-4, 'log-probs are those of the new weights');
      });
    } finally {
      await p.dispose();
    }
  });

  it('refuses a sequence used twice at once, twice in one call, or by another policy', async () => {
    const seq = policy.newSequence(ids(5, 3));
    const running = policy.sample([{ seq, maxNewTokens: 3, temperature: 0 }]);
    await assert.rejects(policy.sample([{ seq, maxNewTokens: 3 }]), /in use by a running/);
    assert.throws(() => seq.append([1]), /in use by a running/);
    await running;
    await assert.rejects(policy.extend([{ seq }, { seq }]), /appears twice/);
    const other = new Policy(weights, undefined, { provider: 'cpu' });
    await assert.rejects(other.sample([{ seq }]), /belongs to another policy/);
    await other.dispose();
    assert.throws(() => seq.append([V]), /outside the vocabulary/);
  });

  it("packed decode weights (held in the session, ONNX Runtime's packed layout) draw the tokens and log-probs of fed weights, with an adapter, across a weight change; the weights' file goes with the policy", async () => {
    const cache = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-packed-'));
    const was = process.env.XDG_CACHE_HOME;
    process.env.XDG_CACHE_HOME = cache;
    const packedRoot = path.join(cache, 'turnwise', 'packed');
    const adapter = initAdapter(SMALL_CONFIG, parseLoraConfig({ r: 4, lora_alpha: 8, target_modules: 'all-linear' }, 'test'), 3);
    const rng = new SeededRandom(4);
    for (const [k, t] of adapter.tensors) if (k.includes('lora_B')) for (let i = 0; i < t.length; i++) t[i] = 0.3 * (2 * rng.next() - 1);
    const changed = initWeights(SMALL_CONFIG, 12, 0.3);
    const run = async (pack: boolean) => {
      const p = new Policy(weights, undefined, { provider: 'cpu', packDecodeWeights: pack }, adapter);
      try {
        assert.equal(await p.packsDecodeWeights(), pack);
        const seqs = [ids(5, 3), ids(2, 7), ids(3, 11)].map((t) => p.newSequence(t));
        // three rows (one greedy), then one row alone (a one-row step on the same session)
        const many = await p.sample(
          seqs.map((seq, b) => ({ seq, seed: 50 + b, maxNewTokens: 8, temperature: b === 2 ? 0 : 1, stopIds: [] })),
        );
        const one = await p.sample([{ seq: seqs[0], seed: 60, maxNewTokens: 6, temperature: 1, stopIds: [] }]);
        const files = fs.existsSync(packedRoot) ? fs.readdirSync(packedRoot).length : 0;
        // new base weights: a packed session must not keep drawing from the old ones
        p.setWeights(changed);
        const after = await p.sample([{ seq: seqs[1], seed: 70, maxNewTokens: 6, temperature: 1, stopIds: [] }]);
        return { rows: [...many, ...one, ...after], seqs: seqs.map((s) => [...s.tokens]), files };
      } finally {
        await p.dispose();
      }
    };
    try {
      const fed = await run(false);
      assert.equal(fed.files, 0, 'fed weights write no file');
      const packed = await run(true);
      assert.equal(packed.files, 1, 'one folder of packed weights while the policy lives');
      assert.deepEqual(packed.seqs, fed.seqs, 'the same tokens');
      fed.rows.forEach((row, i) =>
        row.logprobs.forEach((lp, t) =>
          assert.ok(Math.abs(lp - packed.rows[i].logprobs[t]) < 1e-4, `row ${i} token ${t}: ${packed.rows[i].logprobs[t]} vs ${lp}`),
        ),
      );
      assert.deepEqual(fs.readdirSync(packedRoot), [], 'dispose removes the folder');
      // A folder left by a process that no longer runs is removed by the next one.
      fs.mkdirSync(path.join(packedRoot, '999999999-stale'));
      const p = new Policy(weights, undefined, { provider: 'cpu', packDecodeWeights: true });
      await p.sample([{ seq: p.newSequence(ids(4, 5)), seed: 1, maxNewTokens: 2 }]);
      assert.ok(!fs.existsSync(path.join(packedRoot, '999999999-stale')));
      await p.dispose();
      // Where the file cannot be written (the cache folder is a file), one warning and fed weights.
      const blocked = path.join(cache, 'not-a-folder');
      fs.writeFileSync(blocked, '');
      process.env.XDG_CACHE_HOME = blocked;
      const warnings: string[] = [];
      const q = new Policy(weights, undefined, { provider: 'cpu', packDecodeWeights: true, onWarning: (m) => warnings.push(m) }, adapter);
      const qs = [ids(5, 3), ids(2, 7), ids(3, 11)].map((t) => q.newSequence(t));
      const rows = await q.sample(qs.map((seq, b) => ({ seq, seed: 50 + b, maxNewTokens: 8, temperature: b === 2 ? 0 : 1, stopIds: [] })));
      await q.sample([{ seq: qs[0], seed: 60, maxNewTokens: 6, temperature: 1, stopIds: [] }]);
      assert.equal(warnings.length, 1, warnings.join('\n'));
      assert.match(warnings[0], /decode weights not packed .*decoding with the weights fed/);
      assert.equal(await q.packsDecodeWeights(), false);
      assert.deepEqual(
        qs.map((x) => [...x.tokens]).slice(0, 3),
        fed.seqs.map((x, i) => (i === 0 ? x : x.slice(0, qs[i].tokens.length))),
        'the tokens fed weights draw',
      );
      rows.forEach((row, i) => row.logprobs.forEach((lp, t) => assert.ok(Math.abs(lp - fed.rows[i].logprobs[t]) < 1e-4)));
      await q.dispose();
    } finally {
      if (was === undefined) delete process.env.XDG_CACHE_HOME;
      else process.env.XDG_CACHE_HOME = was;
      fs.rmSync(cache, { recursive: true, force: true });
    }
    // Left open, the setting packs on the CPU from PACK_MIN_WEIGHT_BYTES, never on a GPU provider.
    assert.deepEqual(
      [
        packsDecodeWeights(undefined, 'cpu', PACK_MIN_WEIGHT_BYTES - 1),
        packsDecodeWeights(undefined, 'cpu', PACK_MIN_WEIGHT_BYTES),
        packsDecodeWeights(true, 'cuda', 1e9),
        packsDecodeWeights(false, 'cpu', 1e10),
      ],
      [false, true, false, false],
    );
  });

  it('several decode steps per run (a Loop, as GPU providers run them) give the tokens of one step per run, and keep the cache right across stops', async () => {
    // Rows stop inside a run of 4 steps (a stop id, a shorter budget), a row greedy beside
    // sampled ones; each sequence then continues, and every log-prob is checked against the
    // float64 reference of its whole sequence: a slot kept that should not be, or one lost,
    // changes the continuation's log-probs.
    const prompts = [ids(5, 3), ids(2, 7), ids(3, 11), ids(4, 2)];
    // Row 0's second call stops at `stopAt` (none: the probe that finds its third token).
    const run = async (perRun: number, stopAt?: number) => {
      const p = new Policy(weights, undefined, { provider: 'cpu' });
      p.decodeStepsPerRun = perRun;
      try {
        const seqs = prompts.map((t) => p.newSequence(t));
        const first = await p.sample(
          seqs.map((seq, b) => ({ seq, seed: 20 + b, maxNewTokens: [12, 13, 6, 11][b], temperature: b === 3 ? 0 : 1, stopIds: [] })),
        );
        const second = await p.sample(
          seqs.map((seq, b) => ({
            seq,
            seed: 30 + b,
            maxNewTokens: 9,
            temperature: b === 3 ? 0 : 1,
            stopIds: b === 0 && stopAt !== undefined ? [stopAt] : [],
          })),
        );
        const alone = await p.sample([{ seq: seqs[1], seed: 40, maxNewTokens: 7, temperature: 1, stopIds: [] }]);
        return { seqs: seqs.map((s) => [...s.tokens]), first, second, alone };
      } finally {
        await p.dispose();
      }
    };
    // the stop of row 0's second call: its third token, so that the loop stops it mid-run
    const stopAt = (await run(1)).second[0].tokenIds[2];
    const [a, b] = [await run(1, stopAt), await run(4, stopAt)];
    assert.ok(a.second[0].finishReason === 'stop' && a.second[0].tokenIds.length <= 3, 'row 0 stops at its stop id');
    assert.deepEqual(b.seqs, a.seqs, 'the same tokens');
    for (const [x, y] of [
      [a.first, b.first],
      [a.second, b.second],
      [a.alone, b.alone],
    ] as const) {
      x.forEach((row, i) => {
        assert.equal(y[i].finishReason, row.finishReason);
        row.logprobs.forEach((lp, t) =>
          assert.ok(Math.abs(lp - y[i].logprobs[t]) < 1e-4, `row ${i} token ${t}: ${y[i].logprobs[t]} vs ${lp}`),
        );
      });
    }
    // the looped run's log-probs against the reference of each whole sequence
    b.seqs.forEach((tokens, i) => {
      const start = prompts[i].length;
      checkAgainstReference(tokens, start, b.first[i], i === 3 ? 0 : 1, i === 3);
      checkAgainstReference(tokens, start + b.first[i].tokenIds.length, b.second[i], i === 3 ? 0 : 1, i === 3);
    });
    checkAgainstReference(b.seqs[1], prompts[1].length + b.first[1].tokenIds.length + b.second[1].tokenIds.length, b.alone[0], 1, false);
  });
});
