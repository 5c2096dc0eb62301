// Telling GPU adapters from software ones without asking Dawn: Vulkan driver manifests and the
// device nodes a GPU's driver needs. A machine is described in a temporary directory (its
// /usr/share/vulkan/icd.d and /dev); nvidia-smi's answer is given, as no GPU is at hand here.
import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { vulkanManifests, webgpuAdapters } from '../../../src/onnx/adapters';

describe('onnx: WebGPU adapters', () => {
  let root: string;
  const env = { XDG_DATA_DIRS: '/usr/share', XDG_CONFIG_DIRS: '/etc/xdg' };
  beforeEach(() => (root = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-adapters-'))));
  afterEach(() => fs.rmSync(root, { recursive: true, force: true }));
  const icd = (file: string, lib: string) => {
    const dir = path.join(root, 'usr/share/vulkan/icd.d');
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(
      path.join(dir, file),
      JSON.stringify({ file_format_version: '1.0.0', ICD: { library_path: lib, api_version: '1.3' } }),
    );
  };
  const device = (p: string) => {
    fs.mkdirSync(path.dirname(path.join(root, p)), { recursive: true });
    fs.writeFileSync(path.join(root, p), '');
  };
  const gpus = () => [{ name: 'NVIDIA H200', memoryBytes: 143771 * 2 ** 20 }];

  it('lavapipe alone is a software adapter; Mesa drivers for GPUs the machine lacks are left out', () => {
    icd('lvp_icd.json', 'libvulkan_lvp.so');
    icd('radeon_icd.json', 'libvulkan_radeon.so');
    icd('intel_icd.json', 'libvulkan_intel.so');
    const a = webgpuAdapters({ env, root, platform: 'linux', gpuInfo: gpus });
    assert.deepEqual(a, [{ kind: 'software', name: 'Mesa lavapipe', driver: 'libvulkan_lvp.so' }]);
  });

  it("NVIDIA's driver with its device is a GPU, named and sized by nvidia-smi; without the device it is not", () => {
    icd('nvidia_icd.json', 'libGLX_nvidia.so.0');
    icd('lvp_icd.json', 'libvulkan_lvp.so');
    assert.deepEqual(
      webgpuAdapters({ env, root, platform: 'linux', gpuInfo: gpus }).map((a) => a.kind),
      ['software'],
    );
    device('dev/nvidiactl');
    const a = webgpuAdapters({ env, root, platform: 'linux', gpuInfo: gpus });
    assert.deepEqual(a[0], { kind: 'hardware', name: 'NVIDIA H200', driver: 'libGLX_nvidia.so.0', memoryBytes: 143771 * 2 ** 20 });
  });

  it('a Mesa GPU driver with a render node is a GPU; SwiftShader is software; a broken manifest is skipped', () => {
    icd('radeon_icd.json', '/usr/lib/x86_64-linux-gnu/libvulkan_radeon.so');
    icd('swiftshader_icd.json', './libvk_swiftshader.so');
    fs.writeFileSync(path.join(root, 'usr/share/vulkan/icd.d/broken.json'), '{not json');
    device('dev/dri/renderD128');
    const a = webgpuAdapters({ env, root, platform: 'linux', gpuInfo: gpus });
    assert.deepEqual(
      a.map((x) => [x.kind, x.name]),
      [
        ['hardware', 'Mesa radeon'],
        ['software', 'SwiftShader'],
      ],
    );
  });

  it('VK_DRIVER_FILES replaces the search, as the Vulkan loader does', () => {
    icd('lvp_icd.json', 'libvulkan_lvp.so');
    const only = path.join(root, 'only.json');
    fs.writeFileSync(only, JSON.stringify({ ICD: { library_path: 'libvk_swiftshader.so' } }));
    assert.deepEqual(vulkanManifests({ ...env, VK_DRIVER_FILES: only }, root), [only]);
    assert.deepEqual(
      webgpuAdapters({ env: { ...env, VK_DRIVER_FILES: only }, root, platform: 'linux' }).map((a) => a.driver),
      ['libvk_swiftshader.so'],
    );
  });

  it('on this machine (no GPU; lavapipe where the webgpu tier is installed) no hardware adapter is found', () => {
    const a = webgpuAdapters();
    assert.deepEqual(
      a.filter((x) => x.kind === 'hardware'),
      [],
    );
    if (fs.existsSync('/usr/share/vulkan/icd.d/lvp_icd.json')) assert.ok(a.some((x) => x.driver === 'libvulkan_lvp.so'));
  });
});
