// Estimators registered by name (verl-style): unknown or duplicate names raise, listing the
// valid ones; parameters are checked against each estimator's declared defaults.
import { TurnwiseError } from '../core/errors';
import { ESTIMATOR_NAMES } from './names';
import type { EstimatorContext, EstimatorResult, EstimatorSpec, ParamValue, Params, TurnRow } from './types';

const REGISTRY = new Map<string, EstimatorSpec>();

export function registerEstimator(spec: EstimatorSpec): void {
  if (!(ESTIMATOR_NAMES as readonly string[]).includes(spec.name)) {
    throw new TurnwiseError(
      'internal',
      `advantage estimator "${spec.name}" is not in ESTIMATOR_NAMES (credit/names.ts), the list every menu shows`,
    );
  }
  if (REGISTRY.has(spec.name)) {
    throw new TurnwiseError('internal', `advantage estimator "${spec.name}" is registered twice`, {
      hint: `registered: ${estimatorNames().join(', ')}`,
    });
  }
  REGISTRY.set(spec.name, spec);
}

export function estimatorNames(): string[] {
  return [...REGISTRY.keys()];
}

export function getEstimator(name: string): EstimatorSpec {
  const spec = REGISTRY.get(name);
  if (!spec) {
    throw new TurnwiseError('invalid-input', `unknown advantage estimator "${name}"`, {
      hint: `valid estimators: ${estimatorNames().join(', ')}`,
    });
  }
  return spec;
}

/** Defaults overlaid with `overrides`; unknown keys, wrong types and bad enum values raise. */
export function resolveParams(spec: EstimatorSpec, overrides: Partial<Params> = {}): Params {
  const out: Params = { ...spec.defaults };
  for (const [key, value] of Object.entries(overrides)) {
    if (value === undefined) continue;
    if (!Object.hasOwn(spec.defaults, key)) {
      throw new TurnwiseError('invalid-input', `estimator "${spec.name}" has no parameter "${key}"`, {
        hint: `its parameters: ${Object.keys(spec.defaults).join(', ') || '(none)'}`,
      });
    }
    const def = spec.defaults[key];
    const ok =
      (typeof def === 'number' && typeof value === 'number' && !Number.isNaN(value)) ||
      (typeof def === 'string' && typeof value === 'string') ||
      (Array.isArray(def) && Array.isArray(value) && value.every((v) => typeof v === 'number' && Number.isFinite(v)));
    if (!ok) {
      throw new TurnwiseError(
        'invalid-input',
        `parameter "${key}" of "${spec.name}" must be ${describe(def)}, got ${JSON.stringify(value)}`,
      );
    }
    const choices = spec.choices?.[key];
    if (choices && !choices.includes(value as string)) {
      throw new TurnwiseError(
        'invalid-input',
        `parameter "${key}" of "${spec.name}" must be one of ${choices.join(', ')}, got ${JSON.stringify(value)}`,
      );
    }
    out[key] = value;
  }
  return out;
}

function describe(def: ParamValue): string {
  return Array.isArray(def) ? 'a list of numbers' : typeof def === 'number' ? 'a number' : 'a string';
}

/** Parses CLI `key=value` strings into typed overrides, using each default's type. */
export function parseParamArgs(spec: EstimatorSpec, pairs: readonly string[]): Partial<Params> {
  const out: Partial<Params> = Object.create(null) as Partial<Params>;
  for (const pair of pairs) {
    const eq = pair.indexOf('=');
    if (eq <= 0)
      throw new TurnwiseError('invalid-input', `--param "${pair}" is not key=value`, {
        hint: 'e.g. --param gamma=0.9 --param scopes=1,2,-1',
      });
    const key = pair.slice(0, eq).trim();
    const raw = pair.slice(eq + 1).trim();
    // Own keys only: `constructor` or `__proto__` are not parameters of any estimator.
    const def = Object.hasOwn(spec.defaults, key) ? spec.defaults[key] : undefined;
    if (def === undefined) {
      throw new TurnwiseError('invalid-input', `estimator "${spec.name}" has no parameter "${key}"`, {
        hint: `its parameters: ${Object.keys(spec.defaults).join(', ') || '(none)'}`,
      });
    }
    if (typeof def === 'string') out[key] = raw;
    else if (Array.isArray(def)) out[key] = raw === '' ? [] : raw.split(',').map((s) => num(key, s));
    else out[key] = num(key, raw);
  }
  resolveParams(spec, out);
  return { ...out };
}

function num(key: string, s: string): number {
  const n = Number(s.trim());
  if (s.trim() === '' || !Number.isFinite(n)) throw new TurnwiseError('invalid-input', `--param ${key}: "${s}" is not a number`);
  return n;
}

/** Runs estimator `name` with defaults overlaid by `overrides`. */
export function computeAdvantages(
  name: string,
  rows: readonly TurnRow[],
  overrides: Partial<Params> = {},
  ctx: EstimatorContext = {},
): EstimatorResult {
  const spec = getEstimator(name);
  return spec.fn(rows, resolveParams(spec, overrides), ctx);
}
