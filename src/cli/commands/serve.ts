// `turnwise serve`: a model folder (and a LoRA adapter) behind the OpenAI-compatible API, until
// a signal stops it.
import { listensBeyondLoopback, startServer } from '../../serve/server';
import { numberInRange, requireString, UsageError, valueOptions, type CliCommand } from '../command';
import { PRECISION_USAGE, precisionOption, PROVIDER_USAGE, providerOption } from './options';

export const serveCommand: CliCommand = {
  name: 'serve',
  summary: 'serve a model (and a LoRA adapter) over the OpenAI-compatible API: /v1/models, /v1/chat/completions, /v1/completions',
  usage: `--model DIR [--adapter DIR] [--host 127.0.0.1] [--port 8000] [--name ID] [--token-env VAR] [--max-request-kb 1024] [--pack-decode-weights auto|on|off] ${PRECISION_USAGE} ${PROVIDER_USAGE} [--json]`,
  options: valueOptions(
    'model',
    'adapter',
    'host',
    'port',
    'name',
    'token-env',
    'max-request-kb',
    'pack-decode-weights',
    'precision',
    'provider',
  ),
  async run(args, io) {
    const port = numberInRange(args, 'port', 8000, { min: 0, max: 65535, integer: true });
    const kb = numberInRange(args, 'max-request-kb', 1024, { min: 1, max: 1024 * 1024, integer: true });
    // The token is read from the environment, never from the command line (which other users can list).
    const tokenVar = args.values['token-env'] as string | undefined;
    const token = tokenVar ? process.env[tokenVar] : undefined;
    if (tokenVar && !token) throw new UsageError(`--token-env ${tokenVar}: that environment variable is not set`);
    const pack = args.values['pack-decode-weights'];
    if (pack !== undefined && pack !== 'auto' && pack !== 'on' && pack !== 'off')
      throw new UsageError(`--pack-decode-weights is auto, on or off, got ${JSON.stringify(pack)}`);
    const host = (args.values.host as string | undefined) ?? '127.0.0.1';
    if (!token && listensBeyondLoopback(host))
      io.err(
        `warning: --host ${host} without --token-env: anyone who reaches port ${port} of this machine can use the model; set a token with --token-env VAR`,
      );
    const s = await startServer({
      model: requireString(args, 'model'),
      ...(typeof args.values.adapter === 'string' ? { adapter: args.values.adapter } : {}),
      host,
      port,
      ...(typeof args.values.name === 'string' ? { name: args.values.name } : {}),
      ...(token ? { token } : {}),
      maxRequestBytes: kb * 1024,
      ...(pack !== undefined ? { packDecodeWeights: pack } : {}),
      settings: {
        provider: providerOption(args),
        rolloutPrecision: precisionOption(args) ?? 'float32',
        onWarning: (m) => io.err(`warning: ${m}`),
      },
      onLog: (line) => io.err(`${new Date().toISOString()} ${line}`),
    });
    const provider = await s.provider;
    io.out(io.json ? JSON.stringify({ ok: true, url: s.url, provider }) : `serving ${s.url}/v1 on the ${provider} provider (Ctrl-C stops)`);
    await new Promise<void>((resolve) => {
      const stop = () => resolve();
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
    });
    await s.close();
    return 0;
  },
};
