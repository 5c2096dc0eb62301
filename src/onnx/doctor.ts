// The onnx layer's part of `turnwise doctor`: each execution provider creates a session and runs
// (probeProvider, in a child process so a crashing driver cannot take the doctor down).
import type { Check } from '../core/doctor';
import { EXECUTION_PROVIDERS, probeProvider, type ExecutionProviderName, type ProviderProbe } from './runtime';

/** Per provider: whether a run needs it, and what to do when it is not there. */
const PROVIDER_NEEDS: Record<ExecutionProviderName, { required: boolean; fix: string }> = {
  cpu: { required: true, fix: 'reinstall onnxruntime-node for this platform' },
  cuda: {
    required: false,
    fix: 'optional. For CUDA: install CUDA 12 + cuDNN 9, then `npm rebuild onnxruntime-node --onnxruntime-node-install=cuda12` (see docs/gpus.md)',
  },
  webgpu: { required: false, fix: 'optional. WebGPU needs a GPU adapter (Vulkan driver); without one training uses the CPU' },
};

/** ORT prefixes provider errors with its source location and the failed assertion; the reason is last. */
export function tidyProviderError(message: string): string {
  const assertion = message.lastIndexOf(' was false. ');
  return assertion >= 0 ? message.slice(assertion + ' was false. '.length) : message;
}

/** One check per provider: CPU is required (fail), GPU providers are optional (warn). */
export async function providerChecks(probe: (ep: ExecutionProviderName) => Promise<ProviderProbe> = probeProvider): Promise<Check[]> {
  const checks: Check[] = [];
  for (const ep of EXECUTION_PROVIDERS) {
    const p = await probe(ep);
    if (p.ok) {
      checks.push({ name: `onnxruntime ${ep}`, status: 'ok', detail: `session created and ran (${p.ms.toFixed(0)} ms)` });
      continue;
    }
    const { required, fix } = PROVIDER_NEEDS[ep];
    checks.push({
      name: `onnxruntime ${ep}`,
      status: required ? 'fail' : 'warn',
      detail: `not available: ${tidyProviderError(p.error ?? 'unknown error')}`,
      fix,
    });
  }
  return checks;
}
