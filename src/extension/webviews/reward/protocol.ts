// Messages of the reward panel (host ↔ webview). Each says which way it travels.
import { message } from '../shared/ipc';
import type { EvalKindSummary } from '../../../eval/results';
import type { ReportTaskCell } from '../../../eval/report';

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

/** What the panel shows: a run's charts, or evaluation results files compared. */
export type PanelView = 'runs' | 'evals';

/** An evaluation results file (`turnwise eval --out`), as its header describes it. */
export interface EvalFileEntry {
  file: string;
  /** The file's name, relative to the workspace where it is inside it. */
  name: string;
  /** The model or endpoint evaluated. */
  label: string;
  kind: 'checkpoint' | 'endpoint' | 'episodes';
  tasks: number;
  samples: number;
  seed: number | null;
  createdAt?: string;
  complete: boolean;
}

/** PASS@(k,T): keyed by k, then by T. */
export type PassAtKTTable = Record<string, Record<string, number>>;

/** Several results files compared on the episodes they share (eval/report.ts, without the per-episode rows). */
export interface EvalComparison {
  models: {
    label: string;
    file: string;
    kind: 'checkpoint' | 'endpoint';
    greedy: EvalKindSummary | null;
    sampled: EvalKindSummary | null;
    pass_at_k_t: PassAtKTTable | null;
    maxTurns: number;
  }[];
  tasks: string[];
  episodes: { greedy: number; sampled: number };
  /** Compared on the episodes all files share (the files covered different ones). */
  intersection: boolean;
  notes: string[];
  per_task: { taskId: string; models: ReportTaskCell[] }[];
  /** What each later model changed against the first (eval/pass-curves.ts boundaryVerdict): its kind and its line. */
  boundary: { base: string; model: string; kind: string; line: string }[];
}

/** UI state kept by the webview (getState/setState) and restored by the serializer. */
export interface RewardPanelState {
  selected?: string;
  overlay?: string;
  view?: PanelView;
  /** The results files chosen for comparison. */
  evals?: string[];
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

// Evaluations view
// host → webview
/** Show this view (the host opened the panel on it). */
export const ViewNotification = message<{ view: PanelView }>()('view/set');
/** The results files found (the workspace's .turnwise/evals and any added), and which are chosen. */
export const EvalFilesNotification = message<{ files: EvalFileEntry[]; selected: string[] }>()('evals/list');
/** The chosen files compared; null with a reason when they cannot be. */
export const EvalComparisonNotification = message<{ comparison: EvalComparison | null; error?: string }>()('evals/comparison');
// webview → host
export const ShowViewCommand = message<{ view: PanelView }>()('view/show');
export const SelectEvalsCommand = message<{ files: string[] }>()('evals/select');
/** Asks the host for a file dialog to add results files from elsewhere. */
export const AddEvalFilesCommand = message<Record<string, never>>()('evals/add');
/** What the comparison drew: a heatmap per model (its k × T cells) and the table's rows. */
export const EvalRenderedNotification = message<{
  ms: number;
  models: number;
  rows: number;
  heatmaps: { label: string; ks: number; ts: number; cells: number; max: number | null }[];
  /** Pass curves drawn (one per model and T), and the verdict lines under them. */
  curves: number;
  verdicts: string[];
}>()('perf/evalsRendered');
