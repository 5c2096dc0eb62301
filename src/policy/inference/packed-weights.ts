// The base weights a packed decode session holds (ProductForm 'packed'): written once to a file
// in Turnwise's cache that the session's model names as ONNX external data, for ONNX Runtime to
// load and pack. A policy's folder goes when the policy drops it or the process exits; folders of
// processes killed before their exit hook go when the next one is made.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { toModelProto, type DType, type ExternalTensor, type Graph, type HostTensor } from '../../onnx';
import { TurnwiseError } from '../../core/errors';
import { turnwiseCacheDir } from '../../core/fs';

/** A policy's packed weights: the folder, and where each tensor is in its weights.bin, with its type and shape. */
export interface PackedWeights {
  dir: string;
  places: Map<string, ExternalTensor & { dtype: DType; dims: readonly number[] }>;
}

/** Folders of packed weights this process has written: removed when their policy is disposed, or at exit. */
const packedDirs = new Set<string>();
let exitHookSet = false;

/**
 * A new folder for a policy's packed weights under the cache (not the system's temp folder, which
 * may be memory), after removing those left by processes that no longer run (killed before their
 * exit hook).
 */
function newPackedDir(): string {
  const root = turnwiseCacheDir('packed');
  fs.mkdirSync(root, { recursive: true });
  for (const name of fs.readdirSync(root)) {
    const pid = Number(/^(\d+)-/.exec(name)?.[1]);
    if (!(pid > 0) || pid === process.pid) continue;
    let alive = true;
    try {
      process.kill(pid, 0);
    } catch (e) {
      alive = (e as NodeJS.ErrnoException).code === 'EPERM';
    }
    if (!alive) fs.rmSync(path.join(root, name), { recursive: true, force: true });
  }
  const dir = fs.mkdtempSync(path.join(root, `${process.pid}-`));
  packedDirs.add(dir);
  if (!exitHookSet) {
    exitHookSet = true;
    process.on('exit', () => {
      for (const d of packedDirs) fs.rmSync(d, { recursive: true, force: true });
    });
  }
  return dir;
}

function removePackedDir(dir: string): void {
  fs.rmSync(dir, { recursive: true, force: true });
  packedDirs.delete(dir);
}

/** Offsets of the packed weights' file are multiples of this (pages, on every system ONNX Runtime maps files on). */
const PACKED_ALIGN = 64 * 1024;

/**
 * Writes `feeds` (the base weights in graph layout) to weights.bin in a new folder, each tensor at
 * an aligned offset, synced to disk before any session reads it.
 */
export function writePackedWeights(feeds: Record<string, HostTensor>): PackedWeights {
  const dir = newPackedDir();
  const places: PackedWeights['places'] = new Map();
  const fd = fs.openSync(path.join(dir, 'weights.bin'), 'w');
  try {
    let offset = 0;
    for (const [name, t] of Object.entries(feeds)) {
      const d = t.data;
      fs.writeSync(fd, new Uint8Array(d.buffer, d.byteOffset, d.byteLength), 0, d.byteLength, offset);
      places.set(name, { location: 'weights.bin', offset, length: d.byteLength, dtype: t.dtype, dims: t.dims });
      offset += Math.ceil(d.byteLength / PACKED_ALIGN) * PACKED_ALIGN;
    }
    // On disk before the session reads it: the system writing gigabytes back in the background
    // would otherwise take the memory bandwidth of the first decode steps.
    fs.fsyncSync(fd);
  } catch (e) {
    fs.closeSync(fd);
    removePackedDir(dir);
    throw new TurnwiseError('runtime-unavailable', `could not write the decode weights to pack to ${dir}: ${(e as Error).message}`, {
      hint: 'free disk space there (the file takes the float32 weights\' size, and goes when the policy does), or set "packDecodeWeights": "off"',
    });
  }
  fs.closeSync(fd);
  return { dir, places };
}

/**
 * Writes `g` into the packed weights' folder with every tensor of the file held as an initializer
 * stored there; returns the model's path, for a session to load.
 */
export function writePackedModel(packed: PackedWeights, g: Graph): string {
  for (const [name, t] of packed.places)
    g.holdInput(name, { dtype: t.dtype, dims: [...t.dims], data: new Uint8Array(0) }, { external: true });
  const model = path.join(packed.dir, `${g.name}.onnx`);
  fs.writeFileSync(model, toModelProto(g, { external: (n) => packed.places.get(n) }));
  return model;
}

/** Removes the packed weights' folder (at once, not at exit). */
export function removePackedWeights(packed: PackedWeights): void {
  removePackedDir(packed.dir);
}
