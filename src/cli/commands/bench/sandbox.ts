// `turnwise bench sandbox`: exec, warm acquire, cold start and snapshot start times (medians).
import { optionalNumber, valueOptions, type CliCommand } from '../../command';
import { benchSandbox } from '../../../bench/sandbox';

export const benchSandboxCommand: CliCommand = {
  name: 'bench sandbox',
  summary: 'time sandbox exec (vs docker exec), warm acquire, cold start and snapshot starts',
  usage: '[--samples N] [--docker-host URL] [--json]',
  options: valueOptions('samples', 'docker-host'),
  async run(args, io) {
    const samples = optionalNumber(args, 'samples', 30);
    const r = await benchSandbox({ samples, host: args.values['docker-host'] as string | undefined, onProgress: (s) => io.err(s) });
    if (io.json) {
      io.out(JSON.stringify(r));
      return 0;
    }
    const ratio = r.snapshot_acquire_ms_100mb / r.snapshot_acquire_ms_1mb;
    io.out(
      [
        `exec p50                ${r.exec_p50_ms} ms` +
          (r.docker_cli_exec_p50_ms ? `  (docker exec: ${r.docker_cli_exec_p50_ms} ms, target ≤ 1/3)` : ''),
        `warm acquire p50        ${r.acquire_warm_p50_ms} ms  (target ≤ 50)`,
        `cold start p50          ${r.cold_start_p50_ms} ms`,
        `snapshot start 1 MB     ${r.snapshot_acquire_ms_1mb} ms`,
        `snapshot start 100 MB   ${r.snapshot_acquire_ms_100mb} ms  (ratio ${ratio.toFixed(2)}, target ≤ 1.2)`,
        `medians over ${r.samples} samples`,
      ].join('\n'),
    );
    return 0;
  },
};
