// Hugging Face model folders: weights in one model.safetensors or in shards named by
// model.safetensors.index.json, generation_config.json's end-of-sequence ids, the chat template
// (tokenizer_config.json's `chat_template`, or chat_template.jinja beside it), and the writer of
// such folders (generated checkpoints for the tests and the model benchmark, in the exact layout
// transformers writes).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { TurnwiseError } from '../../core/errors';
import { readJsonFile, replaceDirAtomic, writeFileAtomic } from '../../core/fs';
import {
  biasesOf,
  configToJson,
  familyOf,
  headDim,
  kvBytesPerToken,
  MODEL_FAMILIES,
  parameterCount,
  paramSpecs,
  parseModelConfig,
  type ConfigDType,
  type ModelConfig,
} from '../model/config';
import { numel, readSafetensorsFile, readSafetensorsHeader, safetensorsParts, type SafeDType, type TensorMap } from './safetensors';
import { loadTokenizer } from './tokenizer';
import type { PolicyWeights } from '../model/weights';

export const WEIGHTS_FILE = 'model.safetensors';
export const WEIGHTS_INDEX = 'model.safetensors.index.json';

function readBytes(file: string, what: string): Uint8Array {
  try {
    return fs.readFileSync(file);
  } catch (e) {
    throw new TurnwiseError('not-found', `cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`, {
      hint: what,
    });
  }
}

/** What to do about a model folder's JSON file (config.json, the weights' index, the tokenizer's) that cannot be read or parsed. */
const FOLDER_JSON = {
  unreadable: 'the model folder is incomplete',
  invalid: 'the file is damaged; download or copy the model folder again',
};

/** The weight files of a folder: model.safetensors, or the shards its index names (in order). */
export function weightFiles(dir: string): { files: string[]; index?: string } {
  const single = path.join(dir, WEIGHTS_FILE);
  const indexFile = path.join(dir, WEIGHTS_INDEX);
  if (fs.existsSync(indexFile)) {
    const raw = readJsonFile(indexFile, FOLDER_JSON) as { weight_map?: unknown };
    const map = raw && typeof raw === 'object' ? raw.weight_map : undefined;
    if (!map || typeof map !== 'object' || Array.isArray(map) || !Object.values(map).every((v) => typeof v === 'string')) {
      throw new TurnwiseError('invalid-file', `${indexFile} has no weight_map of tensor name → shard file`, {
        hint: 'the index is damaged; copy the model folder again',
      });
    }
    const shards = [...new Set(Object.values(map as Record<string, string>))].sort();
    for (const s of shards) {
      if (s !== path.basename(s) || s.startsWith('.'))
        throw new TurnwiseError('invalid-file', `${indexFile} names a shard outside the folder: ${JSON.stringify(s)}`, {
          hint: 'a shard is a file name in the model folder',
        });
      if (!fs.existsSync(path.join(dir, s))) {
        throw new TurnwiseError('not-found', `shard ${s} named by ${indexFile} is missing from ${dir}`, {
          hint: `the folder is incomplete: copy every model-*.safetensors file (${shards.length} shard(s)) into it`,
        });
      }
    }
    return { files: shards.map((s) => path.join(dir, s)), index: indexFile };
  }
  if (fs.existsSync(single)) return { files: [single] };
  throw new TurnwiseError('not-found', `${dir} holds neither ${WEIGHTS_FILE} nor ${WEIGHTS_INDEX}`, {
    hint: 'give a model folder with its safetensors weights (PyTorch .bin files are not read)',
  });
}

/**
 * Every tensor of a folder's weights, from one file or its shards; a tensor in two shards, or in
 * a shard the index does not name it in, is an error naming both. Also returns the stored dtypes.
 */
