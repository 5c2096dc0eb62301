// The sandbox layer's part of `turnwise doctor`: the Docker engine answers, the sandbox images
// are built, and the agent's tools are inside them.
import type Docker from 'dockerode';
import { failedCheck, notChecked, type Check } from '../core/doctor';
import { containerSpec } from './container';
import { connectEngine, engineInfo } from './engine';
import { AGENT_TOOLS, BASE_LABEL, PUBLIC_BASE_IMAGE, SANDBOX_LANGUAGES, languageImageTag, type SandboxLanguage } from './images';

/** How long the doctor waits for the Docker engine to answer one request. */
const ENGINE_TIMEOUT_MS = 5000;

/** `docker`, `sandbox images`, `agent tools`, in that order; each later one needs the ones before. */
export async function sandboxChecks(host?: string): Promise<Check[]> {
  // engineInfo's own race only stops waiting; the socket timeout closes the request itself.
  const { docker, target } = connectEngine(host, { requestTimeoutMs: ENGINE_TIMEOUT_MS });
  let info;
  try {
    info = await engineInfo(docker, target, ENGINE_TIMEOUT_MS);
  } catch (e) {
    return [
      failedCheck('docker', e),
      notChecked('sandbox images', 'Docker is not reachable', 'docker'),
      notChecked('agent tools', 'Docker is not reachable', 'docker'),
    ];
  }
  const dockerCheck: Check = {
    name: 'docker',
    status: 'ok',
    detail: `Docker ${info.version} (API ${info.apiVersion}, ${info.os}) at ${info.target}`,
  };
  const { check: imagesCheck, missing } = await imagesPresent(docker);
  const withTools = SANDBOX_LANGUAGES.filter((l) => AGENT_TOOLS[l].length > 0);
  const unbuilt = withTools.filter((l) => missing.includes(languageImageTag(l)));
  const toolsCheck =
    unbuilt.length > 0
      ? notChecked('agent tools', `the ${unbuilt.join(', ')} sandbox image is missing`, 'sandbox images')
      : await agentToolsCheck(docker);
  return [dockerCheck, imagesCheck, toolsCheck];
}

async function imagesPresent(docker: Docker): Promise<{ check: Check; missing: string[] }> {
  const wanted = SANDBOX_LANGUAGES.map((l) => languageImageTag(l));
  const missing: string[] = [];
  const present: string[] = [];
  for (const tag of wanted) {
    try {
      const base = (await docker.getImage(tag).inspect()).Config?.Labels?.[BASE_LABEL];
      present.push(base ? `${tag} (FROM ${base})` : tag);
    } catch {
      missing.push(tag);
    }
  }
  const check: Check =
    missing.length === 0
      ? { name: 'sandbox images', status: 'ok', detail: present.join(', ') }
      : {
          name: 'sandbox images',
          status: 'fail',
          detail: `missing: ${missing.join(', ')}`,
          fix: `build them: \`turnwise images build\` (FROM ${PUBLIC_BASE_IMAGE} when a registry is reachable, no root needed; --base IMAGE for a mirror; offline it bootstraps a base from Debian packages, which needs root and debootstrap)`,
        };
  return { check, missing };
}

/**
 * Each language image holds its agent tools, commands executable by the sandbox user. Looked up
 * in a container that is created and never started (the archive API reads its filesystem), so
 * the check costs no container start. `tools` is for tests.
 */
export async function agentToolsCheck(
  docker: Docker,
  tools: Partial<Record<SandboxLanguage, readonly string[]>> = AGENT_TOOLS,
): Promise<Check> {
  const found: string[] = [];
  const problems: string[] = [];
  for (const [language, paths] of Object.entries(tools) as [SandboxLanguage, readonly string[]][]) {
    if (paths.length === 0) continue;
    const image = languageImageTag(language);
    const names: string[] = [];
    let container: Docker.Container;
    try {
      container = await docker.createContainer(containerSpec({ image, run: 'doctor' }));
    } catch (e) {
      return failedCheck('agent tools', e, 'run `turnwise doctor` again; if it persists, rebuild the images with `turnwise images build`');
    }
    try {
      for (const p of paths) {
        const stat = await pathStat(container, p);
        if (!stat) problems.push(`${p} is missing from ${image}`);
        else if (/\/bin\//.test(p) && (stat.mode & 0o005) !== 0o005)
          problems.push(`${p} in ${image} is not executable by the sandbox user`);
        else names.push(p.slice(p.lastIndexOf('/') + 1));
      }
      if (names.length) found.push(`${language} image has ${names.join(', ')}`);
    } catch (e) {
      return failedCheck('agent tools', e, 'run `turnwise doctor` again; if it persists, rebuild the images with `turnwise images build`');
    } finally {
      await container.remove({ force: true }).catch(() => undefined);
    }
  }
  return problems.length === 0
    ? { name: 'agent tools', status: 'ok', detail: found.join('; ') || 'none needed' }
    : {
        name: 'agent tools',
        status: 'fail',
        detail: problems.join('; '),
        fix: 'rebuild the images with `turnwise images build`; the tools come from sandbox-images/<language>/tools and its Dockerfile',
      };
}

/** A file's stat inside a container, or undefined when it is not there. */
async function pathStat(container: Docker.Container, p: string): Promise<{ mode: number } | undefined> {
  let res: { headers?: Record<string, string | undefined>; destroy?: () => void };
  try {
    res = (await container.infoArchive({ path: p })) as typeof res;
  } catch (e) {
    if ((e as { statusCode?: number }).statusCode === 404) return undefined;
    throw e;
  }
  // A HEAD response: its (empty) body must be released, or the socket keeps the process alive.
  res.destroy?.();
  const header = res.headers?.['x-docker-container-path-stat'];
  if (!header) return undefined;
  return JSON.parse(Buffer.from(header, 'base64').toString('utf8')) as { mode: number };
}
