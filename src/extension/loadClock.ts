// Imported first by extension.ts, so its time is when the bundle started evaluating: the
// activation time the extension reports counts its own module loading, not only activate().
export const loadStart = performance.now();
