// `turnwise policy init | inspect | logits | generate | merge | export`: create, describe, sample,
// merge and export the ONNX policy.
import { TurnwiseError } from '../../core/errors';
import { escapeControlChars } from '../../core/text';
import { ollamaChat } from '../../agent/ollama-template';
import { formatMiB } from '../../core/units';
import { initPolicyDir, loadPolicy, mergeAdapterFolder, type Policy } from '../../policy';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parseModelConfig } from '../../policy/model/config';
import {
  halfBytesPerToken,
  halfSessionBytes,
  quantizedBytesPerToken,
  quantizedSessionBytes,
  rolloutPrecisionFor,
} from '../../policy/model/quantize';
import { availableDeviceMemory } from '../../policy/model/memory';
import { inspectModelFolder } from '../../policy/files/hf';
import { inspectAdapterFolder, parseLoraConfig } from '../../policy/files/lora';
import { exportGguf, GGUF_WEIGHT_TYPES } from '../../policy/files/gguf-export';
import { TRAIN_DEFAULTS } from '../../train/config';
import { runMemoryPlan } from '../../train/memory-plan';
import {
  flagOptions,
  numberInRange,
  oneOf,
  requireString,
  seedOption,
  UsageError,
  valueOptions,
  type CliCommand,
  type CliIO,
  type ParsedArgs,
} from '../command';
import { PROVIDER_USAGE, providerOption } from './options';

/** `--adapter DIR`: a LoRA adapter folder (PEFT layout) on top of --model. */
function adapterOption(args: ParsedArgs): { adapter?: string } {
  const a = args.values.adapter;
  return typeof a === 'string' ? { adapter: a } : {};
}

/** The policy of --model DIR [--adapter DIR] on --provider, for `use`; disposed after it. */
async function withPolicy<T>(args: ParsedArgs, io: CliIO, use: (policy: Policy) => Promise<T>): Promise<T> {
  const policy = loadPolicy(
    requireString(args, 'model'),
    { provider: providerOption(args), onWarning: (m) => io.err(`warning: ${m}`) },
    adapterOption(args),
  );
  try {
    return await use(policy);
  } finally {
    await policy.dispose();
  }
}

export const policyInitCommand: CliCommand = {
  name: 'policy init',
  summary: 'write a randomly initialized model (safetensors, config.json, tokenizer.json) to a directory',
  usage: '--out DIR [--size tiny] [--seed S] [--force] [--json]',
  options: { ...valueOptions('out', 'size', 'seed'), ...flagOptions('force') },
  async run(args, io) {
    const seed = seedOption(args);
    const r = initPolicyDir(requireString(args, 'out'), {
      size: (args.values.size as string | undefined) ?? 'tiny',
      seed,
      force: args.values.force === true,
    });
    if (io.json) io.out(JSON.stringify({ ok: true, ...r }, null, 2));
    else io.out(`wrote turnwise-${r.size} (${(r.parameters / 1e6).toFixed(2)}M parameters, seed ${r.seed}) to ${r.dir}`);
    return 0;
  },
};

