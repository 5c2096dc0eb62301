// The warm start of a chat model, in its own chat format (agent/chat-format.ts): demonstrations
// (generated fix episodes, a workspace's recorded ones, resolved episodes of evaluation results)
// become conversations through the model's chat template, with the loss on the replies (one
// fenced bash block each, or submit) and the ids built as rollouts build them (chat-demonstrations.ts).
// The whole model is trained, or a LoRA adapter over the frozen base: a fresh one (`lora`), or
// one continued (`adapter`, or `from` an adapter folder) with its optimizer state. The result is
// a checkpoint that records its chat format (action_format.json), so a run, eval and serve prompt
// it the same way; a full one carries its template as chat_template.jinja.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { TurnwiseError } from '../core/errors';
import { writeFileAtomic } from '../core/fs';
import { seededRandom } from '../core/random';
import { chatFormatErrorObservation, parseChatReply, type ChatFormat } from '../agent/chat-format';
import { taskText } from '../agent/prompt';
import { loadCheckpoint, saveCheckpoint } from '../policy/files/checkpoint';
import { initAdapter, loadAdapter, loadAdapterOptimizer, saveAdapter, type LoraAdapter } from '../policy/files/lora';
import { Policy } from '../policy/inference/policy';
import { PolicyTrainer } from '../policy/training/trainer';
import { recordActionFormat } from '../train/action-format';
import {
  chatDemonstrationFromSegments,
  chatReplyFor,
  encodeChatDemonstration,
  episodeDemonstration,
  PYTHON_SYSTEM,
  type ChatDemonstration,
} from '../demonstrations/chat';
import { chatFormatOf } from '../train/chat-model';
import type { FixCase } from '../demonstrations/fix-cases';
import { resolveWarmstartConfig, type WarmstartOptions, type WarmstartResult } from './config';
import { casePool, drawDemonstration, evalCasePool } from '../demonstrations/cases';
import { runWarmstartLoop } from './loop';
import { simulateTurn } from '../demonstrations/simulator';
import { startDir } from './record';

export async function warmstartChat(o: WarmstartOptions): Promise<WarmstartResult> {
  const start = startDir(o)!;
  // The base model, and the adapter trained over it (if any).
  const ck = loadCheckpoint(o.adapter && o.model ? o.model : start, { optimizer: true });
  let adapter: LoraAdapter | undefined;
  let adapterOptimizer = ck.adapterOptimizer;
  if (o.adapter && o.model) {
    adapter = loadAdapter(o.adapter, ck.weights.config);
    adapterOptimizer = loadAdapterOptimizer(o.adapter, adapter, ck.weights.config);
  } else adapter = ck.adapter;
  if (adapter && o.lora) {
    throw new TurnwiseError(
      'invalid-input',
      `${o.adapter ?? start} is a LoRA adapter already (r ${adapter.config.r}, ${adapter.config.target_modules.join(', ')}); its settings are its own`,
      {
        hint: 'leave out --lora to continue the adapter, or give the base with --model alone and --lora to start a new one',
      },
    );
  }
  // A LoRA adapter (a fresh one or one continued) has its own defaults (WARMSTART_DEFAULTS.byKind).
  const c = resolveWarmstartConfig(o, adapter || o.lora ? 'chat-lora' : 'chat');
  const seed = c.seed;
  if (!adapter && o.lora) adapter = initAdapter(ck.weights.config, o.lora, seed * 7919 + 5);
  // The adapter names its base by absolute path: the output folder is elsewhere than the one it came from.
  if (adapter) adapter = { ...adapter, config: { ...adapter.config, base_model_name_or_path: ck.dir } };
  const continued = !!c.from || !!c.adapter;
  const maxActionTokens = c.maxActionTokens;
  const format = chatFormatOf(ck, maxActionTokens);
  const eos = ck.weights.config.eos_token_ids ?? (ck.weights.config.eos_token_id !== undefined ? [ck.weights.config.eos_token_id] : []);
  const stopIds = [...new Set([format.endOfTurn.id, ...eos])];
  const ctx = ck.weights.config.max_position_embeddings;
  const rows = c.rows;
  const rowTokens = Math.min(c.rowTokens, ctx);
  const promptWeight = c.promptWeight;
  const wsShare = o.workspaceCases?.length ? c.workspaceShare : 0;

  // A whole model continues its optimizer only when its warm start is continued (--from).
  const trainer = new PolicyTrainer(
    ck.weights,
    adapter ? undefined : continued ? ck.optimizer : undefined,
    o.settings,
    adapter ? { adapter, ...(continued && adapterOptimizer ? { optimizer: adapterOptimizer } : {}) } : undefined,
  );

  const episodes: ChatDemonstration[] = (o.episodes ?? []).map((e) => episodeDemonstration(e.trajectory, e.task, 'chat'));
  const epShare = episodes.length ? c.episodeShare : 0;
  const pool = epShare >= 1 ? [] : await casePool(seed * 7919 + 1, c.poolSize, o.signal);
  const evalCases = await evalCasePool(seed, c.evalCases, o.signal);
  const r = seededRandom(seed * 7919 + 3);
  const pickCase = (): FixCase =>
    wsShare > 0 && r() < wsShare ? o.workspaceCases![Math.floor(r() * o.workspaceCases!.length)] : pool[Math.floor(r() * pool.length)];
  // An episode's conversation is the same every time it is drawn: encoded once.
  const episodeIds = new Map<number, ReturnType<typeof encodeChatDemonstration>>();
  const encodeEpisode = (i: number) => {
    let e = episodeIds.get(i);
    if (!e) episodeIds.set(i, (e = encodeChatDemonstration(format, episodes[i], promptWeight, rowTokens)));
    return e;
  };
  if (episodes.length && episodes.every((_, i) => encodeEpisode(i).replies === 0)) {
    throw new TurnwiseError('invalid-input', `none of the ${episodes.length} episode(s) fits a row of ${rowTokens} tokens with one reply`, {
      hint: "give longer rows (--row-tokens), up to the model's context",
    });
  }

  const outDir = path.resolve(c.out);
  const save = () => {
    if (adapter) saveAdapter(outDir, trainer.adapter()!, ck.weights.config, trainer.adapterOptimizerState());
    else {
      saveCheckpoint(outDir, {
        weights: trainer.weights(),
        optimizer: trainer.optimizerState(),
        tokenizerJson: ck.tokenizerJson,
        tokenizerConfig: ck.tokenizerConfig,
      });
      // The template goes with the weights (it may have been in the base's chat_template.jinja).
      writeFileAtomic(path.join(outDir, 'chat_template.jinja'), format.o.template.text);
      for (const f of ['generation_config.json', 'special_tokens_map.json']) {
        const from = path.join(ck.dir, f);
        if (fs.existsSync(from)) fs.copyFileSync(from, path.join(outDir, f));
      }
    }
    recordActionFormat(outDir, 'chat');
  };
  const evaluate = async () => {
    const policy = new Policy(trainer.weights(), ck.tokenizer, o.settings, trainer.adapter());
    try {
      const e = await evaluateChatEpisodes(policy, format, stopIds, evalCases, { maxActionTokens });
      return { episode_fix: e.fixed, exact_fix: e.exact };
    } finally {
      await policy.dispose();
    }
  };
  return runWarmstartLoop(
    { ...o, ...c },
    {
      trainer,
      rowTokens,
      curriculum: () => 0,
      draw: () => {
        const examples: { ids: number[]; weights: number[] }[] = [];
        for (let i = 0; i < rows * 4; i++) {
          const enc =
            epShare > 0 && (epShare >= 1 || r() < epShare)
              ? encodeEpisode(Math.floor(r() * episodes.length))
              : encodeChatDemonstration(
                  format,
                  chatDemonstrationFromSegments(
                    drawDemonstration(r, pickCase(), { curriculum: 0, loopShare: c.loopShare }).segments,
                    PYTHON_SYSTEM,
                  ),
                  promptWeight,
                  rowTokens,
                );
          if (enc.replies > 0) examples.push(enc);
        }
        return examples;
      },
      evaluate,
      save,
      finalCurriculum: 0,
    },
  );
}

