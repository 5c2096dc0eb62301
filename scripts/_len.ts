import { seededRandom } from '../src/core/random';
import { loadCheckpoint } from '../src/policy/checkpoint';
import { loadTokenizer } from '../src/policy/tokenizer';
import { chatCodec, encodeDemo } from '../src/train/chat';
import { fixEpisode, syntheticCases } from '../src/train/demos';
(async () => {
  const ck = loadCheckpoint('models/turnwise-tiny', { optimizer: false });
  const codec = chatCodec(loadTokenizer(ck.tokenizerJson, ck.tokenizerConfig));
  const r = seededRandom(3);
  const lens: number[] = [];
  let shown = false;
  for (let i = 0; i < 40; i++) {
    for (const c of await syntheticCases(r, 2)) {
      const d = fixEpisode(r, c);
      if (d.kind.startsWith('episode-loop')) lens.push(encodeDemo(codec, d.segments, 0.3).ids.length);
      if (!shown && d.kind === 'episode-loop') { shown = true; console.log(d.segments.map((s) => `[${s.role}] ${s.text}`).join('\n')); }
    }
  }
  lens.sort((a, b) => a - b);
  console.log(lens.length, 'median', lens[lens.length >> 1], 'p90', lens[Math.floor(lens.length * 0.9)], 'max', lens[lens.length - 1]);
})();
