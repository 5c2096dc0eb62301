// Fix cases from a workspace's own mutation tasks, with the tool output recorded for real: each
// task's bug is written into a fresh sandbox (as in an episode) and `tw-suspects` is run there.
// Only train-split tasks may be given: held-out tasks never become demonstrations (the ids used
// are written next to the warm-started model, and a run never holds out one of them).
import type { Task } from '../core/schema';
import { stopPoint } from '../core/stop';
import { prepareSandbox } from '../agent/episode';
import type { PoolSnapshot, Sandbox, SandboxPool } from '../sandbox';
import { shellQuote } from '../sandbox/shell';
import { detectRunner } from '../tasks/runners';
import { synthesizeMutationTasks, synthPhaseText } from '../tasks/synth';
import { FIXABLE_OPERATORS, fixCommand, mutatedLineOf, withTopCandidates, type FixCase } from '../demonstrations/fix-cases';
import { showContext } from '../demonstrations/tool-output';
import { fixVariant } from '../demonstrations/forms';
import { splitTasks } from '../train/split';

/** The one-line fix of a mutation task, from the original file in the workspace. */
export function taskFix(workspace: string, task: Task): Omit<FixCase, 'failing' | 'passing' | 'suspects'> | undefined {
  const m = task.mutation;
  if (!m || !FIXABLE_OPERATORS.has(m.operator)) return undefined;
  const at = mutatedLineOf(workspace, m);
  if (!at) return undefined;
  const { line, mutatedLine, originalLine } = at;
  const fix = fixCommand(m.file, line, mutatedLine, originalLine);
  return fix ? { path: m.file, line, mutatedLine, originalLine, fix, context: showContext(at.mutatedLines, line) } : undefined;
}

/** Records a FixCase per fixable task (tw-suspects run in a sandbox with the bug written in). */
export async function recordWorkspaceCases(o: {
  workspace: string;
  tasks: readonly Task[];
  pool: SandboxPool;
  snapshot: PoolSnapshot;
  onProgress?: (done: number, total: number) => void;
}): Promise<FixCase[]> {
  const out: FixCase[] = [];
  const todo = o.tasks.map((t) => ({ t, fix: taskFix(o.workspace, t) })).filter((x) => x.fix);
  let done = 0;
  for (const { t, fix } of todo) {
    const sb = await o.pool.acquire(o.snapshot, { rollout: `demonstration-${t.id}` });
    try {
      await prepareSandbox(sb, t);
      const r = await sb.exec('tw-suspects', { timeoutMs: 60_000 });
      const lines = r.stdout.trim().split('\n');
      const m = /^(\d+) failed, (\d+) passed/.exec(lines[0] ?? '');
      const suspects = lines.slice(1).filter((l) => /^\S+:\d+: /.test(l));
      // Only bugs the tool points at: a demonstration must be derivable from what the model sees.
      if (r.exitCode === 1 && m && Number(m[1]) > 0 && suspects.some((l) => l.startsWith(`${fix!.path}:${fix!.line}: `))) {
        const firstPassingVariant = await earlierPassingVariant(sb, fix!);
        out.push(
          await withTopCandidates({
            ...fix!,
            taskId: t.id,
            failing: t.fail_to_pass,
            passing: Number(m[2]),
            suspects,
            ...(firstPassingVariant ? { firstPassingVariant } : {}),
          }),
        );
      }
    } finally {
      await sb.dispose();
    }
    o.onProgress?.(++done, todo.length);
  }
  return out;
}

/**
 * The first of the bug line's variants listed before the original's that makes the workspace's
 * tests pass, tried in the sandbox as a try in order does (`tw-apply`, `tw-test`, the file put
 * back); undefined when none does. A demonstration that tries variants in order stops there.
 */
async function earlierPassingVariant(
  sb: Sandbox,
  fix: Pick<FixCase, 'path' | 'line' | 'mutatedLine' | 'originalLine'>,
): Promise<number | undefined> {
  const j = fixVariant(fix);
  for (let v = 1; v < j; v++) {
    const r = await sb.exec(
      `tw-apply ${shellQuote(`${fix.path}:${fix.line}`)} ${v} >/dev/null && tw-test >/dev/null; s=$?; git checkout -q .; exit $s`,
      {
        timeoutMs: 60_000,
      },
    );
    if (r.exitCode === 0) return v;
  }
  return undefined;
}

/**
 * The train-split fix cases of a workspace, as a run with the same settings would split it:
 * its mutation tasks (synthesized with `seed`), split with `heldoutFraction`, held-out ones left out.
 */
export async function workspaceCasesFor(o: {
  workspace: string;
  seed: number;
  maxTasks: number;
  heldoutFraction: number;
  pool: SandboxPool;
  onLog?: (m: string) => void;
  /** Checked between the stages (synthesis, recording): an abort stops at the next (StoppedError). */
  signal?: AbortSignal;
}): Promise<{ cases: FixCase[]; heldout: string[] }> {
  const runner = detectRunner(o.workspace);
  // Synthesis takes a minute or more: its phases, and the validation every tenth of the way.
  let phase: string | undefined;
  let shown = -1;
  o.onLog?.(`making tasks from ${o.workspace}`);
  const { tasks } = await synthesizeMutationTasks({
    workspace: o.workspace,
    pool: o.pool,
    seed: o.seed,
    max: o.maxTasks,
    signal: o.signal,
    onProgress: (p) => {
      if (p.phase !== phase) {
        phase = p.phase;
        o.onLog?.(synthPhaseText(p.phase));
      }
      const tenth = p.total > 0 ? Math.floor((10 * p.tried) / p.total) : 0;
      if (p.phase === 'validate' && tenth > shown) {
        shown = tenth;
        if (p.tried > 0) o.onLog?.(`  ${p.tried} of up to ${p.total} mutants tried, ${p.kept} kept`);
      }
    },
  });
  await stopPoint(o.signal, `making the workspace's tasks (${tasks.length} made)`);
  const split = splitTasks(tasks, o.heldoutFraction, o.seed);
  const train = new Set(split.train);
  const snapshot = await o.pool.snapshot(o.workspace, { language: runner.language });
  o.onLog?.(
    `${tasks.length} task(s) in ${o.workspace}: ${split.train.length} train, ${split.heldout.length} held out (never demonstrated)`,
  );
  await stopPoint(o.signal, "preparing the workspace's demonstrations");
  const cases = await recordWorkspaceCases({ workspace: o.workspace, tasks: tasks.filter((t) => train.has(t.id)), pool: o.pool, snapshot });
  o.onLog?.(`${cases.length} demonstration case(s) recorded from the train split`);
  return { cases, heldout: split.heldout };
}
