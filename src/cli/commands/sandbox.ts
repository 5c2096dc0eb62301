// `turnwise sandbox prune`: removes Turnwise containers whose owner process is gone (what the
// reaper does at every start), or all of them with --all, and what interrupted snapshot builds
// left; --images also drops unused snapshots.
import { connectEngine } from '../../sandbox/engine';
import { pruneSnapshotImages, reapInterruptedBuilds, reapOrphans } from '../../sandbox/reaper';
import { flagOptions, valueOptions, type CliCommand } from '../command';

export const sandboxPruneCommand: CliCommand = {
  name: 'sandbox prune',
  summary: 'remove leftover sandbox containers (owner gone; --all: every one) and, with --images, unused snapshots',
  usage: '[--all] [--images] [--run RUN_ID] [--docker-host URL] [--json]',
  options: { ...flagOptions('all', 'images'), ...valueOptions('run', 'docker-host') },
  async run(args, io) {
    const { docker, target } = connectEngine(args.values['docker-host'] as string | undefined);
    const reaped = await reapOrphans(docker, target, { all: !!args.values.all, run: args.values.run as string | undefined });
    // Step images of interrupted snapshot builds are garbage once no build can still be running.
    const builds = await reapInterruptedBuilds(docker, target);
    const images = args.values.images ? await pruneSnapshotImages(docker, target) : [];
    if (io.json) {
      io.out(
        JSON.stringify(
          {
            ok: true,
            engine: target.label,
            removedContainers: reaped.removed,
            keptContainers: reaped.kept,
            removedImages: images,
            removedBuildImages: builds,
          },
          null,
          2,
        ),
      );
    } else {
      io.out(
        `removed ${reaped.removed.length} container(s) on ${target.label}; kept ${reaped.kept} (owner still running${args.values.all ? '' : '; --all removes them too'})` +
          (builds.length ? `\nremoved ${builds.length} image(s) left by interrupted snapshot builds` : '') +
          (args.values.images ? `\nremoved ${images.length} snapshot image(s)` : ''),
      );
    }
    return 0;
  },
};
