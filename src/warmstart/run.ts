// Supervised warm start: teaches the policy the agent format and the fix skill before RL
// (RL cannot learn from a start that never succeeds). Packed rows of demonstrations and a copy
// curriculum whose share falls from `curriculumStart` to `curriculumEnd` over the budget;
// prompt tokens in the loss at `promptWeight`, action tokens at 1; warm-up then cosine learning
// rate by optimizer step (a step count, or one planned from a time budget). Checkpoints (weights
// + optimizer) are written every few minutes, so a killed warm start keeps its progress, and a
// JSONL log records loss and held-out fix rates.
import { seededRandom } from '../core/random';
import { TurnwiseError } from '../core/errors';
import { loadCheckpoint, saveCheckpoint } from '../policy/files/checkpoint';
import { presetConfig } from '../policy/model/config';
import { Policy } from '../policy/inference/policy';
import { byteLevelTokenizerConfig, byteLevelTokenizerJson, loadTokenizer } from '../policy/files/tokenizer';
import { PolicyTrainer } from '../policy/training/trainer';
import { initWeights } from '../policy/model/weights';
import { compactCodec, encodeDemonstration, encodeDemonstrationTurns } from '../train/compact-codec';
import type { FixCase } from '../demonstrations/fix-cases';
import { pythonSourceFiles, realSourcePool } from '../demonstrations/real-source';
import { evaluateEpisodes, evaluateFixes } from './evaluate';
import { startDir } from './record';
import { episodeDemonstration } from '../demonstrations/chat';
import { warmstartChat } from './chat';
import { resolveWarmstartConfig, type WarmstartLogRow, type WarmstartOptions, type WarmstartResult } from './config';
import { casePool, drawDemonstration, evalCasePool } from '../demonstrations/cases';
import { runWarmstartLoop } from './loop';
import { modelActionFormat } from '../train/action-format';

