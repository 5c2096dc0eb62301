// `turnwise images build`: the sandbox images, each FROM a public base (debian:bookworm-slim)
// when a registry is reachable, FROM a base bootstrapped from Debian packages offline, or FROM
// the image --base names (a company mirror); says which base and why. Skips every image whose
// content-hashed tag already exists.
import { TurnwiseError } from '../../core/errors';
import { connectEngine, engineInfo } from '../../sandbox/engine';
import { BASE_IMAGE_ENV, SANDBOX_LANGUAGES, ensureLanguageImage, type SandboxLanguage } from '../../sandbox/images';
import { flagOptions, valueOptions, type CliCommand } from '../command';

export const imagesBuildCommand: CliCommand = {
  name: 'images build',
  summary: `build the sandbox images (python, node) FROM debian:bookworm-slim when a registry is reachable, else FROM a base bootstrapped from Debian packages; --base IMAGE (or ${BASE_IMAGE_ENV}) names another; skips images that exist`,
  usage: '[--language python|node] [--base IMAGE] [--force] [--docker-host URL] [--json]',
  options: { ...valueOptions('language', 'base', 'docker-host'), ...flagOptions('force') },
  async run(args, io) {
    const wanted = args.values.language as string | undefined;
    if (wanted !== undefined && !(SANDBOX_LANGUAGES as readonly string[]).includes(wanted)) {
      throw new TurnwiseError('invalid-input', `no sandbox image for --language ${wanted}`, {
        hint: `choose one of: ${SANDBOX_LANGUAGES.join(', ')}`,
      });
    }
    const base = typeof args.values.base === 'string' ? args.values.base.trim() : undefined;
    if (base === '')
      throw new TurnwiseError('invalid-input', '--base needs an image name', {
        hint: 'e.g. --base debian:bookworm-slim or --base registry.example.com/debian:bookworm-slim',
      });
    const languages: SandboxLanguage[] = wanted ? [wanted as SandboxLanguage] : [...SANDBOX_LANGUAGES];
    const { docker, target } = connectEngine(args.values['docker-host'] as string | undefined);
    await engineInfo(docker, target);
    // Bootstrapping runs debootstrap on this machine: only for an engine on this machine.
    const local = !/^(tcp|ssh|https?):/.test(target.label);
    const results = [];
    for (const language of languages) {
      io.err(`[${language}] checking…`);
      const r = await ensureLanguageImage(docker, target, language, (line) => io.err(`[${language}] ${line}`), {
        force: !!args.values.force,
        base,
        bootstrap: local,
      });
      io.err(
        `[${language}] ${r.built ? `built ${r.tag} FROM ${r.base} in ${(r.ms / 1000).toFixed(1)} s` : `${r.tag} already present${r.base ? ` (FROM ${r.base})` : ''}, skipped`}`,
      );
      results.push(r);
    }
    io.out(
      io.json
        ? JSON.stringify({ ok: true, images: results }, null, 2)
        : results
            .map((r) => `${r.built ? 'built  ' : 'present'} ${r.tag}${r.base ? `  FROM ${r.base}${r.built ? ` (${r.baseWhy})` : ''}` : ''}`)
            .join('\n'),
    );
    return 0;
  },
};