/**
 * Greedy episodes of a chat model on fix cases, simulated (simulateTurn) from the point after
 * `tw-suspects`, as the compact format's evaluateEpisodes: the share whose bug line is restored
 * with no stray edit left within `turns` turns, and the share whose first command is the exact fix.
 */
export async function evaluateChatEpisodes(
  policy: Policy,
  format: ChatFormat,
  stopIds: readonly number[],
  cases: readonly FixCase[],
  o: { turns?: number; maxActionTokens?: number } = {},
): Promise<{ fixed: number; exact: number; meanTurns: number }> {
  const tok = format.o.tokenizer;
  const turns = o.turns ?? 5;
  const st = cases.map((c) => {
    const conv = format.conversation(PYTHON_SYSTEM, taskText({ fail_to_pass: c.failing, source: 'mutation' }));
    conv.prompt();
    const text = chatReplyFor('tw-suspects');
    conv.addReply({ text, tokenIds: [...tok.encode(text, { special: false }), format.endOfTurn.id], stopped: true });
    conv.addObservation(`exit 1\n${[`${c.failing.length} failed, ${c.passing} passed`, ...c.suspects].join('\n')}`);
    return { c, conv, line: c.mutatedLine, stray: false, done: false, n: 0, exact: false };
  });
  for (let t = 0; t < turns; t++) {
    const live = st.filter((s) => !s.done);
    for (let i = 0; i < live.length; i += 8) {
      const chunk = live.slice(i, i + 8);
      const prompts = chunk.map((s) => s.conv.prompt().ids);
      const rows = await policy.generateIds(prompts, { maxNewTokens: o.maxActionTokens ?? 96, temperature: 0, stopIds: [...stopIds] });
      for (const [k, row] of rows.entries()) {
        const s = chunk[k];
        const stopped = row.finishReason === 'stop';
        const text = tok.decode(stopped ? row.tokenIds.slice(0, -1) : row.tokenIds, true);
        s.conv.addReply({ text, tokenIds: row.tokenIds, stopped });
        s.n++;
        const a = await parseChatReply(text, stopped);
        if (t === 0 && a.kind === 'bash' && a.command === s.c.fix) s.exact = true;
        if (a.kind === 'submit') {
          s.done = true;
          continue;
        }
        s.conv.addObservation(a.kind === 'bash' ? simulateTurn(s, s.c, a.command) : chatFormatErrorObservation(a.reason));
      }
    }
  }
  const n = Math.max(1, st.length);
  return {
    fixed: st.filter((s) => s.line === s.c.originalLine && !s.stray).length / n,
    exact: st.filter((s) => s.exact).length / n,
    meanTurns: st.reduce((a, s) => a + s.n, 0) / n,
  };
}
