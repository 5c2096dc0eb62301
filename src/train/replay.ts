// Supervised replay during RL (PPO-ptx, as in InstructGPT): generated warm-start demonstrations
// trained beside each update's RL rows, `replayCoef` times their weighted mean NLL in the loss.
// RL on a workspace sees a few dozen tasks, each a couple of times; fitting them cost the policy
// skills it needs elsewhere (docs/experiments/2026-12-01-held-out-drift.md, repeat-6: a task that copies a 30-character condition went
// from 6/8 to 0/8 while others were learned). The demonstrations are drawn as the shipped warm
// start's last phase drew them (attempt loops, a little curriculum, prompt tokens at 0.3) from
// generated modules only: never the workspace's tasks, so no held-out task can leak in.
import { seededRandom } from '../core/random';
import { encodeDemonstration, type CompactCodec } from './compact-codec';
import type { FixCase } from '../demonstrations/fix-cases';
import { LOOP_SHARE } from '../demonstrations/forms';
import { casePool, drawDemonstration } from '../demonstrations/cases';

/** One encoded demonstration: token ids and per-token loss weights (actions 1, the rest 0.3). */
export interface ReplayExample {
  ids: number[];
  weights: number[];
}

/** The mix of the shipped policy's last warm-start phase (docs/model-card-turnwise-tiny.md). */
export const REPLAY_MIX = { curriculum: 0.1, loopShare: LOOP_SHARE, promptWeight: 0.3 } as const;

/** Generated fix cases drawn per run (generation takes about 2 ms a case). */
export const REPLAY_POOL = 500;

export class ReplaySource {
  private constructor(
    private readonly codec: CompactCodec,
    private readonly cases: readonly FixCase[],
  ) {}

  static async create(codec: CompactCodec, seed: number, poolSize = REPLAY_POOL): Promise<ReplaySource> {
    return new ReplaySource(codec, await casePool(seed, poolSize));
  }

  /**
   * `n` demonstrations of at most `maxTokens` tokens, from the random stream `seed` (a run seeds
   * it by iteration, epoch and minibatch, so a resumed run replays the same ones). A draw longer
   * than maxTokens is drawn again (up to 8 times); the last one is cut to fit, keeping its head.
   */
  draw(n: number, maxTokens: number, seed: number): ReplayExample[] {
    const r = seededRandom(seed);
    const out: ReplayExample[] = [];
    for (let i = 0; i < n; i++) {
      let ex: ReplayExample | undefined;
      for (let k = 0; k < 8 && !(ex && ex.ids.length <= maxTokens); k++) {
        const c = this.cases[Math.floor(r() * this.cases.length)];
        ex = encodeDemonstration(this.codec, drawDemonstration(r, c, REPLAY_MIX).segments, REPLAY_MIX.promptWeight);
      }
      out.push({ ids: ex!.ids.slice(0, maxTokens), weights: ex!.weights.slice(0, maxTokens) });
    }
    return out;
  }
}