export function readModelTensors(dir: string): { tensors: TensorMap; dtypes: Set<SafeDType>; files: string[] } {
  const { files, index } = weightFiles(dir);
  const expected = index ? (readJsonFile(index, FOLDER_JSON) as { weight_map: Record<string, string> }).weight_map : undefined;
  const tensors: TensorMap = new Map();
  const from = new Map<string, string>();
  const dtypes = new Set<SafeDType>();
  for (const f of files) {
    const part = readSafetensorsFile(f, 'the model folder is incomplete').tensors;
    for (const [name, t] of part) {
      const other = from.get(name);
      if (other)
        throw new TurnwiseError('invalid-file', `tensor ${name} is in both ${path.basename(other)} and ${path.basename(f)}`, {
          hint: 'the shards come from different models; copy the model folder again',
        });
      if (expected && expected[name] !== path.basename(f)) {
        throw new TurnwiseError(
          'invalid-file',
          `${index} puts ${name} in ${expected[name] ?? 'no shard'}, but it is in ${path.basename(f)}`,
          { hint: 'the index and the shards disagree; copy the model folder again' },
        );
      }
      from.set(name, f);
      tensors.set(name, t);
      dtypes.add(t.dtype);
    }
  }
  if (expected) {
    const missing = Object.keys(expected).filter((n) => !tensors.has(n));
    if (missing.length)
      throw new TurnwiseError(
        'invalid-file',
        `${index} names ${missing.length} tensor(s) no shard holds (${missing.slice(0, 3).join(', ')})`,
        { hint: 'a shard is truncated or from another model; copy the model folder again' },
      );
  }
  return { tensors, dtypes, files };
}

/** A tokenizer may have fewer entries than the model's vocab_size (padded embeddings), never more. */
export function assertTokenizerFits(tokFile: string, size: number, vocabSize: number): void {
  if (size > vocabSize) {
    throw new TurnwiseError('invalid-file', `${tokFile} has ${size} tokens but config.json vocab_size is ${vocabSize}`, {
      hint: 'the tokenizer belongs to another model; use the tokenizer.json saved with these weights',
    });
  }
}

/** End-of-sequence ids from generation_config.json (a number or a list), undefined without the file. */
export function generationEosIds(dir: string): number[] | undefined {
  const file = path.join(dir, 'generation_config.json');
  if (!fs.existsSync(file)) return undefined;
  const raw = readJsonFile(file, FOLDER_JSON) as { eos_token_id?: unknown };
  const v = raw && typeof raw === 'object' ? raw.eos_token_id : undefined;
  const list = Array.isArray(v) ? v : v === undefined || v === null ? [] : [v];
  if (!list.every((x) => Number.isInteger(x) && (x as number) >= 0)) {
    throw new TurnwiseError('invalid-file', `${file}: eos_token_id must be a token id or a list of them, got ${JSON.stringify(v)}`, {
      hint: "fix the file or remove it (config.json's eos_token_id is used then)",
    });
  }
  return list as number[];
}

/** The chat template: chat_template.jinja beside the tokenizer, else tokenizer_config.json's `chat_template` (a string, or the "default" of a list). */
export function chatTemplateOf(
  dir: string,
  tokenizerConfig: Record<string, unknown> | undefined,
): { template: string; source: string } | undefined {
  const jinja = path.join(dir, 'chat_template.jinja');
  if (fs.existsSync(jinja))
    return { template: Buffer.from(readBytes(jinja, 'the model folder is incomplete')).toString('utf8'), source: jinja };
  const t = tokenizerConfig?.chat_template;
  if (typeof t === 'string') return { template: t, source: path.join(dir, 'tokenizer_config.json') };
  if (Array.isArray(t)) {
    const d = t.find((x) => x && typeof x === 'object' && (x as { name?: unknown }).name === 'default') as
      { template?: unknown } | undefined;
    if (typeof d?.template === 'string') return { template: d.template, source: path.join(dir, 'tokenizer_config.json') };
  }
  return undefined;
}

const SAFE_DTYPE: Record<ConfigDType, SafeDType> = { float32: 'F32', float16: 'F16', bfloat16: 'BF16' };

export interface WriteModelOptions {
  dtype: ConfigDType;
  /** Split the weights into shards of about this many bytes (with an index); one file when absent. */
  shardBytes?: number;
  tokenizerJson: Record<string, unknown>;
  tokenizerConfig?: Record<string, unknown>;
  /** Written as generation_config.json when given. */
  generationConfig?: Record<string, unknown>;
}

/**
 * Writes a Hugging Face model folder (config.json with its torch_dtype, the weights as one
 * model.safetensors or as model-0000k-of-0000n.safetensors shards with an index, the tokenizer
 * files, generation_config.json), complete or not at all.
 */
/** Weights made tensor by tensor as the file is written (a folder larger than what one would hold in memory). */
export interface LazyWeights {
  config: ModelConfig;
  make: (name: string, shape: number[]) => Float32Array;
}

