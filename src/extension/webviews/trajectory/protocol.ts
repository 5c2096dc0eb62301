// Messages of the trajectory viewer (host ↔ webview). Each says which way it travels.
import { message } from '../shared/ipc';
import type { AdvantageStyle } from '../../model/turnView';
import type { TrajectoryActionFormat } from '../../model/runModel';

export { ReadyCommand } from '../shared/ipc';

export interface TurnRow {
  index: number;
  /** The command run (or `submit`); for a format error, what did not parse. */
  action: string;
  /** A chat model's whole reply, of which `action` is the one bash block's command. */
  reply?: string;
  observation: string;
  exitCode: number | null;
  durationMs: number;
  /** Replayed from the run's observation cache (the command did not run again). */
  cached?: boolean;
  /** A branch's turn taken from its parent episode (run again, not written or trained here). */
  inherited?: boolean;
  formatError?: string;
  /** What went wrong in the turn (agent/diagnosis.ts). */
  labels?: string[];
  intentSignature?: string[];
  editSignature?: string[];
  advantage?: number;
  advantageComponents?: Record<string, number>;
  style: AdvantageStyle;
  files: string[];
}

export interface TrajectoryView {
  title: string;
  trajId: string;
  taskId: string;
  iteration?: number;
  split?: string;
  checkpoint: string;
  /** The action format the checkpoint wrote in (its action_format.json), when recorded. */
  actionFormat?: TrajectoryActionFormat;
  reward: {
    reward: number | null;
    passRate: number | null;
    resolved: boolean;
    turns: number;
    efficiencyPenalty?: number;
    formatPenalty?: number;
    repeats?: number;
    repeatPenalty?: number;
    testsEdited?: boolean;
    tampered?: string;
    error?: string;
  };
  tests?: { passed: number; failed: number; errors: number; failedNames: string[] };
  failure?: string;
  /** A branch: the episode it continues and the turns it took from it. */
  branch?: { parent: string; at: number; shared: number };
  turns: TurnRow[];
}

/** Viewer UI state kept by the webview (getState/setState) and restored by the serializer. */
export interface TrajectoryPanelState {
  ref?: unknown;
  turn?: number;
}

// host → webview
export const ShowTrajectoryNotification = message<{ view: TrajectoryView; current: number; state: TrajectoryPanelState }>()(
  'trajectory/show',
);
export const CurrentTurnNotification = message<{ index: number }>()('turn/current');

// webview → host
export const SelectTurnCommand = message<{ index: number }>()('turn/select');
export const ShowDiffCommand = message<{ index: number; path: string }>()('turn/showDiff');
/** Open the file as it is after the current turn, with the turns' decorations. */
export const OpenFileCommand = message<{ path: string }>()('file/open');
