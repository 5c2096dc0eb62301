// The operators the generated graphs use, against the GPU providers' kernel lists: every one has a
// CUDA kernel; the WebGPU gaps are listed (those nodes run on the CPU there), so a new gap shows.
// The verbose session log's node placements are read back.
import { strict as assert } from 'node:assert';
import { opsWithoutKernel, opTypes, parsePlacements } from '../../../src/onnx/ops';
import { nodePlacements } from '../../../src/onnx/placements';
import { toModelProto } from '../../../src/onnx/model';
import { buildDecodeLoopGraph, buildStepGraph } from '../../../src/policy/model/graphs';
import { buildTrainGraph } from '../../../src/policy/training/graphs';
import { BENCH_SHAPES } from '../../../src/bench/model';
import { LORA_MODULES } from '../../../src/policy/files/lora';

const c = BENCH_SHAPES['tiny-test'];
const lora = { r: 4, lora_alpha: 8, use_rslora: false, target_modules: [...LORA_MODULES] };

function graphs() {
  return {
    prefill: buildStepGraph(c, 'prefill', lora, 'rows'),
    decode: buildStepGraph(c, 'decode', lora),
    'decode (cache only)': buildStepGraph(c, 'decode', undefined, 'none'),
    'decode (several rows, tokens drawn in the graph)': buildStepGraph(c, 'decode', lora, 'sample', 'weights-left'),
    'decode loop (steps in a Loop, several rows)': buildDecodeLoopGraph(c, lora, 'weights-left'),
    'train (ppo-token, LoRA, 2 steps in a Loop)': buildTrainGraph(c, { loss: 'ppo-token', batch: 2, seq: 8, lora }, 2),
    'train (sft, full)': buildTrainGraph(c, { loss: 'sft', batch: 2, seq: 8 }),
  };
}

describe('onnx/ops: operators of the generated graphs and provider kernels', () => {
  it('lists op types over subgraphs too (the Loop body of a K-step training graph)', () => {
    const ops = opTypes(graphs()['train (ppo-token, LoRA, 2 steps in a Loop)']);
    assert.ok(ops.has('Loop') && ops.has('MatMul') && ops.has('Softmax'), [...ops.keys()].join(' '));
  });

  it('every op of the inference and training graphs has a CUDA kernel', () => {
    for (const [name, g] of Object.entries(graphs())) assert.deepEqual([...opsWithoutKernel(g, 'cuda').keys()], [], name);
  });

  it('WebGPU: the inference graphs miss nothing; of the training graphs only the Loop of a K-step graph runs on the CPU', () => {
    const g = graphs();
    assert.deepEqual([...opsWithoutKernel(g.decode, 'webgpu').keys()], []);
    assert.deepEqual([...opsWithoutKernel(g.prefill, 'webgpu').keys()], []);
    assert.deepEqual([...opsWithoutKernel(g['train (ppo-token, LoRA, 2 steps in a Loop)'], 'webgpu').keys()], ['Loop']);
    assert.deepEqual([...opsWithoutKernel(g['train (sft, full)'], 'webgpu').keys()], []);
    assert.deepEqual([...opsWithoutKernel(g['decode (several rows, tokens drawn in the graph)'], 'webgpu').keys()], []);
    assert.deepEqual([...opsWithoutKernel(g['decode loop (steps in a Loop, several rows)'], 'webgpu').keys()], ['Loop']);
  });

  it("nodePlacements: a real ONNX Runtime session's log, one process per graph; a model that cannot be opened says why", function () {
    this.timeout(120_000);
    const g = graphs();
    const [prefill, decode, broken] = nodePlacements('cpu', [
      { name: 'prefill', bytes: toModelProto(g.prefill) },
      { name: 'decode', bytes: toModelProto(g.decode) },
      { name: 'broken', bytes: new Uint8Array([8, 1, 0xff, 0xff]) },
    ]);
    // On the CPU provider the log says every node is there, in one line.
    for (const p of [prefill, decode]) {
      assert.equal(p.error, undefined, `${p.graph}: ${p.error}`);
      assert.deepEqual(Object.keys(p.providers), ['CPUExecutionProvider']);
      assert.ok(p.cpuNodes > 20, `${p.graph}: ${p.cpuNodes} nodes`);
    }
    assert.equal(broken.graph, 'broken');
    assert.ok(broken.error && broken.error.length > 0, JSON.stringify(broken));
    assert.equal(broken.cpuNodes, 0);
  });

  it('reads node placements from the verbose session log', () => {
    const log = [
      '2026-12-02 09:21:38.166069199 [V:onnxruntime:, session_state.cc:1377 VerifyEachNodeIsAssignedToAnEp] Node placements',
      '2026-12-02 09:21:38.166078416 [V:onnxruntime:, session_state.cc:1380 VerifyEachNodeIsAssignedToAnEp]  Node(s) placed on [WebGpuExecutionProvider]. Number of nodes: 158',
      '2026-12-02 09:21:38.166078416 [V:onnxruntime:, session_state.cc:1380 VerifyEachNodeIsAssignedToAnEp]   MatMul (MatMul_12)',
      '2026-12-02 09:21:38.166078416 [V:onnxruntime:, session_state.cc:1380 VerifyEachNodeIsAssignedToAnEp]  Node(s) placed on [CPUExecutionProvider]. Number of nodes: 2',
      '2026-12-02 09:21:38.166078416 [V:onnxruntime:, session_state.cc:1380 VerifyEachNodeIsAssignedToAnEp]   Max (Max_40)',
      '2026-12-02 09:21:38.166078416 [V:onnxruntime:, session_state.cc:1380 VerifyEachNodeIsAssignedToAnEp]   Max (Max_93)',
      '2026-12-02 09:21:38.170875419 [V:onnxruntime:, session_state.cc:186 CreateGraphInfo] SaveMLValueNameIndexMapping',
    ].join('\n');
    const p = parsePlacements(log);
    assert.deepEqual(p.get('CPUExecutionProvider'), { count: 2, nodes: ['Max (Max_40)', 'Max (Max_93)'] });
    assert.equal(p.get('WebGpuExecutionProvider')?.count, 158);
    assert.deepEqual(
      [...parsePlacements('… VerifyEachNodeIsAssignedToAnEp]  All nodes placed on [CPUExecutionProvider]. Number of nodes: 160')],
      [['CPUExecutionProvider', { count: 160, nodes: [] }]],
    );
  });
});
