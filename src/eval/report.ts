// `turnwise eval --report A B …`: evaluation results files of several models compared on the same
// episodes. Episodes pair by kind (greedy or sampled), task and seed: evaluations with the same
// task file, --seed and --samples give every model the same episodes, so the models differ only in
// the model. Files evaluated on other tasks or seeds are refused, or with `intersect` compared on
// the episodes every file has (and the report says what it left out). Per model: resolved rate,
// pass rate, turns, format errors, tokens and wall time per episode, per task, and PASS@(k,T).
import { TurnwiseError } from '../core/errors';
import type { Trajectory } from '../core/schema';
import { episodeKind, type EpisodeKind } from './compare';
import {
  episodeRow,
  maxTurnsOf,
  readEvalResults,
  summarizeRows,
  type EvalEpisodeRow,
  type EvalKindSummary,
  type EvalModel,
  type EvalResultsFile,
} from './results';
import { passAtKT, type PassAtKT } from './pass-at-k';
import { FAILURE_LABELS, failureBreakdown, type FailureLabel } from '../agent/diagnosis';
import { boundaryVerdict, passChart, passChartSvg, type BoundaryVerdict } from './pass-curves';

export interface ReportModel {
  file: string;
  model: EvalModel;
  label: string;
  greedy: EvalKindSummary | null;
  sampled: EvalKindSummary | null;
  /** Over the compared sampled episodes, T up to the turn limit; null without sampled episodes. */
  pass_at_k_t: PassAtKT | null;
  maxTurns: number;
  /** Per failure label (agent/diagnosis.ts), the share of the model's compared episodes showing it. */
  failures: Record<FailureLabel, number>;
}

/** One task's numbers for one model: its greedy episode and its sampled ones. */
export interface ReportTaskCell {
  greedy: EvalKindSummary | null;
  sampled: EvalKindSummary | null;
  /** Sampled episodes resolved, of how many (scored or not). */
  sampledResolved: number;
  sampledEpisodes: number;
}

export interface EvalReport {
  models: ReportModel[];
  /** Tasks compared, in the first file's order. */
  tasks: string[];
  /** Episodes compared per model (the same for every model). */
  episodes: { greedy: number; sampled: number };
  /** True when the files covered different episodes and only the shared ones are compared. */
  intersection: boolean;
  /** Per file, its episodes that were left out (no twin in another file, or a task whose content differs). */
  left_out: { file: string; episodes: number }[];
  /** Task ids whose content differs between files (left out under intersect). */
  tasks_differ: string[];
  per_task: { taskId: string; models: ReportTaskCell[] }[];
  per_episode: { taskId: string; kind: EpisodeKind; seed: number | null; models: EvalEpisodeRow[] }[];
  /**
   * What each later model changed against the first (the base), read from PASS@(k,T) at the
   * largest k and T (pass-curves.ts boundaryVerdict): sharpened, enlarged, …; where both have samples.
   */
  boundary: { base: string; model: string; verdict: BoundaryVerdict }[];
  notes: string[];
}

const keyOf = (t: Trajectory) => `${episodeKind(t)}\u0000${t.taskId}\u0000${t.seed ?? ''}`;

/** What a file covers, in a few words: its tasks, seed and samples. */
function covers(f: EvalResultsFile): string {
  const tasks = new Set(f.trajectories.map((t) => t.taskId)).size;
  const sampled = f.trajectories.filter((t) => episodeKind(t) === 'sampled').length;
  const h = f.header;
  const seed = h ? `seed ${h.seed}` : 'seed not recorded';
  return `${tasks} task(s), ${seed}, ${sampled ? `${h?.samples ?? Math.round(sampled / Math.max(1, tasks))} sample(s) per task` : 'no samples'}${h && !h.complete ? ', stopped before the end' : ''}`;
}

