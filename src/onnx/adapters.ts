// Which GPU adapters a WebGPU session can reach. ONNX Runtime names no adapter, and a software
// Vulkan driver (Mesa's lavapipe, Google's SwiftShader) passes the same session probe as a GPU
// while running far slower than the CPU provider. So the adapters are found the way the Vulkan
// loader finds them: the driver manifests installed (ICD JSON files), each driver's library told
// apart by name, and, for a hardware driver, the device node it opens (/dev/nvidia*, /dev/dri/renderD*).
import * as childProcess from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

export interface GpuAdapter {
  /** 'software': a driver that runs on the CPU; 'hardware': a GPU's driver with its device present. */
  kind: 'hardware' | 'software';
  /** What it is: the GPU's name where the driver says (nvidia-smi), else the driver's. */
  name: string;
  /** The Vulkan driver library (its ICD manifest's library_path). */
  driver: string;
  /** The GPU's memory, where the driver says (nvidia-smi); undefined otherwise. */
  memoryBytes?: number;
}

/** Software Vulkan drivers, by their library's name. */
const SOFTWARE = [
  { re: /lvp/i, name: 'Mesa lavapipe' },
  { re: /swiftshader/i, name: 'SwiftShader' },
];

/** Hardware Vulkan drivers by library name, with the device nodes their GPUs appear as. */
const HARDWARE = [
  { re: /nvidia/i, name: 'NVIDIA', devices: (root: string) => exists(root, 'dev/nvidiactl') || exists(root, 'dev/nvidia0') },
  {
    // Mesa's GPU drivers (radeon, intel, nouveau, freedreno, panfrost, asahi, broadcom, virtio...)
    re: /libvulkan_(\w+)\.so/i,
    name: 'Mesa',
    devices: (root: string) => {
      try {
        return fs.readdirSync(path.join(root, 'dev/dri')).some((f) => f.startsWith('renderD'));
      } catch {
        return false;
      }
    },
  },
];

function exists(root: string, p: string): boolean {
  return fs.existsSync(path.join(root, p));
}

/** The ICD manifest files the Vulkan loader reads, in its order (an override variable replaces the search). */
export function vulkanManifests(env: NodeJS.ProcessEnv = process.env, root = '/'): string[] {
  const override = env.VK_DRIVER_FILES || env.VK_ICD_FILENAMES;
  if (override) return override.split(path.delimiter).filter(Boolean);
  const dataDirs = (env.XDG_DATA_DIRS || '/usr/local/share:/usr/share').split(path.delimiter).filter(Boolean);
  const dirs = [...(env.XDG_CONFIG_DIRS || '/etc/xdg').split(path.delimiter).filter(Boolean), '/etc', ...dataDirs].map((d) =>
    path.join(root, d, 'vulkan', 'icd.d'),
  );
  const out: string[] = [];
  for (const d of [...new Set(dirs)]) {
    try {
      for (const f of fs.readdirSync(d).sort()) if (f.endsWith('.json')) out.push(path.join(d, f));
    } catch {
      // no such directory
    }
  }
  return out;
}

/**
 * The adapters WebGPU can use on this machine: each installed Vulkan driver that is software, or
 * that is a GPU's driver with its device present (a Mesa driver for a GPU the machine does not
 * have is left out), GPUs first. On macOS the system's Metal GPU; elsewhere (Windows) nothing is known.
 * `root` and `gpuInfo` let tests describe another machine.
 */
export function webgpuAdapters(
  o: { env?: NodeJS.ProcessEnv; root?: string; platform?: NodeJS.Platform; gpuInfo?: () => { name: string; memoryBytes?: number }[] } = {},
): GpuAdapter[] {
  const platform = o.platform ?? process.platform;
  if (platform === 'darwin') return [{ kind: 'hardware', name: 'Apple GPU (Metal)', driver: 'Metal' }];
  if (platform !== 'linux') return [];
  const root = o.root ?? '/';
  const out: GpuAdapter[] = [];
  const seen = new Set<string>();
  for (const file of vulkanManifests(o.env ?? process.env, root)) {
    let lib: string;
    try {
      const m = JSON.parse(fs.readFileSync(file, 'utf8')) as {
        ICD?: { library_path?: unknown };
      };
      if (typeof m.ICD?.library_path !== 'string') continue;
      lib = path.basename(m.ICD.library_path);
    } catch {
      continue; // a manifest that cannot be read names no driver the loader can use either
    }
    if (seen.has(lib)) continue;
    seen.add(lib);
    const soft = SOFTWARE.find((s) => s.re.test(lib));
    if (soft) {
      out.push({ kind: 'software', name: soft.name, driver: lib });
      continue;
    }
    const hard = HARDWARE.find((h) => h.re.test(lib));
    if (!hard || !hard.devices(root)) continue;
    if (hard.name === 'NVIDIA') {
      const gpus = (o.gpuInfo ?? nvidiaGpus)();
      if (gpus.length) for (const g of gpus) out.push({ kind: 'hardware', name: g.name, driver: lib, memoryBytes: g.memoryBytes });
      else out.push({ kind: 'hardware', name: 'NVIDIA GPU', driver: lib });
    } else out.push({ kind: 'hardware', name: `${hard.name} ${/libvulkan_(\w+)/i.exec(lib)?.[1] ?? lib}`, driver: lib });
  }
  // GPUs first: Dawn prefers a GPU adapter to a CPU one.
  return [...out.filter((a) => a.kind === 'hardware'), ...out.filter((a) => a.kind === 'software')];
}

/** NVIDIA GPUs and their memory as nvidia-smi lists them; none when it is absent or fails. */
export function nvidiaGpus(): { name: string; memoryBytes?: number }[] {
  try {
    const text = childProcess.execFileSync('nvidia-smi', ['--query-gpu=name,memory.total', '--format=csv,noheader,nounits'], {
      encoding: 'utf8',
      timeout: 10_000,
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    return text
      .split('\n')
      .map((l) => l.split(',').map((s) => s.trim()))
      .filter(([name]) => name)
      .map(([name, mib]) => ({ name, ...(Number(mib) > 0 ? { memoryBytes: Number(mib) * 2 ** 20 } : {}) }));
  } catch {
    return [];
  }
}

/** A line for the doctor: the adapters found and which of them is a GPU. */
export function describeAdapters(adapters: readonly GpuAdapter[]): string {
  if (!adapters.length) return 'no Vulkan driver found';
  return adapters
    .map(
      (a) =>
        `${a.name}${a.memoryBytes ? `, ${(a.memoryBytes / 2 ** 30).toFixed(0)} GiB` : ''}, ${a.kind === 'software' ? 'software (runs on the CPU)' : 'GPU'} [${a.driver}]`,
    )
    .join('; ');
}
