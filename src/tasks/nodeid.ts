// pytest node ids read the way pytest writes them. A node id is the test file's path (relative to
// the rootdir, '/'-separated), then `::` and the names of the nodes inside it (classes, nested
// classes, the function or method, or a doctest's dotted name), the last one optionally followed
// by a parametrization id in brackets. pytest builds that id from `ids=`, `pytest.param(id=…)` or
// the parameters' values, so it can hold anything: `::`, `[`, `]`, `/`, spaces, dots, unicode,
// escapes. pytest itself reads an id by taking everything from the first `[` as the parameter
// part (`mangle_test_address` in its junitxml plugin), and so does this module: a split on every
// `::` reads `test_f[a::b]` as the names `test_f[a` and `b]`.

/** A pytest node id taken apart. */
export interface PytestNodeId {
  /** The test file (or document, for a doctest of a text file): everything before the first `::`. */
  file: string;
  /** The node names after the file, outermost first; the last is the test itself. Empty for a file-level id. */
  names: string[];
  /** The parametrization id without its brackets, when the test is parametrized. */
  params?: string;
}

/**
 * Splits a node id. The file is everything before the first `::` (a path holds no `::`); of the
 * rest, the parameter part starts at the first `[` and runs to the end (its closing `]`
 * included), whatever it holds; the names before it are split on `::`.
 */
export function parsePytestNodeId(id: string): PytestNodeId {
  const at = id.indexOf('::');
  if (at < 0) return { file: id, names: [] };
  const file = id.slice(0, at);
  const rest = id.slice(at + 2);
  const bracket = rest.indexOf('[');
  const path = bracket < 0 ? rest : rest.slice(0, bracket);
  const names = path.split('::');
  if (bracket < 0) return { file, names };
  const tail = rest.slice(bracket + 1);
  return { file, names, params: tail.endsWith(']') ? tail.slice(0, -1) : tail };
}

/** The test file of a node id (everything before the first `::`). */
export function pytestNodeFile(id: string): string {
  const at = id.indexOf('::');
  return at < 0 ? id : id.slice(0, at);
}

/**
 * Whether a node id is a doctest: pytest names a doctest item by the dotted name of the object
 * whose docstring holds it (`pkg/mod.py::pkg.mod.func`), or by the document's own path
 * (`README.md::README.md`, --doctest-glob). Test functions and classes never hold a dot.
 */
export function isPytestDoctestId(id: string): boolean {
  const p = parsePytestNodeId(id);
  return p.names.length === 1 && p.params === undefined && (p.names[0].includes('.') || p.names[0] === p.file.split('/').pop());
}
