// A LoRA adapter folder in the PEFT layout for a model folder (B = 0, so it is the model), for
// the editor's tests: adapter_config.json names the base as given (a folder, or a hub id that is
// not a folder here).
//   node -r tsx/cjs test/support/adapterFixture.ts --model DIR --out DIR [--base-name NAME]
import { loadCheckpoint } from '../../src/policy/files/checkpoint';
import { initAdapter, parseLoraConfig, saveAdapter } from '../../src/policy/files/lora';

export function writeAdapterFixture(modelDir: string, out: string, baseName = modelDir): void {
  const config = loadCheckpoint(modelDir, { optimizer: false }).weights.config;
  const lora = parseLoraConfig({ r: 4, lora_alpha: 8, target_modules: ['q_proj', 'v_proj'] }, 'the adapter fixture', baseName);
  saveAdapter(out, initAdapter(config, lora, 7), config);
}

if (require.main === module) {
  const arg = (name: string) => {
    const i = process.argv.indexOf(`--${name}`);
    return i > 0 ? process.argv[i + 1] : undefined;
  };
  const model = arg('model');
  const out = arg('out');
  if (!model || !out) {
    console.error('usage: adapterFixture.ts --model DIR --out DIR [--base-name NAME]');
    process.exit(2);
  }
  writeAdapterFixture(model, out, arg('base-name') ?? model);
  console.log(out);
}
