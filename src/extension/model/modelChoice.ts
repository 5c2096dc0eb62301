// The model a run starts from, as the editor offers it: the embedded turnwise-tiny or a model
// folder (a Hugging Face checkpoint or Turnwise's own), checked from its config, safetensors
// headers and tokenizer files before a run starts (policy/files/hf.ts inspectModelFolder, no weights
// loaded), and the LoRA block of `turnwise.train.lora`. A LoRA adapter folder (PEFT's layout, or
// a LoRA run's checkpoint) starts a run too, as the CLI loads one: over the base its
// adapter_config.json names, the run training that adapter further with its own settings; when
// that base is not a folder here (PEFT records a hub id), the editor asks for the base and keeps a
// copy of the adapter naming it under .turnwise/adapters/. The same checks are Check Environment's
// "model" and "lora" lines. Loaded with the services bundle (it reads model files); plain Node,
// unit-tested in test/unit/extension/.
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Check } from '../../core/doctor';
import { createHash } from 'node:crypto';
import { replaceDirAtomic } from '../../core/fs';
import { formatMiB } from '../../core/units';
import { inspectModelFolder, type ModelInspection } from '../../policy/files/hf';
import { adapterParameterCount, loadAdapter, LORA_MODULES, parseLoraConfig, type LoraConfig } from '../../policy/files/lora';
import { parseModelConfig } from '../../policy/model/config';
import { EMBEDDED_MODEL_NAME, resolveModelSetting } from './runModel';

export { resolveModelSetting };

/** What to pick instead, said after every refusal. */
export const PICK_INSTEAD =
  'pick a folder that holds config.json, model.safetensors (or its shards with model.safetensors.index.json) and tokenizer.json, or the embedded turnwise-tiny';

/** A model folder that cannot start a run: `message` says what is wrong, `fix` what to do. */
export class ModelRefused extends Error {
  constructor(
    message: string,
    readonly fix: string,
  ) {
    super(message);
  }
}

/**
 * A LoRA adapter folder whose adapter_config.json names a base that is not a model folder here
 * (a hub id, a folder moved away): the editor asks for the base (adapterOnBase).
 */
export class AdapterNeedsBase extends ModelRefused {
  constructor(
    message: string,
    fix: string,
    readonly adapterDir: string,
    /** The base as adapter_config.json names it. */
    readonly named: string,
  ) {
    super(message, fix);
  }
}

/** A run that starts from a LoRA adapter: the adapter, its base folder and its settings (the run keeps training it). */
export interface AdapterStart {
  dir: string;
  base: string;
  lora: LoraConfig;
}

export interface ModelSummary {
  /** The folder picked: a model folder, or an adapter folder (then `adapter`). */
  dir: string;
  /** The model's, or for an adapter its base's. */
  inspection: ModelInspection;
  /** One line: architecture, parameters, dtype, context, chat template (an adapter's first says what it is). */
  summary: string;
  adapter?: AdapterStart;
}

/** The LoRA block a run from this adapter trains with (its own settings, PEFT's field names). */
export function adapterLoraBlock(a: AdapterStart): Record<string, unknown> {
  const l = a.lora;
  return {
    r: l.r,
    lora_alpha: l.lora_alpha,
    lora_dropout: l.lora_dropout,
    target_modules: l.target_modules.length === LORA_MODULES.length ? 'all-linear' : [...l.target_modules],
    use_rslora: l.use_rslora,
  };
}

const isAdapterFolder = (d: string) => fs.existsSync(path.join(d, 'adapter_config.json')) && !fs.existsSync(path.join(d, 'config.json'));

function readAdapterConfig(d: string): { raw: Record<string, unknown>; lora: LoraConfig } {
  const file = path.join(d, 'adapter_config.json');
  let raw: unknown;
  try {
    raw = JSON.parse(fs.readFileSync(file, 'utf8').replace(/^\uFEFF/, ''));
  } catch (e) {
    throw new ModelRefused(`${file} is not valid JSON (${(e as Error).message})`, `use another copy of the adapter; or ${PICK_INSTEAD}`);
  }
  try {
    return { raw: raw as Record<string, unknown>, lora: parseLoraConfig(raw, file) };
  } catch (e) {
    throw new ModelRefused((e as Error).message, `${(e as { hint?: string }).hint ?? 'fix adapter_config.json'}; or ${PICK_INSTEAD}`);
  }
}

