// `turnwise sandbox prune`: removes Turnwise containers whose owner process is gone (what the
// reaper does at every start), or all of them with --all; --images also drops unused snapshots.
import { connectEngine } from '../../sandbox/engine';
import { pruneSnapshotImages, reapOrphans } from '../../sandbox/reaper';
import type { CliCommand } from '../command';

export const sandboxPruneCommand: CliCommand = {
  name: 'sandbox prune',
  summary: 'remove leftover sandbox containers (owner gone; --all: every one) and, with --images, unused snapshots',
  usage: '[--all] [--images] [--run RUN_ID] [--docker-host URL] [--json]',
  options: { all: { type: 'boolean' }, images: { type: 'boolean' }, run: { type: 'string' }, 'docker-host': { type: 'string' } },
  async run(args, io) {
    const { docker, target } = connectEngine(args.values['docker-host'] as string | undefined);
    const reaped = await reapOrphans(docker, target, { all: !!args.values.all, run: args.values.run as string | undefined });
    const images = args.values.images ? await pruneSnapshotImages(docker, target) : [];
    if (io.json) {
      io.out(JSON.stringify({ ok: true, engine: target.label, removedContainers: reaped.removed, keptContainers: reaped.kept, removedImages: images }, null, 2));
    } else {
      io.out(
        `removed ${reaped.removed.length} container(s) on ${target.label}; kept ${reaped.kept} (owner still running${args.values.all ? '' : '; --all removes them too'})` +
          (args.values.images ? `\nremoved ${images.length} snapshot image(s)` : ''),
      );
    }
    return 0;
  },
};
