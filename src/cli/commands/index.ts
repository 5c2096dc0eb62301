// Every `turnwise` subcommand. Add yours here (one line), keeping the list sorted by name.
import type { CliCommand } from '../command';
import { doctorCommand } from './doctor';
import { policyCommands } from './policy';

export const COMMANDS: CliCommand[] = [doctorCommand, ...policyCommands];
