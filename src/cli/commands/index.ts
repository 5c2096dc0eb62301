// Every `turnwise` subcommand. Add yours here (one line), keeping the list sorted by name.
import type { CliCommand } from '../command';
import { benchSandboxCommand } from './bench-sandbox';
import { doctorCommand } from './doctor';
import { imagesBuildCommand } from './images';
import { policyCommands } from './policy';
import { sandboxPruneCommand } from './sandbox';

export const COMMANDS: CliCommand[] = [benchSandboxCommand, doctorCommand, imagesBuildCommand, ...policyCommands, sandboxPruneCommand];