export const policyInspectCommand: CliCommand = {
  name: 'policy inspect',
  summary: "describe a model folder (a Hugging Face checkpoint or Turnwise's own) without loading its weights",
  usage: `DIR ${PROVIDER_USAGE} [--json]`,
  options: valueOptions('provider'),
  allowPositionals: true,
  async run(args, io) {
    const dir = args.positionals[0];
    if (!dir || args.positionals.length > 1) throw new UsageError('give one model folder: turnwise policy inspect DIR');
    // An adapter folder (PEFT's layout, no config.json of its own): the adapter and its base.
    if (fs.existsSync(path.join(dir, 'adapter_config.json')) && !fs.existsSync(path.join(dir, 'config.json'))) {
      const a = inspectAdapterFolder(dir);
      if (io.json) io.out(JSON.stringify({ ok: true, ...a }, null, 2));
      else {
        io.out(`${a.dir}
  LoRA adapter  r ${a.r}, alpha ${a.loraAlpha}${a.useRslora ? ', rsLoRA' : ''}: B·A scaled by ${Number(a.scale.toPrecision(6))}; dropout ${a.loraDropout}
  targets       ${a.targetModules.join(', ')} in every layer
  base          ${a.base.named ? JSON.stringify(a.base.named) : 'not named (base_model_name_or_path)'}${a.base.found ? `, found: ${a.base.found}` : a.base.named ? ', not a model folder here: give it with --model BASE --adapter DIR' : ''}`);
      }
      return 0;
    }
    const r = inspectModelFolder(dir);
    // The memory plan of a run at the default settings on this machine, training the model or a LoRA adapter.
    const config = parseModelConfig(JSON.parse(fs.readFileSync(path.join(r.dir, 'config.json'), 'utf8')));
    const lora = parseLoraConfig({ target_modules: 'all-linear' }, 'the default LoRA block');
    // --provider: the plans on that provider (a GPU's device memory beside the host's).
    const settings = {
      ...TRAIN_DEFAULTS,
      executionProvider: args.values.provider !== undefined ? providerOption(args) : TRAIN_DEFAULTS.executionProvider,
    };
    const plans = { full: runMemoryPlan(settings, config), lora: runMemoryPlan({ ...settings, lora }, config) };
    const onDevice = plans.full.plan.input.provider;
    const device = plans.full.plan.device > 0 ? availableDeviceMemory() : undefined;
    // What sampling reads per token at each rollout precision, and what the quantized or half-precision copies hold.
    const rollouts = {
      default: rolloutPrecisionFor(TRAIN_DEFAULTS.rolloutPrecision, onDevice, r.memory.weightsF32Bytes).precision,
      float32: { bytesPerToken: r.memory.weightsF32Bytes },
      int8: { bytesPerToken: quantizedBytesPerToken(config, 8), sessionBytes: quantizedSessionBytes(config, 8) },
      int4: { bytesPerToken: quantizedBytesPerToken(config, 4), sessionBytes: quantizedSessionBytes(config, 4) },
      float16: { bytesPerToken: halfBytesPerToken(config), sessionBytes: halfSessionBytes(config) },
    };
    if (io.json) {
      const planJson = (p: (typeof plans)['full']) => ({
        hostBytes: p.plan.host,
        deviceBytes: p.plan.device,
        updateTokensPerStep: p.updateTokens,
        context: p.plan.input.context,
        episodes: p.plan.input.episodes,
        parts: p.plan.parts,
      });
      io.out(
        JSON.stringify(
          {
            ok: true,
            ...r,
            rolloutPrecision: rollouts,
            memoryPlan: {
              provider: onDevice,
              limitBytes: plans.full.limit.bytes,
              limitSource: plans.full.limit.source,
              deviceLimitBytes: device?.bytes ?? null,
              deviceLimitSource: device?.source ?? null,
              full: planJson(plans.full),
              lora: planJson(plans.lora),
            },
          },
          null,
          2,
        ),
      );
      return 0;
    }
    io.out(`${r.dir}
  architecture  ${r.architecture} (${r.family}), ${(r.parameters / 1e6).toFixed(1)}M parameters
  weights       ${r.storedDtypes.join(', ')} in ${r.weightFiles.length === 1 ? r.weightFiles[0] : `${r.weightFiles.length} shards`}${r.configDtype ? ` (config: ${r.configDtype})` : ''}; held as float32
  layers        ${r.layers} × hidden ${r.hidden}, ${r.heads.query} query / ${r.heads.keyValue} key-value heads of ${r.heads.dim}
  context       ${r.context} tokens; rope θ ${r.rope.theta}, scaling ${r.rope.scaling}
  biases        q/k/v ${r.biases.qkv ? 'yes' : 'no'}, o ${r.biases.o ? 'yes' : 'no'}, mlp ${r.biases.mlp ? 'yes' : 'no'}; ${r.tiedEmbeddings ? 'tied' : 'untied'} output head
  tokenizer     ${r.tokenizer.kind}; ${r.vocab.tokenizer} tokens (config vocab ${r.vocab.config}); end-of-sequence ids ${r.eosIds.join(', ') || 'none'}
  special       ${r.tokenizer.specialTokens.map(escapeControlChars).join(' ') || 'none'}
  chat template ${r.chatTemplate ? `${r.chatTemplate.kind} (${r.chatTemplate.source}, ${r.chatTemplate.chars} characters)` : 'none'}
  memory        weights ${formatMiB(r.memory.weightsF32Bytes)}; KV cache ${formatMiB(r.memory.kvBytesPerToken * 1024)} per 1,024 tokens of a sequence (${formatMiB(r.memory.kvBytesAtContext)} at full context); full fine-tuning with AdamW ${formatMiB(r.memory.fullFineTuneBytes)}
  rollouts      ${rollouts.default} by default (rolloutPrecision); a sampled token reads ${formatMiB(rollouts.float32.bytesPerToken)} of weights in float32, ${formatMiB(rollouts.int8.bytesPerToken)} at int8, ${formatMiB(rollouts.int4.bytesPerToken)} at int4 (their sessions hold ${formatMiB(rollouts.int8.sessionBytes)} / ${formatMiB(rollouts.int4.sessionBytes)}; CPU), ${formatMiB(rollouts.float16.bytesPerToken)} at float16 (a ${formatMiB(rollouts.float16.sessionBytes)} copy; GPU)`);
    io.out(
      `  a run at the default settings on this machine${args.values.provider !== undefined ? ` (${onDevice})` : ''} (turnwise train refuses one that does not fit):`,
    );
    for (const p of [plans.full, plans.lora]) for (const line of p.lines) io.out(`  ${line}`);
    if (plans.full.plan.device > 0)
      io.out(
        `  device memory: ${device ? `${formatMiB(device.bytes)} (${device.source})` : 'unknown (set TURNWISE_DEVICE_MEMORY_LIMIT_MB to have runs checked against it)'}`,
      );
    return 0;
  },
};

