// `turnwise bench train`: training-step time, tokens/s, the K-step Loop speedup, KV-cache vs
// no-cache decode speed at 512 tokens of context, and peak RSS, for turnwise-tiny on this machine.
import * as os from 'node:os';
import { resolveSpinning, type SessionSettings } from '../onnx';
import { presetConfig, parameterCount } from '../policy/model/config';
import { Policy } from '../policy/inference/policy';
import { PolicyTrainer, type TrainBatch } from '../policy/training/trainer';
import { initWeights, SeededRandom } from '../policy/model/weights';
import { median } from '../core/stats';

export interface TrainBenchOptions {
  size?: string;
  batch?: number;
  seq?: number;
  /** Timed training steps (after two warm-up steps); train_step_ms is their median. */
  steps?: number;
  /** Steps per Loop run for loop_speedup. */
  k?: number;
  /** Alternating repeats of (one K-step Loop run, K separate runs); medians are compared. */
  loopRepeats?: number;
  /** Packed-row SFT step shape (default SFT_PACKED: the warm start's 8 × 640). */
  packedBatch?: number;
  packedSeq?: number;
  context?: number;
  decodeTokens?: number;
  settings?: SessionSettings;
  onProgress?: (message: string) => void;
}

export interface TrainBenchResult {
  config: string;
  parameters: number;
  provider: string;
  batch: number;
  seq: number;
  loss: string;
  /** Intra-op threads asked for (0: ONNX Runtime's default, one per core). */
  threads: number;
  /** Whether the intra-op workers spin (see SessionSettings.spinning). */
  spinning: boolean;
  /** 1-minute load average when the benchmark started (other work on the machine skews timings). */
  load_avg_1m: number;
  /** Median over the timed steps. */
  train_step_ms: number;
  tokens_per_s: number;
  loop_k: number;
  loop_ms_per_step: number;
  separate_ms_per_step: number;
  loop_speedup: number;
  /**
   * The same comparison at SMALL_LOOP (1 × 16 tokens), where a step's compute is small next to
   * what every run() costs (copying ~38 MB of weights and moments out): what the Loop saves.
   */
  loop_small_batch: number;
  loop_small_seq: number;
  loop_speedup_small: number;
  /**
   * One SFT optimizer step on packed rows (sft_packed_batch × sft_packed_seq, examples of 48–320
   * tokens packed greedily, prompt tokens at weight 0.3): median ms, real (non-padding) tokens per
   * step, and real tokens per second, the warm start's throughput.
   */
  sft_packed_batch: number;
  sft_packed_seq: number;
  sft_packed_step_ms: number;
  sft_packed_real_tokens: number;
  sft_packed_tokens_per_s: number;
  decode_context: number;
  decode_tokens_per_s_kv: number;
  decode_tokens_per_s_nokv: number;
  /** Rows decoded together for decode_tokens_per_s_kv_batched (tokens of all rows per second). */
  decode_batch: number;
  decode_tokens_per_s_kv_batched: number;
  kv_speedup: number;
  /**
   * Sampled tokens per second over decode_batch sequences of ragged lengths (decode_context/8 …
   * decode_context), a turn each: a SEQUENCE_OBSERVATION-token observation appended through the
   * per-sequence caches (Policy.extend), then decode_tokens sampled at temperature 1, per-row
   * seeds (Policy.sample). The observation's prefill is part of the time, as in an episode.
   */
  sequence_sample_tokens_per_s: number;
  peak_rss_mb: number;
}

/** Rows in the batched decode measurement (a rollout group). */
export const DECODE_BATCH = 8;

/** Tokens of the observation appended per turn in sequence_sample_tokens_per_s. */
export const SEQUENCE_OBSERVATION = 32;

/** The warm start's row shape (640-token rows ran 20% faster per token than 1,024 in the warm start's measurements). */
export const SFT_PACKED = { batch: 8, seq: 640 };

/**
 * Rows of `seq` tokens packed greedily with examples of random lengths (7.5–50% of a row, the last
 * quarter the action at weight 1, the rest prompt at 0.3) until the next one does not fit;
 * the rest of the row is padding. Returns the batch and its real-token count.
 */
