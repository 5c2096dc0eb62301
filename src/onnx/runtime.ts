// ONNX Runtime sessions and execution providers. Asking onnxruntime-node for an EP whose
// libraries are absent throws instead of falling back, so every EP is tried for real.
import * as ort from 'onnxruntime-node';
import { ProtoWriter } from './protobuf';

export type ExecutionProviderName = 'cpu' | 'cuda' | 'webgpu';
export const EXECUTION_PROVIDERS: readonly ExecutionProviderName[] = ['cpu', 'cuda', 'webgpu'];

const FLOAT = 1; // TensorProto.DataType.FLOAT

/** A one-node model, Y = X + X over float[N], used to prove an EP really runs. */
export function probeModel(): Uint8Array {
  const valueInfo = (w: ProtoWriter, name: string) =>
    w
      .string(1, name)
      .message(2, (t) => t.message(1, (tt) => tt.int(1, FLOAT).message(2, (s) => s.message(1, (d) => d.string(2, 'N')))));
  return new ProtoWriter()
    .int(1, 8) // ir_version
    .string(2, 'turnwise')
    .message(7, (g) =>
      g
        .message(1, (n) => n.string(1, 'X').string(1, 'X').string(2, 'Y').string(3, 'add').string(4, 'Add'))
        .string(2, 'probe')
        .message(11, (w) => valueInfo(w, 'X'))
        .message(12, (w) => valueInfo(w, 'Y')),
    )
    .message(8, (o) => o.string(1, '').int(2, 17))
    .finish();
}

export interface ProviderProbe {
  provider: ExecutionProviderName;
  ok: boolean;
  /** Whether onnxruntime-node ships this provider's libraries in the package. */
  bundled: boolean;
  ms: number;
  error?: string;
}

/** Creates a session on `provider` alone and checks that it computes 2·x correctly. */
export async function probeProvider(provider: ExecutionProviderName): Promise<ProviderProbe> {
  const bundled = ort.listSupportedBackends().find((b) => b.name === provider)?.bundled ?? false;
  const t0 = performance.now();
  let session: ort.InferenceSession | undefined;
  try {
    session = await ort.InferenceSession.create(probeModel(), {
      executionProviders: [provider],
      logSeverityLevel: 4,
    });
    const x = new Float32Array([1, 2, 3, 4]);
    const out = await session.run({ X: new ort.Tensor('float32', x, [4]) });
    const y = out.Y.data as Float32Array;
    const good = y.length === 4 && y.every((v, i) => v === 2 * x[i]);
    return { provider, ok: good, bundled, ms: performance.now() - t0, ...(good ? {} : { error: `wrong result ${Array.from(y)}` }) };
  } catch (e) {
    return { provider, ok: false, bundled, ms: performance.now() - t0, error: (e as Error).message.split('\n')[0] };
  } finally {
    await session?.release().catch(() => undefined);
  }
}

export { ort };
