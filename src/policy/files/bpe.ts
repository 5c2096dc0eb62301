// Byte-level BPE tokenizers of the kind Qwen2 and Llama 3 ship, generated: a GPT-style split
// regex then the ByteLevel byte → character map as the pre-tokenizer, a vocabulary of the 256
// byte symbols plus merges learned deterministically from a corpus, and the chat format's
// special tokens as added tokens. Generated model folders (tests, the model benchmark) carry
// one, with the tokenizer_config.json and chat template that go with it, so a folder made here
// reads like a downloaded one without any download.
import { byteLevelAlphabet, byteLevelBpeJson } from './tokenizer';

/**
 * The split of Qwen2's pre-tokenizer (GPT-4 style: contractions, letter runs with one leading
 * non-letter, single digits, punctuation runs, newline runs, other whitespace). Llama 3's is the
 * same with digits in runs of up to three.
 */
export const SPLIT_PATTERN_QWEN2 =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
export const SPLIT_PATTERN_LLAMA3 = SPLIT_PATTERN_QWEN2.replace('|\\p{N}|', '|\\p{N}{1,3}|');

/** The same split as a JavaScript regular expression (the inline `(?i:` spelled out), for learning merges. */
function splitRegex(digits: 1 | 3): RegExp {
  const num = digits === 1 ? '\\p{N}' : '\\p{N}{1,3}';
  return new RegExp(
    `'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|${num}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+`,
    'gu',
  );
}

export const CHATML_SPECIAL_TOKENS = ['<|endoftext|>', '<|im_start|>', '<|im_end|>'] as const;
export const LLAMA3_SPECIAL_TOKENS = [
  '<|begin_of_text|>',
  '<|end_of_text|>',
  '<|start_header_id|>',
  '<|end_header_id|>',
  '<|eot_id|>',
] as const;

/**
 * Text the generated tokenizers learn their merges from: what an agent's conversation holds
 * (shell commands in fenced blocks, Python, test output, prose).
 */
export const BPE_CORPUS = [
  'You are a software engineer working in a repository. Run one command per reply.',
  'THOUGHT: The test fails because the function returns the wrong value. Let me look at the file.',
  '```bash\ntw-suspects\n```',
  '```bash\ntw-test\n```',
  '```bash\ncat -n src/app/utils.py | head -40\n```',
  "```bash\nsed -i '12s/return a - b/return a + b/' src/app/utils.py && tw-test\n```",
  '```bash\ngrep -rn "def parse" --include=*.py .\n```',
  '```bash\npython -m pytest -q tests/test_utils.py\n```',
  'def parse(text):\n    if not text:\n        return None\n    return text.strip().split(",")\n',
  'import os\nimport sys\n\nclass Config:\n    def __init__(self, path):\n        self.path = path\n',
  'exit 1\n2 failed, 14 passed\ntests/test_utils.py::test_add FAILED\ntests/test_utils.py::test_parse FAILED',
  'exit 0\n16 passed in 0.42s',
  'Fix the code so this test passes:\ntests/test_utils.py::test_add',
  'submit',
  'for i in range(10):\n    print(i, end=" ")\n',
  'The observation shows the error. I will edit the line and run the tests again.',
].join('\n\n');

export interface BpeOptions {
  /** Text the merges are learned from (default: BPE_CORPUS). */
  corpus?: string;
  /** Merges to learn at most (fewer when the corpus runs out of pairs seen twice). */
  merges?: number;
  /** Added special tokens, ids after the merged tokens. */
  specialTokens: readonly string[];
  /** Digits per pre-token: 1 (Qwen2) or up to 3 (Llama 3). */
  digits?: 1 | 3;
}

/**
 * Learns byte-level BPE merges: the corpus is split like the pre-tokenizer does, each piece
 * mapped to ByteLevel characters, then the most frequent adjacent pair is merged, again and
 * again (ties: the pair whose joined string sorts first, so the result is the same every time).
 */
export function learnMerges(corpus: string, count: number, digits: 1 | 3 = 1): [string, string][] {
  const alphabet = byteLevelAlphabet();
  const freq = new Map<string, number>();
  for (const m of corpus.matchAll(splitRegex(digits))) {
    const word = Array.from(Buffer.from(m[0], 'utf8'), (b) => alphabet[b]).join('\u0000');
    freq.set(word, (freq.get(word) ?? 0) + 1);
  }
  let words = [...freq].map(([w, n]) => ({ symbols: w.split('\u0000'), n }));
  const merges: [string, string][] = [];
  while (merges.length < count) {
    const pairs = new Map<string, number>();
    for (const { symbols, n } of words)
      for (let i = 0; i + 1 < symbols.length; i++) {
        const key = `${symbols[i]}\u0000${symbols[i + 1]}`;
        pairs.set(key, (pairs.get(key) ?? 0) + n);
      }
    let best: string | undefined;
    let bestN = 1;
    for (const [key, n] of pairs) {
      if (n > bestN || (n === bestN && best !== undefined && key.replace('\u0000', '') < best.replace('\u0000', ''))) {
        best = key;
        bestN = n;
      }
    }
    if (best === undefined) break;
    const [a, b] = best.split('\u0000') as [string, string];
    merges.push([a, b]);
    words = words.map(({ symbols, n }) => {
      const out: string[] = [];
      for (let i = 0; i < symbols.length; i++) {
        if (i + 1 < symbols.length && symbols[i] === a && symbols[i + 1] === b) {
          out.push(a + b);
          i++;
        } else out.push(symbols[i]);
      }
      return { symbols: out, n };
    });
  }
  return merges;
}

