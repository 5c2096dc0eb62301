"""Agent tools installed in the Python sandbox (`tw-test`, `tw-suspects`).

A tiny policy has ~1,000 bytes of context, so the tools print little and in a fixed shape:
  tw-test      runs the tests; prints up to 3 failing test ids, then "N failed, M passed".
  tw-suspects  runs the tests with a line tracer and ranks the source lines executed by failing
               tests by Ochiai suspiciousness (spectrum-based fault localization), then re-ranks
               the top lines by mutation analysis (in the spirit of Metallaxis-FL / MUSE): a line
               where a one-token change (an operator, a constant +/- 1, a negated condition)
               makes more of the tests pass is more suspicious (a fixed number of test runs, so
               the ranking does not depend on the machine's load). Prints the summary line, then
               up to 5 lines as "path:line: code". It ranks lines only; it never says which change.
               TW_MUTATE=0 turns the re-ranking off (Ochiai order only).
Both only read the workspace: nothing is written besides what pytest itself writes (no cache,
no bytecode); the mutants are tried on a copy in a temporary directory, each in a forked child
with a time limit. They know nothing a developer running the tests would not.
"""
import io
import math
import os
import re
import shutil
import signal
import sys
import tempfile
import time
import contextlib

ROOT = os.path.realpath(os.environ.get("TW_ROOT", os.getcwd()))
_STARTED = time.monotonic()


def _is_test_file(path):
    rel = os.path.relpath(path, ROOT)
    parts = rel.replace("\\", "/").split("/")
    name = parts[-1]
    return (
        name.startswith("test_")
        or name.endswith("_test.py")
        or name == "conftest.py"
        or any(p in ("tests", "test") for p in parts[:-1])
    )


class _Collector:
    def __init__(self, trace):
        self.trace = trace
        self.outcomes = {}
        self.lines = {}
        self.errors = []

    def pytest_runtest_logreport(self, report):
        nid = report.nodeid
        if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
            self.outcomes[nid] = report.outcome


def _make_plugin(col):
    import pytest

    class Plugin:
        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_call(self, item):
            if not col.trace:
                yield
                return
            seen = set()
            cache = {}

            def local(frame, event, arg):
                if event == "line":
                    seen.add((frame.f_code.co_filename, frame.f_lineno))
                return local

            def global_(frame, event, arg):
                f = frame.f_code.co_filename
                ok = cache.get(f)
                if ok is None:
                    rp = os.path.realpath(f)
                    ok = rp.startswith(ROOT + os.sep) and rp.endswith(".py") and not _is_test_file(rp)
                    cache[f] = ok
                if ok:
                    seen.add((f, frame.f_lineno))
                    return local
                return None

            sys.settrace(global_)
            try:
                yield
            finally:
                sys.settrace(None)
                col.lines[item.nodeid] = seen

        def pytest_runtest_logreport(self, report):
            col.pytest_runtest_logreport(report)

        def pytest_collectreport(self, report):
            if report.failed:
                col.errors.append(report.nodeid or "collection")

    return Plugin()


def _run(trace):
    import pytest

    # As `python3 -m pytest` does: the workspace root is importable.
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    col = _Collector(trace)
    args = ["-q", "-p", "no:cacheprovider", "--tb=no", "-o", "addopts=", ROOT]
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        code = pytest.main(args, plugins=[_make_plugin(col)])
    return code, col, buf.getvalue()


def _summary(col):
    failed = sorted(n for n, o in col.outcomes.items() if o == "failed")
    passed = sum(1 for o in col.outcomes.values() if o == "passed")
    return failed, passed


def _counts(failed, passed, col):
    line = "%d failed, %d passed" % (len(failed), passed)
    if col.errors:
        line += ", %d error%s" % (len(col.errors), "" if len(col.errors) == 1 else "s")
    return line


def tw_test():
    code, col, out = _run(False)
    failed, passed = _summary(col)
    if not col.outcomes and not col.errors:
        tail = [l for l in out.strip().splitlines() if l.strip()][-3:]
        print("no tests ran (pytest exit %d)" % code)
        for l in tail:
            print(l[:160])
        return 2
    # Files that do not even import come first: every test in them is lost.
    shown = ["ERROR " + n for n in col.errors] + ["FAIL " + n for n in failed]
    for l in shown[:3]:
        print(l)
    if len(shown) > 3:
        print("... %d more" % (len(shown) - 3))
    print(_counts(failed, passed, col))
    return 1 if failed or col.errors else 0


