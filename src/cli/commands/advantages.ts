import type { CliCommand } from '../command';
import { requireString } from '../command';
import { computeAdvantages, getEstimator, parseParamArgs, resolveParams } from '../../credit/index';
import { readTrajectories } from '../../credit/input';
import { attachSignatures, rowsFromTrajectories } from '../../credit/signatures';

export const advantagesCommand: CliCommand = {
  name: 'advantages',
  summary: 'per-turn advantages of a trajectories file under one estimator (grpo, rloo, gigpo, a3, turnwise)',
  usage: '--in trajectories.jsonl --estimator NAME [--param key=value ...] [--json]',
  options: { in: { type: 'string' }, estimator: { type: 'string' }, param: { type: 'string', multiple: true } },
  async run(args, io) {
    const file = requireString(args, 'in');
    const spec = getEstimator(requireString(args, 'estimator'));
    const overrides = parseParamArgs(spec, (args.values.param as string[] | undefined) ?? []);
    const trajs = readTrajectories(file);
    const rows = rowsFromTrajectories(trajs);
    const ctx = await attachSignatures(rows);
    const params = resolveParams(spec, overrides);
    const result = computeAdvantages(spec.name, rows, overrides, ctx);
    const names = Object.keys(result.components);
    const out = rows.map((r, i) => ({
      promptId: r.promptId,
      trajId: r.trajId,
      turn: r.turn,
      signature: [...(r.signature ?? []), ...(spec.name === 'turnwise' ? r.editSig ?? [] : [])],
      advantage: result.advantages[i],
      components: Object.fromEntries(names.map((n) => [n, result.components[n][i]])),
      ...(result.clusters ? { clusters: Object.fromEntries(Object.entries(result.clusters).map(([k, v]) => [k, v[i]])) } : {}),
    }));
    if (io.json) {
      io.out(JSON.stringify({ ok: true, estimator: spec.name, params, trajectories: trajs.length, diagnostics: result.diagnostics, rows: out }, null, 2));
      return 0;
    }
    const d = result.diagnostics;
    const fmt = (x: number | null) => (x === null ? 'n/a' : x.toFixed(3));
    const lines = [
      `${spec.name}: ${trajs.length} trajectories, ${rows.length} turns`,
      `frac_reward_zero_std ${fmt(d.frac_reward_zero_std)}  cells with ≥2 clusters ${fmt(d.frac_cells_multi_cluster)}  mean tree gate ${fmt(d.mean_tree_gate)}  NaN rows ${d.rows_nan}`,
      '',
      `${'task'.padEnd(16)} ${'trajectory'.padEnd(16)} turn  advantage  command`,
      ...out.map((r, i) => {
        const cmd = rows[i].bash.replace(/\s+/g, ' ');
        return `${r.promptId.slice(0, 16).padEnd(16)} ${r.trajId.slice(0, 16).padEnd(16)} ${String(r.turn).padStart(4)}  ${r.advantage.toFixed(4).padStart(9)}  ${cmd.length > 60 ? cmd.slice(0, 59) + '…' : cmd}`;
      }),
    ];
    io.out(lines.join('\n'));
    return 0;
  },
};
