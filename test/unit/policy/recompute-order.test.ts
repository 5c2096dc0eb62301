// The order ONNX Runtime runs a training graph that recomputes its layers (graphs.ts
// recomputeLayers) in: read back from the optimized model ONNX Runtime saves (its topological
// order, the one its sequential executor runs), with every value freed after its last reader.
// Recomputing only bounds memory if each layer's recomputed activations are freed before the
// next layer down is recomputed. Without the gradient handed down waiting for the layer's
// parameter gradients, and with nodes that no output needs left in the model, ONNX Runtime ran
// those last and held every layer's activations to the end of the pass (measured at the Llama
// 3.2 1B shape: 3.2 GB of live values against 0.5 GB).
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as ort from 'onnxruntime-node';
import { toModelProto } from '../../../src/onnx';
import { paramSpecs, type ModelConfig } from '../../../src/policy/model/config';
import { LORA_MODULES } from '../../../src/policy/files/lora';
import { buildTrainGraph } from '../../../src/policy/training/graphs';
import { peakLiveBytes, readModelNodes, valueBytes } from '../onnx/model-reader';
import { SMALL_CONFIG } from './helpers';

// ONNX Runtime's order depends on the graph's structure: at 1,024 tokens (attention in 4 query
// chunks) and hidden 256 it runs the weight-gradient products last unless made to wait.
const T = 1024;

/** Peak bytes of live values when the optimized model's nodes run in file order (values ONNX Runtime renamed are not counted). */
async function peakInRuntimeOrder(c: ModelConfig, dir: string, lora: boolean): Promise<number> {
  const g = buildTrainGraph(c, {
    batch: 1,
    seq: T,
    loss: 'ppo-token',
    recomputeLayers: true,
    weightDecay: false,
    ...(lora ? { lora: { r: 16, lora_alpha: 32, target_modules: [...LORA_MODULES], use_rslora: false } } : {}),
  });
  const file = path.join(dir, `opt-${c.num_hidden_layers}-${lora}.onnx`);
  const s = await ort.InferenceSession.create(toModelProto(g), {
    executionProviders: ['cpu'],
    graphOptimizationLevel: 'all',
    optimizedModelFilePath: file,
    logSeverityLevel: 3,
  });
  await s.release();
  return peakLiveBytes(readModelNodes(fs.readFileSync(file)), valueBytes(g)).peak;
}

describe('policy/training: recomputed layers in the order ONNX Runtime runs them', function () {
  this.timeout(120_000);
  let dir: string;
  before(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-recompute-'))));
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  for (const lora of [true, false]) {
    it(`${lora ? 'LoRA' : 'full training'}: each extra layer adds about its input to the peak, not its activations`, async () => {
      const c: ModelConfig = {
        ...SMALL_CONFIG,
        hidden_size: 256,
        intermediate_size: 1024,
        num_attention_heads: 4,
        num_key_value_heads: 2,
        vocab_size: 1000,
      };
      const at = async (layers: number) => peakInRuntimeOrder({ ...c, num_hidden_layers: layers }, dir, lora);
      const [p2, p6] = [await at(2), await at(6)];
      const perLayer = (p6 - p2) / 4;
      // What one layer's activations take: the MLP's gate, up, their product (T × intermediate
      // each) and the attention probabilities (heads × T × T), besides hidden-sized values.
      const activations = 4 * T * (3 * c.intermediate_size + c.num_attention_heads * T);
      const input = 4 * T * c.hidden_size;
      // Full training also keeps each layer's weight gradients for the optimizer.
      const grads = lora
        ? 0
        : 4 *
          paramSpecs(c)
            .filter((p) => p.name.startsWith('model.layers.0.'))
            .reduce((s, p) => s + p.shape.reduce((a, b) => a * b, 1), 0);
      assert.ok(
        perLayer <= 4 * input + grads,
        `each layer adds ${perLayer} bytes to the peak; its input is ${input}, its gradients ${grads}, its activations ${activations}`,
      );
      assert.ok(perLayer - grads < activations / 4);
    });
  }
});
