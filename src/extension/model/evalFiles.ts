// Evaluation results files in the editor: where Evaluate Policy writes them
// (.turnwise/evals/<time>-<model>.jsonl), what the reward panel's comparison lists (read from
// each file's header line only), and the checks of the endpoint Evaluate Policy is given. Plain
// Node (no vscode), so it is unit-tested.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { SCHEMA } from '../../core/schema';
import type { EvalResultsHeader } from '../../eval/results';
import type { EvalReport } from '../../eval/report';
import type { EvalComparison, EvalFileEntry } from '../webviews/reward/protocol';

export const EVALS_DIR = path.join('.turnwise', 'evals');

/** The largest header line read (a header holds a row per episode: ~200 bytes each). */
const MAX_HEADER_BYTES = 16 * 1024 * 1024;

/** The first line of a file (up to MAX_HEADER_BYTES), or undefined when it cannot be read. */
function firstLine(file: string): string | undefined {
  let fd: number | undefined;
  try {
    fd = fs.openSync(file, 'r');
    const chunks: Buffer[] = [];
    const buf = Buffer.alloc(64 * 1024);
    let total = 0;
    for (;;) {
      const n = fs.readSync(fd, buf, 0, buf.length, total);
      if (n === 0) break;
      const nl = buf.subarray(0, n).indexOf(10);
      if (nl >= 0) {
        chunks.push(Buffer.from(buf.subarray(0, nl)));
        break;
      }
      chunks.push(Buffer.from(buf.subarray(0, n)));
      total += n;
      if (total > MAX_HEADER_BYTES) return undefined;
    }
    return Buffer.concat(chunks).toString('utf8');
  } catch {
    return undefined;
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
}

/** A results file as the comparison lists it; undefined for a file that is neither results nor episodes. */
export function evalFileEntry(file: string, root?: string): EvalFileEntry | undefined {
  const line = firstLine(file);
  if (!line) return undefined;
  let h: Omit<Partial<EvalResultsHeader>, 'schema'> & { schema?: unknown; taskId?: unknown };
  try {
    h = JSON.parse(line);
  } catch {
    return undefined;
  }
  const rel = root && path.resolve(file).startsWith(path.resolve(root) + path.sep) ? path.relative(root, file) : file;
  if (h.schema === SCHEMA.evalResults && h.model && h.tasks) {
    return {
      file,
      name: rel,
      label: typeof h.model.label === 'string' ? h.model.label : path.basename(file),
      kind: h.model.kind === 'endpoint' ? 'endpoint' : 'checkpoint',
      tasks: Array.isArray(h.tasks.ids) ? h.tasks.ids.length : 0,
      samples: typeof h.samples === 'number' ? h.samples : 0,
      seed: typeof h.seed === 'number' ? h.seed : null,
      ...(typeof h.createdAt === 'string' ? { createdAt: h.createdAt } : {}),
      complete: h.complete !== false,
    };
  }
  // An episodes file without a header (written before results headers): listed by its name.
  if (h.schema === SCHEMA.trajectory && typeof h.taskId === 'string')
    return { file, name: rel, label: path.basename(file, '.jsonl'), kind: 'episodes', tasks: 0, samples: 0, seed: null, complete: true };
  return undefined;
}

/** The results files of the workspaces' .turnwise/evals folders and the extra files given, newest first. */
export function listEvalFiles(roots: readonly string[], extra: readonly string[] = []): EvalFileEntry[] {
  const found: EvalFileEntry[] = [];
  const seen = new Set<string>();
  const add = (file: string, root?: string) => {
    const abs = path.resolve(file);
    if (seen.has(abs)) return;
    seen.add(abs);
    const e = evalFileEntry(abs, root);
    if (e) found.push(e);
  };
  for (const root of roots) {
    const dir = path.join(root, EVALS_DIR);
    let names: string[];
    try {
      names = fs.readdirSync(dir).filter((n) => n.endsWith('.jsonl'));
    } catch {
      continue;
    }
    for (const n of names) add(path.join(dir, n), root);
  }
  for (const f of extra)
    add(
      f,
      roots.find((r) => path.resolve(f).startsWith(path.resolve(r) + path.sep)),
    );
  const time = (e: EvalFileEntry) => (e.createdAt ? Date.parse(e.createdAt) : 0) || 0;
  return found.sort((a, b) => time(b) - time(a) || a.name.localeCompare(b.name));
}

/** Where Evaluate Policy writes the results of `label`: .turnwise/evals/<UTC time>-<label as a file name>.jsonl. */
export function evalOutFile(root: string, label: string, now = new Date()): string {
  const stamp = now
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z')
    .replace('T', '-');
  const slug = label
    .replace(/[^A-Za-z0-9._-]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 60);
  return path.join(root, EVALS_DIR, `${stamp}-${slug || 'model'}.jsonl`);
}

/** Why a URL cannot be an endpoint's (undefined when it can). */
export function endpointUrlProblem(url: string): string | undefined {
  let u: URL;
  try {
    u = new URL(url.trim());
  } catch {
    return "not a URL: give the server's address, e.g. http://127.0.0.1:8000/v1";
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return 'give an http:// or https:// address';
  if (u.username || u.password) return 'no user or password in the URL: an API key goes in an environment variable, named in the next step';
  if (u.search) return 'no query in the URL: an API key goes in an environment variable, named in the next step';
  return undefined;
}

/**
 * Why `name` cannot be the key's environment variable (undefined when it can; '' is no key). The
 * value typed is never repeated: a pasted key must not end up on screen or in a log.
 */
export function keyEnvProblem(name: string, env: Record<string, string | undefined>): string | undefined {
  if (name === '') return undefined;
  if (!/^[A-Za-z_][A-Za-z0-9_]{0,127}$/.test(name)) return 'the name of an environment variable (letters, digits, _), not the key itself';
  if (!env[name])
    return "no variable of this name is set in the editor's environment: set it where the editor starts (the evaluation reads it there), or leave this empty for a server without a key";
  return undefined;
}

/** The report as the panel draws it (the per-episode rows stay in the files). */
export function comparisonView(r: EvalReport): EvalComparison {
  return {
    models: r.models.map((m) => ({
      label: m.label,
      file: m.file,
      kind: m.model.kind,
      greedy: m.greedy,
      sampled: m.sampled,
      pass_at_k_t: m.pass_at_k_t,
      maxTurns: m.maxTurns,
    })),
    tasks: r.tasks,
    episodes: r.episodes,
    intersection: r.intersection,
    notes: r.notes,
    per_task: r.per_task,
    boundary: r.boundary.map((b) => ({ base: b.base, model: b.model, kind: b.verdict.kind, line: b.verdict.line })),
  };
}