/** Compares loaded results files (the first one's order of tasks and episodes is kept). */
export function compareResults(files: readonly EvalResultsFile[], o: { intersect?: boolean } = {}): EvalReport {
  if (files.length < 1)
    throw new TurnwiseError('invalid-input', 'a report needs at least one results file', {
      hint: 'give the --out files of `turnwise eval`, one per model',
    });
  const notes: string[] = [];
  // Tasks whose content differs between files under the same id.
  const differ = new Set<string>();
  const seen = new Map<string, string>();
  for (const f of files) {
    for (const [id, d] of Object.entries(f.header?.tasks.digests ?? {})) {
      const prev = seen.get(id);
      if (prev !== undefined && prev !== d) differ.add(id);
      else seen.set(id, d);
    }
  }
  const keysOf = (f: EvalResultsFile) => new Set(f.trajectories.filter((t) => !differ.has(t.taskId)).map(keyOf));
  const sets = files.map(keysOf);
  const shared = [...sets[0]].filter((k) => sets.every((s) => s.has(k)));
  const same =
    differ.size === 0 && sets.every((s) => s.size === shared.length) && files.every((f) => f.trajectories.length === sets[0].size);
  if (!same && !o.intersect) {
    const lines = files.map((f) => `  ${f.file}: ${f.model.label}, ${covers(f)}`);
    if (differ.size)
      lines.push(
        `  task(s) ${[...differ].slice(0, 5).join(', ')}${differ.size > 5 ? ` and ${differ.size - 5} more` : ''} differ in content under the same id`,
      );
    throw new TurnwiseError(
      'invalid-input',
      `these results files were not evaluated on the same tasks and seeds (${shared.length} episode(s) in common):\n${lines.join('\n')}`,
      {
        hint: 'evaluate every model with the same --tasks file, --seed and --samples; or give --intersect to compare only the episodes all files share',
      },
    );
  }
  if (shared.length === 0)
    throw new TurnwiseError('invalid-input', 'these results files have no episode in common (same task and seed)', {
      hint: 'evaluate every model with the same --tasks file, --seed and --samples',
    });
  const keep = new Set(shared);
  const kept = files.map((f) => f.trajectories.filter((t) => keep.has(keyOf(t))));
  if (!same)
    notes.push(
      `compared on the ${shared.length} episode(s) every file has; ${files.map((f, i) => `${f.trajectories.length - kept[i].length} of ${f.file}`).join(', ')} left out`,
    );
  if (differ.size) notes.push(`left out task(s) whose content differs between files: ${[...differ].join(', ')}`);
  const limits = new Set(files.map((f) => f.header?.maxTurns ?? maxTurnsOf(f.trajectories)));
  if (limits.size > 1)
    notes.push(`the files ran under different turn limits (${[...limits].join(', ')}): PASS@(k,T) of each goes up to its own`);
  const headerless = files.filter((f) => !f.header).map((f) => f.file);
  if (headerless.length)
    notes.push(`${headerless.join(', ')}: no results header (an episodes file); its model, tasks and seeds are read from its episodes`);
  const seeds = new Set(files.flatMap((f) => (f.header ? [f.header.seed] : [])));
  if (seeds.size > 1) notes.push(`the files name different evaluation seeds (${[...seeds].join(', ')}) but share these episodes' seeds`);

  // The first file's order of episodes; every file's rows by key.
  const order = kept[0];
  const rowsBy = kept.map((ts) => new Map(ts.map((t) => [keyOf(t), episodeRow(t)])));
  const tasks = [...new Set(order.map((t) => t.taskId))];
  const models: ReportModel[] = files.map((f, i) => {
    const rows = [...rowsBy[i].values()];
    const g = rows.filter((r) => r.kind === 'greedy');
    const s = rows.filter((r) => r.kind === 'sampled');
    const maxTurns = f.header?.maxTurns ?? maxTurnsOf(kept[i]);
    const sampledTrajs = kept[i].filter((t) => episodeKind(t) === 'sampled');
    return {
      file: f.file,
      model: f.model,
      label: f.model.label,
      greedy: g.length ? summarizeRows(g) : null,
      sampled: s.length ? summarizeRows(s) : null,
      pass_at_k_t: sampledTrajs.length ? passAtKT(sampledTrajs, maxTurns) : null,
      maxTurns,
      failures: failureBreakdown(kept[i]),
    };
  });
  const labels = models.map((m) => m.label);
  if (new Set(labels).size < labels.length) models.forEach((m, i) => (m.label = `${m.label} (${i + 1})`));
  const per_task = tasks.map((taskId) => ({
    taskId,
    models: rowsBy.map((rows) => {
      const mine = [...rows.values()].filter((r) => r.taskId === taskId);
      const g = mine.filter((r) => r.kind === 'greedy');
      const s = mine.filter((r) => r.kind === 'sampled');
      return {
        greedy: g.length ? summarizeRows(g) : null,
        sampled: s.length ? summarizeRows(s) : null,
        sampledResolved: s.filter((r) => r.resolved).length,
        sampledEpisodes: s.length,
      };
    }),
  }));
  const per_episode = order.map((t) => ({
    taskId: t.taskId,
    kind: episodeKind(t),
    seed: typeof t.seed === 'number' ? t.seed : null,
    models: rowsBy.map((rows) => rows.get(keyOf(t))!),
  }));
  return {
    models,
    tasks,
    episodes: {
      greedy: order.filter((t) => episodeKind(t) === 'greedy').length,
      sampled: order.filter((t) => episodeKind(t) === 'sampled').length,
    },
    intersection: !same,
    left_out: files.map((f, i) => ({ file: f.file, episodes: f.trajectories.length - kept[i].length })),
    tasks_differ: [...differ],
    per_task,
    per_episode,
    boundary: boundaries(models, tasks.length),
    notes,
  };
}

