// How well a warm-started policy fixes held-out generated cases, in the simulator: greedy fix-turn
// accuracy (sed form) and whole simulated episodes.
import type { Policy } from '../policy/inference/policy';
import { renderPrompt, type CompactCodec } from '../train/compact-codec';
import type { FixCase } from '../demonstrations/fix-cases';
import { editOf, fixPromptTurns, sedRestores, simulateTurn, type FixForm } from '../demonstrations/simulator';

/**
 * Greedy fix-turn accuracy on cases in the sed form: the exact demonstrated command, a command
 * that restores the line when run, the right line number, any `sed -i 'N…'`. (The numbered form
 * is judged by whole episodes: evaluateEpisodes.)
 */
export async function evaluateFixes(
  policy: Policy,
  codec: CompactCodec,
  cases: readonly FixCase[],
  budget = 1024 - 96,
): Promise<{ exact: number; restores: number; rightLine: number; validSed: number }> {
  let exact = 0;
  let restores = 0;
  let line = 0;
  let sed = 0;
  const B = 16;
  for (let i = 0; i < cases.length; i += B) {
    const chunk = cases.slice(i, i + B);
    const prompts = chunk.map((c) => {
      const p = fixPromptTurns(c);
      return renderPrompt(codec, p.task, p.turns, budget).ids;
    });
    const rows = await policy.generateIds(prompts, { maxNewTokens: 96, temperature: 0, stopIds: [codec.imEnd] });
    rows.forEach((row, k) => {
      // The edit of an attempt (`sed … && tw-test || git checkout -q FILE`) is what is judged.
      const text = editOf(codec.decode(row.tokenIds.filter((t) => t !== codec.imEnd)).trim());
      const c = chunk[k];
      if (text === c.fix) exact++;
      if (sedRestores(text, c)) restores++;
      const m = /^sed -i '(\d+)s\//.exec(text);
      if (m) {
        sed++;
        if (Number(m[1]) === c.line) line++;
      }
    });
  }
  const n = Math.max(1, cases.length);
  return { exact: exact / n, restores: restores / n, rightLine: line / n, validSed: sed / n };
}

/**
 * Greedy episodes on fix cases, simulated (simulateTurn) from the point after `tw-suspects`: the
 * share whose bug line is restored, with no stray edit left, within `turns` turns. Unlike the
 * first-command figures this credits trying again after a failed attempt.
 */
export async function evaluateEpisodes(
  policy: Policy,
  codec: CompactCodec,
  cases: readonly FixCase[],
  turns = 5,
  budget = 1024 - 96,
  form: FixForm = 'sed',
): Promise<{ fixed: number; meanTurns: number }> {
  const st = cases.map((c) => ({ c, p: fixPromptTurns(c, form), line: c.mutatedLine, stray: false, done: false, n: 0 }));
  for (let t = 0; t < turns; t++) {
    const live = st.filter((s) => !s.done);
    for (let i = 0; i < live.length; i += 16) {
      const chunk = live.slice(i, i + 16);
      const rows = await policy.generateIds(
        chunk.map((s) => renderPrompt(codec, s.p.task, s.p.turns, budget).ids),
        { maxNewTokens: 96, temperature: 0, stopIds: [codec.imEnd] },
      );
      rows.forEach((row, k) => {
        const s = chunk[k];
        const cmd = codec.decode(row.tokenIds.filter((x) => x !== codec.imEnd)).trim();
        s.n++;
        if (cmd === 'submit') {
          s.done = true;
          return;
        }
        s.p.turns.push({ action: cmd, observation: simulateTurn(s, s.c, cmd) });
      });
    }
  }
  const n = Math.max(1, st.length);
  return { fixed: st.filter((s) => s.line === s.c.originalLine && !s.stray).length / n, meanTurns: st.reduce((a, s) => a + s.n, 0) / n };
}