export async function warmstart(o: WarmstartOptions): Promise<WarmstartResult> {
  // Resolved (and checked) before the start folder is read; a chat model's warm start resolves
  // the settings again with its own defaults (chat.ts).
  const c = resolveWarmstartConfig(o, 'compact');
  const seed = c.seed;
  const rows = c.rows;
  const rowTokens = c.rowTokens;
  const wsShare = o.workspaceCases?.length ? c.workspaceShare : 0;
  // With noSed every example is in the numbered form, and the simulated episodes are measured in it.
  const numberedShare = c.noSed ? 1 : c.numberedShare;
  const realShare = c.realShare;

  // A chat model (its own template) is warm-started in its own format, LoRA when asked.
  const start = startDir(c);
  if (start && modelActionFormat(c.adapter && c.model ? c.model : start).kind === 'chat') {
    return warmstartChat(o);
  }
  if (c.adapter || c.lora) {
    throw new TurnwiseError(
      'invalid-input',
      `${start ?? 'turnwise-tiny'} writes in the compact format, whose warm start trains the whole model; LoRA warm starts are for chat models`,
      {
        hint: 'leave out --lora / --adapter (turnwise-tiny is small enough to train whole), or give a chat model folder with --model',
      },
    );
  }
  let weights;
  let optimizer;
  let tokenizerJson: Record<string, unknown>;
  let tokenizerConfig: Record<string, unknown> | undefined;
  if (start) {
    const ck = loadCheckpoint(start, { optimizer: true });
    if (ck.adapter) {
      throw new TurnwiseError(
        'invalid-input',
        `${start} is a LoRA adapter over ${ck.dir}, a model in the compact format; its warm start trains a whole model`,
        {
          hint: `merge it first (turnwise policy merge --model ${ck.dir} --adapter ${start} --out DIR), then warm-start --from DIR`,
        },
      );
    }
    weights = ck.weights;
    // A new warm start of a model (--model) starts its optimizer afresh; --from continues it.
    optimizer = c.from ? ck.optimizer : undefined;
    tokenizerJson = ck.tokenizerJson;
    tokenizerConfig = ck.tokenizerConfig;
  } else {
    weights = initWeights(presetConfig('tiny'), seed);
    tokenizerJson = byteLevelTokenizerJson();
    tokenizerConfig = byteLevelTokenizerConfig();
  }
  const tokenizer = loadTokenizer(tokenizerJson, tokenizerConfig);
  const codec = compactCodec(tokenizer);
  const ctx = weights.config.max_position_embeddings;
  if (rowTokens > ctx)
    throw new TurnwiseError('invalid-input', `rows of ${rowTokens} tokens are longer than the model's context of ${ctx}`, {
      hint: `give --row-tokens of at most ${ctx}`,
    });
  const trainer = new PolicyTrainer(weights, optimizer, o.settings);

  // Train cases and held-out eval cases come from different seeds of the generator (none are
  // generated for a warm start on episodes alone).
  const onlyEpisodes = !!o.episodes?.length && c.episodeShare >= 1;
  const pool = onlyEpisodes ? [] : await casePool(seed * 7919 + 1, c.poolSize, o.signal);
  const evalCases = await evalCasePool(seed, c.evalCases, o.signal);
  // Real source: train cases from most files, held-out cases from the files set aside for evaluation.
  let realPool: FixCase[] = [];
  let realEval: FixCase[] = [];
  if (realShare > 0 && !onlyEpisodes) {
    const roots = c.sourceRoots;
    const files = pythonSourceFiles(roots);
    realPool = await realSourcePool(seededRandom(seed * 7919 + 5), files, c.realPoolSize, { signal: o.signal });
    realEval = await realSourcePool(seededRandom(seed * 7919 + 6), files, 32, { heldOut: true, perFile: 2, signal: o.signal });
    if (realPool.length === 0) {
      throw new TurnwiseError(
        'invalid-input',
        `no fix case could be made from Python source under ${roots.length ? roots.join(', ') : '(no folder found)'}`,
        {
          hint: 'install Python 3 (its standard library is the default source), give folders of Python modules with --source-root DIR, or leave out --real-share',
        },
      );
    }
  }
  const r = seededRandom(seed * 7919 + 3);
  const generated = (): FixCase =>
    realShare > 0 && r() < realShare ? realPool[Math.floor(r() * realPool.length)] : pool[Math.floor(r() * pool.length)];
  const pickCase = (): FixCase =>
    wsShare > 0 && r() < wsShare ? o.workspaceCases![Math.floor(r() * o.workspaceCases!.length)] : generated();

  const save = () =>
    saveCheckpoint(c.out, { weights: trainer.weights(), optimizer: trainer.optimizerState(), tokenizerJson, tokenizerConfig });
  const evaluate = async (): Promise<Partial<WarmstartLogRow>> => {
    const policy = new Policy(trainer.weights(), tokenizer, o.settings);
    try {
      const e = await evaluateFixes(policy, codec, evalCases);
      const ws = o.workspaceCases?.length ? await evaluateFixes(policy, codec, o.workspaceCases.slice(0, 32)) : undefined;
      const ep = await evaluateEpisodes(policy, codec, evalCases.slice(0, 32));
      // The numbered form, on the generated cases and on held-out real source (the form the
      // warm start teaches most, else the sed form).
      const num = numberedShare > 0 ? await evaluateEpisodes(policy, codec, evalCases.slice(0, 32), 5, undefined, 'numbered') : undefined;
      const real = realEval.length
        ? await evaluateEpisodes(policy, codec, realEval, 5, undefined, numberedShare >= 0.5 ? 'numbered' : 'sed')
        : undefined;
      return {
        episode_fix: ep.fixed,
        exact_fix: e.exact,
        restores_line: e.restores,
        right_line: e.rightLine,
        valid_sed: e.validSed,
        ...(ws ? { workspace_exact_fix: ws.exact } : {}),
        ...(num ? { numbered_episode_fix: num.fixed } : {}),
        ...(real ? { real_episode_fix: real.fixed } : {}),
      };
    } finally {
      await policy.dispose();
    }
  };
  // The copy curriculum's share falls linearly over the schedule.
  const curriculum = (frac: number) => c.curriculumStart + (c.curriculumEnd - c.curriculumStart) * frac;
  // Resolved episodes of evaluation results, in the compact format, drawn in `episodeShare` of examples.
  const episodeSegs = (o.episodes ?? []).map((e) => episodeDemonstration(e.trajectory, e.task, 'compact'));
  const epShare = episodeSegs.length ? c.episodeShare : 0;
  const drawMix = (cur: number) => {
    const mix = {
      curriculum: cur,
      loopShare: c.loopShare,
      numberedShare,
      candsShare: c.candsShare,
      walkShare: c.walkShare,
      lowerShare: c.lowerShare,
    };
    if (!c.noSed) return drawDemonstration(r, pickCase(), mix).segments;
    // A case without a numbered form is drawn again; after 20 such the example is left out.
    for (let t = 0; t < 20; t++) {
      const d = drawDemonstration(r, pickCase(), { ...mix, noSed: true });
      if (d) return d.segments;
    }
    return undefined;
  };
  return runWarmstartLoop(
    { ...o, ...c },
    {
      trainer,
      rowTokens,
      curriculum,
      draw: (frac) => {
        const cur = curriculum(frac);
        const examples: { ids: number[]; weights: number[] }[] = [];
        // Over-draw: packing keeps what fits.
        for (let i = 0; i < rows * 10; i++) {
          // No draw without episodes: the random stream of the generated demonstrations stays as it was.
          const segments =
            epShare > 0 && (epShare >= 1 || r() < epShare) ? episodeSegs[Math.floor(r() * episodeSegs.length)] : drawMix(cur);
          if (!segments) continue;
          const limit = Math.min(rowTokens, ctx);
          const encs =
            c.longEpisodes === 'turns'
              ? encodeDemonstrationTurns(codec, segments, c.promptWeight, limit - c.maxActionTokens)
              : [encodeDemonstration(codec, segments, c.promptWeight)];
          for (const enc of encs) if (enc.ids.length <= limit) examples.push(enc);
        }
        return examples;
      },
      evaluate,
      save,
      finalCurriculum: c.curriculumEnd,
    },
  );
}