function parseIds(text: string): number[] {
  const ids = text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '')
    .map(Number);
  if (ids.length === 0 || ids.some((n) => !Number.isInteger(n)))
    throw new UsageError(`--ids must be comma-separated token ids, got ${JSON.stringify(text)}`);
  return ids;
}

export const policyLogitsCommand: CliCommand = {
  name: 'policy logits',
  summary: 'print the logits at every position for a sequence of token ids',
  usage: `--model DIR [--adapter DIR] (--ids 1,2,3 | --text TEXT) ${PROVIDER_USAGE} [--json]`,
  options: valueOptions('model', 'adapter', 'ids', 'text', 'provider'),
  async run(args, io) {
    if (typeof args.values.ids !== 'string' && typeof args.values.text !== 'string') throw new UsageError('--ids or --text is required');
    const given = typeof args.values.ids === 'string' ? parseIds(args.values.ids) : undefined;
    return withPolicy(args, io, async (policy) => {
      const ids = given ?? policy.tokenizer!.encode(args.values.text as string);
      const V0 = policy.config.vocab_size;
      const outside = ids.find((i) => i < 0 || i >= V0);
      if (outside !== undefined)
        throw new TurnwiseError('invalid-input', `token id ${outside} is outside the vocabulary (0 … ${V0 - 1})`, {
          hint: `give --ids between 0 and ${V0 - 1}`,
        });
      if (ids.length === 0) throw new TurnwiseError('invalid-input', 'the text encodes to no tokens', { hint: 'give a non-empty --text' });
      const [flat] = await policy.logits([ids]);
      const V = policy.config.vocab_size;
      const rows = ids.map((_, t) => Array.from(flat.subarray(t * V, (t + 1) * V)));
      if (io.json) {
        io.out(JSON.stringify({ ok: true, ids, vocab_size: V, provider: await policy.provider, logits: rows }));
      } else {
        for (let t = 0; t < ids.length; t++) {
          const top = rows[t]
            .map((v, i) => [v, i] as const)
            .sort((a, b) => b[0] - a[0])
            .slice(0, 5);
          const show = (i: number) => JSON.stringify(policy.tokenizer?.decode([i]) ?? String(i));
          io.out(`${t}\t${ids[t]}\t→ ${top.map(([v, i]) => `${i} ${show(i)} ${v.toFixed(3)}`).join('  ')}`);
        }
      }
      return 0;
    });
  },
};

export const policyGenerateCommand: CliCommand = {
  name: 'policy generate',
  summary: 'sample a continuation of a prompt with the KV cache',
  usage: `--model DIR [--adapter DIR] --prompt TEXT [--max-tokens N] [--temperature T] [--top-p P] [--seed S] ${PROVIDER_USAGE} [--json]`,
  options: valueOptions('model', 'adapter', 'prompt', 'max-tokens', 'temperature', 'top-p', 'seed', 'provider'),
  async run(args, io) {
    const prompt = requireString(args, 'prompt');
    const maxNewTokens = numberInRange(args, 'max-tokens', 64, { min: 1, integer: true });
    const temperature = numberInRange(args, 'temperature', 1, { min: 0 });
    const topP = numberInRange(args, 'top-p', 1, { min: 0, max: 1, minExclusive: true });
    const seed = seedOption(args);
    return withPolicy(args, io, async (policy) => {
      const t0 = performance.now();
      const [r] = await policy.generate([prompt], {
        maxNewTokens,
        temperature,
        topP,
        seed,
      });
      const ms = performance.now() - t0;
      if (io.json) {
        io.out(
          JSON.stringify(
            {
              ok: true,
              text: r.text,
              token_ids: r.tokenIds,
              logprobs: r.logprobs,
              finish_reason: r.finishReason,
              provider: await policy.provider,
              ms: Math.round(ms),
            },
            null,
            2,
          ),
        );
      } else {
        // An untrained model emits arbitrary bytes: ESC sequences would reach the terminal.
        io.out(escapeControlChars(r.text));
        io.err(`${r.tokenIds.length} tokens in ${ms.toFixed(0)} ms (${r.finishReason})`);
        if (r.tokenIds.length === 0)
          io.err(
            `the prompt fills the model's context (max_position_embeddings ${policy.config.max_position_embeddings}): shorten it to leave room`,
          );
      }
      return 0;
    });
  },
};

