// How a turn reads in the editor: the style bucket of its advantage (sign and size), and the
// text of its hover and CodeLens. Plain Node (no vscode).
import type { Trajectory, Turn } from '../../core/schema';

/** Decoration styles, one decoration type each (extension/trajectoryEditor.ts). */
export const ADVANTAGE_STYLES = ['positiveStrong', 'positive', 'neutral', 'negative', 'negativeStrong', 'unscored'] as const;
export type AdvantageStyle = (typeof ADVANTAGE_STYLES)[number];

/** Largest |advantage| over the trajectory's turns (the scale "strong" is measured against). */
export function advantageScale(traj: Pick<Trajectory, 'turns'>): number {
  let s = 0;
  for (const t of traj.turns) if (typeof t.advantage === 'number' && Number.isFinite(t.advantage)) s = Math.max(s, Math.abs(t.advantage));
  return s;
}

/** Strong: at least half of the trajectory's largest |advantage|; neutral: |A| < 1e-6. */
export function advantageStyle(advantage: number | undefined, scale: number): AdvantageStyle {
  if (typeof advantage !== 'number' || !Number.isFinite(advantage)) return 'unscored';
  if (Math.abs(advantage) < 1e-6) return 'neutral';
  const strong = scale > 0 && Math.abs(advantage) >= 0.5 * scale;
  if (advantage > 0) return strong ? 'positiveStrong' : 'positive';
  return strong ? 'negativeStrong' : 'negative';
}

export function formatSigned(x: number | undefined | null, digits = 3): string {
  if (typeof x !== 'number' || !Number.isFinite(x)) return '–';
  return `${x >= 0 ? '+' : '−'}${Math.abs(x).toFixed(digits)}`;
}

export function formatComponents(c: Record<string, number> | undefined): string {
  if (!c) return '';
  return Object.entries(c)
    .map(([k, v]) => `${k} ${formatSigned(v)}`)
    .join(', ');
}

/**
 * A turn's CodeLens, short enough for a narrow editor: "Turn 3 · A +0.420"; its tooltip holds
 * the advantage's components and the command.
 */
export function turnLensTitle(turn: Turn): string {
  return `Turn ${turn.index}${typeof turn.advantage === 'number' ? ` · A ${formatSigned(turn.advantage)}` : ''}`;
}

/** "A +0.420 = backbone +0.300, tree +0.120" and the command, for the lens tooltip. */
export function turnLensTooltip(turn: Turn): string {
  const comps = formatComponents(turn.advantageComponents);
  const adv = typeof turn.advantage === 'number' ? `A ${formatSigned(turn.advantage)}${comps ? ` = ${comps}` : ''}\n` : '';
  return `${adv}$ ${turn.action.slice(0, 300)}`;
}

/** The lens next to it that opens the diff of the turn (the tooltip names the turn). */
export const DIFF_LENS_TITLE = '$(diff) Diff';

const fence = (s: string) => {
  const longest = Math.max(2, ...[...s.matchAll(/`+/g)].map((m) => m[0].length));
  const f = '`'.repeat(longest + 1);
  return { open: f, close: f };
};

/** Text from a trajectory (the policy's, a run folder's) as Markdown that renders as that text: no link, image or markup. */
export const escapeMarkdown = (s: string) => s.replace(/[\\`*_{}[\]()#+\-.!|<>~]/g, (c) => `\\${c}`).replace(/\n/g, ' ');

/** Hover markdown for a line a turn wrote: its command, exit code and advantage. */
export function turnHoverMarkdown(turn: Turn, traj: Pick<Trajectory, 'trajId' | 'reward'>): string {
  const action = turn.action.length > 1200 ? `${turn.action.slice(0, 1200)}\n…` : turn.action;
  const { open, close } = fence(action);
  const lines = [
    `**Turnwise · turn ${turn.index}** of ${escapeMarkdown(traj.trajId)}`,
    '',
    `${open}bash\n${action}\n${close}`,
    '',
    `exit ${turn.exitCode ?? '–'} · ${turn.cached ? 'replayed from an identical workspace' : `${turn.durationMs} ms`}${turn.formatError ? ` · format error: ${escapeMarkdown(turn.formatError)}` : ''}${turn.inherited ? ' · taken from the parent episode of this branch' : ''}`,
    '',
    `advantage **${formatSigned(turn.advantage)}**${turn.advantageComponents ? ` = ${formatComponents(turn.advantageComponents)}` : ''}`,
    '',
    `episode reward ${formatSigned(traj.reward?.reward)} · pass rate ${pct(traj.reward?.passRate)}${traj.reward?.resolved ? ' · resolved' : ''}`,
  ];
  return lines.join('\n');
}

export function pct(x: number | null | undefined): string {
  return typeof x === 'number' && Number.isFinite(x) ? `${Math.round(x * 100)}%` : '–';
}
