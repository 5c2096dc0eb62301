// Every `turnwise` subcommand, in one table: a row per command, its words after `turnwise` → the
// command object of its module (commands/<name>.ts; `bench <name>` in commands/bench/<name>.ts;
// `policy …` and `tasks …` in policy.ts and tasks.ts). Add yours as a row, keeping them sorted; a
// unit test checks that each row's name is its command's and that every command is in a row.
import type { CliCommand } from '../command';
import { advantagesCommand } from './advantages';
import { benchCreditCommand } from './bench/credit';
import { benchLearnCommand } from './bench/learn';
import { benchModelCommand } from './bench/model';
import { benchRolloutCommand } from './bench/rollout';
import { benchSandboxCommand } from './bench/sandbox';
import { benchTasksCommand } from './bench/tasks';
import { benchTrainCommand } from './bench/train';
import { benchTransferCommand } from './bench/transfer';
import { demoCommand } from './demo';
import { doctorCommand } from './doctor';
import { episodeCommand } from './episode';
import { evalCommand } from './eval';
import { imagesBuildCommand } from './images';
import {
  policyExportCommand,
  policyGenerateCommand,
  policyInitCommand,
  policyInspectCommand,
  policyLogitsCommand,
  policyMergeCommand,
} from './policy';
import { sandboxPruneCommand } from './sandbox';
import { serveCommand } from './serve';
import { tasksCheckCommand, tasksFailingCommand, tasksReachCommand, tasksSynthCommand } from './tasks';

import { trainCommand } from './train';
import { warmstartCommand } from './warmstart';

export const COMMAND_TABLE: Readonly<Record<string, CliCommand>> = {
  advantages: advantagesCommand,
  'bench credit': benchCreditCommand,
  'bench learn': benchLearnCommand,
  'bench model': benchModelCommand,
  'bench rollout': benchRolloutCommand,
  'bench sandbox': benchSandboxCommand,
  'bench tasks': benchTasksCommand,
  'bench train': benchTrainCommand,
  'bench transfer': benchTransferCommand,
  demo: demoCommand,
  doctor: doctorCommand,
  episode: episodeCommand,
  eval: evalCommand,
  'images build': imagesBuildCommand,
  'policy export': policyExportCommand,
  'policy generate': policyGenerateCommand,
  'policy init': policyInitCommand,
  'policy inspect': policyInspectCommand,
  'policy logits': policyLogitsCommand,
  'policy merge': policyMergeCommand,
  'sandbox prune': sandboxPruneCommand,
  serve: serveCommand,
  'tasks check': tasksCheckCommand,
  'tasks failing': tasksFailingCommand,
  'tasks reach': tasksReachCommand,
  'tasks synth': tasksSynthCommand,
  train: trainCommand,
  warmstart: warmstartCommand,
};

/** The commands, sorted by name: what `turnwise --help` lists and main.ts dispatches to. */
export const COMMANDS: CliCommand[] = Object.values(COMMAND_TABLE).sort((a, b) => a.name.localeCompare(b.name));
