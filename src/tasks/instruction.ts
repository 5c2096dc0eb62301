// The task text the policy sees: which tests fail and how, never where the bug is. For
// mutation tasks every line of the failure output that points into the mutated file (stack
// frames, traceback frames and their source lines) is removed.

export interface FailingTest {
  id: string;
  message?: string;
}

export interface InstructionOptions {
  /** Workspace-relative files whose mention must not reach the policy (the mutated file). */
  hideFiles?: string[];
  /** Characters of failure output per test, and in all. */
  perTestChars?: number;
  totalChars?: number;
}

function mentions(line: string, files: string[]): boolean {
  return files.some((f) => {
    if (line.includes(f)) return true;
    const base = f.split('/').pop() ?? f;
    // `pricing.py:12` / `pricing.js:3:10` / `File "…/pricing.py"`: the bare file name as a word
    return new RegExp(`(^|[\\s/"'(\\\\])${base.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(\\b|$)`).test(line);
  });
}

/** Removes lines that point into hidden files (and a Python frame's indented source lines under them). */
export function redactLocations(text: string, hideFiles: string[]): string {
  if (hideFiles.length === 0) return text;
  const out: string[] = [];
  let skippingFrameBody = false;
  for (const line of text.split('\n')) {
    if (mentions(line, hideFiles)) {
      skippingFrameBody = true;
      continue;
    }
    // pytest --tb=short prints "path:line: in func" followed by the source line, indented
    if (skippingFrameBody && /^\s{2,}\S/.test(line) && !/^E\s/.test(line) && !/^\s+at\s/.test(line)) continue;
    skippingFrameBody = false;
    out.push(line);
  }
  return out.join('\n');
}

/** Stack frames inside the runtime (node:internal, node:async_hooks) say nothing about the code. */
export function dropRuntimeFrames(text: string): string {
  return text
    .split('\n')
    .filter((l) => !/^\s*at (async )?(.*\()?(node:|internal\/)/.test(l))
    .join('\n');
}

function clip(s: string, n: number): string {
  return s.length <= n ? s : `${s.slice(0, n)}\n… [truncated]`;
}

export function buildInstruction(failing: FailingTest[], opts: InstructionOptions = {}): string {
  const per = opts.perTestChars ?? 1500;
  let budget = opts.totalChars ?? 6000;
  const hide = opts.hideFiles ?? [];
  const lines = [
    failing.length === 1 ? 'This test fails:' : `These ${failing.length} tests fail:`,
    ...failing.map((t) => `  - ${t.id}`),
    '',
    `Find the cause in the code and fix it so that ${failing.length === 1 ? 'it passes' : 'they pass'}, without breaking the other tests.`,
    'Do not edit the tests: test files are restored before the tests are scored.',
  ];
  const outputs: string[] = [];
  for (const t of failing) {
    if (!t.message || budget <= 0) continue;
    const body = clip(redactLocations(dropRuntimeFrames(t.message), hide).trim(), Math.min(per, budget));
    budget -= body.length;
    outputs.push(`--- ${t.id}\n${body}`);
  }
  if (outputs.length) lines.push('', 'Failure output:', ...outputs);
  return lines.join('\n');
}
