// Which turns of an episode repeat an earlier one: the reward charges each (tasks/reward.ts) and
// the turnwise estimator charges it to the turn itself (credit/a3.ts).

/**
 * Per turn, whether it repeats an earlier one: it changed no file and ran the same command
 * (whitespace aside) for the same output as an earlier turn that changed no file either.
 * `submit` and format errors never count (the format penalty covers those).
 */
export function repeatFlags(
  turns: readonly { action: string; observation: string; edits?: readonly unknown[]; formatError?: string }[],
): boolean[] {
  const seen = new Set<string>();
  return turns.map((t) => {
    if (t.action === 'submit' || t.formatError !== undefined || (t.edits?.length ?? 0) > 0) return false;
    const key = `${t.action.replace(/\s+/g, ' ').trim()}\u0000${t.observation}`;
    if (seen.has(key)) return true;
    seen.add(key);
    return false;
  });
}

/** The number of turns repeatFlags marks. */
export function repeatedTurns(
  turns: readonly { action: string; observation: string; edits?: readonly unknown[]; formatError?: string }[],
): number {
  return repeatFlags(turns).filter(Boolean).length;
}
