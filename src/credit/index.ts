// The credit layer: advantage estimators by name, turn rows from trajectories.
import { A3_SPECS } from './a3';
import { GRPO_SPECS } from './grpo';
import { estimatorNames, registerEstimator } from './registry';

for (const spec of [...GRPO_SPECS, ...A3_SPECS]) if (!estimatorNames().includes(spec.name)) registerEstimator(spec);

export { a3Advantages, turnwiseAdvantages, singleLinkage, A3_DEFAULTS, TURNWISE_DEFAULTS } from './a3';
export { grpoAdvantages, rlooAdvantages, gigpoAdvantages } from './grpo';
export { computeAdvantages, estimatorNames, getEstimator, parseParamArgs, registerEstimator, resolveParams } from './registry';
export * from './types';
