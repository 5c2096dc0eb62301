// Session settings: whether intra-op worker threads spin (off unless asked; never with one thread).
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import {
  autoTriesWebgpu,
  deviceFailure,
  Graph,
  OnnxSession,
  SessionCache,
  nativeReason,
  probeProvider,
  resolveSpinning,
  toModelProto,
  type ProviderProbe,
} from '../../../src/onnx';

describe('onnx runtime: intra-op spinning', () => {
  it('is off unless asked for, and never with one thread', () => {
    assert.equal(resolveSpinning({}), false);
    assert.equal(resolveSpinning({ threads: 2 }), false);
    assert.equal(resolveSpinning({ spinning: false }), false);
    assert.equal(resolveSpinning({ spinning: true }), true);
    assert.equal(resolveSpinning({ spinning: true, threads: 0 }), true);
    assert.equal(resolveSpinning({ spinning: true, threads: 1 }), false);
  });

  it('sessions with and without spinning compute the same', async () => {
    const g = Graph.create();
    const x = g.input('x', 'float32', [3]);
    g.output(g.mul(g.add(x, 1), 2), 'y');
    const model = toModelProto(g);
    const feeds = { x: { dtype: 'float32' as const, dims: [3], data: Float32Array.of(1, 2, 3) } };
    for (const spinning of [true, false]) {
      const s = await OnnxSession.create(model, { provider: 'cpu', threads: 2, spinning });
      assert.deepEqual(Array.from((await s.run(feeds)).y.data as Float32Array), [4, 6, 8]);
      await s.release();
    }
  });
});

describe('onnx runtime: releasing a session', () => {
  it('a cache eviction mid-run waits for the run, then refuses new runs with a clear error', async () => {
    // A MatMul big enough that the run is still going when the cache evicts its session.
    const n = 384;
    const build = (scale: number) => () => {
      const g = Graph.create();
      const a = g.input('a', 'float32', [n, n]);
      let y = a;
      for (let i = 0; i < 12; i++) y = g.matmul(y, a);
      g.output(g.mul(y, scale), 'y');
      return toModelProto(g);
    };
    const cache = new SessionCache({ provider: 'cpu', threads: 1 }, 1);
    const first = await cache.get('first', build(1));
    const data = new Float32Array(n * n).fill(1 / n);
    const running = first.run({ a: { dtype: 'float32', dims: [n, n], data } });
    await cache.get('second', build(2)); // capacity 1: evicts and releases `first` while it runs
    const out = await running;
    assert.ok(Math.abs((out.y.data as Float32Array)[0] - 1 / n) < 1e-5, `got ${(out.y.data as Float32Array)[0]}`);
    await assert.rejects(first.run({ a: { dtype: 'float32', dims: [n, n], data } }), /session was released/);
    await cache.clear();
  });
});

describe('execution provider probes in a child process', function () {
  this.timeout(60000);

  it('an input held as an initializer in a file beside the model (external data) computes what the input fed does; a wrong tensor is refused', async () => {
    const build = () => {
      const g = Graph.create('held');
      const x = g.input('x', 'float32', ['B', 3]);
      const w = g.input('w', 'float32', [2, 3]);
      g.output(g.gemm(x, w, { transB: true }), 'y');
      return g;
    };
    const W = new Float32Array([1, 2, 3, 4, 5, 6]);
    const x = { dtype: 'float32' as const, dims: [2, 3], data: new Float32Array([1, 0, 1, 0.5, 2, -1]) };
    const fed = await OnnxSession.create(toModelProto(build()), { provider: 'cpu' });
    const want = (await fed.run({ x, w: { dtype: 'float32', dims: [2, 3], data: W } })).y.data;
    await fed.release();
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-held-'));
    try {
      const g = build();
      g.holdInput('w', { dtype: 'float32', dims: [2, 3], data: W });
      assert.deepEqual(
        g.inputs.map((v) => v.name),
        ['x'],
      );
      // bytes 4096.. of the file: an offset, as the policy's packed weights use
      const file = Buffer.alloc(4096 + 24, 0xff);
      Buffer.from(W.buffer).copy(file, 4096);
      fs.writeFileSync(path.join(dir, 'w.bin'), file);
      const model = toModelProto(g, { external: (n) => (n === 'w' ? { location: 'w.bin', offset: 4096, length: 24 } : undefined) });
      assert.ok(model.length < 200, 'the weight is not in the model');
      fs.writeFileSync(path.join(dir, 'm.onnx'), model);
      const held = await OnnxSession.create(path.join(dir, 'm.onnx'), { provider: 'cpu' });
      assert.deepEqual(held.inputNames, ['x']);
      assert.deepEqual(Array.from((await held.run({ x })).y.data as Float32Array), Array.from(want as Float32Array));
      await held.release();
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
    assert.throws(
      () => build().holdInput('w', { dtype: 'float32', dims: [3, 2], data: W }),
      /a float32 \[3,2\] tensor for an input of float32 \[2,3\]/,
    );
    assert.throws(() => build().holdInput('nope', { dtype: 'float32', dims: [2, 3], data: W }), /no input nope/);
  });

  it('reads the reason out of native log lines: colour codes, ORT prefixes and known noise removed', () => {
    const ort =
      '\u001b[1;31m2026-11-29 10:19:07.18 [E:onnxruntime:onnxruntime-node, provider_bridge_ort.cc:2146 Create] /onnxruntime_src/x.cc:1988 Get() ' +
      '[ONNXRuntimeError] : 1 : FAIL : Failed to load library libonnxruntime_providers_cuda.so with error: libcublasLt.so.12: cannot open shared object file\n\u001b[m\n';
    assert.equal(
      nativeReason(ort),
      'Failed to load library libonnxruntime_providers_cuda.so with error: libcublasLt.so.12: cannot open shared object file',
    );
    const dawn =
      "error: XDG_RUNTIME_DIR is invalid or not set in the environment.\nWarning: Couldn't load Vulkan: libvulkan.so.1: cannot open shared object file: No such file or directory\n    at operator() (/build/BackendVk.cpp:368)\n";
    assert.equal(nativeReason(dawn), "Couldn't load Vulkan: libvulkan.so.1: cannot open shared object file: No such file or directory");
    assert.equal(nativeReason('all good\n'), undefined);
  });

  it('a probe whose process crashes or hangs is reported as a driver crash or hang, not thrown', async () => {
    const crashed = await probeProvider('webgpu', {
      program: "process.stderr.write('Error: vkCreateDevice failed\\n'); process.kill(process.pid, 'SIGSEGV')",
    });
    assert.equal(crashed.ok, false);
    assert.match(crashed.error ?? '', /was killed by SIGSEGV before answering \(a driver crashed\); vkCreateDevice failed/);
    const hung = await probeProvider('webgpu', { program: 'setInterval(() => {}, 1000)', timeoutMs: 1000 });
    assert.equal(hung.ok, false);
    assert.match(hung.error ?? '', /did not finish in 1 s \(a driver hung\)/);
  });

  it('the real WebGPU and CUDA probes answer from the child: ok, or the reason, and nothing native printed by this process', async () => {
    // Run the probes in a fresh process (as the doctor does) and read that process's stderr:
    // in-process, Dawn and ONNX Runtime write their adapter search and library errors there.
    const runtime = path.resolve(__dirname, '../../../src/onnx/runtime');
    const program = `require(${JSON.stringify(runtime)}).probeProvider('webgpu').then(async (w) => { const c = await require(${JSON.stringify(runtime)}).probeProvider('cuda'); console.log(JSON.stringify([w, c])); })`;
    const r = spawnSync(process.execPath, ['-r', 'tsx/cjs', '-e', program], { encoding: 'utf8', timeout: 60000 });
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stderr, '');
    const [w, c] = JSON.parse(r.stdout) as ProviderProbe[];
    assert.equal(w.provider, 'webgpu');
    if (!w.ok) assert.match(w.error ?? '', /adapter|Vulkan/i);
    assert.equal(c.provider, 'cuda');
    if (!c.ok) assert.match(c.error ?? '', /cuda|CUDA/);
  });
});

