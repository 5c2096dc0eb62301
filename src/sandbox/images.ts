// The sandbox images: their names, and how they are built. Each language image builds FROM a
// public base (debian:bookworm-slim, or an image named with --base / TURNWISE_BASE_IMAGE, e.g. a
// company mirror) when a registry is reachable; offline FROM a base bootstrapped from Debian
// packages (scripts/bootstrap-base-image.sh), whose tag hashes the package list.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type Docker from 'dockerode';
import * as tar from 'tar-stream';
import { TurnwiseError } from '../core/errors';
import { findResource, resourceCandidates } from '../core/resources';
import type { EngineTarget } from './engine';
import { sandboxError } from './errors';

/** sandbox-images/ of the package (core/resources.ts). */
export function sandboxImagesDir(): string {
  return findResource('sandbox-images', path.join('base', 'packages.txt')) ?? resourceCandidates('sandbox-images').at(-1)!;
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
  python: [
    '/usr/local/bin/tw-test',
    '/usr/local/bin/tw-suspects',
    '/usr/local/bin/tw-show',
    '/usr/local/bin/tw-tokens',
    '/usr/local/bin/tw-edit',
    '/usr/local/bin/tw-cands',
    '/usr/local/bin/tw-apply',
    '/opt/turnwise/turnwise_tools.py',
  ],
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
    throw new TurnwiseError('not-found', `${root}/Dockerfile is missing`, {
      hint: 'reinstall Turnwise; the sandbox image definitions ship with it',
    });
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
        await new Promise<void>((res, rej) =>
          pack.entry({ name: f, size: data.length, mode: 0o644 }, data, (err) => (err ? rej(err) : res())),
        );
      }
      pack.finalize();
    } catch (e) {
      pack.destroy(e as Error);
    }
  })();
  return pack as unknown as NodeJS.ReadableStream;
}

/** The public image language images build FROM when a registry is reachable. */
export const PUBLIC_BASE_IMAGE = 'debian:bookworm-slim';

/** Environment variable naming the base image for every build (as `turnwise images build --base`). */
export const BASE_IMAGE_ENV = 'TURNWISE_BASE_IMAGE';

/** scripts/bootstrap-base-image.sh next to sandbox-images/ (a checkout, the npm package, the .vsix). */
export function bootstrapScript(dir = sandboxImagesDir()): string {
  return path.join(dir, '..', 'scripts', 'bootstrap-base-image.sh');
}

/**
 * Runs scripts/bootstrap-base-image.sh (debootstrap + `docker import`) to make the base image
 * on a machine with no registry. Needs root and debootstrap; the script says so if missing.
 */
export async function bootstrapBaseImage(onProgress: BuildProgress = () => undefined, dir = sandboxImagesDir()): Promise<void> {
  const script = bootstrapScript(dir);
  if (!fs.existsSync(script)) {
    throw new TurnwiseError(
      'docker-image-missing',
      `the base image ${baseImageTag(dir)} is missing and ${script} is not there to build it`,
      {
        hint: `pass --base IMAGE (a registry or mirror copy of ${PUBLIC_BASE_IMAGE}), or reinstall Turnwise`,
      },
    );
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
            new TurnwiseError(
              'docker-image-missing',
              `bootstrapping the base image ${baseImageTag(dir)} failed (exit ${code}): ${tail.trim().split('\n').slice(-3).join(' / ')}`,
              {
                hint: `with a registry in reach, \`turnwise images build --base IMAGE\` needs no root (IMAGE: ${PUBLIC_BASE_IMAGE} or a mirror of it); offline, run \`sudo ${script}\` once on a Debian host (apt-get install debootstrap)`,
              },
            ),
          ),
    );
  });
}

/** Where a language image's base came from, and the sentence that says why it was chosen. */
export interface BaseChoice {
  image: string;
  /** option: --base or TURNWISE_BASE_IMAGE; registry: the public base; bootstrap: the offline base. */
  source: 'option' | 'registry' | 'bootstrap';
  why: string;
}

/** How long a pull may go without a word from the engine before the registry counts as unreachable. */
const PULL_SILENCE_MS = 30_000;