/**
 * A tokenizer.json of the Qwen2 / Llama 3 kind: Split(regex, Isolated) then ByteLevel (no
 * regex of its own) as the pre-tokenizer, a BPE model over the 256 byte symbols (id = byte
 * value) and the learned merges (ids 256…, in merge order), ByteLevel decoding, and the special
 * tokens after them. No normalizer, so any UTF-8 text round-trips byte for byte.
 */
export function byteLevelBpeTokenizerJson(o: BpeOptions): Record<string, unknown> {
  const digits = o.digits ?? 1;
  const merges = learnMerges(o.corpus ?? BPE_CORPUS, o.merges ?? 400, digits);
  return byteLevelBpeJson({
    merges,
    specialTokens: o.specialTokens,
    split: digits === 1 ? SPLIT_PATTERN_QWEN2 : SPLIT_PATTERN_LLAMA3,
    subwordAffix: '',
  });
}

/**
 * A chat template of the ChatML kind (the shape Qwen2 models use): each message as
 * `<|im_start|>ROLE\nCONTENT<|im_end|>\n`, a default system message when the conversation has
 * none, `<|im_start|>assistant\n` as the generation prompt; an unknown role raises.
 */
export const CHATML_TEMPLATE = [
  '{%- for message in messages -%}',
  "{%- if message.role not in ['system', 'user', 'assistant'] -%}{{ raise_exception('unsupported role: ' + message.role) }}{%- endif -%}",
  "{%- if loop.first and message.role != 'system' -%}{{ '<|im_start|>system\\nYou are a helpful coding assistant.<|im_end|>\\n' }}{%- endif -%}",
  "{{ '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}",
  '{%- endfor -%}',
  "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}",
].join('\n');

/**
 * A chat template of the header kind (the shape Llama 3 models use): the begin-of-text token,
 * then each message as `<|start_header_id|>ROLE<|end_header_id|>\n\nCONTENT<|eot_id|>` with its
 * content trimmed, and an assistant header as the generation prompt.
 */
export const HEADER_TEMPLATE = [
  '{{- bos_token -}}',
  '{%- for message in messages -%}',
  "{{- '<|start_header_id|>' + message.role + '<|end_header_id|>\\n\\n' + message.content | trim + '<|eot_id|>' -}}",
  '{%- endfor -%}',
  "{%- if add_generation_prompt -%}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}{%- endif -%}",
].join('\n');

export type ChatKind = 'chatml' | 'llama3';

/**
 * tokenizer.json and tokenizer_config.json (special tokens, eos, the chat template) of a
 * generated chat model folder of either kind.
 */
export function chatTokenizerFiles(
  kind: ChatKind,
  o: { merges?: number; corpus?: string } = {},
): { tokenizerJson: Record<string, unknown>; tokenizerConfig: Record<string, unknown> } {
  const chatml = kind === 'chatml';
  const tokenizerJson = byteLevelBpeTokenizerJson({
    ...o,
    specialTokens: chatml ? CHATML_SPECIAL_TOKENS : LLAMA3_SPECIAL_TOKENS,
    digits: chatml ? 1 : 3,
  });
  const tokenizerConfig = chatml
    ? {
        tokenizer_class: 'Qwen2Tokenizer',
        bos_token: null,
        eos_token: '<|im_end|>',
        pad_token: '<|endoftext|>',
        clean_up_tokenization_spaces: false,
        model_max_length: 32768,
        chat_template: CHATML_TEMPLATE,
      }
    : {
        tokenizer_class: 'PreTrainedTokenizerFast',
        bos_token: '<|begin_of_text|>',
        eos_token: '<|eot_id|>',
        clean_up_tokenization_spaces: true,
        model_max_length: 131072,
        chat_template: HEADER_TEMPLATE,
      };
  return { tokenizerJson, tokenizerConfig };
}

/** Entries of a tokenizer.json's vocabulary and added tokens: the least vocab_size a model for it needs. */
export function tokenizerJsonSize(json: Record<string, unknown>): number {
  const vocab = (json.model as { vocab: Record<string, number> }).vocab;
  const added = (json.added_tokens as { id: number }[] | undefined) ?? [];
  return Math.max(...Object.values(vocab), ...added.map((t) => t.id)) + 1;
}