export const policyMergeCommand: CliCommand = {
  name: 'policy merge',
  summary: 'fold a LoRA adapter into its base model and write a Hugging Face folder (the base dtype, its tokenizer files)',
  usage: '--model BASE --adapter DIR --out DIR [--force] [--json]',
  options: { ...valueOptions('model', 'adapter', 'out'), ...flagOptions('force') },
  async run(args, io) {
    const r = mergeAdapterFolder(requireString(args, 'model'), requireString(args, 'adapter'), requireString(args, 'out'), {
      force: args.values.force === true,
    });
    if (io.json) io.out(JSON.stringify({ ok: true, ...r }, null, 2));
    else io.out(`wrote ${r.dir}: the base with the adapter folded into ${r.adapted} layers, ${r.dtype}`);
    return 0;
  },
};

/** Formats `policy export` writes. */
const EXPORT_FORMATS = ['gguf'] as const;

export const policyExportCommand: CliCommand = {
  name: 'policy export',
  summary:
    'write a model (with a LoRA adapter folded in) as one GGUF file for llama.cpp, Ollama and LM Studio: architecture, tokenizer, chat template, weights at f32, f16 or q8_0',
  usage: `--model DIR [--adapter DIR] --format gguf [--type ${GGUF_WEIGHT_TYPES.join('|')}] --out FILE [--name NAME] [--ollama] [--force] [--json]`,
  options: { ...valueOptions('model', 'adapter', 'format', 'type', 'out', 'name'), ...flagOptions('ollama', 'force') },
  async run(args, io) {
    if (args.values.format === undefined) throw new UsageError(`--format is required (${EXPORT_FORMATS.join(', ')})`);
    oneOf(args, 'format', EXPORT_FORMATS, 'gguf');
    const type = oneOf(args, 'type', GGUF_WEIGHT_TYPES, 'f16');
    const model = requireString(args, 'model');
    const out = requireString(args, 'out');
    const r = exportGguf(model, out, {
      type,
      ...adapterOption(args),
      ...(typeof args.values.name === 'string' ? { name: args.values.name } : {}),
      ollama: args.values.ollama === true,
      ollamaChat,
      force: args.values.force === true,
    });
    if (io.json) {
      io.out(JSON.stringify({ ok: true, ...r }, null, 2));
      return 0;
    }
    io.out(
      `wrote ${r.file}: ${r.architecture}, ${r.tensors} tensors at ${r.type} (${formatMiB(r.bytes)}); tokenizer ${r.tokenizer.pre}, ${r.tokenizer.tokens} tokens, ${r.tokenizer.merges} merges; chat template ${r.chatTemplate ? 'included' : 'none'}`,
    );
    if (r.adapter)
      io.out(
        `  adapter ${r.adapter.dir} folded into ${r.adapter.adapted} layers at scale ${Number(r.adapter.scale.toPrecision(6))} (${r.adapter.useRslora ? 'rsLoRA: alpha/sqrt(r)' : 'alpha/r'})`,
      );
    if (r.f16Fallback.length) io.out(`  ${r.f16Fallback.length} tensor(s) at f16: their rows are not whole q8_0 blocks of 32 values`);
    if (r.modelfile) {
      io.out(`  wrote ${r.modelfile}: \`ollama create NAME -f ${r.modelfile}\` imports it`);
      if (r.ollamaTemplate?.written)
        io.out("  its TEMPLATE is the chat template written as Ollama's, checked against the model's own on sample conversations");
      else if (r.ollamaTemplate?.why)
        io.out(`  no TEMPLATE in it: ${r.ollamaTemplate.why}; Ollama then formats chats only if it recognises the file's chat template`);
    }
    return 0;
  },
};
