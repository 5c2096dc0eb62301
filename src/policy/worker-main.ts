// Entry of the policy worker thread (PolicyWorker): holds one TrainablePolicy and answers the
// main thread's calls, so ONNX Runtime's blocking run() never stalls the main event loop.
// Bundled as dist/policy-worker.js; under tsx the .ts file itself is loaded.
import { parentPort } from 'node:worker_threads';
import { errorToJson, TurnwiseError } from '../core/errors';
import { TrainablePolicy } from './trainable';
import type { WorkerReply, WorkerRequest } from './worker';

const port =
  parentPort ??
  (() => {
    throw new Error('policy/worker-main.ts runs inside a worker thread (PolicyWorker)');
  })();
let policy: TrainablePolicy | undefined;

function loaded(): TrainablePolicy {
  if (!policy)
    throw new TurnwiseError('internal', 'no policy is loaded in this policy worker', {
      hint: 'call PolicyWorker.loadCheckpoint() or loadWeights() first',
    });
  return policy;
}

async function handle(req: WorkerRequest): Promise<{ result: unknown; transfer?: ArrayBuffer[] }> {
  const settings =
    'settings' in req
      ? { ...req.settings, onWarning: (message: string) => port.postMessage({ warning: message } satisfies WorkerReply) }
      : undefined;
  switch (req.method) {
    case 'loadCheckpoint':
      await policy?.dispose();
      policy = TrainablePolicy.fromCheckpoint(req.dir, settings, req.options);
      return { result: await policy.info() };
    case 'loadWeights':
      await policy?.dispose();
      policy = new TrainablePolicy(req.weights, { ...req.options, settings });
      return { result: await policy.info() };
    case 'info':
      return { result: await loaded().info() };
    case 'newSequence':
      return { result: await loaded().newSequence(req.tokens) };
    case 'tokens':
      return { result: await loaded().tokens(req.seq) };
    case 'reset':
      return { result: await loaded().reset(req.seq, req.ids) };
    case 'release':
      return { result: await loaded().release(req.seq) };
    case 'extend':
      return { result: await loaded().extend(req.requests) };
    case 'sample':
      return { result: await loaded().sample(req.requests) };
    case 'logprobs': {
      const rows = await loaded().logprobs(req.rows, req.options);
      return { result: rows, transfer: rows.map((r) => r.buffer as ArrayBuffer) };
    }
    case 'train': {
      const p = loaded();
      const metrics = await p.train(...req.args);
      return { result: { metrics, step: (await p.info()).step } };
    }
    case 'saveCheckpoint':
      return { result: await loaded().saveCheckpoint(req.dir) };
    case 'weights':
      return { result: await loaded().weights() };
    case 'optimizerState':
      return { result: await loaded().optimizerState() };
    case 'setRolloutPrecision':
      return { result: await loaded().setRolloutPrecision(req.setting) };
    case 'dispose':
      await policy?.dispose();
      policy = undefined;
      return { result: undefined };
    case 'crashForTest':
      // Tests of PolicyWorker's crash handling: an exception nothing catches ends the thread.
      setImmediate(() => {
        throw new Error('simulated crash of the policy worker');
      });
      return new Promise(() => undefined);
  }
}

port.on('message', (req: WorkerRequest) => {
  handle(req).then(
    ({ result, transfer }) => port.postMessage({ id: req.id, result } satisfies WorkerReply, transfer ?? []),
    (e: unknown) => port.postMessage({ id: req.id, error: errorToJson(e) } satisfies WorkerReply),
  );
});
