// Names of the sandbox images. The base image is bootstrapped from Debian packages when no
// registry is reachable (scripts/bootstrap-base-image.sh); its tag hashes the package list.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type Docker from 'dockerode';
import * as tar from 'tar-stream';
import { TurnwiseError } from '../core/errors';
import type { EngineTarget } from './engine';
import { sandboxError } from './errors';

/** sandbox-images/ in a source checkout or next to dist/ in the packaged extension. */
export function sandboxImagesDir(): string {
  const candidates = [path.join(__dirname, '..', 'sandbox-images'), path.join(__dirname, '..', '..', 'sandbox-images')];
  return candidates.find((c) => fs.existsSync(path.join(c, 'base', 'packages.txt'))) ?? candidates[candidates.length - 1];
}

export function basePackages(dir = sandboxImagesDir()): string[] {
  return fs
    .readFileSync(path.join(dir, 'base', 'packages.txt'), 'utf8')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'));
}

/** Same tag as `scripts/bootstrap-base-image.sh --print-tag`. */
export function baseImageTag(dir = sandboxImagesDir()): string {
  const hash = createHash('sha256').update(basePackages(dir).join(',')).digest('hex').slice(0, 12);
  return `turnwise/base:bookworm-${hash}`;
}

// ---- Language images: sandbox-images/<language>/Dockerfile, FROM the base via `ARG BASE`. ----

/** Languages with an image under sandbox-images/. */
export const SANDBOX_LANGUAGES = ['python', 'node'] as const;
export type SandboxLanguage = (typeof SANDBOX_LANGUAGES)[number];

/**
 * Files each language image installs for the agent beyond the base (its Dockerfile copies them
 * from sandbox-images/<language>/tools): commands on PATH, which the warm-start demonstrations
 * teach the policy to call. `turnwise doctor` checks that the built image has them.
 */
export const AGENT_TOOLS: Record<SandboxLanguage, readonly string[]> = {
  python: ['/usr/local/bin/tw-test', '/usr/local/bin/tw-suspects', '/opt/turnwise/turnwise_tools.py'],
  node: [],
};

/** Which sandbox image runs a task language (core's Language). */
export function sandboxLanguageFor(language: string): SandboxLanguage {
  if (language === 'python') return 'python';
  if (language === 'javascript' || language === 'typescript' || language === 'node') return 'node';
  throw new TurnwiseError('invalid-input', `no sandbox image for language ${JSON.stringify(language)}`, {
    hint: `supported: ${SANDBOX_LANGUAGES.join(', ')} (javascript and typescript use node)`,
  });
}

function languageDir(language: SandboxLanguage, dir: string): string {
  return path.join(dir, language);
}