/** Pulls an image; resolves with undefined when done, or with the reason it could not be pulled. */
export async function tryPull(
  docker: Docker,
  image: string,
  onProgress: BuildProgress = () => undefined,
  silenceMs = PULL_SILENCE_MS,
): Promise<string | undefined> {
  let stream: NodeJS.ReadableStream;
  try {
    stream = await docker.pull(image);
  } catch (e) {
    return String((e as { json?: { message?: string } }).json?.message ?? (e as Error).message ?? e)
      .replace(/^\(HTTP code \d+\) [a-z ]+ - /i, '')
      .trim();
  }
  return new Promise<string | undefined>((resolve) => {
    let failure: string | undefined;
    let lastStatus = '';
    let timer: NodeJS.Timeout;
    const arm = () => {
      clearTimeout(timer);
      timer = setTimeout(() => {
        (stream as unknown as { destroy?: () => void }).destroy?.();
        resolve(`no progress from the registry in ${silenceMs / 1000} s`);
      }, silenceMs);
    };
    arm();
    docker.modem.followProgress(
      stream,
      (err: Error | null) => {
        clearTimeout(timer);
        resolve(err ? err.message : failure);
      },
      (ev: { status?: string; error?: string; errorDetail?: { message?: string } }) => {
        arm();
        if (ev.error || ev.errorDetail) failure = ev.errorDetail?.message ?? ev.error;
        // One line per kind of step, not one per layer and percent.
        if (ev.status && !/^(Downloading|Extracting|Waiting|Verifying Checksum)/.test(ev.status) && ev.status !== lastStatus) {
          lastStatus = ev.status;
          onProgress(`pull ${image}: ${ev.status}`);
        }
      },
    );
  });
}

const recentPullFailures = new Map<string, { reason: string; at: number }>();
const PULL_FAILURE_TTL_MS = 5 * 60_000;

/**
 * Chooses the image a language image builds FROM, and says why:
 *  1. `base` (--base / TURNWISE_BASE_IMAGE): used as given, pulled when not on the engine;
 *  2. the public base (debian:bookworm-slim) when it is on the engine or a registry gives it;
 *  3. offline, the base bootstrapped from Debian packages: reused, or bootstrapped when
 *     `bootstrap` allows it (the local engine, root and debootstrap).
 */
export async function chooseBase(
  docker: Docker,
  target: EngineTarget,
  opts: { base?: string; bootstrap?: boolean; dir?: string; onProgress?: BuildProgress; publicBase?: string } = {},
): Promise<BaseChoice> {
  const say = opts.onProgress ?? (() => undefined);
  const dir = opts.dir ?? sandboxImagesDir();
  const exists = async (tag: string) => {
    try {
      return await imageExists(docker, tag);
    } catch (e) {
      throw sandboxError(e, target, `looking for ${tag}`);
    }
  };
  const given = opts.base?.trim();
  if (given) {
    if (await exists(given)) return { image: given, source: 'option', why: `asked for, present on ${target.label}` };
    say(`pulling ${given}`);
    const failed = await tryPull(docker, given, say);
    if (failed) {
      throw new TurnwiseError(
        'docker-image-missing',
        `the base image ${given} is not on ${target.label} and could not be pulled: ${failed}`,
        {
          hint: `check the name and that its registry is reachable from the engine (\`docker pull ${given}\`; \`docker login\` for a private mirror)`,
        },
      );
    }
    return { image: given, source: 'option', why: 'asked for, pulled from its registry' };
  }
  const publicBase = opts.publicBase ?? PUBLIC_BASE_IMAGE;
  if (await exists(publicBase)) return { image: publicBase, source: 'registry', why: `${publicBase} is on ${target.label}` };
  // One engine's failed pull is remembered for a while: the next language need not wait for it again.
  const key = `${target.label}\0${publicBase}`;
  const recent = recentPullFailures.get(key);
  let failed: string | undefined;
  if (recent && Date.now() - recent.at < PULL_FAILURE_TTL_MS) failed = recent.reason;
  else {
    say(`pulling ${publicBase}`);
    failed = await tryPull(docker, publicBase, say);
    if (failed) recentPullFailures.set(key, { reason: failed, at: Date.now() });
  }
  if (!failed) return { image: publicBase, source: 'registry', why: `pulled ${publicBase} from the registry` };
  const offline = `no registry gave ${publicBase} (${failed})`;
  const boot = baseImageTag(dir);
  if (await exists(boot)) return { image: boot, source: 'bootstrap', why: `${offline}: using the base bootstrapped from Debian packages` };
  // debootstrap needs root on a Linux host; anywhere else the script cannot run at all.
  const root = process.platform === 'linux' && process.getuid?.() === 0;
  if (opts.bootstrap === false || !root) {
    const how =
      opts.bootstrap === false
        ? `or build the images on the engine's host (\`turnwise images build\`; offline that needs root and debootstrap)`
        : `or, on a Debian host, bootstrap the base once as root: \`sudo ${bootstrapScript(dir)}\` (apt-get install debootstrap), then run this again`;
    throw new TurnwiseError('docker-image-missing', `${offline}, and the bootstrapped base ${boot} is not on ${target.label}`, {
      hint: `pass --base IMAGE from a registry the engine can reach (a mirror of ${publicBase}), ${how}`,
    });
  }
  say(`${offline}: bootstrapping ${boot} from Debian packages`);
  await bootstrapBaseImage(say, dir);
  return { image: boot, source: 'bootstrap', why: `${offline}: bootstrapped the base from Debian packages` };
}

