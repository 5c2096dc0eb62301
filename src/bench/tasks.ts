// `turnwise bench tasks`: validated mutation tasks per minute on a generated Python workspace
// whose test suite takes about one second (paced by a sleeping test, so the number measures the
// pipeline: snapshot, sandboxes, runner, parsing; not the speed of the CPU running the tests).
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { synthesizeMutationTasks, type DropReason } from '../tasks/synth';

const PRICING = `"""Prices, discounts, totals and shipping."""


def clamp(value, low, high):
    if value < low:
        return low
    if value > high:
        return high
    return value


def discount(price, percent):
    percent = clamp(percent, 0, 100)
    return round(price * (100 - percent) / 100, 2)


def total(items, member=False):
    subtotal = 0
    for price, qty in items:
        subtotal += price * qty
    if member and subtotal >= 50:
        subtotal = discount(subtotal, 10)
    return subtotal


def shipping(subtotal, express=False):
    if subtotal >= 100 and not express:
        return 0
    cost = 5
    if express:
        cost = cost * 2
    return cost


def first_index(seq, wanted):
    for i in range(len(seq)):
        if seq[i] == wanted:
            return i
    return None
`;

const TESTS = `from shop.pricing import clamp, discount, first_index, shipping, total


def test_clamp():
    assert clamp(5, 0, 10) == 5
    assert clamp(-3, 0, 10) == 0
    assert clamp(12, 0, 10) == 10
    assert clamp(0, 0, 10) == 0


def test_discount():
    assert discount(200, 25) == 150
    assert discount(80, 150) == 0


def test_total():
    assert total([(10, 2), (5, 1)]) == 25
    assert total([(30, 2)]) == 60


def test_total_member():
    assert total([(30, 2)], member=True) == 54
    assert total([(20, 2)], member=True) == 40


def test_shipping():
    assert shipping(100) == 0
    assert shipping(99) == 5
    assert shipping(20, express=True) == 10


def test_first_index():
    assert first_index(["x", "y", "z"], "z") == 2
    assert first_index(["x"], "q") is None
`;

const PACING = `import time


def test_suite_takes_about_a_second():
    time.sleep(SLEEP_S)
`;

export interface BenchTasksOptions {
  concurrency?: number;
  max?: number;
  seed?: number;
  /** Wall time the generated suite should take, seconds. Default 1. */
  suiteSeconds?: number;
  onProgress?: (line: string) => void;
}

export interface BenchTasksResult {
  bench: 'tasks';
  workspace: string;
  suite_s: number;
  concurrency: number;
  candidates_generated: number;
  candidates_tried: number;
  kept: number;
  dropped: number;
  dropped_by_reason: Record<DropReason, number>;
  surplus: number;
  validation_s: number;
  total_s: number;
  tasks_per_minute: number;
  candidates_per_minute: number;
  /** Mutants its tests catch whose no-op and reference fix were scored (tasks/scoring-check.ts), and those that scored right. */
  scoring_checked: number;
  scoring_passed: number;
  /** scoring_passed / scoring_checked: the share of tasks whose reward tells a fix from no fix (target 1). */
  scoring_share: number | null;
}

/** Writes the generated workspace; returns its folder (caller removes it). */
export function writeBenchWorkspace(dir: string, suiteSeconds: number): void {
  fs.mkdirSync(path.join(dir, 'shop'), { recursive: true });
  fs.mkdirSync(path.join(dir, 'tests'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'shop', '__init__.py'), '');
  fs.writeFileSync(path.join(dir, 'shop', 'pricing.py'), PRICING);
  fs.writeFileSync(path.join(dir, 'tests', 'test_pricing.py'), TESTS);
  // pytest itself takes ~0.25 s to start in the sandbox; the sleep makes up the rest.
  fs.writeFileSync(
    path.join(dir, 'tests', 'test_pacing.py'),
    PACING.replace('SLEEP_S', String(Math.max(0, suiteSeconds - 0.25).toFixed(2))),
  );
}

export async function benchTasks(opts: BenchTasksOptions = {}): Promise<BenchTasksResult> {
  const concurrency = opts.concurrency ?? 4;
  const suiteSeconds = opts.suiteSeconds ?? 1;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'turnwise-bench-tasks-'));
  try {
    writeBenchWorkspace(dir, suiteSeconds);
    const r = await synthesizeMutationTasks({
      workspace: dir,
      max: opts.max ?? 24,
      seed: opts.seed ?? 0,
      concurrency,
      run: `bench-tasks-${process.pid}`,
      onProgress: (p) => opts.onProgress?.(`tried ${p.tried}/${p.total}, kept ${p.kept}, dropped ${p.dropped}`),
    });
    const s = r.summary;
    const minutes = s.validationMs / 60_000;
    return {
      bench: 'tasks',
      workspace: `generated Python project, pytest suite ≈${suiteSeconds} s (sleep-paced)`,
      suite_s: Math.round(s.baseline.durationMs) / 1000,
      concurrency,
      candidates_generated: s.candidates.generated,
      candidates_tried: s.candidates.tried,
      kept: s.candidates.kept,
      dropped: s.candidates.dropped,
      dropped_by_reason: s.dropped,
      surplus: s.candidates.surplus,
      validation_s: Math.round(s.validationMs) / 1000,
      total_s: Math.round(s.durationMs) / 1000,
      tasks_per_minute: Math.round((s.candidates.kept / minutes) * 10) / 10,
      candidates_per_minute: Math.round((s.candidates.tried / minutes) * 10) / 10,
      scoring_checked: s.scoring.checked,
      scoring_passed: s.scoring.passed,
      scoring_share: s.scoring.checked ? Math.round((s.scoring.passed / s.scoring.checked) * 10_000) / 10_000 : null,
    };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
