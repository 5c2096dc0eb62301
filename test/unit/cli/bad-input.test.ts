// Bad input for every command that takes files or numbers, table-driven: each row asserts the
// exit code, that the message names the problem and the fix, and that nothing the user owns
// changed (every file under the row's folder hashed before and after). None needs Docker: a
// bad option must be refused before any sandbox starts.
import * as assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { main } from '../../../src/cli/main';
import { SCHEMA } from '../../../src/core/schema';

async function cli(argv: string[]) {
  let out = '';
  let err = '';
  const code = await main(argv, { out: (t) => (out += t + '\n'), err: (t) => (err += t + '\n') });
  return { code, out, err };
}

/** Path, mode and content of every file and folder under `dir`. */
function treeHash(dir: string, skip: (rel: string) => boolean = () => false): string {
  const h = createHash('sha256');
  const walk = (rel: string) => {
    for (const e of fs.readdirSync(path.join(dir, rel), { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const r = path.join(rel, e.name);
      if (skip(r)) continue;
      h.update(`${r}\0${fs.lstatSync(path.join(dir, r)).mode}\0`);
      if (e.isDirectory()) walk(r);
      else h.update(fs.readFileSync(path.join(dir, r)));
    }
  };
  walk('');
  return h.digest('hex');
}

const BINARY = Buffer.from([0x7f, 0x45, 0x4c, 0x46, 0x1b, 0x5b, 0x32, 0x4a, 0, 0, 1, 2, 3]);
const traj = (trajId: string, reward: number, actions: string[]) => ({
  schema: SCHEMA.trajectory,
  taskId: 'p',
  groupId: 'p',
  trajId,
  checkpoint: 'c',
  turns: actions.map((action, index) => ({ index, action, observation: '', exitCode: 0, durationMs: 1 })),
  reward: {
    passRate: reward,
    resolved: false,
    turns: actions.length,
    maxTurns: 5,
    formatError: false,
    efficiencyPenalty: 0,
    formatPenalty: 0,
    reward,
  },
});
const jsonl = (rows: unknown[]) => rows.map((r) => JSON.stringify(r)).join('\n') + '\n';

interface Row {
  name: string;
  /** Creates the user's files in `dir`. */
  setup?: (dir: string) => void;
  argv: (dir: string) => string[];
  code: number;
  /** The message names the problem… */
  problem: RegExp;
  /** …and what to do about it (a hint or the usage line). */
  fix: RegExp;
  /** Paths under dir the command may create (successful rows); everything else must stay as it was. */
  creates?: string[];
  json?: boolean;
}

const USAGE = /usage: turnwise /;

const ROWS: Record<string, Row[]> = {
  advantages: [
    { name: 'missing --in', argv: () => ['advantages', '--estimator', 'grpo'], code: 2, problem: /--in is required/, fix: USAGE },
    {
      name: '--in names a folder',
      argv: (d) => ['advantages', '--in', d, '--estimator', 'grpo'],
      code: 1,
      problem: /is a folder, not a file/,
      fix: /→ give/,
    },
    {
      name: '--in does not exist',
      argv: (d) => ['advantages', '--in', path.join(d, 'nope.jsonl'), '--estimator', 'grpo'],
      code: 1,
      problem: /does not exist/,
      fix: /→ /,
    },
    {
      name: '--in is binary',
      setup: (d) => fs.writeFileSync(path.join(d, 't.jsonl'), BINARY),
      argv: (d) => ['advantages', '--in', path.join(d, 't.jsonl'), '--estimator', 'grpo'],
      code: 1,
      problem: /binary file/,
      fix: /→ give/,
    },
    {
      name: '--in is empty',
      setup: (d) => fs.writeFileSync(path.join(d, 't.jsonl'), '\n'),
      argv: (d) => ['advantages', '--in', path.join(d, 't.jsonl'), '--estimator', 'grpo'],
      code: 1,
      problem: /holds no trajectories/,
      fix: /→ /,
    },
    {
      name: 'two trajectories share a trajId (different turns)',
      setup: (d) =>
        fs.writeFileSync(path.join(d, 't.jsonl'), jsonl([traj('a', 1, ['ls']), traj('b', 0, ['ls']), traj('a', 0, ['x', 'y'])])),
      argv: (d) => ['advantages', '--in', path.join(d, 't.jsonl'), '--estimator', 'grpo'],
      code: 1,
      problem: /duplicate trajId "a".*lines 1 and 3/,
      fix: /each episode needs its own trajId/,
    },
    {
      name: 'a flood of identical problems is summarized',
      setup: (d) => fs.writeFileSync(path.join(d, 't.jsonl'), 'nope\n'.repeat(20000)),
      argv: (d) => ['advantages', '--in', path.join(d, 't.jsonl'), '--estimator', 'grpo'],
      code: 1,
      problem: /20000 invalid line\(s\)[\s\S]*… and 19997 more line\(s\) with: not valid JSON/,
      fix: /fix the lines listed above/,
    },
    {
      name: 'unknown estimator',
      argv: (d) => ['advantages', '--in', path.join(d, 'x'), '--estimator', 'ppo'],
      code: 1,
      problem: /unknown advantage estimator "ppo"/,
      fix: /valid estimators: grpo/,
    },
    {
      name: 'inherited object key as a parameter',
      argv: (d) => ['advantages', '--in', path.join(d, 'x'), '--estimator', 'a3', '--param', 'constructor=1'],
      code: 1,
      problem: /no parameter "constructor"/,
      fix: /its parameters: epsilon/,
    },
    {
      name: '__proto__ as a parameter',
      argv: (d) => ['advantages', '--in', path.join(d, 'x'), '--estimator', 'a3', '--param', '__proto__=1'],
      code: 1,
      problem: /no parameter "__proto__"/,
      fix: /its parameters/,
    },
    {
      name: 'usage error under --json is invalid-input',
      argv: () => ['advantages', '--json'],
      code: 2,
      problem: /"code": "invalid-input"[\s\S]*--in is required/,
      fix: /"hint": "usage: turnwise advantages/,
      json: true,
    },
  ],
  'eval --from / --compare': [
    {
      name: '--from with run flags',
      setup: (d) => fs.writeFileSync(path.join(d, 'a.jsonl'), jsonl([traj('eval-0-0', 1, ['ls'])])),
      argv: (d) => ['eval', '--from', path.join(d, 'a.jsonl'), '--tasks', path.join(d, 't.jsonl'), '--seed', '1'],
      code: 2,
      problem: /--from reads an evaluation already run; it takes no --tasks, --seed/,
      fix: USAGE,
    },
    {
      name: '--compare file missing (refused before any sandbox)',
      argv: (d) => ['eval', '--tasks', path.join(d, 't.jsonl'), '--compare', path.join(d, 'before.jsonl')],
      code: 1,
      problem: /before\.jsonl: it does not exist/,
      fix: /→ give a trajectories/,
    },
    {
      name: '--out is the --compare file (the baseline would be overwritten)',
      setup: (d) => fs.writeFileSync(path.join(d, 'a.jsonl'), jsonl([traj('eval-0-0', 1, ['ls'])])),
      argv: (d) => [
        'eval',
        '--tasks',
        path.join(d, 't.jsonl'),
        '--compare',
        path.join(d, 'a.jsonl'),
        '--out',
        path.join(d, '.', 'a.jsonl'),
      ],
      code: 2,
      problem: /--out would overwrite the --compare file/,
      fix: /write the new episodes to another file/,
    },
    {
      name: '--compare file corrupt',
      setup: (d) => fs.writeFileSync(path.join(d, 'b.jsonl'), '{"schema":"turnwise/trajectory@1"}\n'),
      argv: (d) => ['eval', '--from', path.join(d, 'b.jsonl'), '--compare', path.join(d, 'b.jsonl')],
      code: 1,
      problem: /b\.jsonl has 1 invalid line/,
      fix: /fix the lines listed above/,
    },
  ],
  'policy init': [
    {
      name: '--force never empties a folder holding other files (--out . in a project)',
      setup: (d) => {
        fs.mkdirSync(path.join(d, 'src'));
        fs.writeFileSync(path.join(d, 'src', 'main.py'), 'print(1)\n');
        fs.writeFileSync(path.join(d, 'config.json'), '{}');
      },
      argv: (d) => ['policy', 'init', '--out', d, '--force'],
      code: 1,
      problem: /holds files that are not part of a checkpoint: src/,
      fix: /--force only replaces an existing checkpoint/,
    },
    {
      name: "a neighbouring <name>.old-* folder is the user's: init leaves it alone",
      setup: (d) => {
        fs.mkdirSync(path.join(d, 'model.old-v1'));
        fs.writeFileSync(path.join(d, 'model.old-v1', 'w.bin'), 'mine');
      },
      argv: (d) => ['policy', 'init', '--out', path.join(d, 'model')],
      code: 0,
      problem: /wrote turnwise-tiny/,
      fix: /wrote/,
      creates: ['model'],
    },
    {
      name: '--out under a file',
      setup: (d) => fs.writeFileSync(path.join(d, 'f'), 'x'),
      argv: (d) => ['policy', 'init', '--out', path.join(d, 'f', 'model')],
      code: 1,
      problem: /is a file/,
      fix: /→ /,
    },
    {
      name: '--seed -1',
      argv: (d) => ['policy', 'init', '--out', path.join(d, 'm'), '--seed=-1'],
      code: 2,
      problem: /--seed must be an integer at least 0 and at most 4294967295, got "-1"/,
      fix: USAGE,
    },
    {
      name: '--seed 2^32 (would silently become seed 0)',
      argv: (d) => ['policy', 'init', '--out', path.join(d, 'm'), '--seed', '4294967296'],
      code: 2,
      problem: /--seed must be an integer/,
      fix: USAGE,
    },
    {
      name: '--seed 1.5',
      argv: (d) => ['policy', 'init', '--out', path.join(d, 'm'), '--seed', '1.5'],
      code: 2,
      problem: /--seed must be an integer/,
      fix: USAGE,
    },
    {
      name: '--seed empty',
      argv: (d) => ['policy', 'init', '--out', path.join(d, 'm'), '--seed', ''],
      code: 2,
      problem: /--seed must be a number, got ""/,
      fix: USAGE,
    },
  ],
  'policy logits / generate': [
    {
      name: "a read-only command never renames a user's <name>.old-* folder",
      setup: (d) => fs.mkdirSync(path.join(d, 'data.old-backup')),
      argv: (d) => ['policy', 'logits', '--model', path.join(d, 'data'), '--ids', '1'],
      code: 1,
      problem: /model directory .*data does not exist/,
      fix: /policy init --out DIR/,
    },
    {
      name: '--model names a file',
      setup: (d) => fs.writeFileSync(path.join(d, 'm'), 'x'),
      argv: (d) => ['policy', 'logits', '--model', path.join(d, 'm'), '--ids', '1'],
      code: 1,
      problem: /is a file, not a model directory/,
      fix: /→ give the directory/,
    },
    {
      name: 'neither --ids nor --text',
      argv: (d) => ['policy', 'logits', '--model', d],
      code: 2,
      problem: /--ids or --text is required/,
      fix: USAGE,
    },
    {
      name: '--top-p 0',
      argv: (d) => ['policy', 'generate', '--model', d, '--prompt', 'x', '--top-p', '0'],
      code: 2,
      problem: /--top-p must be a number greater than 0 and at most 1/,
      fix: USAGE,
    },
    {
      name: '--temperature -1',
      argv: (d) => ['policy', 'generate', '--model', d, '--prompt', 'x', '--temperature=-1'],
      code: 2,
      problem: /--temperature must be a number at least 0/,
      fix: USAGE,
    },
    {
      name: '--max-tokens 0',
      argv: (d) => ['policy', 'generate', '--model', d, '--prompt', 'x', '--max-tokens', '0'],
      code: 2,
      problem: /--max-tokens must be an integer at least 1/,
      fix: USAGE,
    },
  ],
  'tasks check': [
    { name: 'a folder', argv: (d) => ['tasks', 'check', d], code: 1, problem: /task file .* is a folder, not a file/, fix: /→ / },
    {
      name: 'a binary file',
      setup: (d) => fs.writeFileSync(path.join(d, 't'), BINARY),
      argv: (d) => ['tasks', 'check', path.join(d, 't')],
      code: 1,
      problem: /binary file, not text/,
      fix: /→ check the path|create tasks/,
    },
    {
      name: 'a missing file',
      argv: (d) => ['tasks', 'check', path.join(d, 'nope')],
      code: 1,
      problem: /does not exist/,
      fix: /turnwise tasks synth/,
    },
    { name: 'no file', argv: () => ['tasks', 'check'], code: 2, problem: /give exactly one task file/, fix: USAGE },
  ],
  'tasks synth / failing (refused before any sandbox starts)': [
    ...['0', '-1', 'x'].map((t): Row => ({
      name: `--timeout ${t}`,
      setup: (d) => fs.mkdirSync(path.join(d, 'ws')),
      argv: (d) => ['tasks', 'synth', '--workspace', path.join(d, 'ws'), '--out', path.join(d, 'o.jsonl'), `--timeout=${t}`],
      code: 2,
      problem: /--timeout must be a number/,
      fix: USAGE,
    })),
    {
      name: '--out names a folder',
      setup: (d) => fs.mkdirSync(path.join(d, 'ws')),
      argv: (d) => ['tasks', 'synth', '--workspace', path.join(d, 'ws'), '--out', path.join(d, 'ws')],
      code: 1,
      problem: /--out: .*ws is a folder, not a file/,
      fix: /give --out a file path/,
    },
    {
      name: '--out under a file',
      setup: (d) => {
        fs.mkdirSync(path.join(d, 'ws'));
        fs.writeFileSync(path.join(d, 'f'), 'x');
      },
      argv: (d) => ['tasks', 'failing', '--workspace', path.join(d, 'ws'), '--out', path.join(d, 'f', 'o.jsonl')],
      code: 1,
      problem: /f is a file, so .* cannot be created under it/,
      fix: /give --out a file path/,
    },
    {
      name: '--seed out of range',
      setup: (d) => fs.mkdirSync(path.join(d, 'ws')),
      argv: (d) => ['tasks', 'synth', '--workspace', path.join(d, 'ws'), '--out', path.join(d, 'o.jsonl'), '--seed', '99999999999'],
      code: 2,
      problem: /--seed must be an integer/,
      fix: USAGE,
    },
    {
      name: '--runner unknown',
      setup: (d) => fs.mkdirSync(path.join(d, 'ws')),
      argv: (d) => ['tasks', 'failing', '--workspace', path.join(d, 'ws'), '--out', path.join(d, 'o.jsonl'), '--runner', 'nose'],
      code: 2,
      problem: /--runner must be one of pytest/,
      fix: USAGE,
    },
    {
      name: '--max 0',
      setup: (d) => fs.mkdirSync(path.join(d, 'ws')),
      argv: (d) => ['tasks', 'synth', '--workspace', path.join(d, 'ws'), '--out', path.join(d, 'o.jsonl'), '--max', '0'],
      code: 2,
      problem: /--max must be an integer at least 1/,
      fix: USAGE,
    },
    {
      name: '--workspace names a file',
      setup: (d) => fs.writeFileSync(path.join(d, 'ws'), 'x'),
      argv: (d) => ['tasks', 'synth', '--workspace', path.join(d, 'ws'), '--out', path.join(d, 'o.jsonl')],
      code: 1,
      problem: /workspace .* is a file, not a folder/,
      fix: /→ pass --workspace DIR/,
    },
  ],
  'bench rollout': [
    {
      name: '--repeats 0',
      argv: () => ['bench', 'rollout', '--repeats', '0'],
      code: 2,
      problem: /--repeats must be an integer at least 1 and at most 20, got "0"/,
      fix: USAGE,
    },
  ],
  'bench learn': [
    {
      name: '--config sets a field the benchmark sets itself',
      setup: (d) => fs.writeFileSync(path.join(d, 'c.json'), JSON.stringify({ lr: 1e-3, estimator: 'rloo', taskSeed: 2 })),
      argv: (d) => ['bench', 'learn', '--config', path.join(d, 'c.json'), '--runs', path.join(d, 'runs')],
      code: 1,
      problem: /the learn benchmark sets "estimator", "taskSeed" itself/,
      fix: /remove those fields/,
    },
    {
      name: '--config with an unknown field (refused before any copy or synthesis)',
      setup: (d) => fs.writeFileSync(path.join(d, 'c.json'), JSON.stringify({ learningRate: 1e-3 })),
      argv: (d) => ['bench', 'learn', '--config', path.join(d, 'c.json'), '--runs', path.join(d, 'runs')],
      code: 1,
      problem: /the learn benchmark settings has unknown field "learningRate"/,
      fix: /valid fields: .*\blr\b/,
    },
    {
      name: '--config with a value out of range',
      setup: (d) => fs.writeFileSync(path.join(d, 'c.json'), JSON.stringify({ epochs: 0 })),
      argv: (d) => ['bench', 'learn', '--config', path.join(d, 'c.json'), '--runs', path.join(d, 'runs')],
      code: 1,
      problem: /"epochs" must be an integer in \[1, 100\], got 0/,
      fix: /fix "epochs"/,
    },
  ],
  'any command': [
    {
      name: 'unknown command under --json',
      argv: () => ['frobnicate', '--json'],
      code: 2,
      problem: /"code": "invalid-input"[\s\S]*unknown command/,
      fix: /turnwise --help/,
      json: true,
    },
    { name: 'unknown option', argv: () => ['tasks', 'check', 'x', '--frob'], code: 2, problem: /Unknown option '--frob'/, fix: USAGE },
  ],
};

describe('cli: bad input is refused with the problem and the fix, and nothing the user owns changes', function () {
  this.timeout(60000);
  let dir: string;
  beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-bad-input-'))));
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  for (const [command, rows] of Object.entries(ROWS)) {
    describe(command, () => {
      for (const row of rows) {
        it(row.name, async () => {
          row.setup?.(dir);
          const skip = (rel: string) => (row.creates ?? []).some((c) => rel === c || rel.startsWith(c + path.sep));
          const before = treeHash(dir, skip);
          const r = await cli(row.argv(dir));
          const text = row.json ? r.out + r.err : r.err + r.out;
          assert.equal(r.code, row.code, `exit code; output:\n${text}`);
          assert.match(text, row.problem);
          assert.match(text, row.fix);
          assert.ok(!text.includes('\u001b'), 'no raw control bytes reach the terminal');
          assert.ok(!/\n\s+at .*\(.*:\d+:\d+\)/.test(text), 'no stack trace');
          assert.ok(!/tmp-\d+-\d+|ENOTDIR|EISDIR|ERR_STRING_TOO_LONG/.test(text), 'no raw errno or temp file names');
          assert.ok(text.length < 20000, `message is ${text.length} characters`);
          if (row.json) assert.equal(JSON.parse(r.out).ok, false);
          assert.equal(treeHash(dir, skip), before, "the user's files changed");
        });
      }
    });
  }
});