export function packedSftBatch(rows: number, seq: number, rng: SeededRandom): { batch: TrainBatch; realTokens: number } {
  const inputIds: number[] = [];
  const segmentIds: number[] = [];
  const lossMask: number[] = [];
  let real = 0;
  // 48–320 tokens at 640: short tasks of the curriculum up to full prompts with their action.
  const lo = Math.max(2, Math.round(seq * 0.075));
  const hi = Math.max(lo, Math.round(seq / 2));
  for (let r = 0; r < rows; r++) {
    let used = 0;
    for (let seg = 1; ; seg++) {
      const len = lo + Math.floor(rng.next() * (hi - lo + 1));
      if (used + len > seq) break; // the next example starts the next row
      for (let t = 0; t < len; t++) {
        inputIds.push(Math.floor(rng.next() * 256));
        segmentIds.push(seg);
        lossMask.push(t === 0 ? 0 : t >= 0.75 * len ? 1 : 0.3);
      }
      used += len;
      real += len;
    }
    for (; used < seq; used++) {
      inputIds.push(0);
      segmentIds.push(0);
      lossMask.push(0);
    }
  }
  return { batch: { inputIds, segmentIds, lossMask }, realTokens: real };
}

/** The overhead-dominated shape loop_speedup_small is measured at. */
export const SMALL_LOOP = { batch: 1, seq: 16 };

const round = (x: number, d = 2) => Math.round(x * 10 ** d) / 10 ** d;