/** The first model against each later one, where both have a PASS@(k,T) table. */
function boundaries(models: readonly ReportModel[], tasks: number): EvalReport['boundary'] {
  const [base, ...rest] = models;
  if (!base?.pass_at_k_t) return [];
  return rest.flatMap((m) => {
    const v = m.pass_at_k_t ? boundaryVerdict(base.pass_at_k_t!, m.pass_at_k_t, { tasks }) : null;
    return v ? [{ base: base.label, model: m.label, verdict: v }] : [];
  });
}

/** The report's pass curves as an SVG document: pass@k against k per T, every model on one chart, the verdicts under it. */
export function reportSvg(r: EvalReport): string {
  const chart = passChart(r.models.map((m) => ({ label: m.label, p: m.pass_at_k_t })));
  const note = r.boundary.map((b) => `${b.model} vs ${b.base}: ${b.verdict.line}`).join('; ');
  return passChartSvg(chart, { title: `PASS@(k,T) on ${r.tasks.length} task(s)`, ...(note ? { note } : {}) });
}

/** Reads the files and compares them. */
export function evalReport(files: readonly string[], o: { intersect?: boolean } = {}): EvalReport {
  return compareResults(files.map(readEvalResults), o);
}

const f3 = (v: number | null | undefined, d = 3) => (typeof v === 'number' && Number.isFinite(v) ? v.toFixed(d) : '—');
const cut = (s: string, n: number) => (s.length > n ? `${s.slice(0, n - 1)}…` : s);