export function writeModelFolder(dir: string, w: PolicyWeights | LazyWeights, o: WriteModelOptions): void {
  const dtype = SAFE_DTYPE[o.dtype];
  const specs = paramSpecs(w.config);
  const groups: (typeof specs)[] = [[]];
  const sizeOf = (s: (typeof specs)[number]) => numel(s.shape) * (dtype === 'F32' ? 4 : 2);
  // The index's total_size: every tensor's bytes, whichever shard holds it.
  const total = specs.reduce((n, s) => n + sizeOf(s), 0);
  let bytes = 0;
  for (const s of specs) {
    const size = sizeOf(s);
    if (o.shardBytes !== undefined && bytes > 0 && bytes + size > o.shardBytes) {
      groups.push([]);
      bytes = 0;
    }
    groups[groups.length - 1].push(s);
    bytes += size;
  }
  const config: ModelConfig = { ...w.config, torch_dtype: o.dtype };
  replaceDirAtomic(path.resolve(dir), (tmp) => {
    const n = groups.length;
    const names = groups.map((_, i) =>
      o.shardBytes === undefined ? WEIGHTS_FILE : `model-${String(i + 1).padStart(5, '0')}-of-${String(n).padStart(5, '0')}.safetensors`,
    );
    const weightMap: Record<string, string> = {};
    groups.forEach((g, i) => {
      const m = new Map(
        g.map((s) => [
          s.name,
          'make' in w
            ? { dtype, shape: s.shape, make: () => w.make(s.name, s.shape) }
            : { dtype, shape: s.shape, data: w.tensors.get(s.name)! },
        ]),
      );
      writeFileAtomic(path.join(tmp, names[i]), safetensorsParts(m, { format: 'pt' }));
      for (const s of g) weightMap[s.name] = names[i];
    });
    if (o.shardBytes !== undefined)
      writeFileAtomic(
        path.join(tmp, WEIGHTS_INDEX),
        JSON.stringify({ metadata: { total_size: total }, weight_map: weightMap }, null, 2) + '\n',
      );
    writeFileAtomic(path.join(tmp, 'config.json'), JSON.stringify(configToJson(config), null, 2) + '\n');
    writeFileAtomic(path.join(tmp, 'tokenizer.json'), JSON.stringify(o.tokenizerJson) + '\n');
    if (o.tokenizerConfig) writeFileAtomic(path.join(tmp, 'tokenizer_config.json'), JSON.stringify(o.tokenizerConfig, null, 2) + '\n');
    if (o.generationConfig) writeFileAtomic(path.join(tmp, 'generation_config.json'), JSON.stringify(o.generationConfig, null, 2) + '\n');
  });
}

/** What `turnwise policy inspect` reports of a model folder. */
export interface ModelInspection {
  dir: string;
  family: string;
  architecture: string;
  parameters: number;
  /** dtype(s) the weight files store, and the config's torch_dtype. */
  storedDtypes: SafeDType[];
  configDtype?: ConfigDType;
  weightFiles: string[];
  layers: number;
  hidden: number;
  heads: { query: number; keyValue: number; dim: number };
  context: number;
  vocab: { config: number; tokenizer: number };
  rope: { theta: number; scaling: string };
  biases: { qkv: boolean; o: boolean; mlp: boolean };
  tiedEmbeddings: boolean;
  tokenizer: { kind: string; specialTokens: string[] };
  eosIds: number[];
  chatTemplate?: { source: string; kind: 'chatml' | 'llama3' | 'other'; chars: number };
  memory: {
    /** The weights as Turnwise holds them (float32). */
    weightsF32Bytes: number;
    /** Key and value cache per token of one sequence (float32). */
    kvBytesPerToken: number;
    /** One sequence filling the context. */
    kvBytesAtContext: number;
    /** Full fine-tuning with AdamW: weights, gradients and two moments, float32. */
    fullFineTuneBytes: number;
  };
}

/**
 * Describes a model folder from its config, safetensors headers and tokenizer files, without
 * reading the weights' data; checks every tensor's name and shape against the config (the error
 * names the file) the way loading would.
 */