/** An adapter checked against a base folder: the base is a model, and every adapter tensor has the shape it needs. */
function adapterSummary(d: string, baseDir: string, lora: LoraConfig): ModelSummary {
  const base = checkModelFolder(baseDir);
  if (base.adapter)
    throw new ModelRefused(
      `${baseDir}, the base of the adapter ${d}, is itself a LoRA adapter`,
      `pick the model folder the adapters were trained on; or ${PICK_INSTEAD}`,
    );
  try {
    loadAdapter(
      d,
      parseModelConfig(JSON.parse(fs.readFileSync(path.join(base.dir, 'config.json'), 'utf8')), path.join(base.dir, 'config.json')),
    );
  } catch (e) {
    throw new ModelRefused((e as Error).message, `pick the model the adapter was trained on; or ${PICK_INSTEAD}`);
  }
  const adapter: AdapterStart = { dir: d, base: base.dir, lora };
  return {
    dir: d,
    inspection: base.inspection,
    summary: `LoRA adapter, ${describeLora(lora).replace(/^LoRA /, '')}, over ${base.dir}: ${base.summary}`,
    adapter,
  };
}
const params = (n: number) => (n >= 1e9 ? `${(n / 1e9).toFixed(2)}B` : n >= 1e5 ? `${(n / 1e6).toFixed(1)}M` : n.toLocaleString('en-US'));

/**
 * Checks a folder as a run's starting model; returns what it holds, or throws ModelRefused
 * naming what is wrong (no folder, a file, a LoRA adapter instead of a model, no config.json,
 * weights that do not match, an unsupported architecture…) and what to pick instead.
 */
export function checkModelFolder(dir: string): ModelSummary {
  const d = path.resolve(dir);
  let st: fs.Stats | undefined;
  try {
    st = fs.statSync(d);
  } catch {
    throw new ModelRefused(`${d} does not exist`, PICK_INSTEAD);
  }
  if (!st.isDirectory()) throw new ModelRefused(`${d} is a file, not a model folder`, PICK_INSTEAD);
  if (isAdapterFolder(d)) {
    const { raw, lora } = readAdapterConfig(d);
    const named = typeof raw.base_model_name_or_path === 'string' ? raw.base_model_name_or_path : '';
    const resolved = named ? path.resolve(d, named) : '';
    if (!resolved || !fs.existsSync(path.join(resolved, 'config.json'))) {
      throw new AdapterNeedsBase(
        named
          ? `${d} is a LoRA adapter trained on ${JSON.stringify(named)}, which is not a model folder here`
          : `${d} is a LoRA adapter whose adapter_config.json names no base model (base_model_name_or_path)`,
        'pick the folder of the model it was trained on (Start Training Run… asks for it), or write that folder into base_model_name_or_path in its adapter_config.json',
        d,
        named,
      );
    }
    return adapterSummary(d, resolved, lora);
  }
  if (!fs.existsSync(path.join(d, 'config.json')))
    throw new ModelRefused(`${d} has no config.json, so it is not a model folder`, PICK_INSTEAD);
  let inspection: ModelInspection;
  try {
    inspection = inspectModelFolder(d);
  } catch (e) {
    const hint = (e as { hint?: string }).hint;
    throw new ModelRefused((e as Error).message, hint ? `${hint}; or ${PICK_INSTEAD}` : PICK_INSTEAD);
  }
  const i = inspection;
  const tmpl = i.chatTemplate ? `${i.chatTemplate.kind} chat template` : 'no chat template';
  const summary = `${i.architecture}, ${params(i.parameters)} parameters, ${i.storedDtypes.join('/')}, context ${i.context} tokens, ${tmpl}; weights ${formatMiB(i.memory.weightsF32Bytes)} as float32`;
  return { dir: d, inspection, summary };
}

/**
 * An adapter whose named base is not here (AdapterNeedsBase), put on `baseDir`: checked against
 * it, then copied (the user's folder is left as it is) to `<workspace>/.turnwise/adapters/<name>`
 * with adapter_config.json naming the base's folder, which a run (and the CLI) loads like any
 * adapter folder. Returns the copy's summary.
 */
export function adapterOnBase(adapterDir: string, baseDir: string, workspace: string): ModelSummary {
  const d = path.resolve(adapterDir);
  const b = path.resolve(baseDir);
  const { raw, lora } = readAdapterConfig(d);
  adapterSummary(d, b, lora);
  const tag = createHash('sha256').update(d).digest('hex').slice(0, 8);
  const dest = path.join(path.resolve(workspace), '.turnwise', 'adapters', `${path.basename(d)}-${tag}`);
  replaceDirAtomic(dest, (tmp) => {
    for (const f of fs.readdirSync(d)) {
      const from = path.join(d, f);
      if (f !== 'adapter_config.json' && fs.statSync(from).isFile()) fs.copyFileSync(from, path.join(tmp, f));
    }
    fs.writeFileSync(path.join(tmp, 'adapter_config.json'), JSON.stringify({ ...raw, base_model_name_or_path: b }, null, 2) + '\n');
  });
  return checkModelFolder(dest);
}

