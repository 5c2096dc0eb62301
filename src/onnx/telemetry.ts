// ONNX Runtime's own telemetry, off in every process that loads it through Turnwise. Left on, its
// initialization reads /etc/machine-id and /proc/cpuinfo and leaves an empty
// `mat-debug-<pid>.log` (on some machines) in the temporary folder of every process that creates a session (the
// policy worker, each probe child, each test process): hundreds of files over a day of runs.
// Turnwise sends nothing anywhere, and the runtime it loads should not either. A user who set
// ORT_DISABLE_TELEMETRY themselves keeps their value. Imported before onnxruntime-node, and
// inherited by the child processes Turnwise starts (they get this process's environment).

/** The environment variable ONNX Runtime reads when it first initializes. */
export const ORT_TELEMETRY_ENV = 'ORT_DISABLE_TELEMETRY';

/** Turns ONNX Runtime's telemetry off in `env` unless it already says otherwise; returns the value in force. */
export function disableOrtTelemetry(env: NodeJS.ProcessEnv = process.env): string {
  if (env[ORT_TELEMETRY_ENV] === undefined || env[ORT_TELEMETRY_ENV] === '') env[ORT_TELEMETRY_ENV] = '1';
  return env[ORT_TELEMETRY_ENV]!;
}

disableOrtTelemetry();