export interface EnsureImageResult {
  language: SandboxLanguage;
  tag: string;
  built: boolean;
  baseBuilt: boolean;
  /** The image it was built FROM (its `turnwise.base` label when it was already there). */
  base?: string;
  /** Why that base: the choice's sentence, or "already built" for a present image. */
  baseWhy?: string;
  ms: number;
}

/** Label on every language image naming the image it was built FROM. */
export const BASE_LABEL = 'turnwise.base';

async function labelsOf(docker: Docker, tag: string): Promise<Record<string, string>> {
  try {
    return ((await docker.getImage(tag).inspect()).Config?.Labels ?? {}) as Record<string, string>;
  } catch {
    return {};
  }
}

/**
 * Builds a language image, its base chosen by `chooseBase` (a base named in `opts.base` or
 * TURNWISE_BASE_IMAGE, the public base, or the bootstrapped one offline); skips an image that
 * exists unless `force`, or unless a base was named and the image was built FROM another.
 * `tag` replaces the content-hashed tag (tests).
 */
export async function ensureLanguageImage(
  docker: Docker,
  target: EngineTarget,
  language: SandboxLanguage,
  onProgress: BuildProgress = () => undefined,
  opts: { dir?: string; force?: boolean; bootstrap?: boolean; base?: string; tag?: string; publicBase?: string } = {},
): Promise<EnsureImageResult> {
  const t0 = Date.now();
  const dir = opts.dir ?? sandboxImagesDir();
  const tag = opts.tag ?? languageImageTag(language, dir);
  const base = opts.base?.trim() || process.env[BASE_IMAGE_ENV]?.trim() || undefined;
  const result = { language, tag, built: false, baseBuilt: false };
  let exists: boolean;
  try {
    exists = await imageExists(docker, tag);
  } catch (e) {
    throw sandboxError(e, target, `looking for ${tag}`);
  }
  if (exists && !opts.force) {
    const builtFrom = (await labelsOf(docker, tag))[BASE_LABEL];
    if (!base || builtFrom === base) return { ...result, base: builtFrom, baseWhy: 'already built', ms: Date.now() - t0 };
    onProgress(`${tag} was built FROM ${builtFrom ?? 'another base'}; rebuilding it FROM ${base}`);
  }
  const bootstrapBefore = await imageExists(docker, baseImageTag(dir)).catch(() => true);
  const choice = await chooseBase(docker, target, { base, bootstrap: opts.bootstrap, dir, onProgress, publicBase: opts.publicBase });
  onProgress(`base ${choice.image}: ${choice.why}`);
  onProgress(`building ${tag} FROM ${choice.image}`);
  try {
    await buildFromContext(
      docker,
      target,
      packDir(languageDir(language, dir)),
      {
        t: tag,
        buildargs: { BASE: choice.image, PACKAGES: basePackages(dir).join(' ') },
        labels: { 'turnwise.image': language, [BASE_LABEL]: choice.image },
        // A registry base installs the sandbox packages with apt, which needs the network; the
        // bootstrapped base has them all, so its builds stay off the network.
        networkmode: choice.source === 'bootstrap' ? 'none' : 'default',
      },
      onProgress,
    );
  } catch (e) {
    if (choice.source === 'bootstrap' || !(e instanceof TurnwiseError) || e.code !== 'sandbox-failed') throw e;
    // FROM a registry image the build installs the sandbox packages with apt.
    throw new TurnwiseError('sandbox-failed', `${e.message} (building FROM ${choice.image})`, {
      hint: `the build installs Debian packages with apt (see the build output above), so the engine's build containers need a Debian mirror in reach; --base must be a Debian bookworm image; offline, bootstrap the base instead: \`sudo ${bootstrapScript(dir)}\` then \`turnwise images build --base ${baseImageTag(dir)}\``,
      cause: e,
    });
  }
  return {
    ...result,
    built: true,
    baseBuilt: choice.source === 'bootstrap' && !bootstrapBefore,
    base: choice.image,
    baseWhy: choice.why,
    ms: Date.now() - t0,
  };
}
