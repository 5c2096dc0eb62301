// A fix case for the numbered and candidate forms' unit tests: a flipped comparison on the
// second suspect of a nested package path, with the first suspect's undo candidate and the
// bug's context known.
import type { FixCase } from '../../../src/demonstrations/fix-cases';

export const LEDGER_CASE: FixCase = {
  path: 'src/books/_core/ledger.py',
  line: 12,
  mutatedLine: '        if len(self.rows) > self.limit:',
  originalLine: '        if len(self.rows) >= self.limit:',
  fix: "sed -i '12s/>/>=/' src/books/_core/ledger.py",
  failing: ['tests/test_ledger.py::test_add_limit'],
  passing: 9,
  suspects: [
    'src/books/_core/ledger.py:10: if amount <= 0:',
    'src/books/_core/ledger.py:12: if len(self.rows) > self.limit:',
    'src/books/_core/ledger.py:14: self.rows.append((amount, note))',
  ],
  topCandidates: [{ code: 'if amount < 0:', fix: "sed -i '10s/<=/</' src/books/_core/ledger.py" }],
  context: {
    first: 10,
    lines: [
      '        if amount <= 0:',
      '            raise ValueError("amount must be positive")',
      '        if len(self.rows) > self.limit:',
      '            return False',
      '        self.rows.append((amount, note))',
    ],
  },
};
