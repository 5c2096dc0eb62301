// A valid task of the `file` source: one failing and one passing test of a Python suite, for unit
// tests of task files and the task cache.
import { SCHEMA, type Task } from '../../src/core/schema';

export const FILE_TASK: Task = {
  schema: SCHEMA.task,
  id: 't1',
  source: 'file',
  instruction: 'make tests/test_x.py::test_a pass',
  language: 'python',
  testCommand: 'python3 -m pytest --junitxml=$TURNWISE_REPORT',
  reportFormat: 'junit-xml',
  runner: 'pytest',
  fail_to_pass: ['tests/test_x.py::test_a'],
  pass_to_pass: ['tests/test_x.py::test_b'],
};
