// Evaluate Policy: a checkpoint of a run, or an OpenAI-compatible endpoint, evaluated on a task
// file by `turnwise eval`, with sampled episodes for PASS@(k,T); the results file goes to
// .turnwise/evals/, where Compare Evaluations finds it.
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { endpointUrlProblem, evalOutFile, keyEnvProblem } from '../model/evalFiles';
import { listRuns, runsRoot } from '../model/runIndex';
import { pct } from '../model/turnView';
import { RewardPanel } from '../rewardPanel';
import { command } from './context';
import { dockerReachable, workspaceRoot } from './preconditions';
import { TASKS_DIR } from './taskFiles';

/** What Evaluate Policy remembers of an endpoint: its URL, model and the name of the key's variable. */
interface RememberedEndpoint {
  url: string;
  model: string;
  keyEnv: string;
}
const ENDPOINT_KEY = 'turnwise.eval.endpoint';
const SAMPLES_KEY = 'turnwise.eval.samples';

/** The endpoint to evaluate: the URL, the model (empty: the server's one) and the key's variable (empty: none). */
async function askEndpoint(last: RememberedEndpoint | undefined): Promise<RememberedEndpoint | undefined> {
  const steps: {
    field: keyof RememberedEndpoint;
    title: string;
    prompt: string;
    placeHolder: string;
    validateInput?: (v: string) => string | undefined;
  }[] = [
    {
      field: 'url',
      title: 'endpoint URL',
      prompt: 'An OpenAI-compatible server: vLLM, SGLang, llama.cpp, Ollama, a hosted API, or `turnwise serve`',
      placeHolder: 'http://127.0.0.1:8000/v1',
      validateInput: (v) => endpointUrlProblem(v),
    },
    {
      field: 'model',
      title: 'model',
      prompt: 'The model to ask the server for; empty: the one model the server lists',
      placeHolder: 'e.g. Qwen/Qwen2.5-Coder-7B-Instruct',
    },
    {
      field: 'keyEnv',
      title: 'API key variable',
      prompt:
        'The name of the environment variable that holds the API key (the key itself is never asked for or stored); empty: a server that needs no key',
      placeHolder: 'e.g. OPENAI_API_KEY',
      validateInput: (v) => keyEnvProblem(v.trim(), process.env),
    },
  ];
  const answer: RememberedEndpoint = { url: '', model: '', keyEnv: '' };
  for (const [i, { field, title, ...box }] of steps.entries()) {
    const v = await vscode.window.showInputBox({
      ...box,
      title: `Evaluate Policy: ${title} (${i + 1}/${steps.length})`,
      value: last?.[field] ?? '',
      ignoreFocusOut: true,
    });
    if (v === undefined) return undefined;
    answer[field] = v.trim();
  }
  return answer;
}

