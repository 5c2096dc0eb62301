// Tokenizers: any Hugging Face tokenizer.json through @huggingface/tokenizers, and the generated
// byte-level tokenizer.json of turnwise-tiny (256 bytes + special tokens, no merges).
import { Tokenizer } from '@huggingface/tokenizers';
import { TurnwiseError } from '../../core/errors';
import { BYTE_SPECIAL_TOKENS } from '../model/config';

export interface EncodeOptions {
  /**
   * Whether special-token strings in the text (`<|im_end|>`, …) become their control ids
   * (default true). Untrusted text (workspace files, tool output) is data: encode it with
   * `special: false`, so a file that contains `<|im_end|>` cannot end a turn.
   */
  special?: boolean;
}

export interface PolicyTokenizer {
  /** Token ids of `text`; special-token strings in the text become their ids unless `special: false`. */
  encode(text: string, options?: EncodeOptions): number[];
  /** Text of `ids`; special tokens are dropped when `skipSpecial` is set. */
  decode(ids: readonly number[], skipSpecial?: boolean): string;
  /** Id of a token string (e.g. "<|im_end|>"), or undefined. */
  tokenId(token: string): number | undefined;
  /** Number of entries in the vocabulary, added tokens included. */
  readonly size: number;
}

/**
 * GPT-2's byte → printable-character table (the "ByteLevel" alphabet of Hugging Face
 * tokenizers): printable Latin-1 bytes map to themselves, the rest to U+0100 onwards.
 */
export function byteLevelAlphabet(): string[] {
  const keep: number[] = [];
  for (let b = 0x21; b <= 0x7e; b++) keep.push(b);
  for (let b = 0xa1; b <= 0xac; b++) keep.push(b);
  for (let b = 0xae; b <= 0xff; b++) keep.push(b);
  const table: string[] = new Array(256);
  for (const b of keep) table[b] = String.fromCodePoint(b);
  let n = 0;
  for (let b = 0; b < 256; b++) if (table[b] === undefined) table[b] = String.fromCodePoint(256 + n++);
  return table;
}

/**
 * The byte-level tokenizer.json of turnwise-tiny: token id = byte value (0..255), then the
 * special tokens (<|endoftext|>, <|im_start|>, <|im_end|>, <|pad|>) as 256, 257, ….
 * A BPE model with an empty merge list over the ByteLevel alphabet, so any UTF-8 text
 * round-trips and a real tokenizers library (Rust or JS) reads it unchanged.
 */
export function byteLevelTokenizerJson(): Record<string, unknown> {
  return byteLevelBpeJson({ merges: [], specialTokens: BYTE_SPECIAL_TOKENS, subwordAffix: null });
}

/**
 * A tokenizer.json of the byte-level BPE kind: the 256 byte symbols of the ByteLevel alphabet
 * (id = byte value), then each merge's symbol in merge order, then the special tokens; ByteLevel
 * decoding. `split` is a GPT-style pre-tokenizer regex applied before the ByteLevel mapping (none:
 * ByteLevel alone). `subwordAffix` is the model's continuing_subword_prefix / end_of_word_suffix.
 */
export function byteLevelBpeJson(o: {
  merges: readonly (readonly [string, string])[];
  specialTokens: readonly string[];
  split?: string;
  subwordAffix: string | null;
}): Record<string, unknown> {
  const vocab: Record<string, number> = {};
  byteLevelAlphabet().forEach((ch, b) => (vocab[ch] = b));
  for (const [a, b] of o.merges) vocab[a + b] ??= Object.keys(vocab).length;
  const first = Object.keys(vocab).length;
  const added = o.specialTokens.map((content, i) => ({
    id: first + i,
    content,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special: true,
  }));
  const byteLevel = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false };
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: added,
    normalizer: null,
    pre_tokenizer:
      o.split === undefined
        ? byteLevel
        : {
            type: 'Sequence',
            pretokenizers: [{ type: 'Split', pattern: { Regex: o.split }, behavior: 'Isolated', invert: false }, byteLevel],
          },
    post_processor: byteLevel,
    decoder: byteLevel,
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: o.subwordAffix,
      end_of_word_suffix: o.subwordAffix,
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab,
      merges: o.merges.map(([a, b]) => `${a} ${b}`),
    },
  };
}

/** tokenizer_config.json companion: tells the library which tokens are special. */
export function byteLevelTokenizerConfig(): Record<string, unknown> {
  return {
    tokenizer_class: 'PreTrainedTokenizerFast',
    bos_token: null,
    eos_token: '<|endoftext|>',
    pad_token: '<|pad|>',
    clean_up_tokenization_spaces: false,
    model_max_length: 1024,
  };
}

/** Wraps a parsed tokenizer.json (any Hugging Face tokenizer the JS library supports). */
export function loadTokenizer(
  tokenizerJson: unknown,
  tokenizerConfig: Record<string, unknown> = {},
  source = 'tokenizer.json',
): PolicyTokenizer {
  if (tokenizerJson === null || typeof tokenizerJson !== 'object' || !('model' in tokenizerJson)) {
    throw new TurnwiseError('invalid-file', `${source} is not a Hugging Face tokenizer (no "model" field)`, {
      hint: 'use the tokenizer.json that came with the model, or run `turnwise policy init` for a fresh one',
    });
  }
  let tok: Tokenizer;
  try {
    tok = new Tokenizer(tokenizerJson, { clean_up_tokenization_spaces: false, ...tokenizerConfig });
  } catch (e) {
    throw new TurnwiseError('invalid-file', `${source} could not be loaded: ${(e as Error).message}`, {
      hint: 'the tokenizer uses a component @huggingface/tokenizers does not support, or the file is damaged',
    });
  }
  const size = tok.get_vocab(true).size;
  // With special tokens off, text is encoded by a twin without the special added tokens: the
  // library has no switch for it (transformers' split_special_tokens is not implemented).
  let plain: Tokenizer | undefined;
  const plainTokenizer = () => {
    const json = tokenizerJson as { added_tokens?: { special?: boolean }[] };
    return (plain ??= new Tokenizer(
      { ...json, added_tokens: (json.added_tokens ?? []).filter((t) => !t.special) },
      { clean_up_tokenization_spaces: false, ...tokenizerConfig },
    ));
  };
  return {
    encode: (text, options = {}) => (options.special === false ? plainTokenizer() : tok).encode(text, { add_special_tokens: false }).ids,
    // @huggingface/tokenizers throws on an empty list; nothing decodes to nothing.
    decode: (ids, skipSpecial = false) =>
      ids.length === 0 ? '' : tok.decode(Array.from(ids), { skip_special_tokens: skipSpecial, clean_up_tokenization_spaces: false }),
    tokenId: (t) => tok.token_to_id(t),
    size,
  };
}

export function byteLevelTokenizer(): PolicyTokenizer {
  return loadTokenizer(byteLevelTokenizerJson(), byteLevelTokenizerConfig());
}
