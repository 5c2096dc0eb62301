// The replay term's demonstrations (train/replay.ts): drawn as the warm start draws them, seeded
// (a resumed run replays the same ones), never longer than the minibatch's rows.
import * as assert from 'node:assert/strict';
import { byteLevelTokenizer } from '../../../src/policy/files/tokenizer';
import { compactCodec } from '../../../src/train/compact-codec';
import { REPLAY_MIX, ReplaySource } from '../../../src/train/replay';

describe('train/replay: demonstrations for the replay term', function () {
  this.timeout(60_000);
  const codec = compactCodec(byteLevelTokenizer());
  let source: ReplaySource;
  before(async () => {
    source = await ReplaySource.create(codec, 11, 60);
  });

  it('draws n seeded demonstrations of at most maxTokens, weighted as the warm start weighs them', () => {
    const a = source.draw(16, 768, 5);
    assert.equal(a.length, 16);
    assert.deepEqual(source.draw(16, 768, 5), a, 'same seed, same demonstrations');
    assert.notDeepEqual(source.draw(16, 768, 6), a, 'another seed, others');
    for (const ex of a) {
      assert.ok(ex.ids.length > 0 && ex.ids.length <= 768);
      assert.equal(ex.weights.length, ex.ids.length);
      assert.ok(
        ex.weights.every((w) => w === 1 || w === REPLAY_MIX.promptWeight),
        'actions at 1, everything else at the prompt weight',
      );
      assert.ok(
        ex.weights.some((w) => w === 1),
        'every demonstration has an action to learn',
      );
    }
    const text = a.map((ex) => codec.decode(ex.ids)).join('\n');
    // Whole fix episodes dominate the mix: the tools, a line edit and the end of the episode.
    for (const s of ['tw-suspects', "sed -i '", 'tw-test', 'submit']) assert.ok(text.includes(s), `no "${s}" in 16 draws`);
  });

  it('fits the row: a demonstration longer than maxTokens is drawn again, and cut only as a last resort', () => {
    // Fix episodes run 240-820 tokens (10th-90th percentile); at 512 about half fit on one draw.
    const whole = (ex: { ids: number[] }) => ex.ids[ex.ids.length - 1] === codec.text('\n')[0] && ex.ids.includes(codec.imEnd);
    const fit = source.draw(24, 512, 3);
    assert.ok(fit.every((ex) => ex.ids.length <= 512));
    assert.ok(fit.filter(whole).length >= 22, `${fit.filter(whole).length} of 24 end as a complete turn`);
    // Rows too short for any demonstration: each is its draw's head, cut to the row.
    const cut = source.draw(4, 24, 3);
    assert.ok(cut.every((ex) => ex.ids.length === 24 && !whole(ex)));
  });
});
