// The shape of a `turnwise` subcommand. Each lives in src/cli/commands/<name>.ts and is a row of
// the command table (commands/index.ts); main.ts parses arguments with node:util parseArgs and dispatches.
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

/** Options that take a value (`--name VALUE`): parseArgs reads each as a string, the command checks it. */
export function valueOptions(...names: string[]): OptionSpec {
  return Object.fromEntries(names.map((n) => [n, { type: 'string' as const }]));
}

/** Options that are given or not (`--name`). */
export function flagOptions(...names: string[]): OptionSpec {
  return Object.fromEntries(names.map((n) => [n, { type: 'boolean' as const }]));
}

/** Reads a string option or throws a usage error naming it. */
export function requireString(args: ParsedArgs, name: string): string {
  const v = args.values[name];
  if (typeof v !== 'string' || v === '') throw new UsageError(`--${name} is required`);
  return v;
}

/** A comma-separated list option (`--repos a,b`), its items trimmed and empty ones dropped; `fallback` when not given. */
export function listOption<T extends readonly string[]>(args: ParsedArgs, name: string, fallback: T): string[] | T {
  const v = args.values[name];
  return typeof v === 'string'
    ? v
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean)
    : fallback;
}

export function optionalNumber(args: ParsedArgs, name: string, fallback: number): number {
  const v = args.values[name];
  if (v === undefined) return fallback;
  const n = Number(v);
  if (typeof v !== 'string' || v.trim() === '' || !Number.isFinite(n))
    throw new UsageError(`--${name} must be a number, got ${JSON.stringify(v)}`);
  return n;
}

/** A number option within [min, max] (inclusive unless `minExclusive`), checked before any work. */
export function numberInRange(
  args: ParsedArgs,
  name: string,
  fallback: number,
  range: { min?: number; max?: number; minExclusive?: boolean; integer?: boolean },
): number {
  const n = optionalNumber(args, name, fallback);
  const { min, max, minExclusive, integer } = range;
  const bad =
    (integer && !Number.isInteger(n)) || (min !== undefined && (minExclusive ? n <= min : n < min)) || (max !== undefined && n > max);
  if (bad) {
    const kind = integer ? 'an integer' : 'a number';
    const lo = min === undefined ? '' : minExclusive ? `greater than ${min}` : `at least ${min}`;
    const hi = max === undefined ? '' : `at most ${max}`;
    throw new UsageError(
      `--${name} must be ${kind}${lo || hi ? ' ' : ''}${[lo, hi].filter(Boolean).join(' and ')}, got ${JSON.stringify(args.values[name])}`,
    );
  }
  return n;
}

/** A string option that must be one of `choices` (`fallback` when not given). */
export function oneOf<T extends string>(args: ParsedArgs, name: string, choices: readonly T[], fallback: T): T {
  const v = args.values[name];
  const s = typeof v === 'string' ? v : fallback;
  if (!(choices as readonly string[]).includes(s))
    throw new UsageError(`--${name} must be one of ${choices.join(', ')}, got ${JSON.stringify(s)}`);
  return s as T;
}

/** Seeds are unsigned 32-bit integers (what the generators take); others would silently become another seed. */
export const MAX_SEED = 4294967295;

export function seedOption(args: ParsedArgs, name = 'seed'): number {
  return numberInRange(args, name, 0, { min: 0, max: MAX_SEED, integer: true });
}

export class UsageError extends Error {
  override name = 'UsageError';
}

/**
 * For a command with a mode that reads files named after a flag (`eval --report A B`, `bench
 * transfer --compare A B`): outside that mode, a file name is a mistake, said as such.
 */
export function refuseStrayFiles(args: ParsedArgs, flag: string): void {
  if (args.positionals.length)
    throw new UsageError(`unexpected argument ${JSON.stringify(args.positionals[0])}; results files to compare go after --${flag}`);
}