# --- mutation analysis -------------------------------------------------------------------------
# Lines tried and the test runs all of it may take: a wrong guess costs the agent a turn, a slow
# tool costs every turn.
MUTATE_LINES = 8
# The re-ranking's budget is a number of test runs, not a time: the same workspace gets the same
# ranking on an idle machine and on one running eight episodes (a time budget cut the analysis
# short under load, so an episode's observation depended on what else was running). On the demo
# workspace's 48 mutation tasks, 24 runs rank the bug line exactly as an unbounded analysis does
# (20 put it lower on 1, 16 on 3; unbounded takes 17.5 runs on average, up to 40, ~0.13 CPU s each).
MUTATE_RUNS = 24
# Wall-clock guard only, counted from the tool's start: 80% of the command's time limit (the
# sandbox exports it as TW_COMMAND_TIMEOUT_MS), 60 s when run by hand. Reached only on a machine
# so busy that the runs above do not fit, and then the lines not reached keep their Ochiai order:
# a shortened ranking is worth more to the agent than a command that timed out. It says so in a
# last line (CUT_SHORT), which also keeps the harness from replaying it as the workspace's answer.
CUT_SHORT = "(ranking cut short by the time limit: the machine is busy; run tw-suspects again for the full one)"


def _guard_seconds():
    try:
        return 0.8 * int(os.environ["TW_COMMAND_TIMEOUT_MS"]) / 1000.0
    except (KeyError, ValueError):
        return 60.0


# A variant that loops forever (i += 1 -> i -= 1) is cut off after this much CPU time (the same
# under any load) or, if it sleeps instead, this much wall time.
MUTANT_CPU_SECONDS = 1.0
MUTANT_WALL_SECONDS = 8.0

_CMP = ["<", "<=", ">", ">=", "==", "!="]
_ARITH = ["+", "-", "*", "/", "//", "%"]
_AUG = ["+=", "-=", "*=", "/=", "//="]
_TOKEN = re.compile(
    r"(?P<str>'[^']*'|\"[^\"]*\")|(?P<num>(?<![\w.])\d+(?![\w.]))|(?P<aug>//=|\+=|-=|\*=|/=)"
    r"|(?P<cmp><=|>=|==|!=|<|>)|(?P<ar>//|\*\*|[-+*/%])|(?P<word>\b(?:and|or|True|False)\b)"
)


def line_mutants(code):
    """One-token variants of a source line (its indentation kept): the changes a mutation engine
    makes, tried in both directions. Strings and comments are left alone."""
    out = []
    hash_at = None
    for m in _TOKEN.finditer(code):
        if m.lastgroup == "str":
            continue
        if hash_at is None and "#" in code[: m.start()]:
            hash_at = code.index("#")
        if hash_at is not None and m.start() > hash_at:
            break
        tok, a, b = m.group(0), m.start(), m.end()
        if m.lastgroup == "num":
            alts = [str(int(tok) + 1)] + ([str(int(tok) - 1)] if int(tok) > 0 else [])
        elif m.lastgroup == "aug":
            alts = [x for x in _AUG if x != tok]
        elif m.lastgroup == "cmp":
            alts = [x for x in _CMP if x != tok]
        elif m.lastgroup == "ar":
            if tok == "**" or (tok in "+-" and not code[:a].rstrip()[-1:].isalnum() and code[:a].rstrip()[-1:] not in ")]"):
                continue  # a unary sign or a power: left alone
            alts = [x for x in _ARITH if x != tok]
        else:
            alts = {"and": ["or"], "or": ["and"], "True": ["False"], "False": ["True"]}[tok]
        out.extend(code[:a] + x + code[b:] for x in alts)
    cond = re.match(r"^(\s*(?:if|elif|while)\s+)(.*?)(:\s*(?:#.*)?)$", code)
    if cond:
        head, expr, tail = cond.groups()
        neg = re.match(r"^not\s*\((.*)\)$", expr) or re.match(r"^not\s+(.*)$", expr)
        out.append(head + (neg.group(1) if neg else "not (%s)" % expr) + tail)
    neg_ret = re.match(r"^(\s*return\s+)not\s*\((.*)\)\s*$", code)
    if neg_ret:
        out.append(neg_ret.group(1) + neg_ret.group(2))
    seen = set()
    return [x for x in out if x != code and not (x in seen or seen.add(x))]


def _forget_workspace_modules(roots):
    for name, mod in list(sys.modules.items()):
        f = getattr(mod, "__file__", None) or ""
        if any(os.path.realpath(f).startswith(r + os.sep) for r in roots):
            del sys.modules[name]


def _passing_in_child(copy, ids):
    """Run `ids` (all tests when empty) on the copy in a forked child: the number that pass, or
    -1 when the child failed or ran out of time."""
    rd, wr = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never returns
        os.close(rd)
        n = -1
        try:
            # SIGPROF / SIGALRM end the child (no handler): read as -1 below.
            signal.setitimer(signal.ITIMER_PROF, MUTANT_CPU_SECONDS)
            signal.setitimer(signal.ITIMER_REAL, MUTANT_WALL_SECONDS)
            _forget_workspace_modules([ROOT, copy])
            sys.path[:] = [p for p in sys.path if os.path.realpath(p or ".") != ROOT]
            sys.path.insert(0, copy)
            os.chdir(copy)
            import pytest

            col = _Collector(False)
            os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
            args = ["-q", "-p", "no:cacheprovider", "--tb=no", "--assert=plain", "-o", "addopts=", "--rootdir", copy]
            args += [os.path.join(copy, i) for i in ids] if ids else [copy]
            with open(os.devnull, "w") as null, contextlib.redirect_stdout(null), contextlib.redirect_stderr(null):
                pytest.main(args, plugins=[_make_plugin(col)])
            n = sum(1 for o in col.outcomes.values() if o == "passed")
        except BaseException:
            n = -1
        os.write(wr, str(n).encode())
        os._exit(0)
    os.close(wr)
    data = b""
    while True:
        chunk = os.read(rd, 64)
        if not chunk:
            break
        data += chunk
    os.close(rd)
    os.waitpid(pid, 0)
    try:
        return int(data or b"-1")
    except ValueError:
        return -1


