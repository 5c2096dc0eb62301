// Errors that reach a user: what happened, and what to do about it.

/** Stable machine-readable error codes; the CLI's `--json` output carries them. */
export type ErrorCode =
  | 'docker-unreachable'
  | 'docker-image-missing'
  | 'docker-out-of-disk'
  | 'sandbox-failed'
  | 'invalid-input'
  | 'invalid-file'
  | 'not-found'
  | 'runtime-unavailable'
  | 'test-report'
  | 'stopped'
  | 'internal';

/**
 * An error meant for the user. `message` says what happened; `hint` says what to do.
 * Everything the CLI and the extension show comes through `formatError`.
 */
export class TurnwiseError extends Error {
  readonly code: ErrorCode;
  readonly hint?: string;
  constructor(code: ErrorCode, message: string, options?: { hint?: string; cause?: unknown }) {
    super(message, options?.cause !== undefined ? { cause: options.cause } : undefined);
    this.name = 'TurnwiseError';
    this.code = code;
    this.hint = options?.hint;
  }
}

export function isTurnwiseError(e: unknown): e is TurnwiseError {
  return e instanceof TurnwiseError;
}

/** One or two lines for a terminal or a notification. */
export function formatError(e: unknown): string {
  if (e instanceof TurnwiseError) return e.hint ? `${e.message}\n  → ${e.hint}` : e.message;
  if (e instanceof Error) return e.message;
  return String(e);
}

/** A JSON-safe description of an error for `--json` output. */
export function errorToJson(e: unknown): { code: ErrorCode; message: string; hint?: string } {
  if (e instanceof TurnwiseError) return { code: e.code, message: e.message, ...(e.hint ? { hint: e.hint } : {}) };
  return { code: 'internal', message: e instanceof Error ? e.message : String(e) };
}
