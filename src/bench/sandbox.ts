// `turnwise bench sandbox`: what a rollout pays per command, per container and per snapshot.
// Medians over `samples` runs each; every container is removed as soon as it is measured.
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { randomBytes } from 'node:crypto';
import { DockerSandbox } from '../sandbox/container';
import { ensureLanguageImage } from '../sandbox/images';
import { SandboxPool } from '../sandbox/pool';
import { median } from '../core/stats';

export interface SandboxBenchResult {
  exec_p50_ms: number;
  docker_cli_exec_p50_ms: number | null;
  acquire_warm_p50_ms: number;
  cold_start_p50_ms: number;
  snapshot_acquire_ms_1mb: number;
  snapshot_acquire_ms_100mb: number;
  samples: number;
}

const round = (x: number) => Math.round(x * 100) / 100;

function makeWorkspace(bytes: number): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-bench-ws-'));
  const per = 1024 * 1024;
  let left = bytes;
  for (let i = 0; left > 0; i++) {
    const n = Math.min(per, left);
    fs.mkdirSync(path.join(dir, `d${i % 10}`), { recursive: true });
    fs.writeFileSync(path.join(dir, `d${i % 10}`, `f${i}.bin`), randomBytes(n));
    left -= n;
  }
  fs.writeFileSync(path.join(dir, 'main.py'), 'print(1)\n');
  return dir;
}

function dockerCliExec(id: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    execFile('docker', ['exec', id, 'true'], (err) => (err ? reject(err) : resolve(performance.now() - t0)));
  });
}

export async function benchSandbox(
  opts: { samples?: number; host?: string; onProgress?: (s: string) => void } = {},
): Promise<SandboxBenchResult> {
  const n = Math.max(1, opts.samples ?? 30);
  const say = opts.onProgress ?? (() => undefined);
  const run = `bench-${process.pid}-${Date.now().toString(36)}`;
  const pool = await SandboxPool.connect({ run, engines: [{ host: opts.host, capacity: 64 }] });
  const dirs: string[] = [];
  const snapshotImages: string[] = [];
  try {
    const engine = pool.engineAt(0);
    const langImage = (await ensureLanguageImage(engine.docker, engine.target, 'python', say)).tag;

    say('exec: persistent shell vs docker exec');
    const sb = await DockerSandbox.start(engine.docker, engine.target, { image: langImage, run });
    let execMs: number[] = [];
    let cliMs: number[] = [];
    try {
      for (let i = 0; i < 3; i++) await sb.exec('true');
      for (let i = 0; i < n; i++) {
        const r = await sb.exec('true');
        if (r.exitCode !== 0) throw new Error(`bench exec failed: ${r.stderr}`);
        execMs.push(r.durationMs);
      }
      try {
        await dockerCliExec(sb.id);
        for (let i = 0; i < n; i++) cliMs.push(await dockerCliExec(sb.id));
      } catch {
        cliMs = []; // no docker CLI on this machine: reported as null
      }
    } finally {
      await sb.dispose();
    }

    say('cold start: create + start + first exec');
    const coldMs: number[] = [];
    for (let i = 0; i < n; i++) {
      const t0 = performance.now();
      const c = await DockerSandbox.start(engine.docker, engine.target, { image: langImage, run });
      await c.exec('true');
      coldMs.push(performance.now() - t0);
      await c.dispose();
    }

    say('snapshots of 1 MB and 100 MB workspaces');
    const snapMs: Record<string, number> = {};
    for (const [label, bytes] of [
      ['1mb', 1024 ** 2],
      ['100mb', 100 * 1024 ** 2],
    ] as const) {
      const dir = makeWorkspace(bytes);
      dirs.push(dir);
      const snap = await pool.snapshot(dir, { baseImage: langImage, onProgress: () => undefined });
      snapshotImages.push(snap.image);
      const ms: number[] = [];
      for (let i = 0; i < n; i++) {
        const t0 = performance.now();
        const c = await pool.acquire(snap);
        ms.push(performance.now() - t0);
        await c.dispose();
      }
      snapMs[label] = median(ms);
      if (label === '1mb') {
        say('warm acquire');
        pool.warm(snap, 2);
        const warmMs: number[] = [];
        for (let i = 0; i < n; i++) {
          await pool.whenWarm(snap);
          const t0 = performance.now();
          const c = await pool.acquire(snap);
          warmMs.push(performance.now() - t0);
          await c.dispose();
        }
        pool.warm(snap, 0);
        snapMs.warm = median(warmMs);
      }
    }
    execMs = execMs.map(round);
    return {
      exec_p50_ms: round(median(execMs)),
      docker_cli_exec_p50_ms: cliMs.length ? round(median(cliMs)) : null,
      acquire_warm_p50_ms: round(snapMs.warm),
      cold_start_p50_ms: round(median(coldMs)),
      snapshot_acquire_ms_1mb: round(snapMs['1mb']),
      snapshot_acquire_ms_100mb: round(snapMs['100mb']),
      samples: n,
    };
  } finally {
    await pool.close();
    const { docker } = pool.engineAt(0);
    // Random workspaces never recur: their snapshot images would only take disk.
    for (const img of snapshotImages)
      await docker
        .getImage(img)
        .remove({ force: true })
        .catch(() => undefined);
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  }
}