def mutation_scores(candidates, failed, total):
    """For each (abs path, line) in `candidates` (most suspicious first), the most tests any of
    its one-token variants makes pass: failing tests first (a variant that fixes none scores 0),
    then the whole suite for those that fix some. Stops after MUTATE_RUNS test runs (lines not
    reached score 0), at the wall-clock guard, or at a variant that makes all `total` tests pass
    (no later line can rank above it). Returns the scores and whether the guard stopped it."""
    scores = {}
    cut = False
    deadline = _STARTED + _guard_seconds()
    runs = 0
    tmp = tempfile.mkdtemp(prefix="tw-mutants-")
    copy = os.path.join(tmp, "ws")
    try:
        shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(".git", "__pycache__", "*.pyc", ".pytest_cache"))
        for f, line in candidates:
            rel = os.path.relpath(os.path.realpath(f), ROOT)
            target = os.path.join(copy, rel)
            try:
                with open(target, encoding="utf-8") as fh:
                    original = fh.read()
            except OSError:
                continue
            lines = original.split("\n")
            if not 0 < line <= len(lines):
                continue
            best = 0
            for variant in line_mutants(lines[line - 1]):
                if runs >= MUTATE_RUNS:
                    break
                if time.monotonic() > deadline:
                    cut = True
                    break
                mutated = lines[: line - 1] + [variant] + lines[line:]
                with open(target, "w", encoding="utf-8") as fh:
                    fh.write("\n".join(mutated))
                try:
                    fixed = _passing_in_child(copy, failed)
                    runs += 1
                    if fixed > 0:
                        whole = _passing_in_child(copy, [])
                        runs += 1
                        best = max(best, whole if whole > 0 else fixed)
                finally:
                    with open(target, "w", encoding="utf-8") as fh:
                        fh.write(original)
                if best >= total:
                    break
            scores[(f, line)] = best
            if best >= total or runs >= MUTATE_RUNS:
                break
            if time.monotonic() > deadline:
                cut = True
                break
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return scores, cut


def tw_suspects():
    code, col, out = _run(True)
    failed, passed = _summary(col)
    if not col.outcomes and not col.errors:
        print("no tests ran (pytest exit %d)" % code)
        return 2
    print(_counts(failed, passed, col))
    for n in col.errors[:2]:
        print("ERROR " + n)
    if not failed:
        return 1 if col.errors else 0
    ef, ep = {}, {}
    for nid, outcome in col.outcomes.items():
        for key in col.lines.get(nid, ()):
            d = ef if outcome == "failed" else ep
            d[key] = d.get(key, 0) + 1
    total_f = len(failed)
    scored = []
    for key, nf in ef.items():
        np_ = ep.get(key, 0)
        scored.append((-(nf / math.sqrt(total_f * (nf + np_))), -nf, os.path.relpath(os.path.realpath(key[0]), ROOT), key[1], key[0]))
    scored.sort()
    texts = {}

    def code_at(f, line):
        if f not in texts:
            try:
                with open(f, encoding="utf-8", errors="replace") as fh:
                    texts[f] = fh.read().split("\n")
            except OSError:
                texts[f] = []
        lines = texts[f]
        return lines[line - 1].strip() if 0 < line <= len(lines) else ""

    ranked = []
    for _, _, rel, line, f in scored:
        code_line = code_at(f, line)
        if code_line and not code_line.startswith(("def ", "class ", "@")):
            ranked.append((rel, line, f, code_line))
    mscore, cut = mutation_scores([(f, line) for _, line, f, _ in ranked[:MUTATE_LINES]], failed, len(failed) + passed) if os.environ.get("TW_MUTATE", "1") != "0" else ({}, False)
    # Stable sort: equal mutation scores keep the Ochiai order.
    ranked.sort(key=lambda t: -mscore.get((t[2], t[1]), 0))
    for rel, line, _, code_line in ranked[:5]:
        print("%s:%d: %s" % (rel, line, code_line[:100]))
    if not ranked:
        print("no source line ran in a failing test")
    if cut:
        print(CUT_SHORT)
    return 1


if __name__ == "__main__":
    sys.dont_write_bytecode = True
    tool = os.path.basename(sys.argv[0]) if len(sys.argv) < 2 else sys.argv[1]
    if tool in ("tw-test", "test"):
        sys.exit(tw_test())
    if tool in ("tw-suspects", "suspects"):
        sys.exit(tw_suspects())
    print("usage: turnwise_tools.py test|suspects", file=sys.stderr)
    sys.exit(2)
