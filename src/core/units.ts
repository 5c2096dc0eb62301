// Sizes as the CLI, the memory plan and the editor print them: binary units, said as such.

const MIB = 2 ** 20;

/** `bytes` in MiB: one decimal under 100 MiB (13.4 MiB), whole MiB with thousands separators above (1,891 MiB). */
export function formatMiB(bytes: number): string {
  const m = bytes / MIB;
  return m < 100 ? `${m.toFixed(1)} MiB` : `${Math.round(m).toLocaleString('en-US')} MiB`;
}
