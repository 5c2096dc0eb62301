// The model a run starts from, as the editor offers it: the embedded turnwise-tiny or a model
// folder (a Hugging Face checkpoint or Turnwise's own), checked from its config, safetensors
// headers and tokenizer files before a run starts (policy/hf.ts inspectModelFolder, no weights
// loaded), and the LoRA block of `turnwise.train.lora`. The same checks are Check Environment's
// "model" and "lora" lines. Loaded with the services bundle (it reads model files); plain Node,
// unit-tested in test/unit/extension/.
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Check } from '../../core/doctor';
import { adapterBaseDir } from '../../policy/checkpoint';
import { inspectModelFolder, type ModelInspection } from '../../policy/hf';
import { adapterParameterCount, LORA_MODULES, parseLoraConfig, type LoraConfig } from '../../policy/lora';
import { parseModelConfig } from '../../policy/config';
import { EMBEDDED_MODEL_NAME, resolveModelSetting } from './runModel';

export { resolveModelSetting };

/** What to pick instead, said after every refusal. */
export const PICK_INSTEAD = 'pick a folder that holds config.json, model.safetensors (or its shards with model.safetensors.index.json) and tokenizer.json, or the embedded turnwise-tiny';

/** A model folder that cannot start a run: `message` says what is wrong, `fix` what to do. */
export class ModelRefused extends Error {
  constructor(
    message: string,
    readonly fix: string,
  ) {
    super(message);
  }
}

export interface ModelSummary {
  dir: string;
  inspection: ModelInspection;
  /** One line: architecture, parameters, dtype, context, chat template. */
  summary: string;
}

const mib = (n: number) => `${(n / 2 ** 20).toFixed(n < 2 ** 30 ? 1 : 0)} MiB`;
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
  if (fs.existsSync(path.join(d, 'adapter_config.json')) && !fs.existsSync(path.join(d, 'config.json'))) {
    let base: string | undefined;
    try {
      base = adapterBaseDir(d);
    } catch {
      // its base is not here: said below without it
    }
    throw new ModelRefused(
      `${d} is a LoRA adapter${base ? ` trained on ${base}` : ''}, not a model`,
      base
        ? `pick its base ${base} (and train a LoRA adapter on it), or merge the adapter into a model folder first: turnwise policy merge --model ${base} --adapter ${d} --out DIR`
        : PICK_INSTEAD,
    );
  }
  if (!fs.existsSync(path.join(d, 'config.json'))) throw new ModelRefused(`${d} has no config.json, so it is not a model folder`, PICK_INSTEAD);
  let inspection: ModelInspection;
  try {
    inspection = inspectModelFolder(d);
  } catch (e) {
    const hint = (e as { hint?: string }).hint;
    throw new ModelRefused((e as Error).message, hint ? `${hint}; or ${PICK_INSTEAD}` : PICK_INSTEAD);
  }
  const i = inspection;
  const tmpl = i.chatTemplate ? `${i.chatTemplate.kind} chat template` : 'no chat template';
  const summary = `${i.architecture}, ${params(i.parameters)} parameters, ${i.storedDtypes.join('/')}, context ${i.context} tokens, ${tmpl}; weights ${mib(i.memory.weightsF32Bytes)} as float32`;
  return { dir: d, inspection, summary };
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
    const cfg = parseModelConfig(JSON.parse(fs.readFileSync(path.join(model.dir, 'config.json'), 'utf8')), path.join(model.dir, 'config.json'));
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
  if (raw === '') out.push({ name: 'model', status: 'ok', detail: `the embedded ${EMBEDDED_MODEL_NAME} (turnwise.train.model is empty; see the embedded policy check)` });
  else if (!workspace && !path.isAbsolute(raw)) {
    out.push({ name: 'model', status: 'fail', detail: `turnwise.train.model is ${JSON.stringify(raw)}, relative to a workspace, and no folder is open`, fix: 'open the repository to train on, or give the model folder as an absolute path' });
  } else {
    const dir = resolveModelSetting(workspace ?? '/', raw);
    try {
      model = checkModelFolder(dir);
      out.push({ name: 'model', status: 'ok', detail: `${dir}: ${model.summary}` });
    } catch (e) {
      const r = e instanceof ModelRefused ? e : new ModelRefused((e as Error).message, PICK_INSTEAD);
      out.push({ name: 'model', status: 'fail', detail: `turnwise.train.model: ${r.message}`, fix: `${r.fix}; or clear turnwise.train.model to train the embedded ${EMBEDDED_MODEL_NAME}` });
    }
  }
  if (loraSetting !== null && loraSetting !== undefined) {
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