export function inspectModelFolder(dir: string): ModelInspection {
  const d = path.resolve(dir);
  if (!fs.existsSync(d) || !fs.statSync(d).isDirectory())
    throw new TurnwiseError('not-found', `model folder ${d} does not exist`, {
      hint: 'give the folder that holds config.json, the safetensors weights and tokenizer.json',
    });
  const configFile = path.join(d, 'config.json');
  if (!fs.existsSync(configFile))
    throw new TurnwiseError('invalid-input', `${d} has no config.json, so it is not a model folder`, {
      hint: 'give a Hugging Face model folder (config.json, model.safetensors or shards, tokenizer.json)',
    });
  const config = parseModelConfig(readJsonFile(configFile, FOLDER_JSON), configFile);
  const { files } = weightFiles(d);
  const stored = new Map<string, { dtype: SafeDType; shape: number[]; file: string }>();
  for (const f of files) for (const [n, t] of readSafetensorsHeader(f)) stored.set(n, { ...t, file: f });
  const problems: string[] = [];
  for (const s of paramSpecs(config)) {
    const t = stored.get(s.name);
    if (!t) problems.push(`missing tensor ${s.name} [${s.shape}]`);
    else if (t.shape.join(',') !== s.shape.join(','))
      problems.push(`${s.name} (${path.basename(t.file)}) has shape [${t.shape}], the config needs [${s.shape}]`);
  }
  if (problems.length)
    throw new TurnwiseError('invalid-file', `the weights in ${d} do not match config.json:\n  ${problems.slice(0, 20).join('\n  ')}`, {
      hint: 'the weights and config.json come from different models',
    });
  const tokFile = path.join(d, 'tokenizer.json');
  if (!fs.existsSync(tokFile))
    throw new TurnwiseError('not-found', `${d} has no tokenizer.json`, {
      hint: "copy the model's tokenizer.json (and tokenizer_config.json) into the folder",
    });
  const tokenizerJson = readJsonFile(tokFile, FOLDER_JSON) as Record<string, unknown>;
  const tcFile = path.join(d, 'tokenizer_config.json');
  const tokenizerConfig = fs.existsSync(tcFile) ? (readJsonFile(tcFile, FOLDER_JSON) as Record<string, unknown>) : undefined;
  const tok = loadTokenizer(tokenizerJson, tokenizerConfig, tokFile);
  assertTokenizerFits(tokFile, tok.size, config.vocab_size);
  const added = Array.isArray(tokenizerJson.added_tokens)
    ? (tokenizerJson.added_tokens as { content?: unknown; special?: unknown }[])
        .filter((t) => t.special === true && typeof t.content === 'string')
        .map((t) => t.content as string)
    : [];
  const model = tokenizerJson.model as { type?: unknown; merges?: unknown } | undefined;
  const eos = [
    ...new Set([
      ...(config.eos_token_ids ?? (config.eos_token_id !== undefined ? [config.eos_token_id] : [])),
      ...(generationEosIds(d) ?? []),
    ]),
  ];
  const tmpl = chatTemplateOf(d, tokenizerConfig);
  const n = parameterCount(config);
  const hd = headDim(config);
  const kvPerToken = kvBytesPerToken(config);
  return {
    dir: d,
    family: familyOf(config),
    architecture: MODEL_FAMILIES[familyOf(config)].architecture,
    parameters: n,
    storedDtypes: [...new Set([...stored.values()].map((t) => t.dtype))].sort(),
    ...(config.torch_dtype ? { configDtype: config.torch_dtype } : {}),
    weightFiles: files.map((f) => path.basename(f)),
    layers: config.num_hidden_layers,
    hidden: config.hidden_size,
    heads: { query: config.num_attention_heads, keyValue: config.num_key_value_heads, dim: hd },
    context: config.max_position_embeddings,
    vocab: { config: config.vocab_size, tokenizer: tok.size },
    rope: {
      theta: config.rope_theta,
      scaling: config.rope_scaling
        ? `llama3 (factor ${config.rope_scaling.factor}, original context ${config.rope_scaling.original_max_position_embeddings})`
        : 'none',
    },
    biases: biasesOf(config),
    tiedEmbeddings: config.tie_word_embeddings,
    tokenizer: {
      kind: `${typeof model?.type === 'string' ? model.type : 'unknown'}${Array.isArray(model?.merges) ? `, ${model.merges.length} merges` : ''}`,
      specialTokens: added.slice(0, 12),
    },
    eosIds: eos,
    ...(tmpl
      ? {
          chatTemplate: {
            source: path.basename(tmpl.source),
            kind: /<\|im_start\|>/.test(tmpl.template)
              ? ('chatml' as const)
              : /<\|start_header_id\|>/.test(tmpl.template)
                ? ('llama3' as const)
                : ('other' as const),
            chars: tmpl.template.length,
          },
        }
      : {}),
    memory: {
      weightsF32Bytes: n * 4,
      kvBytesPerToken: kvPerToken,
      kvBytesAtContext: kvPerToken * config.max_position_embeddings,
      fullFineTuneBytes: n * 16,
    },
  };
}
