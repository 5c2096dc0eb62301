// How commands print a measured number.

/** A number with `digits` decimals; '—' for anything else (absent, NaN, infinite). */
export const fmt = (v: unknown, digits = 3) => (typeof v === 'number' && Number.isFinite(v) ? v.toFixed(digits) : '—');