export const evaluatePolicyCommand = command('turnwise.evaluatePolicy', async (ctx) => {
  const root = workspaceRoot('evaluate a policy');
  await dockerReachable('evaluate a policy');
  type Pick = vscode.QuickPickItem & ({ kind?: undefined; dir: string } | { kind?: undefined; endpoint: 'new' | 'last' });
  const checkpoints: Pick[] = [];
  for (const r of listRuns(runsRoot(root))) {
    const cdir = path.join(r.dir, 'checkpoints');
    let names: string[];
    try {
      names = fs.readdirSync(cdir).filter((n) => /^\d+$/.test(n));
    } catch {
      continue;
    }
    for (const n of names.sort((a, b) => Number(b) - Number(a))) {
      const adapter = fs.existsSync(path.join(cdir, n, 'adapter_config.json'));
      checkpoints.push({
        label: `${r.runId} · checkpoint ${n}`,
        description: [r.model?.label, adapter ? 'LoRA adapter' : undefined].filter(Boolean).join(' · ') || undefined,
        dir: path.join(cdir, n),
      });
    }
  }
  const memo = ctx.workspaceState;
  const last = memo?.get<RememberedEndpoint>(ENDPOINT_KEY);
  const endpoints: Pick[] = [
    ...(last
      ? [
          {
            label: `$(cloud) ${last.model || "the server's model"} at ${last.url}`,
            description: last.keyEnv ? `key in $${last.keyEnv}` : 'no key',
            detail: 'the endpoint used last',
            endpoint: 'last' as const,
          },
        ]
      : []),
    {
      label: '$(cloud) Endpoint…',
      description: 'an OpenAI-compatible server: vLLM, SGLang, llama.cpp, Ollama, a hosted API, turnwise serve',
      endpoint: 'new' as const,
    },
  ];
  const items: (Pick | vscode.QuickPickItem)[] = [
    ...endpoints,
    {
      label: checkpoints.length ? 'checkpoints' : 'no checkpoint yet: start a training run to evaluate one',
      kind: vscode.QuickPickItemKind.Separator,
    },
    ...checkpoints,
  ];
  const picked = (await vscode.window.showQuickPick(items, { title: 'Evaluate Policy: a checkpoint or an endpoint' })) as Pick | undefined;
  if (!picked) return undefined;
  let target: { args: string[]; label: string };
  if ('endpoint' in picked) {
    let ep = picked.endpoint === 'last' ? last : await askEndpoint(last);
    if (!ep) return undefined;
    // The variable must be there now: the evaluation reads the key from the same environment.
    const problem = keyEnvProblem(ep.keyEnv, process.env);
    if (problem) {
      ep = await askEndpoint(ep);
      if (!ep) return undefined;
    }
    await memo?.update(ENDPOINT_KEY, ep);
    target = {
      args: [
        '--endpoint',
        ep.url,
        ...(ep.model ? ['--endpoint-model', ep.model] : []),
        ...(ep.keyEnv ? ['--endpoint-key-env', ep.keyEnv] : []),
      ],
      label: `${ep.model || 'endpoint'}@${(() => {
        try {
          return new URL(ep.url).host;
        } catch {
          return 'server';
        }
      })()}`,
    };
  } else {
    target = { args: ['--model', picked.dir], label: picked.label.replace(' · checkpoint ', '-ckpt') };
  }
  // Sampled episodes per task for PASS@(k,T), the last choice first.
  const lastSamples = memo?.get<number>(SAMPLES_KEY) ?? 4;
  const sampleItems = [4, 8, 16, 2, 0]
    .sort((a, b) => (a === lastSamples ? -1 : b === lastSamples ? 1 : 0))
    .map((n) => ({
      label: n ? `${n} sampled episodes per task` : 'Greedy only',
      description: n ? `PASS@(k,T) for k up to ${n}, besides the greedy episode` : 'one greedy episode per task; no PASS@(k,T)',
      n,
    }));
  const samples = await vscode.window.showQuickPick(sampleItems, { title: 'Evaluate Policy: sampled episodes' });
  if (!samples) return undefined;
  await memo?.update(SAMPLES_KEY, samples.n);
  const synth = path.join(root, TASKS_DIR, 'synth.jsonl');
  const tasksPick = await vscode.window.showOpenDialog({
    title: 'Evaluate Policy: task file',
    canSelectMany: false,
    filters: { 'Task files': ['jsonl'] },
    defaultUri: vscode.Uri.file(fs.existsSync(synth) ? synth : root),
  });
  if (!tasksPick?.[0]) return undefined;
  // One results file per evaluation, where the reward panel's comparison finds it.
  const out = evalOutFile(root, target.label);
  const result = await ctx.controller.runCommand<{ resolved?: number; sampled?: { resolved?: number } }>(
    'evaluating…',
    ['eval', '--tasks', tasksPick[0].fsPath, ...target.args, ...(samples.n ? ['--samples', String(samples.n)] : []), '--out', out],
    root,
  );
  ctx.log.info(`evaluation: ${JSON.stringify(result)}`);
  const rel = path.relative(root, out);
  void vscode.window
    .showInformationMessage(
      `Turnwise: evaluation finished: resolved ${pct(result?.resolved)}${result?.sampled ? `, sampled ${pct(result.sampled.resolved)}` : ''}; results in ${rel}.`,
      'Compare Evaluations',
      'Show Log',
    )
    .then((c) => {
      if (c === 'Compare Evaluations')
        void vscode.commands.executeCommand('turnwise.compareEvaluations', [out, ...(RewardPanel.instance?.selectedEvaluations ?? [])]);
      else if (c === 'Show Log') ctx.log.show(true);
    });
  return { ...result, out };
});
