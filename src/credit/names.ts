// The advantage estimators Turnwise ships, in the order every list shows them (the registry, the
// CLI usage, the editor's pick, the benchmarks). Pure data: the editor reads it without loading
// the estimators.
export const ESTIMATOR_NAMES = ['grpo', 'rloo', 'gigpo', 'a3', 'turnwise', 'gear', 'a2tgpo'] as const;
export type EstimatorName = (typeof ESTIMATOR_NAMES)[number];
