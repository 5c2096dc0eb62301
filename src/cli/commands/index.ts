// Every `turnwise` subcommand. Add yours here (one line), keeping the list sorted by name.
import type { CliCommand } from '../command';
import { advantagesCommand } from './advantages';
import { benchCreditCommand } from './bench-credit';
import { benchLearnCommand } from './bench-learn';
import { benchModelCommand } from './bench-model';
import { benchRolloutCommand } from './bench-rollout';
import { benchSandboxCommand } from './bench-sandbox';
import { benchTasksCommand } from './bench-tasks';
import { benchTrainCommand } from './bench-train';
import { benchTransferCommand } from './bench-transfer';
import { doctorCommand } from './doctor';
import { episodeCommand } from './episode';
import { imagesBuildCommand } from './images';
import { policyCommands } from './policy';
import { sandboxPruneCommand } from './sandbox';
import { serveCommand } from './serve';
import { tasksCommands } from './tasks';
import { trainCommands } from './train';

export const COMMANDS: CliCommand[] = [advantagesCommand, benchCreditCommand, benchLearnCommand, benchModelCommand, benchRolloutCommand, benchSandboxCommand, benchTasksCommand, benchTrainCommand, benchTransferCommand, doctorCommand, episodeCommand, imagesBuildCommand, ...policyCommands, sandboxPruneCommand, serveCommand, ...tasksCommands, ...trainCommands].sort((a, b) => a.name.localeCompare(b.name));
