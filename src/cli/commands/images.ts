// `turnwise images build`: the sandbox images, base first (bootstrapped from Debian packages
// when it is missing), skipping every image whose content-hashed tag already exists.
import { TurnwiseError } from '../../core/errors';
import { connectEngine, engineInfo } from '../../sandbox/engine';
import { SANDBOX_LANGUAGES, ensureLanguageImage, type SandboxLanguage } from '../../sandbox/images';
import type { CliCommand } from '../command';

export const imagesBuildCommand: CliCommand = {
  name: 'images build',
  summary: 'build the sandbox images (python, node); skips images that exist',
  usage: '[--language python|node] [--force] [--docker-host URL] [--json]',
  options: { language: { type: 'string' }, force: { type: 'boolean' }, 'docker-host': { type: 'string' } },
  async run(args, io) {
    const wanted = args.values.language as string | undefined;
    if (wanted !== undefined && !(SANDBOX_LANGUAGES as readonly string[]).includes(wanted)) {
      throw new TurnwiseError('invalid-input', `no sandbox image for --language ${wanted}`, { hint: `choose one of: ${SANDBOX_LANGUAGES.join(', ')}` });
    }
    const languages: SandboxLanguage[] = wanted ? [wanted as SandboxLanguage] : [...SANDBOX_LANGUAGES];
    const { docker, target } = connectEngine(args.values['docker-host'] as string | undefined);
    await engineInfo(docker, target);
    const results = [];
    for (const language of languages) {
      io.err(`[${language}] checking…`);
      const r = await ensureLanguageImage(docker, target, language, (line) => io.err(`[${language}] ${line}`), { force: !!args.values.force });
      io.err(`[${language}] ${r.built ? `built ${r.tag} in ${(r.ms / 1000).toFixed(1)} s` : `${r.tag} already present, skipped`}`);
      results.push(r);
    }
    io.out(io.json ? JSON.stringify({ ok: true, images: results }, null, 2) : results.map((r) => `${r.built ? 'built  ' : 'present'} ${r.tag}`).join('\n'));
    return 0;
  },
};