describe('onnx runtime: the auto provider', () => {
  it('auto never runs on a software WebGPU adapter: on this machine (no GPU) it gives a CPU session, without a warning', async () => {
    // lavapipe passes the WebGPU session probe here (the webgpu tier runs on it): only the adapter
    // lookup keeps auto off it. With a GPU's driver and device present, auto tries WebGPU after CUDA.
    assert.equal(autoTriesWebgpu(), false);
    const g = Graph.create('auto');
    const x = g.input('x', 'float32', [2]);
    g.output(g.add(x, x), 'y');
    const s = await OnnxSession.create(toModelProto(g), { provider: 'auto', onWarning: (m) => assert.fail(`auto warned: ${m}`) });
    assert.equal(s.provider, 'cpu');
    const y = await s.run({ x: { dtype: 'float32', dims: [2], data: Float32Array.of(1, 2) } });
    assert.deepEqual(Array.from(y.y.data as Float32Array), [2, 4]);
    await s.release();
  });
});

describe('onnx runtime: a GPU that fails mid-run', () => {
  // No GPU here: the messages are those ONNX Runtime's CUDA provider and Dawn (WebGPU) raise for
  // these failures, given as text.
  const ortError = (status: string) =>
    new Error(
      `[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : Non-zero status code returned while running MatMul node. Name:'m' Status Message: ${status}`,
    );

  it('out of memory names the settings to lower and the resume on the CPU', () => {
    for (const [provider, status] of [
      [
        'cuda',
        '/onnxruntime_src/onnxruntime/core/framework/bfc_arena.cc:376 void* onnxruntime::BFCArena::AllocateRawInternal(size_t, bool) Failed to allocate memory for requested buffer of size 1073741824',
      ],
      ['cuda', 'CUDA failure 2: out of memory ; GPU=0 ; hostname=h ; expr=cudaMalloc((void**)&p, size);'],
      ['webgpu', 'Buffer allocation failed: Out of memory'],
    ] as const) {
      const e = deviceFailure(provider, ortError(status))!;
      assert.ok(e, status);
      assert.match(e.message, new RegExp(`^the ${provider} device ran out of memory: `));
      assert.match(e.hint!, /"concurrency".*"updateTokensPerStep"/);
      assert.match(e.hint!, /turnwise train --resume RUN.*--provider cpu/);
    }
  });

  it('a lost device or a crashed driver says so; errors that are not the device keep their own message', () => {
    for (const [provider, status] of [
      ['cuda', 'CUDA failure 700: an illegal memory access was encountered ; GPU=0'],
      ['cuda', 'CUDA failure 999: unknown error ; GPU=0'],
      ['webgpu', 'Device lost: the GPU was reset'],
    ] as const) {
      const e = deviceFailure(provider, ortError(status))!;
      assert.match(e.message, new RegExp(`^the ${provider} device was lost`), status);
      assert.match(e.hint!, /--provider cpu/);
    }
    assert.equal(deviceFailure('cuda', ortError('Invalid rank for input: x Got: 3 Expected: 2')), undefined);
    // The CPU provider's own allocation failure is the host's memory, which the memory plan covers.
    assert.equal(deviceFailure('cpu', ortError('Failed to allocate memory for requested buffer of size 10')), undefined);
  });
});
