// The shape of a `turnwise` subcommand. Each lives in src/cli/commands/<name>.ts and is listed
// in commands/index.ts; main.ts parses arguments with node:util parseArgs and dispatches.
import type { ParseArgsConfig } from 'node:util';

export type OptionSpec = NonNullable<ParseArgsConfig['options']>;

export interface CliIO {
  /** Machine-readable output (`--json`) or the human report goes here. */
  out(text: string): void;
  /** Progress and warnings; never parsed. */
  err(text: string): void;
  json: boolean;
}

export interface ParsedArgs {
  values: Record<string, string | boolean | string[] | boolean[] | undefined>;
  positionals: string[];
}

export interface CliCommand {
  /** Words after `turnwise`, e.g. "doctor" or "tasks synth". */
  name: string;
  summary: string;
  /** Usage line after the command name, e.g. "--workspace DIR --out FILE [--seed S]". */
  usage?: string;
  options?: OptionSpec;
  allowPositionals?: boolean;
  /** Returns the process exit code. */
  run(args: ParsedArgs, io: CliIO): Promise<number>;
}

/** Reads a string option or throws a usage error naming it. */
export function requireString(args: ParsedArgs, name: string): string {
  const v = args.values[name];
  if (typeof v !== 'string' || v === '') throw new UsageError(`--${name} is required`);
  return v;
}

export function optionalNumber(args: ParsedArgs, name: string, fallback: number): number {
  const v = args.values[name];
  if (v === undefined) return fallback;
  const n = Number(v);
  if (typeof v !== 'string' || !Number.isFinite(n)) throw new UsageError(`--${name} must be a number, got ${JSON.stringify(v)}`);
  return n;
}

export class UsageError extends Error {
  override name = 'UsageError';
}
