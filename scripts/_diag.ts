import { loadCheckpoint } from '../src/policy/checkpoint';
import { Policy } from '../src/policy/policy';
import { loadTokenizer } from '../src/policy/tokenizer';

import { evalCasePool, fixPromptTurns } from '../src/train/warmstart';
import { chatCodec, renderPrompt } from '../src/train/chat';
(async () => {
  const ck = loadCheckpoint(process.argv[2] ?? 'models/turnwise-tiny', { optimizer: false });
  const tok = loadTokenizer(ck.tokenizerJson, ck.tokenizerConfig);
  const policy = new Policy(ck.weights, tok);
  const codec = chatCodec(tok);
  const cases = await evalCasePool(9, 64);
  const prompts = cases.map((c) => { const p = fixPromptTurns(c); return renderPrompt(codec, p.task, p.turns, 928).ids; });
  for (let i = 0; i < cases.length; i += 16) {
    const rows = await policy.generateIds(prompts.slice(i, i + 16), { maxNewTokens: 96, temperature: 0, stopIds: [codec.imEnd] });
    rows.forEach((row, k) => {
      const c = cases[i + k];
      const text = codec.decode(row.tokenIds.filter((t) => t !== codec.imEnd)).trim();
      console.log(JSON.stringify({ ok: text === c.fix, want: c.fix, got: text, mut: c.mutatedLine.trim(), orig: c.originalLine.trim(), first: c.suspects[0] }));
    });
  }
  await policy.dispose();
})();
