// llama.cpp as the decode figure beside Turnwise's in `bench model --against llama.cpp`: the bench
// model written as GGUF (float32 weights, as Turnwise computes), loaded by llama.cpp's CPU build
// through node-llama-cpp, and timed at batch 1 and batch N after the same context. node-llama-cpp
// is a test tool of a source checkout (test/tools/llama-cpp, scripts/setup-test-tools.sh), never
// a dependency of the package.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { TurnwiseError } from '../core/errors';
import { findResource } from '../core/resources';
import { chatTokenizerFiles, CHATML_SPECIAL_TOKENS, LLAMA3_SPECIAL_TOKENS } from '../policy/files/bpe';
import { writeGgufFile } from '../policy/files/gguf';
import { ggufMetadata, ggufTensors, ggufTokenizer } from '../policy/files/gguf-export';
import { familyOf } from '../policy/model/config';
import type { PolicyWeights } from '../policy/model/weights';

const NODE_LLAMA_CPP = path.join('test', 'tools', 'llama-cpp', 'node_modules', 'node-llama-cpp');

/** The part of node-llama-cpp's API the benchmark uses. */
interface LlamaCppModule {
  getLlama(o: Record<string, unknown>): Promise<{
    loadModel(o: { modelPath: string; gpuLayers: number }): Promise<{
      createContext(o: Record<string, unknown>): Promise<{
        getSequence(): {
          evaluateWithoutGeneratingNewTokens(tokens: number[]): Promise<void>;
          controlledEvaluate(input: [number, Record<string, unknown>][]): Promise<({ next?: { token?: number } } | undefined)[]>;
          eraseContextTokenRanges(ranges: { start: number; end: number }[]): Promise<void>;
          readonly nextTokenIndex: number;
        };
        dispose(): Promise<void>;
      }>;
      dispose(): Promise<void>;
    }>;
    dispose(): Promise<void>;
  }>;
}

export interface LlamaCppDecodeFigures {
  version: string;
  /** The GGUF weight type timed: f32 against Turnwise's float32, q8_0 (blocks of 32, one f16 scale) against its int8 rollouts. */
  weight_type: 'f32' | 'q8_0';
  /** llama.cpp's KV cache type (its default, what a user of it gets). */
  kv_cache: 'f16';
  threads: number;
  decode_tokens_per_s_b1: number;
  decode_tokens_per_s_batch: number;
  decode_batch_speedup: number;
}

/** node-llama-cpp's entry and version in this checkout, or a TurnwiseError saying how to install it. */
function locateNodeLlamaCpp(): { entry: string; version: string } {
  const dir = findResource(NODE_LLAMA_CPP, 'package.json');
  if (!dir)
    throw new TurnwiseError('not-found', 'llama.cpp (node-llama-cpp) is not installed beside this checkout', {
      hint: 'run `bash scripts/setup-test-tools.sh unit` in a source checkout (it installs test/tools/llama-cpp from the npm registry)',
    });
  const version = (JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')) as { version: string }).version;
  return { entry: path.join(dir, 'dist', 'index.js'), version };
}

/**
 * Writes `w` as a GGUF file of `type` (float32 by default). The bench model's byte tokenizer has no pre-tokenizer
 * llama.cpp knows; decoding from ids needs none, so the file carries a generated BPE tokenizer of
 * the family's kind, cut to the model's vocabulary.
 */
export function writeBenchGguf(file: string, w: PolicyWeights, type: 'f32' | 'q8_0' = 'f32'): void {
  const c = w.config;
  const kind = familyOf(c) === 'llama' ? 'llama3' : 'chatml';
  const specials = (kind === 'llama3' ? LLAMA3_SPECIAL_TOKENS : CHATML_SPECIAL_TOKENS).length;
  const merges = Math.max(0, Math.min(400, c.vocab_size - 256 - specials));
  const files = chatTokenizerFiles(kind, { merges });
  const tok = ggufTokenizer(
    files.tokenizerJson,
    files.tokenizerConfig,
    { ...c, bos_token_id: undefined, eos_token_id: undefined },
    'the bench tokenizer',
  );
  writeGgufFile(file, ggufMetadata(c, tok, { name: 'turnwise-bench', type }), ggufTensors(w, type).tensors);
}

/**
 * llama.cpp's decode speed on a GGUF file: `steps` tokens sampled (temperature 1) after `context`
 * tokens, on 1 sequence and on `batch` sequences at once (node-llama-cpp evaluates the sequences'
 * steps in one batch), each the median of `repeats` timed runs after an untimed one, every run
 * starting from the same context.
 */
export async function llamaCppDecode(
  file: string,
  o: { context: number[]; steps: number; batch: number; threads: number; repeats: number; weightType?: 'f32' | 'q8_0' },
): Promise<LlamaCppDecodeFigures> {
  const { entry, version } = locateNodeLlamaCpp();
  const { getLlama } = (await import(entry)) as LlamaCppModule;
  // The package's prebuilt CPU binary only: never a download or a build.
  const llama = await getLlama({
    gpu: false,
    build: 'never',
    skipDownload: true,
    progressLogs: false,
    logLevel: 'error',
    maxThreads: o.threads,
  });
  try {
    const model = await llama.loadModel({ modelPath: file, gpuLayers: 0 });
    try {
      const perSequence = o.context.length + o.steps + 8;
      const timeRows = async (rows: number): Promise<number> => {
        const ctx = await model.createContext({
          contextSize: rows * perSequence,
          sequences: rows,
          threads: o.threads,
          batchSize: Math.max(512, o.context.length),
        });
        try {
          const seqs = Array.from({ length: rows }, () => ctx.getSequence());
          await Promise.all(seqs.map((s) => s.evaluateWithoutGeneratingNewTokens(o.context)));
          const last = o.context[o.context.length - 1];
          const next = seqs.map(() => last);
          const run = async () => {
            const t = performance.now();
            for (let k = 0; k < o.steps; k++) {
              const out = await Promise.all(
                seqs.map((s, b) =>
                  s.controlledEvaluate([[next[b], { generateNext: { token: true, options: { temperature: 1, seed: 10 + b } } }]]),
                ),
              );
              out.forEach((r, b) => (next[b] = r[0]?.next?.token ?? last));
            }
            const ms = performance.now() - t;
            // Back to the context alone, so every run decodes after the same number of tokens.
            await Promise.all(seqs.map((s) => s.eraseContextTokenRanges([{ start: o.context.length, end: s.nextTokenIndex }])));
            next.fill(last);
            return ms;
          };
          await run();
          const times: number[] = [];
          for (let i = 0; i < o.repeats; i++) times.push(await run());
          times.sort((a, b) => a - b);
          return times[Math.floor(times.length / 2)];
        } finally {
          await ctx.dispose();
        }
      };
      const b1 = o.steps / ((await timeRows(1)) / 1000);
      const bn = (o.batch * o.steps) / ((await timeRows(o.batch)) / 1000);
      const round = (x: number) => Math.round(x * 100) / 100;
      return {
        version,
        weight_type: o.weightType ?? 'f32',
        kv_cache: 'f16',
        threads: o.threads,
        decode_tokens_per_s_b1: round(b1),
        decode_tokens_per_s_batch: round(bn),
        decode_batch_speedup: round(bn / b1),
      };
    } finally {
      await model.dispose();
    }
  } finally {
    await llama.dispose();
  }
}
