// `turnwise advantages`: per-turn advantages of a trajectories file under one estimator.
import { escapeControlChars } from '../../core/text';
import { readTrajectories } from '../../core/trajectory';
import { trajectoryAdvantages, writeTurnAdvantages } from '../../credit/advantages';
import { getEstimator, parseParamArgs } from '../../credit/index';
import { valueOptions, type CliCommand } from '../command';
import { requireString } from '../command';
import { shareTreeCredit } from '../../train/branching';
import type { Trajectory } from '../../core/schema';
import type { AdvantageRow } from '../../credit/advantages';

/** The rows' advantages written onto the turns (as a run writes them), shared as a tree, and read back into the rows. */
function treeCredit(trajs: Trajectory[], rows: AdvantageRow[]): void {
  writeTurnAdvantages(trajs, rows);
  shareTreeCredit(trajs);
  const byId = new Map(trajs.map((t) => [t.trajId, t]));
  for (const r of rows) r.advantage = byId.get(r.trajId)?.turns.find((u) => u.index === r.turn)?.advantage ?? r.advantage;
}

export const advantagesCommand: CliCommand = {
  name: 'advantages',
  summary: 'per-turn advantages of a trajectories file under one estimator (grpo, rloo, gigpo, a3, turnwise, gear, a2tgpo)',
  usage: '--in trajectories.jsonl --estimator NAME [--param key=value ...] [--json]',
  options: { ...valueOptions('in', 'estimator'), param: { type: 'string', multiple: true } },
  async run(args, io) {
    const file = requireString(args, 'in');
    const spec = getEstimator(requireString(args, 'estimator'));
    const overrides = parseParamArgs(spec, (args.values.param as string[] | undefined) ?? []);
    const trajs = readTrajectories(file);
    const r = await trajectoryAdvantages(trajs, spec.name, overrides);
    // A run's branches share credit with their parents as a tree (train/branching.ts): the same here.
    if (trajs.some((t) => t.branch)) treeCredit(trajs, r.rows);
    if (io.json) {
      const rows = r.rows.map(({ command: _command, ...row }) => row);
      io.out(
        JSON.stringify(
          { ok: true, estimator: r.estimator, params: r.params, trajectories: r.trajectories, diagnostics: r.diagnostics, rows },
          null,
          2,
        ),
      );
      return 0;
    }
    const d = r.diagnostics;
    const fmt = (x: number | null) => (x === null ? 'n/a' : x.toFixed(3));
    const lines = [
      `${r.estimator}: ${r.trajectories} trajectories, ${r.rows.length} turns`,
      `frac_reward_zero_std ${fmt(d.frac_reward_zero_std)}  cells with ≥2 clusters ${fmt(d.frac_cells_multi_cluster)}  mean tree gate ${fmt(d.mean_tree_gate)}  NaN rows ${d.rows_nan}`,
      // gear and a2tgpo read what a run's teacher pass stored on the turns; a file without it gets GRPO's advantages.
      ...(d.frac_reference_fallback !== undefined
        ? [
            `read against the reference fix: ${fmt(1 - d.frac_reference_fallback)} of the trajectories${d.frac_reference_fallback > 0 ? ` (the rest, without the teacher pass's measurements on their turns, took GRPO's advantage; a training run with this estimator stores them)` : ''}`,
          ]
        : []),
      '',
      `${'task'.padEnd(16)} ${'trajectory'.padEnd(16)} turn  advantage  command`,
      ...r.rows.map((row) => {
        const cmd = escapeControlChars(row.command.replace(/\s+/g, ' '));
        return `${escapeControlChars(row.promptId).slice(0, 16).padEnd(16)} ${escapeControlChars(row.trajId).slice(0, 16).padEnd(16)} ${String(row.turn).padStart(4)}  ${row.advantage.toFixed(4).padStart(9)}  ${cmd.length > 60 ? cmd.slice(0, 59) + '…' : cmd}`;
      }),
    ];
    io.out(lines.join('\n'));
    return 0;
  },
};
