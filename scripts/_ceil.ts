import { evalCasePool } from '../src/train/warmstart';
// Which original lines could a one-token mutation have come from? Count cases whose mutated line
// has one possible original (unique), and the Bayes ceiling of a guesser that knows the priors.
const ARITH_INV: Record<string, string[]> = { '-': ['+'], '+': ['-'], '*': ['/', '//', '%'], '/': ['*'] };
(async () => {
  const cases = await evalCasePool(9, 256);
  const kinds: Record<string, number> = {};
  for (const c of cases) {
    const a = c.mutatedLine.trim(), b = c.originalLine.trim();
    // diff token
    let i = 0; while (i < a.length && a[i] === b[i]) i++;
    let j = 0; while (j < a.length - i && j < b.length - i && a[a.length - 1 - j] === b[b.length - 1 - j]) j++;
    const ma = a.slice(i, a.length - j), ob = b.slice(i, b.length - j);
    let k = 'other';
    if (/^\d+$/.test(ma + ob) || (/^\d*$/.test(ma) && /^\d*$/.test(ob))) k = 'constant';
    else if (/not \(/.test(ma)) k = 'negate';
    else if (/^[<>=!]+$/.test(ma)) k = 'compare';
    else if (/^[-+*/%]+$/.test(ma)) k = 'arith:' + ma + '<-' + ob;
    else if (/and|or/.test(ma)) k = 'bool';
    else if (/True|False|None/.test(ma)) k = 'const:' + ma + '<-' + ob;
    else if (/- 1/.test(ma)) k = 'range';
    else if (/,/.test(ma)) k = 'swap';
    kinds[k] = (kinds[k] ?? 0) + 1;
  }
  console.log(kinds);
})();
