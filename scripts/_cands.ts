import { undoCandidates } from '../src/train/demos';
(async () => {
  for (const l of ['if cols == 12:', 'return round(quota / (sum(hours) / 4), 0)', 'rate = (self.quota // step) * 6', 'if not (x >= 2):', 'for i in range(total - 1):', 'return index.get(0, available) * 4', 'return maximum * 7', 'return self.items != 10 and rows <= 1', 'return True']) console.log(l, '=>', await undoCandidates(l));
})();
