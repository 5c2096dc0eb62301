// The warm start's fix-turn figures for any checkpoint, on a fresh set of held-out generated
// cases (docs/model-card-turnwise-tiny.md, "256 further held-out generated cases": --seed 9 --cases 256). Prints JSON:
// exact (the demonstrated command), restores (a command that restores the line as GNU
// sed would), rightLine, validSed; then simulated greedy episodes from the same point (evaluateEpisodes):
// episodeFixed (bug line restored within 5 turns), episodeTurns, on the first --episode-cases,
// in the sed form or (--form numbered) with the numbered tools, the form phases 7 to 9 train.
//   npx tsx docs/experiments/scripts/eval-fixes.ts [--model models/turnwise-tiny] [--seed 9] [--cases 256] [--episode-cases 64] [--form sed|numbered]
import { parseArgs } from 'node:util';
import { loadCheckpoint } from '../../../src/policy/files/checkpoint';
import { Policy } from '../../../src/policy/inference/policy';
import { loadTokenizer } from '../../../src/policy/files/tokenizer';
import { compactCodec } from '../../../src/train/compact-codec';
import { evalCasePool } from '../../../src/demonstrations/cases';
import { evaluateEpisodes, evaluateFixes } from '../../../src/warmstart/evaluate';

const { values } = parseArgs({
  options: {
    model: { type: 'string', default: 'models/turnwise-tiny' },
    seed: { type: 'string', default: '9' },
    cases: { type: 'string', default: '256' },
    'episode-cases': { type: 'string', default: '64' },
    form: { type: 'string', default: 'sed' },
  },
});
if (values.form !== 'sed' && values.form !== 'numbered') throw new Error(`--form is sed or numbered, got ${values.form}`);

(async () => {
  const ck = loadCheckpoint(values.model!, { optimizer: false });
  const tok = loadTokenizer(ck.tokenizerJson, ck.tokenizerConfig);
  const policy = new Policy(ck.weights, tok);
  try {
    // The cases a warm start with this seed evaluates on (its first `--cases` of them).
    const cases = await evalCasePool(Number(values.seed), Number(values.cases));
    const codec = compactCodec(tok);
    const first = await evaluateFixes(policy, codec, cases);
    const ep = await evaluateEpisodes(
      policy,
      codec,
      cases.slice(0, Number(values['episode-cases'])),
      5,
      undefined,
      values.form as 'sed' | 'numbered',
    );
    console.log(
      JSON.stringify({
        model: values.model,
        seed: Number(values.seed),
        cases: cases.length,
        form: values.form,
        ...first,
        episodeFixed: ep.fixed,
        episodeTurns: ep.meanTurns,
      }),
    );
  } finally {
    await policy.dispose();
  }
})().catch((e) => {
  console.error(e instanceof Error ? e.message : e);
  process.exit(1);
});