/** The report as text tables for a reader. */
export function formatReport(r: EvalReport): string[] {
  const out: string[] = [];
  const n = r.models.length;
  out.push(
    `${n} model(s) on ${r.tasks.length} task(s): ${r.episodes.greedy} greedy and ${r.episodes.sampled} sampled episode(s) each${r.intersection ? ' (the episodes all files share)' : ''}`,
  );
  const w = Math.min(40, Math.max(5, ...r.models.map((m) => m.label.length)));
  const head = `  ${'model'.padEnd(w)}  ${'kind'.padEnd(7)}  ${'resolved'.padStart(8)}  ${'pass'.padStart(5)}  ${'turns'.padStart(5)}  ${'fmt err'.padStart(7)}  ${'tokens'.padStart(7)}  ${'wall s'.padStart(6)}  failed`;
  out.push('per episode (means):', head);
  for (const kind of ['greedy', 'sampled'] as const) {
    for (const m of r.models) {
      const s = m[kind];
      if (!s) continue;
      out.push(
        `  ${cut(m.label, w).padEnd(w)}  ${kind.padEnd(7)}  ${f3(s.resolved).padStart(8)}  ${f3(s.pass_rate, 2).padStart(5)}  ${f3(s['turns/mean'], 1).padStart(5)}  ${f3(s['format_errors/mean'], 2).padStart(7)}  ${f3(s['tokens/mean'], 0).padStart(7)}  ${f3(s['wall_s/mean'], 1).padStart(6)}  ${s.failed}`,
      );
    }
  }
  const withP = r.models.filter((m) => m.pass_at_k_t && Object.keys(m.pass_at_k_t).length);
  if (withP.length) {
    out.push('PASS@(k,T) (a sampled episode of k resolves the task within T actions):');
    for (const m of withP) {
      const p = m.pass_at_k_t!;
      const ks = Object.keys(p);
      const Ts = Object.keys(p[ks[0]]);
      const kMax = ks[ks.length - 1];
      const tMax = Ts[Ts.length - 1];
      const tMid = Ts[Math.floor((Ts.length - 1) / 2)];
      out.push(
        `  ${cut(m.label, w).padEnd(w)}  k=1: T=${tMid} ${f3(p['1'][tMid])} T=${tMax} ${f3(p['1'][tMax])}   k=${kMax}: T=${tMid} ${f3(p[kMax][tMid])} T=${tMax} ${f3(p[kMax][tMax])}`,
      );
    }
    out.push('  (every k and T in --json: models[].pass_at_k_t; the curves with --plot FILE.svg)');
    for (const b of r.boundary) out.push(`  ${cut(b.model, w)} vs ${cut(b.base, w)}: ${b.verdict.line}`);
  }
  if (r.models.some((m) => FAILURE_LABELS.some((l) => m.failures[l] > 0))) {
    out.push('what went wrong (share of episodes with each failure label, greedy and sampled):');
    const lw = Math.max(...FAILURE_LABELS.map((l) => l.length));
    const cw = Math.max(8, Math.min(24, w));
    out.push(`  ${''.padEnd(lw)}  ${r.models.map((m) => cut(m.label, cw).padStart(cw)).join('  ')}`);
    for (const l of FAILURE_LABELS) out.push(`  ${l.padEnd(lw)}  ${r.models.map((m) => f3(m.failures[l], 2).padStart(cw)).join('  ')}`);
  }
  out.push('per task (greedy ✓/✗, sampled resolved/episodes, greedy pass rate):');
  const tw = Math.min(48, Math.max(4, ...r.tasks.map((t) => t.length)));
  const cw = Math.max(14, Math.min(24, w));
  out.push(`  ${'task'.padEnd(tw)}  ${r.models.map((m) => cut(m.label, cw).padEnd(cw)).join('  ')}`);
  for (const t of r.per_task) {
    const cells = t.models.map((c) => {
      const g = c.greedy ? `${c.greedy.failed ? '!' : c.greedy.resolved ? '✓' : '✗'} ${f3(c.greedy.pass_rate, 2)}` : '';
      const s = c.sampledEpisodes ? `${c.sampledResolved}/${c.sampledEpisodes}` : '';
      return [g, s].filter(Boolean).join(' ').padEnd(cw);
    });
    out.push(`  ${cut(t.taskId, tw).padEnd(tw)}  ${cells.join('  ')}`.trimEnd());
  }
  for (const note of r.notes) out.push(`note: ${note}`);
  return out;
}