/** The LoRA block a run would train (`turnwise.train.lora`), checked; undefined for the whole model. */
export function checkLoraSetting(value: unknown): LoraConfig | undefined {
  if (value === null || value === undefined) return undefined;
  try {
    return parseLoraConfig(value, 'the turnwise.train.lora setting');
  } catch (e) {
    const hint = (e as { hint?: string }).hint;
    throw new ModelRefused((e as Error).message, `${hint ? `${hint}, ` : ''}or set turnwise.train.lora to null to train the whole model`);
  }
}

/** One line about a LoRA block on a model: rank, scale, modules and its trained parameters. */
export function describeLora(l: LoraConfig, model?: ModelSummary): string {
  const mods = l.target_modules.length === LORA_MODULES.length ? 'all linear projections' : l.target_modules.join(', ');
  let size = '';
  if (model) {
    const dir = model.adapter?.base ?? model.dir;
    const cfg = parseModelConfig(JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8')), path.join(dir, 'config.json'));
    const n = adapterParameterCount(cfg, l);
    size = `; ${params(n)} trained parameters (${((100 * n) / model.inspection.parameters).toFixed(2)}% of the model)`;
  }
  return `LoRA r ${l.r}, lora_alpha ${l.lora_alpha}${l.use_rslora ? ', rsLoRA' : ''} on ${mods}${size}`;
}

/** The default adapter the editor offers when `turnwise.train.lora` holds none. */
export const DEFAULT_LORA = { r: 16, lora_alpha: 32, target_modules: 'all-linear' } as const;

/**
 * Check Environment's lines for the run's model: "model" (the folder of turnwise.train.model,
 * resolved against the workspace, checked as a run would load it; the embedded one is the
 * "embedded policy" check) and, when turnwise.train.lora is set, "lora".
 */
export function modelChecks(workspace: string | undefined, modelSetting: unknown, loraSetting: unknown): Check[] {
  const out: Check[] = [];
  const raw = typeof modelSetting === 'string' ? modelSetting.trim() : '';
  let model: ModelSummary | undefined;
  if (raw === '')
    out.push({
      name: 'model',
      status: 'ok',
      detail: `the embedded ${EMBEDDED_MODEL_NAME} (turnwise.train.model is empty; see the embedded policy check)`,
    });
  else if (!workspace && !path.isAbsolute(raw)) {
    out.push({
      name: 'model',
      status: 'fail',
      detail: `turnwise.train.model is ${JSON.stringify(raw)}, relative to a workspace, and no folder is open`,
      fix: 'open the repository to train on, or give the model folder as an absolute path',
    });
  } else {
    const dir = resolveModelSetting(workspace ?? '/', raw);
    try {
      model = checkModelFolder(dir);
      out.push({ name: 'model', status: 'ok', detail: `${dir}: ${model.summary}` });
    } catch (e) {
      const r = e instanceof ModelRefused ? e : new ModelRefused((e as Error).message, PICK_INSTEAD);
      out.push({
        name: 'model',
        status: 'fail',
        detail: `turnwise.train.model: ${r.message}`,
        fix: `${r.fix}; or clear turnwise.train.model to train the embedded ${EMBEDDED_MODEL_NAME}`,
      });
    }
  }
  if (model?.adapter) {
    // A run from an adapter keeps training it with its own settings; turnwise.train.lora is not read.
    out.push({
      name: 'lora',
      status: 'ok',
      detail: `${describeLora(model.adapter.lora, model)}: the adapter of turnwise.train.model, trained further with its own settings${loraSetting !== null && loraSetting !== undefined ? ' (turnwise.train.lora is not used)' : ''}`,
    });
  } else if (loraSetting !== null && loraSetting !== undefined) {
    try {
      const l = checkLoraSetting(loraSetting)!;
      out.push({ name: 'lora', status: 'ok', detail: describeLora(l, model) });
    } catch (e) {
      const r = e as ModelRefused;
      out.push({ name: 'lora', status: 'fail', detail: r.message, fix: r.fix });
    }
  }
  return out;
}
