// `turnwise doctor` / "Turnwise: Check Environment": every piece a run needs, tried for real.
// A required check that fails makes the report fail; optional ones (GPU providers) only warn.
import { SCHEMA } from '../core/schema';
import { formatError } from '../core/errors';
import { GRAMMARS, createParser } from '../ast/treesitter';
import { connectEngine, engineInfo } from '../sandbox/engine';
import { SANDBOX_LANGUAGES, baseImageTag, languageImageTag } from '../sandbox/images';
import { EXECUTION_PROVIDERS, probeProvider } from '../onnx/runtime';

export type CheckStatus = 'ok' | 'warn' | 'fail';

export interface Check {
  name: string;
  status: CheckStatus;
  detail: string;
  /** What to do when status is not ok. */
  fix?: string;
}

export interface DoctorReport {
  schema: typeof SCHEMA.doctor;
  ok: boolean;
  checks: Check[];
}

export interface DoctorOptions {
  dockerHost?: string;
  /** Minimum Node major version. */
  minNode?: number;
}

async function nodeCheck(minNode: number): Promise<Check> {
  const major = Number(process.versions.node.split('.')[0]);
  return major >= minNode
    ? { name: 'node', status: 'ok', detail: `Node ${process.versions.node}` }
    : { name: 'node', status: 'fail', detail: `Node ${process.versions.node} is too old`, fix: `install Node ${minNode} or newer` };
}

/** How long the doctor waits for the Docker engine to answer one request. */
const ENGINE_TIMEOUT_MS = 5000;

async function dockerChecks(host?: string): Promise<Check[]> {
  // engineInfo's own race only stops waiting; the socket timeout closes the request itself.
  const { docker, target } = connectEngine(host, { requestTimeoutMs: ENGINE_TIMEOUT_MS });
  let info;
  try {
    info = await engineInfo(docker, target, ENGINE_TIMEOUT_MS);
  } catch (e) {
    const [msg, hint] = formatError(e).split('\n  → ');
    return [
      { name: 'docker', status: 'fail', detail: msg, fix: hint },
      { name: 'sandbox images', status: 'fail', detail: 'not checked: Docker is not reachable', fix: 'fix the docker check first' },
    ];
  }
  const checks: Check[] = [{ name: 'docker', status: 'ok', detail: `Docker ${info.version} (API ${info.apiVersion}, ${info.os}) at ${info.target}` }];
  const wanted = [baseImageTag(), ...SANDBOX_LANGUAGES.map((l) => languageImageTag(l))];
  const missing: string[] = [];
  for (const tag of wanted) {
    try {
      await docker.getImage(tag).inspect();
    } catch {
      missing.push(tag);
    }
  }
  checks.push(
    missing.length === 0
      ? { name: 'sandbox images', status: 'ok', detail: wanted.join(', ') }
      : {
          name: 'sandbox images',
          status: 'fail',
          detail: `missing: ${missing.join(', ')}`,
          fix: 'build them: `turnwise images build` (bootstraps the base from Debian packages when no registry has it; that step needs root and debootstrap)',
        },
  );
  return checks;
}

/** ORT prefixes provider errors with its source location and the failed assertion; the reason is last. */
export function tidyProviderError(message: string): string {
  const assertion = message.lastIndexOf(' was false. ');
  return assertion >= 0 ? message.slice(assertion + ' was false. '.length) : message;
}

async function providerChecks(): Promise<Check[]> {
  const checks: Check[] = [];
  for (const ep of EXECUTION_PROVIDERS) {
    const p = await probeProvider(ep);
    if (p.ok) {
      checks.push({ name: `onnxruntime ${ep}`, status: 'ok', detail: `session created and ran (${p.ms.toFixed(0)} ms)` });
      continue;
    }
    const required = ep === 'cpu';
    const fix =
      ep === 'cuda'
        ? 'optional. For CUDA: install CUDA 12 + cuDNN 9, then `npm rebuild onnxruntime-node --onnxruntime-node-install=cuda12` (see README)'
        : ep === 'webgpu'
          ? 'optional. WebGPU needs a GPU adapter (Vulkan driver); without one training uses the CPU'
          : 'reinstall onnxruntime-node for this platform';
    checks.push({ name: `onnxruntime ${ep}`, status: required ? 'fail' : 'warn', detail: `not available: ${tidyProviderError(p.error ?? 'unknown error')}`, fix });
  }
  return checks;
}

async function grammarCheck(): Promise<Check> {
  const failed: string[] = [];
  for (const g of GRAMMARS) {
    try {
      const parser = await createParser(g);
      const tree = parser.parse('x');
      if (!tree) throw new Error('parse returned nothing');
      tree.delete();
      parser.delete();
    } catch (e) {
      failed.push(`${g} (${(e as Error).message || 'load failed'})`);
    }
  }
  return failed.length === 0
    ? { name: 'tree-sitter grammars', status: 'ok', detail: GRAMMARS.join(', ') }
    : { name: 'tree-sitter grammars', status: 'fail', detail: `cannot load: ${failed.join(', ')}`, fix: 'run `npm run build`, or reinstall the extension' };
}

export async function runDoctor(options: DoctorOptions = {}): Promise<DoctorReport> {
  const checks = [
    await nodeCheck(options.minNode ?? 20),
    ...(await dockerChecks(options.dockerHost)),
    ...(await providerChecks()),
    await grammarCheck(),
  ];
  return { schema: SCHEMA.doctor, ok: checks.every((c) => c.status !== 'fail'), checks };
}

/** The report as text: one line per check, the fix indented under each problem. */
export function formatDoctorReport(report: DoctorReport): string {
  const mark = { ok: '✓', warn: '!', fail: '✗' } as const;
  const lines = report.checks.map((c) => `${mark[c.status]} ${c.name}: ${c.detail}${c.fix && c.status !== 'ok' ? `\n    fix: ${c.fix}` : ''}`);
  const fails = report.checks.filter((c) => c.status === 'fail').length;
  const warns = report.checks.filter((c) => c.status === 'warn').length;
  lines.push(report.ok ? `Environment ready${warns ? ` (${warns} optional item(s) unavailable)` : ''}.` : `${fails} problem(s) must be fixed before a run.`);
  return lines.join('\n');
}