function listDir(root: string): string[] {
  const out: string[] = [];
  const walk = (rel: string) => {
    for (const e of fs.readdirSync(path.join(root, rel), { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const r = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory()) walk(r);
      else if (e.isFile()) out.push(r);
    }
  };
  walk('');
  return out;
}

/** `turnwise/sandbox-<language>:v1-<hash>`: the hash covers the base tag and the build folder. */
export function languageImageTag(language: SandboxLanguage, dir = sandboxImagesDir()): string {
  const root = languageDir(language, dir);
  if (!fs.existsSync(path.join(root, 'Dockerfile'))) {
    throw new TurnwiseError('not-found', `${root}/Dockerfile is missing`, { hint: 'reinstall Turnwise; the sandbox image definitions ship with it' });
  }
  const h = createHash('sha256').update(baseImageTag(dir));
  for (const f of listDir(root)) h.update(`\0${f}\0`).update(fs.readFileSync(path.join(root, f)));
  return `turnwise/sandbox-${language}:v1-${h.digest('hex').slice(0, 12)}`;
}

export async function imageExists(docker: Docker, tag: string): Promise<boolean> {
  try {
    await docker.getImage(tag).inspect();
    return true;
  } catch (e) {
    if ((e as { statusCode?: number }).statusCode === 404) return false;
    throw e;
  }
}

export type BuildProgress = (line: string) => void;

/**
 * Runs an image build from a tar context stream and follows its progress. Rejects with the
 * build's own error text (a failing RUN step, a missing base) instead of dockerode's.
 */
export async function buildFromContext(
  docker: Docker,
  target: EngineTarget,
  context: NodeJS.ReadableStream,
  options: Record<string, unknown> & { t: string },
  onProgress: BuildProgress = () => undefined,
): Promise<void> {
  let stream: NodeJS.ReadableStream;
  try {
    stream = await docker.buildImage(context, { rm: true, forcerm: true, networkmode: 'none', ...options } as Docker.ImageBuildOptions);
  } catch (e) {
    throw sandboxError(e, target, `building ${options.t}`);
  }
  await new Promise<void>((resolve, reject) => {
    let failure: string | undefined;
    docker.modem.followProgress(
      stream,
      (err: Error | null) => {
        if (err) return reject(sandboxError(err, target, `building ${options.t}`));
        if (failure) {
          const e = Object.assign(new Error(failure), { statusCode: /pull access|not found|no such image/i.test(failure) ? 404 : 500 });
          const base = typeof options.buildargs === 'object' ? (options.buildargs as Record<string, string>).BASE : undefined;
          return reject(sandboxError(e, target, `building ${options.t}`, base));
        }
        resolve();
      },
      (ev: { stream?: string; status?: string; error?: string; errorDetail?: { message?: string } }) => {
        if (ev.error || ev.errorDetail) failure = ev.errorDetail?.message ?? ev.error;
        const text = (ev.stream ?? ev.status ?? '').trimEnd();
        if (text) for (const l of text.split('\n')) if (l.trim()) onProgress(l);
      },
    );
  });
}

function packDir(root: string): NodeJS.ReadableStream {
  const pack = tar.pack();
  void (async () => {
    try {
      for (const f of listDir(root)) {
        const data = fs.readFileSync(path.join(root, f));
        await new Promise<void>((res, rej) => pack.entry({ name: f, size: data.length, mode: 0o644 }, data, (err) => (err ? rej(err) : res())));
      }
      pack.finalize();
    } catch (e) {
      pack.destroy(e as Error);
    }
  })();
  return pack as unknown as NodeJS.ReadableStream;
}

/**
 * Runs scripts/bootstrap-base-image.sh (debootstrap + `docker import`) to make the base image
 * on a machine with no registry. Needs root and debootstrap; the script says so if missing.
 */
export async function bootstrapBaseImage(onProgress: BuildProgress = () => undefined, dir = sandboxImagesDir()): Promise<void> {
  const script = path.join(dir, '..', 'scripts', 'bootstrap-base-image.sh');
  if (!fs.existsSync(script)) {
    throw new TurnwiseError('docker-image-missing', `the base image ${baseImageTag(dir)} is missing and ${script} is not there to build it`, {
      hint: 'run Turnwise from a checkout, or import the base image on this engine',
    });
  }
  await new Promise<void>((resolve, reject) => {
    const child = spawn('bash', [script], { stdio: ['ignore', 'pipe', 'pipe'] });
    let tail = '';
    const onData = (b: Buffer) => {
      const t = b.toString();
      tail = (tail + t).slice(-4000);
      for (const l of t.split('\n')) if (l.trim()) onProgress(l);
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0
        ? resolve()
        : reject(
            new TurnwiseError('docker-image-missing', `bootstrapping the base image ${baseImageTag(dir)} failed (exit ${code}): ${tail.trim().split('\n').slice(-3).join(' / ')}`, {
              hint: 'run `sudo scripts/bootstrap-base-image.sh` (needs root and `apt-get install debootstrap`)',
            }),
          ),
    );
  });
}

export interface EnsureImageResult {
  language: SandboxLanguage;
  tag: string;
  built: boolean;
  baseBuilt: boolean;
  ms: number;
}

/** Builds a language image (and the base first, if missing); skips what exists. */
export async function ensureLanguageImage(
  docker: Docker,
  target: EngineTarget,
  language: SandboxLanguage,
  onProgress: BuildProgress = () => undefined,
  opts: { dir?: string; force?: boolean; bootstrap?: boolean } = {},
): Promise<EnsureImageResult> {
  const t0 = Date.now();
  const dir = opts.dir ?? sandboxImagesDir();
  const tag = languageImageTag(language, dir);
  const result = { language, tag, built: false, baseBuilt: false };
  let exists: boolean;
  try {
    exists = await imageExists(docker, tag);
  } catch (e) {
    throw sandboxError(e, target, `looking for ${tag}`);
  }
  if (exists && !opts.force) return { ...result, ms: Date.now() - t0 };
  const base = baseImageTag(dir);
  if (!(await imageExists(docker, base))) {
    if (opts.bootstrap === false) {
      throw new TurnwiseError('docker-image-missing', `the base image ${base} is not present on ${target.label}`, {
        hint: 'run `turnwise images build` on the engine host, or `sudo scripts/bootstrap-base-image.sh`',
      });
    }
    onProgress(`base image ${base} missing: bootstrapping it from Debian packages`);
    await bootstrapBaseImage(onProgress, dir);
    result.baseBuilt = true;
  }
  onProgress(`building ${tag} FROM ${base}`);
  await buildFromContext(docker, target, packDir(languageDir(language, dir)), { t: tag, buildargs: { BASE: base }, labels: { 'turnwise.image': language } }, onProgress);
  return { ...result, built: true, ms: Date.now() - t0 };
}
