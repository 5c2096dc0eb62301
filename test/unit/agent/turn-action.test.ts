// How an episode reads a model's reply as its turn's action, in each action format
// (readTurnAction, which runEpisode uses for every turn). The replies are written here as a chat
// model would write them, and the scripted action model plays them as one would: what is under
// test is the episode's reading of a reply, not a policy.
import * as assert from 'node:assert/strict';
import { readTurnAction } from '../../../src/agent/episode';
import { ScriptedActionModel } from '../../../src/agent/scripted';
import type { ActResult } from '../../../src/agent/types';

const reply = (text: string, finishReason: ActResult['finishReason'] = 'stop'): ActResult => ({
  text,
  tokenIds: [1, 2, 3],
  logprobs: [-1, -2, -3],
  finishReason,
});

describe("agent/episode: a reply read as the turn's action", () => {
  it('chat: the command of the one ```bash block is the action, the whole reply kept beside it', async () => {
    const text = 'The test fails in add; look at it first.\n\n```bash\ngrep -n "def add" -r src\n```\n';
    const r = await readTurnAction(reply(text), 'chat');
    assert.deepEqual(r.parsed, { kind: 'bash', command: 'grep -n "def add" -r src', block: 'grep -n "def add" -r src' });
    assert.equal(r.action, 'grep -n "def add" -r src');
    assert.equal(r.reply, text);
  });

  it('chat: submit as the reply or as its block; a format error names why and runs nothing', async () => {
    assert.equal((await readTurnAction(reply('submit'), 'chat')).action, 'submit');
    assert.equal((await readTurnAction(reply('Done.\n```bash\nsubmit\n```'), 'chat')).parsed.kind, 'submit');
    const none = await readTurnAction(reply('I would run the tests now.'), 'chat');
    assert.deepEqual(none.parsed, { kind: 'format-error', reason: 'the reply has no ```bash block' });
    assert.equal(none.action, 'I would run the tests now.', 'no block: the reply is what the views show');
    const two = await readTurnAction(reply('```bash\nls\n```\nthen\n```bash\npwd\n```'), 'chat');
    assert.equal(two.parsed.kind, 'format-error');
    assert.match((two.parsed as { reason: string }).reason, /2 ```bash blocks/);
    const bad = await readTurnAction(reply('```bash\nif then fi (\n```'), 'chat');
    assert.equal(bad.parsed.kind, 'format-error');
    assert.equal(bad.action, 'if then fi (', 'a block that does not parse is kept as written');
    // A reply cut at the action budget is never run, even with a complete block.
    const cut = await readTurnAction(reply('```bash\nls\n```', 'length'), 'chat');
    assert.deepEqual(cut.parsed, { kind: 'format-error', reason: 'the reply did not end (no end-of-turn within the action budget)' });
  });

  it('chat: the action the model read from its reply is used as given', async () => {
    const r = await readTurnAction({ ...reply('```bash\nls\n```'), action: { kind: 'bash', command: 'ls -la', block: 'ls -la' } }, 'chat');
    assert.equal(r.action, 'ls -la');
  });

  it('compact: the text is the command, as before; a fenced block there is a bash syntax error', async () => {
    const r = await readTurnAction(reply('  ls -la  '));
    assert.deepEqual(r.parsed, { kind: 'bash', command: 'ls -la' });
    assert.equal(r.action, 'ls -la');
    assert.equal(r.reply, undefined);
    assert.equal((await readTurnAction(reply('```bash\nls\n```'))).parsed.kind, 'format-error');
  });

  it('the scripted model plays whole chat replies and says its format', async () => {
    const m = new ScriptedActionModel(['Look first.\n```bash\nls\n```'], 'chat');
    assert.equal(m.actionFormat, 'chat');
    const [a] = await m.act([{ episodeId: 'e', task: 't', turns: [], seed: 0 }]);
    assert.equal((await readTurnAction(a, m.actionFormat)).action, 'ls');
    assert.equal(new ScriptedActionModel(['ls']).actionFormat, 'compact');
  });
});
