// The onnx layer's part of `turnwise doctor`: each execution provider creates a session and runs
// (probeProvider, in a child process so a crashing driver cannot take the doctor down).
import type { Check } from '../core/doctor';
import { describeAdapters, webgpuAdapters, type GpuAdapter } from './adapters';
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

/**
 * Which adapters WebGPU would run on (adapters.ts): ok with a GPU; a warning where the only ones
 * are software drivers (a WebGPU session there runs on the CPU, slower than the cpu provider).
 */
export function adapterCheck(adapters: readonly GpuAdapter[] = webgpuAdapters()): Check {
  const name = 'webgpu adapter';
  if (adapters.some((a) => a.kind === 'hardware')) return { name, status: 'ok', detail: describeAdapters(adapters) };
  return {
    name,
    status: 'warn',
    detail: adapters.length ? `no GPU: ${describeAdapters(adapters)}` : 'no GPU driver found',
    fix: adapters.length
      ? 'optional. A software adapter runs WebGPU on the CPU, slower than the cpu provider: keep executionProvider auto or cpu'
      : "optional. For WebGPU install the GPU vendor's Vulkan driver (see docs/gpus.md)",
  };
}

/** One check per provider: CPU is required (fail), GPU providers are optional (warn); then the WebGPU adapter. */
export async function providerChecks(
  probe: (ep: ExecutionProviderName) => Promise<ProviderProbe> = probeProvider,
  adapters?: readonly GpuAdapter[],
): Promise<Check[]> {
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
  checks.push(adapterCheck(adapters));
  return checks;
}
