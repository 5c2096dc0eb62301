// Extension-host tests: the Turnwise extension under development (the repository root) loaded
// by a real VS Code extension host (code-server's), with the real `vscode` API, Docker engine and
// ONNX Runtime. Nothing is mocked.
const assert = require('node:assert/strict');
const path = require('node:path');
const vscode = require('vscode');

const EXTENSION_ID = 'turnwise.turnwise';

describe('Turnwise', function () {
  let api;

  it('activates from the checkout and returns its API', async function () {
    const ext = vscode.extensions.getExtension(EXTENSION_ID);
    assert.ok(ext, `extension ${EXTENSION_ID} is not known to the extension host`);
    // The extension under development (the checkout), not some installed copy.
    assert.ok(process.env.TURNWISE_REPO_ROOT, 'TURNWISE_REPO_ROOT did not reach the extension host (run.mjs sets it)');
    assert.equal(ext.extensionUri.fsPath, process.env.TURNWISE_REPO_ROOT);
    // Nothing activates Turnwise before its first command or view: the suite is the first use.
    const wasActive = ext.isActive;
    const t0 = performance.now();
    api = await ext.activate();
    const ms = performance.now() - t0;
    const own = api.loadAndActivateMs;
    console.log(
      `TURNWISE-PERF ${JSON.stringify({ name: 'activation_ms', value: Number(own.toFixed(1)), activateFnMs: Number(api.activationMs.toFixed(1)), wallMs: Math.round(ms), kind: "bundle evaluation + activate(); wallMs adds the extension host's own work around it" })}`,
    );
    assert.equal(wasActive, false, 'the extension was activated before its first use');
    // The extension's own share (module evaluation + activate()); the wall time around
    // ext.activate() also holds the host's bookkeeping and swings with the machine's load.
    // Target 300 ms (89 ms measured on a quiet machine); the bound here leaves room for a
    // loaded CI machine, while activate() itself must stay small.
    assert.ok(api.activationMs <= 100, `activate() took ${api.activationMs.toFixed(0)} ms`);
    assert.ok(own <= 1000, `loading and activating took ${own.toFixed(0)} ms`);
    assert.ok(ms <= 1500, `ext.activate() took ${ms.toFixed(0)} ms in all`);
    assert.equal(ext.isActive, true);
    assert.equal(typeof api?.checkEnvironment, 'function', 'activate() must return { checkEnvironment }');
  });

  it('registers the command turnwise.checkEnvironment', async function () {
    const commands = await vscode.commands.getCommands(true);
    assert.ok(commands.includes('turnwise.checkEnvironment'), 'turnwise.checkEnvironment is not registered');
    const contributed = vscode.extensions.getExtension(EXTENSION_ID).packageJSON.contributes.commands;
    const entry = contributed.find((c) => c.command === 'turnwise.checkEnvironment');
    assert.deepEqual([entry?.category, entry?.title], ['Turnwise', 'Check Environment']);
  });

  it('"Check Environment" returns a report with docker and onnxruntime cpu ok', async function () {
    this.timeout(120000);
    const report = await vscode.commands.executeCommand('turnwise.checkEnvironment');
    assert.ok(report && Array.isArray(report.checks), `the command returned ${JSON.stringify(report)}`);
    const byName = new Map(report.checks.map((c) => [c.name, c]));
    for (const name of ['node', 'docker', 'onnxruntime cpu', 'tree-sitter grammars']) {
      const c = byName.get(name);
      assert.ok(c, `no "${name}" check in ${[...byName.keys()].join(', ')}`);
      assert.equal(c.status, 'ok', `${name}: ${c.status}: ${c.detail}${c.fix ? ` (fix: ${c.fix})` : ''}`);
    }
    assert.match(byName.get('docker').detail, /^Docker \d+\.\d+/);
    // The extension host runs on code-server's Node (24), not the machine's Node 20.
    assert.equal(byName.get('node').detail, `Node ${process.versions.node}`);
    // Every failing check is a required one; the machine has all of them, so the report is ok.
    assert.equal(
      report.ok,
      true,
      report.checks
        .filter((c) => c.status === 'fail')
        .map((c) => `${c.name}: ${c.detail}`)
        .join('; '),
    );
  });

  it('"Check Environment" checks the model folder of turnwise.train.model and the LoRA block, saying what to pick instead', async function () {
    this.timeout(240000);
    const sec = () => vscode.workspace.getConfiguration('turnwise');
    const checks = async () => new Map((await vscode.commands.executeCommand('turnwise.checkEnvironment')).checks.map((c) => [c.name, c]));
    const tiny = path.join(vscode.extensions.getExtension(EXTENSION_ID).extensionPath, 'models', 'turnwise-tiny');
    try {
      // A folder of the workspace that is not a model (relative: resolved against the workspace).
      await sec().update('train.model', '.vscode', vscode.ConfigurationTarget.Workspace);
      await sec().update('train.lora', { r: 0 }, vscode.ConfigurationTarget.Workspace);
      let byName = await checks();
      const bad = byName.get('model');
      assert.equal(bad.status, 'fail', JSON.stringify(bad));
      assert.match(bad.detail, /\.vscode has no config\.json, so it is not a model folder/);
      assert.match(bad.fix, /pick a folder that holds config\.json, model\.safetensors .*tokenizer\.json, or the embedded turnwise-tiny/);
      assert.equal(byName.get('lora').status, 'fail');
      assert.match(byName.get('lora').detail, /r must be a positive integer/);
      // The shipped turnwise-tiny as a folder, with an adapter on it.
      await sec().update('train.model', tiny, vscode.ConfigurationTarget.Workspace);
      await sec().update('train.lora', { r: 8, lora_alpha: 16 }, vscode.ConfigurationTarget.Workspace);
      byName = await checks();
      assert.equal(byName.get('model').status, 'ok', JSON.stringify(byName.get('model')));
      assert.match(byName.get('model').detail, /: Qwen2ForCausalLM, 3\.2M parameters, F32, context 1024 tokens/);
      assert.match(byName.get('lora').detail, /^LoRA r 8, lora_alpha 16 on all linear projections/);
      // A LoRA adapter folder as the model (run.mjs writes two beside the workspace): checked over
      // the base it names, the lora line its own settings; one naming a hub id says to pick its base.
      const adapters = `${vscode.workspace.workspaceFolders[0].uri.fsPath}-adapters`;
      await sec().update('train.model', path.join(adapters, 'tiny-lora'), vscode.ConfigurationTarget.Workspace);
      byName = await checks();
      assert.equal(byName.get('model').status, 'ok', JSON.stringify(byName.get('model')));
      assert.match(
        byName.get('model').detail,
        /: LoRA adapter, r 4, lora_alpha 8 on q_proj, v_proj, over .*turnwise-tiny: Qwen2ForCausalLM, 3\.2M parameters/,
      );
      assert.match(
        byName.get('lora').detail,
        /the adapter of turnwise\.train\.model, trained further with its own settings \(turnwise\.train\.lora is not used\)$/,
      );
      await sec().update('train.model', path.join(adapters, 'hub-lora'), vscode.ConfigurationTarget.Workspace);
      byName = await checks();
      assert.equal(byName.get('model').status, 'fail', JSON.stringify(byName.get('model')));
      assert.match(
        byName.get('model').detail,
        /hub-lora is a LoRA adapter trained on "Qwen\/Qwen2\.5-Coder-0\.5B-Instruct", which is not a model folder here/,
      );
      assert.match(byName.get('model').fix, /pick the folder of the model it was trained on \(Start Training Run… asks for it\)/);
    } finally {
      await sec().update('train.model', undefined, vscode.ConfigurationTarget.Workspace);
      await sec().update('train.lora', undefined, vscode.ConfigurationTarget.Workspace);
    }
    const byName = await checks();
    assert.match(byName.get('model').detail, /embedded turnwise-tiny/);
    assert.equal(byName.has('lora'), false);
  });

  it('the API and the command agree on which checks exist', async function () {
    this.timeout(120000);
    const viaApi = await api.checkEnvironment();
    assert.ok(viaApi && Array.isArray(viaApi.checks));
    const names = viaApi.checks.map((c) => c.name);
    assert.ok(names.includes('onnxruntime cuda') && names.includes('onnxruntime webgpu'), `providers tried: ${names.join(', ')}`);
    assert.equal(new Set(names).size, names.length, 'duplicate check names');
  });
});
