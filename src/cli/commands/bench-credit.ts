// `turnwise bench credit`: per-turn advantage quality against known turn contributions, and speed.
import { optionalNumber, type CliCommand } from '../command';
import { runCreditBench } from '../../credit/bench';

export const benchCreditCommand: CliCommand = {
  name: 'bench credit',
  summary: 'correlate each estimator’s per-turn advantages with known turn contributions in a synthetic environment; time a 64×10 batch',
  usage: '[--batches N] [--seed S] [--noise SD] [--json]',
  options: { batches: { type: 'string' }, seed: { type: 'string' }, noise: { type: 'string' } },
  async run(args, io) {
    const batches = optionalNumber(args, 'batches', 40);
    const r = await runCreditBench(
      { batches, seed: optionalNumber(args, 'seed', 1), noise: optionalNumber(args, 'noise', 0.2) },
      undefined,
      io.json ? undefined : (d, t) => io.err(`batch ${d}/${t}`),
    );
    if (io.json) {
      io.out(JSON.stringify(r));
      return 0;
    }
    const lines = [
      `${r.config.batches} batches × ${r.rows_per_batch} turns (${r.config.prompts} tasks × ${r.config.group} rollouts × ${r.config.turns} turns, noise ${r.config.noise})`,
      '',
      `${'estimator'.padEnd(22)} corr (±sd)        within-traj  ms/batch (max)`,
      ...Object.entries(r.estimators).map(
        ([n, e]) =>
          `${n.padEnd(22)} ${e.corr_mean.toFixed(3)} (±${e.corr_std.toFixed(3)})   ${e.corr_within_traj_mean.toFixed(3).padStart(7)}      ${e.ms_per_batch_mean.toFixed(1)} (${e.ms_per_batch_max.toFixed(1)})`,
      ),
      '',
      'ablation (a3 plus one turnwise change):',
      ...Object.entries(r.ablation).map(([n, e]) => `  ${n.padEnd(22)} corr ${e.corr_mean.toFixed(3)}  within-traj ${e.corr_within_traj_mean.toFixed(3)}`),
      '',
      `signing one batch with tree-sitter-bash: ${r.signature_ms_per_batch} ms`,
      `turnwise beats grpo: ${r.targets.turnwise_beats_grpo ? 'yes' : 'NO'}; turnwise ≤ 200 ms/batch: ${r.targets.turnwise_ms_per_batch_le_200 ? 'yes' : 'NO'}`,
      r.note,
    ];
    io.out(lines.join('\n'));
    return 0;
  },
};
