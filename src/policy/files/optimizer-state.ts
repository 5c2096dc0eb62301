// AdamW state as files hold it: `step` (an I64 scalar) and, per trained tensor, `exp_avg.<name>`
// and `exp_avg_sq.<name>` in the tensor's shape. A full checkpoint's names are its parameters'; a
// LoRA adapter's are its PEFT keys. Read back strictly: every moment present with its shape and
// dtype, nothing else.
import { TurnwiseError } from '../../core/errors';
import { numel, type TensorMap } from './safetensors';

/** AdamW moments in the trained tensors' layout, and the number of steps taken. */
export interface OptimizerState {
  step: number;
  expAvg: Map<string, Float32Array>;
  expAvgSq: Map<string, Float32Array>;
}

/** A trained tensor: its name in the state's files and its shape. */
export interface StateTensor {
  name: string;
  shape: readonly number[];
}

/** Zero moments for the given tensors, step 0. */
export function zeroState(tensors: Iterable<StateTensor>): OptimizerState {
  const expAvg = new Map<string, Float32Array>();
  const expAvgSq = new Map<string, Float32Array>();
  for (const p of tensors) {
    expAvg.set(p.name, new Float32Array(numel([...p.shape])));
    expAvgSq.set(p.name, new Float32Array(numel([...p.shape])));
  }
  return { step: 0, expAvg, expAvgSq };
}

/** The state as tensors (step, then each tensor's two moments). */
export function stateToTensors(tensors: Iterable<StateTensor>, s: OptimizerState): TensorMap {
  const m: TensorMap = new Map();
  m.set('step', { dtype: 'I64', shape: [], data: BigInt64Array.of(BigInt(s.step)) });
  for (const p of tensors) {
    m.set(`exp_avg.${p.name}`, { dtype: 'F32', shape: [...p.shape], data: s.expAvg.get(p.name)! });
    m.set(`exp_avg_sq.${p.name}`, { dtype: 'F32', shape: [...p.shape], data: s.expAvgSq.get(p.name)! });
  }
  return m;
}

/**
 * The state read from tensors for the given trained tensors. Throws, naming `source` and what it
 * should match, when a moment is missing, of another dtype or shape, or a tensor is unexpected.
 */
export function stateFromTensors(
  tensors: Iterable<StateTensor>,
  t: TensorMap,
  o: { source: string; matches: string; hint: string },
): OptimizerState {
  const problems: string[] = [];
  const step = t.get('step');
  if (!step || step.dtype !== 'I64' || step.data.length !== 1) problems.push('missing I64 scalar "step"');
  const expAvg = new Map<string, Float32Array>();
  const expAvgSq = new Map<string, Float32Array>();
  const known = new Set(['step']);
  for (const p of tensors) {
    for (const [prefix, into] of [
      ['exp_avg', expAvg],
      ['exp_avg_sq', expAvgSq],
    ] as const) {
      const name = `${prefix}.${p.name}`;
      known.add(name);
      const x = t.get(name);
      if (!x) problems.push(`missing tensor ${name}`);
      else if (x.dtype !== 'F32') problems.push(`${name} has dtype ${x.dtype}, expected F32`);
      else if (x.shape.join(',') !== p.shape.join(',')) problems.push(`${name} has shape [${x.shape}], expected [${p.shape}]`);
      else into.set(p.name, x.data as Float32Array);
    }
  }
  for (const name of t.keys()) if (!known.has(name)) problems.push(`unexpected tensor ${name}`);
  if (problems.length > 0)
    throw new TurnwiseError('invalid-file', `${o.source} does not match ${o.matches}:\n  ${problems.slice(0, 20).join('\n  ')}`, {
      hint: o.hint,
    });
  return { step: Number((step!.data as BigInt64Array)[0]), expAvg, expAvgSq };
}
