// Loads dist/extension-services.js (see services.ts) on first use. In the bundle __dirname is
// dist/; under tsx (unit tests) the TypeScript source is loaded instead.
import * as fs from 'node:fs';
import * as path from 'node:path';

type Services = typeof import('./services');
let loaded: Services | undefined;

export function services(): Services {
  if (!loaded) {
    const bundled = path.join(__dirname, 'extension-services.js');
    // A computed path, so esbuild does not pull the sources into extension.js.
    const source = ['.', 'services'].join('/');
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- a synchronous load, on first use, of a path esbuild must not follow
    loaded = (fs.existsSync(bundled) ? require(bundled) : require(source)) as Services;
  }
  return loaded;
}

export function servicesLoaded(): boolean {
  return loaded !== undefined;
}
