// The scoring corpus's list: the transfer panel and at least six more repositories, each pinned.
import * as assert from 'node:assert/strict';
import { TRANSFER_PANEL } from '../../../src/tasks/panel';
import { pickCorpusRepos, SCORING_CORPUS_EXTRA, scoringCorpus } from '../../../src/bench/scoring-corpus';

describe('bench/scoring-corpus', () => {
  it('holds the transfer panel and at least six more repositories, each pinned by archive path and SHA-256, with its own shape', () => {
    const all = scoringCorpus();
    assert.deepEqual(
      all.slice(0, TRANSFER_PANEL.length).map((r) => r.name),
      TRANSFER_PANEL.map((r) => r.name),
    );
    assert.ok(SCORING_CORPUS_EXTRA.length >= 6);
    assert.equal(new Set(all.map((r) => r.name)).size, all.length, 'names are unique');
    assert.equal(new Set(all.map((r) => r.file)).size, all.length, 'tarballs are unique');
    for (const r of all) {
      assert.match(r.file, /^pool\/main\/[a-z0-9]+\/[^/]+\/[^/]+\.orig\.tar\.(gz|xz|bz2)$/, r.name);
      assert.ok(r.file.includes(`/${r.debianSource}/`), `${r.name}: ${r.file} is under its source package`);
      assert.match(r.sha256, /^[0-9a-f]{64}$/, r.name);
      assert.ok(r.shape.length > 20, r.name);
    }
    // The layouts the corpus is for are all there.
    const shapes = SCORING_CORPUS_EXTRA.map((r) => r.shape).join('\n');
    for (const want of [
      /tox\.ini/,
      /setup\.cfg's \[tool:pytest\]/,
      /pyproject\.toml's \[tool\.pytest\.ini_options\]/,
      /pytest\.ini/,
      /conftest/,
      /unittest/,
      /src\/ layout/,
      /tests inside/,
      /::/,
    ])
      assert.match(shapes, want);
  });

  it('--repos picks by name in corpus order and refuses unknown names with the list', () => {
    assert.deepEqual(
      pickCorpusRepos(['blinker', 'inflection']).map((r) => r.name),
      ['inflection', 'blinker'],
    );
    assert.throws(() => pickCorpusRepos(['nope']), /no repository "nope" in the scoring corpus[\s\S]*/);
    assert.equal(pickCorpusRepos().length, scoringCorpus().length);
  });
});
