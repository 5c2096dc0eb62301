// The credit layer: advantage estimators by name, turn rows from trajectories.
import { A3_SPEC } from './a3';
import { GRPO_SPECS } from './grpo';
import { REFERENCE_SPECS } from './reference';
import { estimatorNames, registerEstimator } from './registry';
import { TURNWISE_SPEC } from './turnwise';

for (const spec of [...GRPO_SPECS, A3_SPEC, TURNWISE_SPEC, ...REFERENCE_SPECS])
  if (!estimatorNames().includes(spec.name)) registerEstimator(spec);

export { a3Advantages, singleLinkage, A3_DEFAULTS } from './a3';
export { turnwiseAdvantages, TURNWISE_DEFAULTS } from './turnwise';
export { grpoAdvantages, rlooAdvantages, gigpoAdvantages } from './grpo';
export { gearAdvantages, a2tgpoAdvantages, GEAR_DEFAULTS, A2TGPO_DEFAULTS } from './reference';
export { computeAdvantages, estimatorNames, getEstimator, parseParamArgs, registerEstimator, resolveParams } from './registry';
export * from './types';
