// `turnwise warmstart`: the supervised warm start (src/warmstart). Its flags are a table over the
// warm start's config (WARMSTART_FLAGS → WarmstartConfig); the demonstrations they name (a
// workspace's recorded cases, the resolved episodes of results files) are gathered here first.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { TurnwiseError } from '../../core/errors';
import type { Task, Trajectory } from '../../core/schema';
import type { FixCase } from '../../demonstrations/fix-cases';
import { parseLoraConfig, type LoraConfig } from '../../policy/files/lora';
import { SandboxPool } from '../../sandbox';
import {
  resolveWarmstartConfig,
  WARMSTART_RANGES,
  type NumberSetting,
  type WarmstartConfig,
  type WarmstartLogRow,
  type WarmstartSettings,
} from '../../warmstart/config';
import { warmstartEpisodes } from '../../warmstart/episodes';
import { startDir } from '../../warmstart/record';
import { warmstart } from '../../warmstart/run';
import { workspaceCasesFor } from '../../warmstart/workspace-demonstrations';
import { flagOptions, numberInRange, requireString, UsageError, type CliCommand, type OptionSpec, type ParsedArgs } from '../command';
import { fmt } from '../format';
import { stopOnSignals } from '../signals';
import { stoppedOr } from '../../core/stop';

/**
 * --lora SPEC: a LoRA block as the run config's `lora` takes it: a JSON object, a file holding
 * one, or PEFT fields as `r=16,lora_alpha=32,target_modules=q_proj+v_proj`.
 */