export async function benchTrain(o: TrainBenchOptions = {}): Promise<TrainBenchResult> {
  const size = o.size ?? 'tiny';
  const c = presetConfig(size);
  const B = o.batch ?? 4;
  const T = o.seq ?? 128;
  const K = o.k ?? 8;
  const steps = o.steps ?? 6;
  const repeats = o.loopRepeats ?? 3;
  const ctx = o.context ?? 512;
  const nDecode = o.decodeTokens ?? 32;
  const log = o.onProgress ?? (() => undefined);
  const loadAvg = os.loadavg()[0];
  const settings: SessionSettings = { ...o.settings };
  const rng = new SeededRandom(1);
  const weights = initWeights(c, 0);

  const batchOf = (b: number, t: number): TrainBatch => {
    const ids = Array.from({ length: b * t }, () => Math.floor(rng.next() * 256));
    const lossMask = ids.map((_, i) => (i % t >= t / 2 ? 1 : 0));
    const oldLogp = ids.map(() => -5.5);
    const advantages = ids.map(() => rng.next() * 2 - 1);
    return { inputIds: ids, lossMask, oldLogp, advantages };
  };
  const trainer = new PolicyTrainer(weights, undefined, settings);
  const hyper = { lr: 1e-4 };
  const timed = async (b: number, t: number, batches: TrainBatch[]) => {
    const t0 = performance.now();
    await trainer.train({ loss: 'ppo-token', batch: b, seq: t }, batches, hyper);
    return performance.now() - t0;
  };
  /** ms for K steps as one Loop run and as K runs (medians of alternating repeats). */
  const loopVsSeparate = async (b: number, t: number) => {
    const batch = batchOf(b, t);
    const batches = new Array<TrainBatch>(K).fill(batch);
    for (let i = 0; i < 2; i++) await timed(b, t, [batch]);
    for (let i = 0; i < 2; i++) await timed(b, t, batches); // builds and warms the K-step session
    // Loop and separate runs alternate, so load from other processes hits both alike.
    const loopTimes: number[] = [];
    const sepTimes: number[] = [];
    for (let r = 0; r < repeats; r++) {
      loopTimes.push(await timed(b, t, batches));
      let sep = 0;
      for (let i = 0; i < K; i++) sep += await timed(b, t, [batch]);
      sepTimes.push(sep);
    }
    return { loop: median(loopTimes), separate: median(sepTimes) };
  };
  log(`training: ${B}×${T} tokens, warm-up…`);
  const batch = batchOf(B, T);
  // The first runs of a session are slower (allocations, arena growth): not what a training run sees.
  for (let i = 0; i < 2; i++) await timed(B, T, [batch]);
  const stepTimes: number[] = [];
  for (let i = 0; i < steps; i++) stepTimes.push(await timed(B, T, [batch]));
  const stepMs = median(stepTimes);
  log(`training: ${stepMs.toFixed(0)} ms/step (median of ${steps}); Loop of ${K}…`);
  const main = await loopVsSeparate(B, T);
  log(`Loop of ${K} at ${SMALL_LOOP.batch}×${SMALL_LOOP.seq} tokens…`);
  const small = await loopVsSeparate(SMALL_LOOP.batch, SMALL_LOOP.seq);
  const pB = o.packedBatch ?? SFT_PACKED.batch;
  const pT = o.packedSeq ?? SFT_PACKED.seq;
  log(`packed-row SFT at ${pB}×${pT} tokens…`);
  const packed = packedSftBatch(pB, pT, rng);
  const sftStep = async () => {
    const t0 = performance.now();
    await trainer.train({ loss: 'sft', batch: pB, seq: pT }, [packed.batch], hyper);
    return performance.now() - t0;
  };
  await sftStep(); // builds the session
  const sftTimes: number[] = [];
  for (let i = 0; i < Math.max(1, Math.min(steps, 3)); i++) sftTimes.push(await sftStep());
  const sftMs = median(sftTimes);
  await trainer.dispose();

  log(`decode at ${ctx} tokens of context…`);
  const policy = new Policy(weights, undefined, settings);
  const provider = await policy.provider;
  const prompt = Array.from({ length: ctx }, () => Math.floor(rng.next() * 256));
  const gen = { temperature: 0, stopIds: [] as number[] };
  await policy.generateIds([prompt], { ...gen, maxNewTokens: 2 });
  // Time prefill + n tokens and prefill + 1 token; the difference is n − 1 decode steps. Each is
  // the fastest of three runs: a difference of single runs went negative when a short decode met
  // the machine's noise.
  const timeGen = async (n: number, kvCache: boolean, rows: number[][] = [prompt]) => {
    let best = Infinity;
    for (let i = 0; i < 3; i++) {
      const t = performance.now();
      await policy.generateIds(rows, { ...gen, maxNewTokens: n, kvCache });
      best = Math.min(best, performance.now() - t);
    }
    return best;
  };
  const base = await timeGen(1, true);
  const kvMs = (await timeGen(nDecode + 1, true)) - base;
  const nNo = Math.max(2, Math.floor(nDecode / 8));
  const noMs = (await timeGen(nNo + 1, false)) - base;
  // Rollouts decode a group of episodes together: DECODE_BATCH rows of the same context length.
  const rows = Array.from({ length: DECODE_BATCH }, () => Array.from({ length: ctx }, () => Math.floor(rng.next() * 256)));
  await timeGen(2, true, rows);
  const baseBatch = await timeGen(1, true, rows);
  const batchMs = (await timeGen(nDecode + 1, true, rows)) - baseBatch;
  // Episodes as the agent runs them: DECODE_BATCH sequences of ragged lengths (ctx/8 … ctx), a
  // turn = an observation appended to each and a sampled action, per-row seeds; one warm-up turn.
  log(`sampling ${DECODE_BATCH} sequences of ragged lengths…`);
  const seqs = Array.from({ length: DECODE_BATCH }, (_, b) =>
    policy.newSequence(Array.from({ length: Math.max(1, Math.round((ctx * (b + 1)) / DECODE_BATCH)) }, () => Math.floor(rng.next() * 256))),
  );
  const turn = async () => {
    const t = performance.now();
    await policy.extend(
      seqs.map((seq) => ({ seq, ids: Array.from({ length: SEQUENCE_OBSERVATION }, () => Math.floor(rng.next() * 256)) })),
    );
    await policy.sample(seqs.map((seq, b) => ({ seq, seed: b, maxNewTokens: nDecode, temperature: 1, stopIds: [] })));
    return performance.now() - t;
  };
  await turn();
  const seqMs = await turn();
  await policy.dispose();
  const kvTps = nDecode / (kvMs / 1000);
  const noTps = nNo / (noMs / 1000);
  return {
    config: `turnwise-${size}`,
    parameters: parameterCount(c),
    provider,
    batch: B,
    seq: T,
    loss: 'ppo-token',
    threads: settings.threads ?? 0,
    spinning: resolveSpinning(settings),
    load_avg_1m: round(loadAvg),
    train_step_ms: round(stepMs, 1),
    tokens_per_s: round((B * T) / (stepMs / 1000), 0),
    loop_k: K,
    loop_ms_per_step: round(main.loop / K, 1),
    separate_ms_per_step: round(main.separate / K, 1),
    loop_speedup: round(main.separate / main.loop),
    loop_small_batch: SMALL_LOOP.batch,
    loop_small_seq: SMALL_LOOP.seq,
    loop_speedup_small: round(small.separate / small.loop),
    sft_packed_batch: pB,
    sft_packed_seq: pT,
    sft_packed_step_ms: round(sftMs, 1),
    sft_packed_real_tokens: packed.realTokens,
    sft_packed_tokens_per_s: round(packed.realTokens / (sftMs / 1000), 0),
    decode_context: ctx,
    decode_tokens_per_s_kv: round(kvTps, 1),
    decode_tokens_per_s_nokv: round(noTps, 1),
    decode_batch: DECODE_BATCH,
    decode_tokens_per_s_kv_batched: round((DECODE_BATCH * nDecode) / (batchMs / 1000), 1),
    kv_speedup: round(kvTps / noTps, 1),
    sequence_sample_tokens_per_s: round((DECODE_BATCH * nDecode) / (seqMs / 1000), 1),
    peak_rss_mb: round(process.resourceUsage().maxRSS / 1024, 0),
  };
}
