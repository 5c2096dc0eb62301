// Messages of the reward panel (host ↔ webview). Each says which way it travels.
import { message } from '../shared/ipc';

export { ReadyCommand } from '../shared/ipc';

export interface RunEntry {
  runId: string;
  state: string;
  estimator?: string;
  iterations?: number;
  /** The model the run trained, short (`turnwise-tiny`, `Qwen2.5-0.5B + LoRA r 16`). */
  model?: string;
  /** One line for the model and one for the adapter. */
  modelDetails?: string[];
}

/** One metrics.jsonl row reduced to its numbers. */
export type MetricsPoint = { iteration: number } & Record<string, number | null>;

export interface TaskTable {
  iterations: number[];
  rows: Array<{ taskId: string; split: 'train' | 'heldout'; passRates: Array<number | null> }>;
}

export interface AdvantageHistogram {
  iteration: number;
  /** Bin edges (bins + 1 values). */
  edges: number[];
  /** Counts per bin for each component ("total" = the advantage itself). */
  counts: Record<string, number[]>;
  turns: number;
}

export type RunRole = 'main' | 'overlay';

/** UI state kept by the webview (getState/setState) and restored by the serializer. */
export interface RewardPanelState {
  selected?: string;
  overlay?: string;
}

// host → webview
/** The runs of the workspace, and which are shown. */
export const RunsNotification = message<{ runs: RunEntry[]; selected?: string; overlay?: string }>()('runs/list');
/** All metrics of a run (sent again, whole, when it grows: small even at 1,000 iterations). */
export const MetricsNotification = message<{ runId: string; role: RunRole; points: MetricsPoint[] }>()('run/metrics');
/** Pass rate per task across iterations. */
export const TasksNotification = message<{ runId: string; role: RunRole; table: TaskTable }>()('run/tasks');
/** Distribution of per-turn advantages by component, for the latest iteration with advantages. */
export const AdvantagesNotification = message<{ runId: string; role: RunRole; histogram: AdvantageHistogram | null }>()('run/advantages');
/** The overlay was removed. */
export const ClearOverlayNotification = message<Record<string, never>>()('run/clearOverlay');

// webview → host
export const SelectRunCommand = message<{ runId: string }>()('run/select');
export const OverlayRunCommand = message<{ runId: string | null }>()('run/overlay');
/** How long the last chart update took (measured in the page). */
export const RenderedNotification = message<{ ms: number; iterations: number; charts: number; points: number }>()('perf/rendered');