export function loraOption(spec: string): LoraConfig {
  let raw: unknown;
  const text = fs.existsSync(spec) && fs.statSync(spec).isFile() ? fs.readFileSync(spec, 'utf8') : spec;
  if (/^\s*\{/.test(text)) {
    try {
      raw = JSON.parse(text);
    } catch (e) {
      throw new UsageError(`--lora: ${JSON.stringify(spec.slice(0, 80))} is not valid JSON (${(e as Error).message})`);
    }
  } else {
    const o: Record<string, unknown> = {};
    for (const part of text
      .split(',')
      .map((x) => x.trim())
      .filter(Boolean)) {
      const m = /^([a-z_]+)=(.+)$/.exec(part);
      if (!m)
        throw new UsageError(
          `--lora takes a JSON object, a file holding one, or fields like r=16,lora_alpha=32,target_modules=all-linear; got ${JSON.stringify(part)}`,
        );
      const [, k, v] = m;
      o[k] =
        k === 'target_modules'
          ? v === 'all-linear'
            ? v
            : v.split('+')
          : v === 'true' || v === 'false'
            ? v === 'true'
            : Number.isFinite(Number(v))
              ? Number(v)
              : v;
    }
    raw = o;
  }
  return parseLoraConfig(raw, '--lora');
}

/** --curriculum START,END: the copy curriculum's share at the start and at the end of the schedule. */
function curriculumOption(text: string): Partial<WarmstartConfig> {
  const parts = text.split(',').map(Number);
  if (parts.length !== 2 || parts.some((x) => !(x >= 0 && x <= 1)))
    throw new UsageError(`--curriculum takes START,END shares in [0, 1], got ${JSON.stringify(text)}`);
  return { curriculumStart: parts[0], curriculumEnd: parts[1] };
}

/**
 * How a warm-start flag's text becomes its setting: `number`, a number in the setting's range
 * (WARMSTART_RANGES); `path`, resolved from the current folder; `paths`, a flag given once or more,
 * each value a path; `text` as it is; `switch`, a flag without a value (true when given); or a
 * function of the text that returns the settings it makes.
 */
type FlagRead = 'number' | 'path' | 'paths' | 'text' | 'switch' | ((text: string) => Partial<WarmstartConfig>);

/** A `turnwise warmstart` flag: the WarmstartConfig setting (or settings) it sets and how its text is read. */
export interface WarmstartFlag {
  flag: string;
  field: keyof WarmstartConfig | readonly (keyof WarmstartConfig)[];
  read: FlagRead;
}

/**
 * Every flag of `turnwise warmstart` but --force (whether --out may be replaced), a row each,
 * read in this order. The meaning and default of each setting are in src/warmstart/config.ts
 * (and docs/configuration.md, "Warm start").
 */
export const WARMSTART_FLAGS: readonly WarmstartFlag[] = [
  { flag: 'out', field: 'out', read: 'path' },
  { flag: 'steps', field: 'steps', read: 'number' },
  { flag: 'minutes', field: 'minutes', read: 'number' },
  { flag: 'seed', field: 'seed', read: 'number' },
  { flag: 'from', field: 'from', read: 'path' },
  { flag: 'model', field: 'model', read: 'path' },
  { flag: 'adapter', field: 'adapter', read: 'path' },
  { flag: 'lora', field: 'lora', read: (spec) => ({ lora: loraOption(spec) }) },
  { flag: 'rows', field: 'rows', read: 'number' },
  { flag: 'row-tokens', field: 'rowTokens', read: 'number' },
  { flag: 'peak-lr', field: 'peakLr', read: 'number' },
  { flag: 'curriculum', field: ['curriculumStart', 'curriculumEnd'], read: curriculumOption },
  { flag: 'episode-share', field: 'episodeShare', read: 'number' },
  { flag: 'workspace-share', field: 'workspaceShare', read: 'number' },
  { flag: 'loop-share', field: 'loopShare', read: 'number' },
  { flag: 'numbered-share', field: 'numberedShare', read: 'number' },
  { flag: 'cands-share', field: 'candsShare', read: 'number' },
  { flag: 'walk-share', field: 'walkShare', read: 'number' },
  { flag: 'lower-share', field: 'lowerShare', read: 'number' },
  { flag: 'long-episodes', field: 'longEpisodes', read: 'text' },
  { flag: 'no-sed', field: 'noSed', read: 'switch' },
  { flag: 'real-share', field: 'realShare', read: 'number' },
  { flag: 'source-root', field: 'sourceRoots', read: 'paths' },
  { flag: 'max-action-tokens', field: 'maxActionTokens', read: 'number' },
  { flag: 'workspace', field: 'workspace', read: 'path' },
  { flag: 'max-tasks', field: 'maxTasks', read: 'number' },
  // The results files after --episodes: `--episodes A.jsonl B.jsonl` (the rest are positionals).
  { flag: 'episodes', field: 'episodeFiles', read: 'paths' },
  { flag: 'tasks', field: 'tasksFile', read: 'path' },
  { flag: 'run', field: 'run', read: 'text' },
  { flag: 'runs', field: 'runsRoot', read: 'path' },
  { flag: 'task-seed', field: 'taskSeed', read: 'number' },
  { flag: 'heldout-fraction', field: 'heldoutFraction', read: 'number' },
];

const WARMSTART_OPTIONS: OptionSpec = {
  ...Object.fromEntries(
    WARMSTART_FLAGS.map(({ flag, read }) => [
      flag,
      read === 'switch'
        ? { type: 'boolean' as const }
        : read === 'paths'
          ? { type: 'string' as const, multiple: true }
          : { type: 'string' as const },
    ]),
  ),
  ...flagOptions('force'),
};

/** The settings the flags given set, each read and checked as its row says (the others are left to their defaults). */
export function warmstartSettingsFromFlags(args: ParsedArgs): WarmstartSettings {
  requireString(args, 'out');
  const given: Partial<WarmstartConfig> = {};
  const set = given as Record<string, unknown>;
  for (const { flag, field, read } of WARMSTART_FLAGS) {
    const v = args.values[flag];
    if (v === undefined) continue;
    if (typeof read === 'function') Object.assign(given, read(String(v)));
    // (No fallback is needed: the flag is given.)
    else if (read === 'number') set[field as string] = numberInRange(args, flag, NaN, WARMSTART_RANGES[field as NumberSetting]);
    else if (read === 'path') set[field as string] = path.resolve(String(v));
    else if (read === 'paths') set[field as string] = (v as string[]).map((p) => path.resolve(p));
    else if (read === 'switch') set[field as string] = true;
    else set[field as string] = String(v);
  }
  return given as WarmstartSettings;
}

export const warmstartCommand: CliCommand = {
  name: 'warmstart',
  summary:
    "supervised warm start: generated fix episodes (+ a copy curriculum for turnwise-tiny), a workspace's recorded ones, or the resolved episodes of eval results; a chat model in its own chat format, LoRA when asked",
  usage:
    '--out DIR [--force] [--from DIR | --model DIR [--adapter DIR | --lora SPEC]] [--episodes FILE… (--tasks FILE [--task-seed S] [--heldout-fraction F] | --run RUN [--runs DIR]) [--episode-share F]] [--steps N] [--minutes M] [--seed S] [--workspace DIR [--task-seed S] [--max-tasks N] [--heldout-fraction F] [--workspace-share F]] [--real-share F [--source-root DIR…]] [--numbered-share F [--cands-share F [--walk-share F [--lower-share F]]] | --no-sed [--cands-share F [--walk-share F [--lower-share F]]]] [--peak-lr X] [--curriculum A,B] [--rows N] [--row-tokens T] [--loop-share F] [--long-episodes turns|drop] [--max-action-tokens N]',
  options: WARMSTART_OPTIONS,
  // The results files after --episodes: `--episodes A.jsonl B.jsonl`.
  allowPositionals: true,
  async run(args, io) {
    // What the flags say; the warm start fills the rest with the defaults of its kind (a chat
    // model's differ from turnwise-tiny's), the sources below with theirs.
    const given = warmstartSettingsFromFlags(args);
    const out = given.out;
    const v = args.values;
    if (v['source-root'] !== undefined && v['real-share'] === undefined) throw new UsageError('--source-root goes with --real-share F');
    if (args.positionals.length && v.episodes === undefined)
      throw new UsageError(`unexpected argument ${JSON.stringify(args.positionals[0])}; results files go after --episodes`);
    if (args.positionals.length) given.episodeFiles = [...(given.episodeFiles ?? []), ...args.positionals.map((f) => path.resolve(f))];
    if (v.from !== undefined && (v.model !== undefined || v.adapter !== undefined || v.lora !== undefined)) {
      throw new UsageError(
        '--from continues a warm-started checkpoint (an adapter folder included) as it is; --model DIR [--adapter DIR | --lora SPEC] starts from a model',
      );
    }
    if (v.adapter !== undefined && v.model === undefined)
      throw new UsageError('--adapter DIR goes with --model BASE (or give the adapter folder alone as --from DIR)');
    if (v.adapter !== undefined && v.lora !== undefined)
      throw new UsageError('--adapter continues an adapter with its own settings; --lora starts a new one: give one of them');
    for (const k of ['tasks', 'run', 'runs', 'episode-share'] as const)
      if (v[k] !== undefined && !given.episodeFiles?.length) throw new UsageError(`--${k} goes with --episodes FILE…`);
    const adapterOut =
      v.lora !== undefined ||
      v.adapter !== undefined ||
      (given.from !== undefined && fs.existsSync(path.join(given.from, 'adapter_config.json')));
    const held = ['model.safetensors', 'adapter_model.safetensors'].find((f) => fs.existsSync(path.join(out, f)));
    if (fs.existsSync(out) && !held && fs.readdirSync(out).length > 0) {
      throw new TurnwiseError('invalid-input', `${out} exists and is not a checkpoint folder`, {
        hint: 'choose an empty or new --out folder',
      });
    }
    // A model there (its weights, warmstart.json's phase history, the log) is replaced only on request.
    if (held && v.force !== true) {
      throw new TurnwiseError(
        'invalid-input',
        `${out} already holds a ${held.startsWith('adapter') ? 'LoRA adapter' : 'model'}; a warm start would replace it (${adapterOut ? 'adapter' : 'weights'}, warmstart.json, warmstart-log.jsonl)`,
        {
          hint: `to continue training it give --from ${out} --out NEW_DIR; to replace it give --force`,
        },
      );
    }
    for (const k of ['from', 'model', 'adapter'] as const) {
      if (given[k] === out)
        throw new UsageError(`--out is the --${k} folder: the warm start would replace what it reads; give another --out`);
    }
    const c = resolveWarmstartConfig(given);
    // Resolved episodes of evaluation results, read and checked before any work.
    let episodes: { trajectory: Trajectory; task: Task }[] | undefined;
    if (c.episodeFiles.length) {
      const start = startDir(c);
      const sel = warmstartEpisodes({
        files: c.episodeFiles,
        ...(c.tasksFile !== undefined ? { tasksFile: c.tasksFile } : {}),
        ...(c.run !== undefined ? { run: c.run, runsRoot: path.resolve(c.runsRoot) } : {}),
        taskSeed: c.taskSeed,
        heldoutFraction: c.heldoutFraction,
        ...(start ? { startModel: start } : {}),
      });
      episodes = sel.kept;
      const tasks = new Set(sel.kept.map((k) => k.task.id)).size;
      io.err(
        `${sel.read} episode(s) read, ${sel.resolved} resolved: ${sel.kept.length} of ${tasks} task(s) are demonstrations${sel.heldOut ? `; ${sel.heldOut} of ${sel.heldOutTasks.length} held-out task(s) left out (held out for evaluation)` : ''}`,
      );
    }
    const { signal, dispose } = stopOnSignals(
      io,
      `stopping: before the first step at once, with nothing written; after it, once the current step ends (the weights trained so far saved to ${c.out})`,
    );
    let workspaceCases: FixCase[] | undefined;
    try {
      if (c.workspace !== undefined) {
        // Demonstrations from the workspace's own train split, recorded in sandboxes.
        const pool = await SandboxPool.connect({ run: `warmstart-${process.pid}` });
        try {
          // The workspace's tasks are synthesized and split as the training run will do it (its
          // --seed, 0 by default), not with this warm start's seed: with another split the
          // demonstrations would take tasks the run meant to hold out (the run then keeps them in
          // train, and its held-out set shrinks to what was never demonstrated).
          const r = await workspaceCasesFor({
            workspace: c.workspace,
            seed: c.taskSeed,
            maxTasks: c.maxTasks,
            heldoutFraction: c.heldoutFraction,
            pool,
            onLog: (m) => io.err(m),
            signal,
          }).catch((e: unknown) => {
            throw stoppedOr(e, signal, "recording the workspace's demonstrations");
          });
          workspaceCases = r.cases;
        } finally {
          await pool.close();
        }
      }
      const r = await warmstart({
        ...given,
        ...(episodes ? { episodes } : {}),
        workspaceCases,
        signal,
        onLog: (row: WarmstartLogRow) =>
          io.json
            ? io.out(JSON.stringify(row))
            : io.err(
                `step ${row.step}  ${row.minutes.toFixed(1)} min  loss ${fmt(row.loss)}  action loss ${fmt(row.action_loss)}  ${Math.round(row.tokens_per_s)} tok/s${row.exact_fix !== undefined ? `  exact fix ${fmt(row.exact_fix, 2)}` : ''}${row.restores_line !== undefined ? `  restores ${fmt(row.restores_line, 2)}  right line ${fmt(row.right_line, 2)}` : ''}${row.episode_fix !== undefined ? `  episode fix ${fmt(row.episode_fix, 2)}` : ''}${row.numbered_episode_fix !== undefined ? `  numbered ${fmt(row.numbered_episode_fix, 2)}` : ''}${row.real_episode_fix !== undefined ? `  real source ${fmt(row.real_episode_fix, 2)}` : ''}`,
              ),
      });
      if (!io.json) io.out(`warm start: ${r.steps} steps, ${r.tokens} tokens in ${r.minutes.toFixed(1)} min → ${r.out}`);
      return signal.aborted ? 130 : 0;
    } finally {
      dispose();
    }
  },
};
