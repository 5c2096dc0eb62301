// The environment check's shared shapes: each layer writes its own checks (sandbox/doctor.ts,
// onnx/doctor.ts, ast/doctor.ts, train/embedded.ts) as Check values; train/doctor.ts lists them.
import { TurnwiseError } from './errors';
import { SCHEMA } from './schema';

export type CheckStatus = 'ok' | 'warn' | 'fail';

/** One line of the report: a piece a run needs, tried for real. */
export interface Check {
  name: string;
  /** `fail` makes the report fail; `warn` is for optional pieces (GPU providers). */
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

export function doctorReport(checks: Check[]): DoctorReport {
  return { schema: SCHEMA.doctor, ok: checks.every((c) => c.status !== 'fail'), checks };
}

/** A failed check from an error: a TurnwiseError's message and hint become the detail and the fix. */
export function failedCheck(name: string, e: unknown, fallbackFix?: string): Check {
  const detail = e instanceof Error ? e.message : String(e);
  const fix = e instanceof TurnwiseError && e.hint ? e.hint : fallbackFix;
  return { name, status: 'fail', detail, ...(fix ? { fix } : {}) };
}

/** A check that could not run because one it depends on failed: it fails too, pointing there. */
export function notChecked(name: string, because: string, fixFirst: string): Check {
  return { name, status: 'fail', detail: `not checked: ${because}`, fix: `fix the ${fixFirst} check first` };
}

/** Node itself: the one check no layer owns. */
export function nodeCheck(minNode: number, version = process.versions.node): Check {
  const major = Number(version.split('.')[0]);
  return major >= minNode
    ? { name: 'node', status: 'ok', detail: `Node ${version}` }
    : { name: 'node', status: 'fail', detail: `Node ${version} is too old`, fix: `install Node ${minNode} or newer` };
}

/** The report as text: one line per check, the fix indented under each problem. */
export function formatDoctorReport(report: DoctorReport): string {
  const mark = { ok: '✓', warn: '!', fail: '✗' } as const;
  const lines = report.checks.map(
    (c) => `${mark[c.status]} ${c.name}: ${c.detail}${c.fix && c.status !== 'ok' ? `\n    fix: ${c.fix}` : ''}`,
  );
  const fails = report.checks.filter((c) => c.status === 'fail').length;
  const warns = report.checks.filter((c) => c.status === 'warn').length;
  lines.push(
    report.ok
      ? `Environment ready${warns ? ` (${warns} optional item(s) unavailable)` : ''}.`
      : `${fails} problem(s) must be fixed before a run.`,
  );
  return lines.join('\n');
}
