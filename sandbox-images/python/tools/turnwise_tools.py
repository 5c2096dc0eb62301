"""Agent tools installed in the Python sandbox (`tw-test`, `tw-suspects`).

A tiny policy has ~1,000 bytes of context, so the tools print little and in a fixed shape:
  tw-test      runs the tests; prints up to 3 failing test ids, then "N failed, M passed" (and
               a line saying so when pytest stopped before every test ran).
  tw-suspects  runs the tests with a line tracer and ranks the source lines executed by failing
               tests (in their fixtures or themselves; a line only the imports ran counts for
               every test) by Ochiai suspiciousness (spectrum-based fault localization), then
               re-ranks the top lines that have a variant by mutation analysis (in the spirit of Metallaxis-FL / MUSE): a line
               where a one-token change (an operator, a constant +/- 1, a negated condition)
               makes more of the tests pass is more suspicious (a fixed number of test runs, so
               the ranking does not depend on the machine's load). Prints the summary line, then
               up to 5 lines as "path:line: code". It ranks lines only; it never says which change.
               TW_MUTATE=0 turns the re-ranking off (Ochiai order only). `tw-suspects -n` prints
               the same lines numbered, "[K] path:line: code", for the commands below. When no
               test of the task failed because the tests could not run (a module that fails to
               import, pytest stopping on an internal error), the suspects are the source lines
               of those errors' tracebacks, the innermost first.
  tw-show K    prints suspect K's file around its line (K: a number from the last tw-suspects, or
               path:line), the line itself marked with ">".
  tw-tokens K  prints the tokens of suspect K's line, one list, as Python's tokenizer splits it.
  tw-edit K OLD NEW
               replaces the text OLD, which must occur exactly once on suspect K's line, by NEW,
               and prints the line before and after. It refuses anything else: OLD not on the
               line, a test file, a file outside the workspace or reached through a link.
  tw-cands K   prints suspect K's line, then its one-token variants numbered "[J] ...change...": each
               comparison, arithmetic or boolean operator flipped, each integer +/- 1, True,
               False and None swapped, a "- 1" bound dropped, the condition negated. A fixed
               list in the line's order; none is tried, and which one (if any) fixes the line is
               for the agent to find out.
  tw-apply K J writes variant J of `tw-cands K` to suspect K's line (the same refusals as
               tw-edit) and prints the line before and after, its place followed by
               "(variant J of N)": N is how many variants the line has.
A test that already failed before the bug (one a workspace ships broken: a missing data file, a
network call) is not the task's: where the episode wrote the task's tests to REQUIRED_FILE, tw-test
and tw-suspects count only those (a developer knows which tests were red before their change);
the others' failures are counted apart on the summary line and never make tw-test fail. Without
the file every test counts.
tw-test and tw-suspects only read the workspace: nothing is written besides what pytest itself
writes (no cache, no bytecode); the mutants are tried on a copy in a temporary directory, each in
a forked child with a time limit. tw-suspects keeps its last ranking in STATE_DIR (outside the
workspace), which the numbered commands read. tw-edit and tw-apply write only the one line they
are asked to.
The tools know nothing a developer running the tests would not, and none says which change fixes
a line: trying one is the agent's decision.
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
import json

ROOT = os.path.realpath(os.environ.get("TW_ROOT", os.getcwd()))
# The last ranking, for tw-show / tw-tokens / tw-edit K. Outside the workspace, so the code and
# the tests never see it (the episode's edit tracker leaves this folder out of its checks).
STATE_DIR = os.environ.get("TW_STATE_DIR", "/tmp/turnwise-tools")
STATE_FILE = os.path.join(STATE_DIR, "suspects.json")
# The task's tests, one id per line (written as the episode starts; see the module's text).
REQUIRED_FILE = os.path.join(STATE_DIR, "required-tests")
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
        self.import_lines = set()
        self.errors = []
        # Per collection error or pytest internal error: the workspace source lines (file, line)
        # of its traceback, innermost first.
        self.error_frames = []

    def pytest_runtest_logreport(self, report):
        nid = report.nodeid
        if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
            self.outcomes[nid] = report.outcome
        elif report.when == "teardown" and report.failed:
            # An error in teardown is an error of the test in the scoring report: not a pass.
            self.outcomes[nid] = "failed"


def _in_source(path, cache):
    """Whether `path` (a code object's file name) is the workspace's own source, not its tests."""
    ok = cache.get(path)
    if ok is None:
        rp = os.path.realpath(path)
        ok = rp.startswith(ROOT + os.sep) and rp.endswith(".py") and not _is_test_file(rp)
        cache[path] = ok
    return ok


def _source_frames(tb, cache):
    """The (file, line) of each frame of traceback `tb` in the workspace's source, innermost first."""
    out = []
    while tb is not None:
        f = tb.tb_frame.f_code.co_filename
        if _in_source(f, cache):
            out.append((f, tb.tb_lineno))
        tb = tb.tb_next
    return out[::-1]


def _tracer(seen, cache):
    """A sys.settrace function that adds (file, line) of every line run in the workspace's own
    source (not its tests) to `seen`."""

    def local(frame, event, arg):
        if event == "line":
            seen.add((frame.f_code.co_filename, frame.f_lineno))
        return local

    def global_(frame, event, arg):
        f = frame.f_code.co_filename
        if _in_source(f, cache):
            seen.add((f, frame.f_lineno))
            return local
        return None

    return global_


def _make_plugin(col):
    import pytest

    cache = {}

    @contextlib.contextmanager
    def traced(seen):
        """Lines run inside go to `seen` (when the run traces at all)."""
        if col.trace:
            sys.settrace(_tracer(seen, cache))
        try:
            yield
        finally:
            sys.settrace(None)

    class Plugin:
        # Lines run while the test modules are imported: module-level code of the source (its
        # constants, class bodies, tables built by calls at import). Every test depends on them.
        @pytest.hookimpl(hookwrapper=True)
        def pytest_collection(self, session):
            with traced(col.import_lines):
                yield

        # A test's lines: its fixtures' (setup) and its own (call).
        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_setup(self, item):
            with traced(col.lines.setdefault(item.nodeid, set())):
                yield

        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_call(self, item):
            with traced(col.lines.setdefault(item.nodeid, set())):
                yield

        def pytest_runtest_logreport(self, report):
            col.pytest_runtest_logreport(report)

        def pytest_collectreport(self, report):
            if report.failed:
                col.errors.append(report.nodeid or "collection")

        # The tracebacks of what kept tests from running: a module that fails to import (a
        # collection error), and an error inside pytest itself.
        def pytest_exception_interact(self, node, call, report):
            if isinstance(report, pytest.CollectReport) and call.excinfo is not None:
                col.error_frames.append(_source_frames(call.excinfo.tb, cache))

        def pytest_internalerror(self, excrepr, excinfo):
            col.error_frames.append(_source_frames(excinfo.tb, cache))

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


def _required():
    """The task's test ids (REQUIRED_FILE), or None when there is no such list."""
    try:
        with open(REQUIRED_FILE, encoding="utf-8") as f:
            ids = {l.rstrip("\n") for l in f if l.strip()}
    except OSError:
        return None
    return ids or None


def _counted(nid, required):
    return required is None or nid in required


def _summary(col, required):
    """The task's failing tests (sorted), the passing count, and how many other tests failed."""
    failed = sorted(n for n, o in col.outcomes.items() if o == "failed" and _counted(n, required))
    others = sum(1 for n, o in col.outcomes.items() if o == "failed" and not _counted(n, required))
    passed = sum(1 for o in col.outcomes.values() if o == "passed")
    return failed, passed, others


def _not_passed(col, required):
    """The task's tests that neither passed nor failed (skipped, xfailed, or not run at all), with
    why, sorted: the reward counts them as not passing, so tw-test must not call the run clean."""
    if required is None:
        return []
    out = []
    for n in sorted(required):
        o = col.outcomes.get(n)
        if o is None:
            out.append((n, "did not run"))
        elif o not in ("passed", "failed"):
            out.append((n, o))
    return out


def _counts(failed, passed, others, col, not_passed=()):
    line = "%d failed, %d passed" % (len(failed), passed)
    if not_passed:
        line += ", %d of the task's tests skipped or not run" % len(not_passed)
    if col.errors:
        line += ", %d error%s" % (len(col.errors), "" if len(col.errors) == 1 else "s")
    if others:
        line += ", %d other%s failing (not the task's tests)" % (others, "" if others == 1 else "s")
    return line


# pytest's exit codes for a session that ended before every test ran: the counts are of the tests
# that did run, and such a run is not a pass (code under test that breaks pytest itself, such as
# a patched os.name left behind, ends the session with an internal error).
_STOPPED = {2: "interrupted", 3: "internal error"}


def _stopped(code, out):
    """The line saying pytest stopped early (None when it did not): its exit and last message."""
    if code not in _STOPPED:
        return None
    last = [l.replace("INTERNALERROR>", "").strip() for l in out.strip().splitlines() if l.strip()]
    why = next((l for l in reversed(last) if "Error" in l or "Exception" in l), last[-1] if last else "")
    return "pytest stopped early (exit %d, %s), not every test ran: %s" % (code, _STOPPED[code], why[:120])


def tw_test():
    code, col, out = _run(False)
    required = _required()
    failed, passed, others = _summary(col, required)
    if not col.outcomes and not col.errors:
        tail = [l for l in out.strip().splitlines() if l.strip()][-3:]
        print("no tests ran (pytest exit %d)" % code)
        for l in tail:
            print(l[:160])
        return 2
    not_passed = _not_passed(col, required)
    # Files that do not even import come first: every test in them is lost.
    shown = ["ERROR " + n for n in col.errors] + ["FAIL " + n for n in failed] + ["NOT PASSED %s (%s)" % x for x in not_passed]
    for l in shown[:3]:
        print(l)
    if len(shown) > 3:
        print("... %d more" % (len(shown) - 3))
    print(_counts(failed, passed, others, col, not_passed))
    stopped = _stopped(code, out)
    if stopped:
        print(stopped)
    return 1 if failed or col.errors or stopped or not_passed else 0


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


# A variant that loops forever (i += 1 -> i -= 1) is cut off after this much CPU time or, if it
# sleeps instead, this much wall time: the floors of the limits below.
MUTANT_CPU_SECONDS = 1.0
MUTANT_WALL_SECONDS = 8.0


def mutant_limits(run_wall, run_cpu):
    """(CPU seconds, wall seconds) one variant's test run may take, from what the tool's own first
    run of the whole suite (traced, so dearer than any variant's run) cost just now: twice its CPU
    time and four times its wall time, never under the floors above. Contention stretches both
    (a forked pytest run on a cgroup shared with busy processes measured 3x the CPU time and 30x
    the wall time of an idle one), and a fixed limit would cut every variant short on a busy
    machine and rank by that; a suite that is slow on its own gets room in the same way."""
    return max(MUTANT_CPU_SECONDS, 2.0 * run_cpu), max(MUTANT_WALL_SECONDS, 4.0 * run_wall)

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


def _passing_in_child(copy, ids, cpu_seconds, wall_seconds):
    """Run `ids` (all tests when empty) on the copy in a forked child: the number that pass, or
    -1 when the child failed or ran past either limit."""
    rd, wr = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never returns
        os.close(rd)
        n = -1
        try:
            # SIGPROF / SIGALRM end the child (no handler): read as -1 below.
            signal.setitimer(signal.ITIMER_PROF, cpu_seconds)
            signal.setitimer(signal.ITIMER_REAL, wall_seconds)
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


class _GuardReached(Exception):
    """The wall-clock guard passed during the re-ranking."""


def mutation_scores(candidates, failed, total, limits):
    """For each (abs path, line) in `candidates` (most suspicious first), the most tests any of
    its one-token variants makes pass: failing tests first (a variant that fixes none scores 0),
    then the whole suite for those that fix some. Stops after MUTATE_RUNS test runs (lines not
    reached score 0), at the wall-clock guard, or at a variant that makes all `total` tests pass
    (no later line can rank above it). `limits` bound each variant's run (mutant_limits); the
    guard bounds it too, and a run the guard stopped counts as not run. Returns the scores and
    whether the guard stopped it."""
    cpu_limit, wall_limit = limits
    scores = {}
    cut = False
    deadline = _STARTED + _guard_seconds()
    runs = 0

    def run(ids):
        nonlocal runs
        left = deadline - time.monotonic()
        if left <= 0:
            raise _GuardReached()
        n = _passing_in_child(copy, ids, cpu_limit, min(wall_limit, left))
        if n < 0 and time.monotonic() >= deadline:
            raise _GuardReached()
        runs += 1
        return n

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
                    fixed = run(failed)
                    if fixed > 0:
                        whole = run([])
                        best = max(best, whole if whole > 0 else fixed)
                except _GuardReached:
                    cut = True
                    break
                finally:
                    with open(target, "w", encoding="utf-8") as fh:
                        fh.write(original)
                if best >= total:
                    break
            scores[(f, line)] = best
            if cut or best >= total or runs >= MUTATE_RUNS:
                break
            if time.monotonic() > deadline:
                cut = True
                break
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return scores, cut


def _has_default(code_line):
    """A def line with a default value (`def f(a, b=1):`): the default is code a bug can be in."""
    return code_line.startswith("def ") and "=" in code_line.split("(", 1)[-1].replace("==", "")


def _mutable(ranked):
    """The first MUTATE_LINES ranked lines that have a one-token variant, as (abs path, line): a
    line with none (an import, a string) costs no test run and takes no place."""
    out = []
    for rel, line, f, code in ranked:
        if len(out) >= MUTATE_LINES:
            break
        if line_mutants(code):
            out.append((f, line))
    return out


def tw_suspects(numbered=False):
    _save_suspects([])
    w0, c0 = time.monotonic(), time.process_time()
    code, col, out = _run(True)
    limits = mutant_limits(time.monotonic() - w0, time.process_time() - c0)
    required = _required()
    failed, passed, others = _summary(col, required)
    if not col.outcomes and not col.errors:
        print("no tests ran (pytest exit %d)" % code)
        return 2
    print(_counts(failed, passed, others, col))
    for n in col.errors[:2]:
        print("ERROR " + n)
    stopped = _stopped(code, out)
    if stopped:
        print(stopped)
    if not failed:
        if (col.errors or stopped) and any(col.error_frames):
            _show_suspects(_error_suspects(col.error_frames), numbered)
            return 1
        return 1 if col.errors or stopped else 0
    ef, ep = {}, {}
    for nid, outcome in col.outcomes.items():
        if not _counted(nid, required):
            continue
        for key in col.lines.get(nid, ()):
            d = ef if outcome == "failed" else ep
            d[key] = d.get(key, 0) + 1
    total_f = len(failed)
    # A line only the imports ran (a constant, a class body, a table built at import) ran before
    # every test: as if each test ran it. One a test ran as well keeps the tests' spectrum.
    total_p = len(col.outcomes) - total_f
    import_only = {key for key in col.import_lines if key not in ef and key not in ep}
    for key in import_only:
        ef[key] = total_f
        ep[key] = total_p
    scored = []
    for key, nf in ef.items():
        np_ = ep.get(key, 0)
        scored.append((-(nf / math.sqrt(total_f * (nf + np_))), -nf, os.path.relpath(os.path.realpath(key[0]), ROOT), key[1], key[0]))
    scored.sort()
    code_at = _code_reader()
    ranked = []
    for _, _, rel, line, f in scored:
        code_line = code_at(f, line)
        if not code_line or (code_line.startswith(("def ", "class ", "@")) and not _has_default(code_line)):
            continue
        # Of the lines only the imports ran, the ones no bug is in: docstrings, imports, `pass`.
        if (f, line) in import_only and (code_line[0] in "'\"" or code_line.startswith(("import ", "from ")) or code_line == "pass"):
            continue
        ranked.append((rel, line, f, code_line))
    mscore, cut = mutation_scores(_mutable(ranked), failed, len(failed) + passed, limits) if os.environ.get("TW_MUTATE", "1") != "0" else ({}, False)
    # Stable sort: equal mutation scores keep the Ochiai order.
    ranked.sort(key=lambda t: -mscore.get((t[2], t[1]), 0))
    _show_suspects(ranked, numbered)
    if not ranked:
        print("no source line ran in a failing test")
    if cut:
        print(CUT_SHORT)
    return 1


def _code_reader():
    """code_at(file, line): the line's text, stripped ("" past the end or for a file that cannot be read)."""
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

    return code_at


def _error_suspects(tracebacks):
    """Suspects from the source lines of the tracebacks of errors that kept the tests from running:
    a line nearer the innermost frame of some traceback first, then one in more of them."""
    depth, count = {}, {}
    for frames in tracebacks:
        for d, key in enumerate(dict.fromkeys(frames)):
            depth[key] = min(depth.get(key, d), d)
            count[key] = count.get(key, 0) + 1
    code_at = _code_reader()
    ranked = []
    for f, line in sorted(depth, key=lambda k: (depth[k], -count[k], os.path.realpath(k[0]), k[1])):
        code_line = code_at(f, line)
        if code_line:
            ranked.append((os.path.relpath(os.path.realpath(f), ROOT), line, f, code_line))
    return ranked


def _show_suspects(ranked, numbered):
    """Prints the first five of `ranked` ((rel, line, file, code) each) and keeps them for the numbered commands."""
    shown = ranked[:5]
    _save_suspects([(rel, line) for rel, line, _, _ in shown])
    for k, (rel, line, _, code_line) in enumerate(shown, 1):
        print("%s%s:%d: %s" % ("[%d] " % k if numbered else "", rel, line, code_line[:100]))


# --- suspects by number: tw-show, tw-tokens, tw-edit, tw-cands, tw-apply ---------------------
# Lines of context tw-show prints on each side of the line (its observation must fit a small
# model's prompt: five lines of code).
SHOW_CONTEXT = 2
USAGE = {
    "test": "tw-test",
    "suspects": "tw-suspects [-n]",
    "show": "tw-show K [LINES]   (K: a suspect's number from tw-suspects, or path:line)",
    "tokens": "tw-tokens K   (K: a suspect's number from tw-suspects, or path:line)",
    "edit": "tw-edit K OLD NEW   (OLD: text that occurs once on suspect K's line)",
    "cands": "tw-cands K   (K: a suspect's number from tw-suspects, or path:line)",
    "apply": "tw-apply K J   (J: a variant's number from tw-cands K)",
}


class Refused(Exception):
    """What a tool will not do, said in one line; exit 1."""


def _save_suspects(suspects):
    try:
        os.makedirs(STATE_DIR, mode=0o700, exist_ok=True)
        tmp = "%s.%d" % (STATE_FILE, os.getpid())
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump({"root": ROOT, "suspects": [[p, n] for p, n in suspects]}, fh)
        os.replace(tmp, STATE_FILE)  # replaces a link put there, never writes through it
    except OSError:
        pass  # run by hand where the folder cannot be written: the ranking is still printed


def _suspect(k):
    try:
        with open(STATE_FILE, encoding="utf-8") as fh:
            state = json.load(fh)
        suspects = state["suspects"] if state.get("root") == ROOT else None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        suspects = None
    if suspects is None:
        raise Refused("no suspects yet in %s: run tw-suspects first (or give path:line)" % ROOT)
    if not suspects:
        raise Refused("the last tw-suspects listed no suspect: run it again after a change (or give path:line)")
    if not 1 <= k <= len(suspects):
        raise Refused("no suspect %d: the last tw-suspects listed %d (1-%d)" % (k, len(suspects), len(suspects)))
    try:
        path, line = suspects[k - 1]
        return str(path), int(line)
    except (TypeError, ValueError):
        raise Refused("the saved ranking is unreadable: run tw-suspects again")


def _target(arg):
    """(workspace-relative path, absolute path, line) of `K` or `path:line`, checked: inside the
    workspace, reached through real folders, a regular file."""
    if re.fullmatch(r"\d+", arg):
        rel, line = _suspect(int(arg))
    else:
        m = re.fullmatch(r"(.+):(\d+)", arg)
        if not m:
            raise Refused("%r is neither a suspect's number nor path:line" % arg)
        rel, line = m.group(1), int(m.group(2))
    full = os.path.normpath(os.path.join(ROOT, rel))
    if not full.startswith(ROOT + os.sep):
        raise Refused("%s is outside the workspace %s" % (rel, ROOT))
    probe = ROOT
    for part in os.path.relpath(full, ROOT).split(os.sep):
        probe = os.path.join(probe, part)
        if os.path.islink(probe):
            raise Refused("%s is reached through a symbolic link" % os.path.relpath(full, ROOT))
    if not os.path.isfile(full):
        raise Refused("%s is not a file of the workspace" % os.path.relpath(full, ROOT))
    return os.path.relpath(full, ROOT), full, line


def _read_lines(full, rel):
    try:
        with open(full, encoding="utf-8", newline="") as fh:
            return fh.read().split("\n")
    except UnicodeDecodeError:
        raise Refused("%s is not UTF-8 text" % rel)


def _line_of(lines, rel, line):
    if not 1 <= line <= len(lines):
        raise Refused("%s has %d lines, no line %d" % (rel, len(lines), line))
    text = lines[line - 1]
    return text[:-1] if text.endswith("\r") else text


def tw_show(args):
    if len(args) not in (1, 2) or (len(args) == 2 and not re.fullmatch(r"\d+", args[1])):
        raise Refused("usage: " + USAGE["show"])
    rel, full, line = _target(args[0])
    ctx = min(int(args[1]), 50) if len(args) == 2 else SHOW_CONTEXT
    lines = _read_lines(full, rel)
    _line_of(lines, rel, line)
    lo, hi = max(1, line - ctx), min(len(lines), line + ctx)
    width = len(str(hi))
    print("%s:%d" % (rel, line))
    for n in range(lo, hi + 1):
        code = lines[n - 1].rstrip("\r")
        print("%s%s %s" % (">" if n == line else " ", str(n).rjust(width), code[:120]))
    return 0


def tw_tokens(args):
    import tokenize

    if len(args) != 1:
        raise Refused("usage: " + USAGE["tokens"])
    rel, full, line = _target(args[0])
    code = _line_of(_read_lines(full, rel), rel, line).strip()
    skip = (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER, tokenize.INDENT, tokenize.DEDENT, tokenize.COMMENT)
    toks = []
    try:
        for t in tokenize.generate_tokens(io.StringIO(code + "\n").readline):
            if t.type not in skip:
                toks.append(t.string)
    except (tokenize.TokenError, SyntaxError):
        pass  # a line that opens a bracket closed on a later one: the tokens up to its end
    print("%s:%d: %s" % (rel, line, code[:100]))
    print("%d tokens: %s" % (len(toks), " ".join(toks)))
    return 0


def _refuse_test_file(rel, full, tool):
    if _is_test_file(full):
        raise Refused("%s is a test file: %s changes the code under test (test files are restored before scoring)" % (rel, tool))


def _lines_and_code(rel, full, line):
    lines = _read_lines(full, rel)
    return lines, _line_of(lines, rel, line)


def _write_line(rel, full, line, lines, code, edited, which=""):
    """Writes `edited` over line `line` (its line ending kept), prints the line before and after
    (`which` after its place: the variant tw-apply wrote), and says so when the file no longer
    parses (exit 1)."""
    lines[line - 1] = edited + lines[line - 1][len(code):]
    text = "\n".join(lines)
    with open(full, "w", encoding="utf-8", newline="") as fh:
        fh.write(text)
    print("edited %s:%d%s" % (rel, line, which))
    print("- " + code.strip()[:100])
    print("+ " + edited.strip()[:100])
    if full.endswith(".py"):
        try:
            compile(text, rel, "exec", dont_inherit=True)
        except SyntaxError as e:
            print("%s no longer parses: %s (line %s)" % (rel, e.msg, e.lineno))
            return 1
    return 0


def tw_edit(args):
    if len(args) != 3:
        raise Refused("usage: " + USAGE["edit"])
    rel, full, line = _target(args[0])
    old, new = args[1], args[2]
    _refuse_test_file(rel, full, "tw-edit")
    if old == "":
        raise Refused("OLD is empty: give the text on the line to replace")
    if "\n" in old or "\n" in new or "\r" in old or "\r" in new:
        raise Refused("tw-edit changes one line: OLD and NEW may not hold a line break")
    if old == new:
        raise Refused("OLD and NEW are the same: nothing to change")
    lines, code = _lines_and_code(rel, full, line)
    n = code.count(old)
    if n == 0:
        raise Refused("%r is not on %s:%d: %s" % (old, rel, line, code.strip()[:100]))
    if n > 1:
        raise Refused("%r occurs %d times on %s:%d: give more of the line so that it occurs once" % (old, n, rel, line))
    return _write_line(rel, full, line, lines, code, code.replace(old, new, 1))


# tw-cands: a line's one-token variants. The flips undo the mutation engine's own (most of its
# operators are involutions), so a line a one-token bug came from is on the list; none is tried.
# src/train/line-candidates.ts is the same function for the warm start's demonstrations, and a
# docker test holds the two to the same lists.
CANDS_MAX = 8
# What tw-cands prints must fit a small model's observation (360 characters): the line once, cut
# to CANDS_WIDTH, then each variant as its change with CANDS_SIDE characters on either side.
CANDS_WIDTH = 60
CANDS_SIDE = 8
_FLIP = {
    "<": ["<="], "<=": ["<"], ">": [">="], ">=": [">"], "==": ["!="], "!=": ["=="],
    "+=": ["-="], "-=": ["+="], "*=": ["/="], "/=": ["*="],
    "+": ["-"], "-": ["+"], "*": ["/", "//", "%"], "/": ["*"], "//": ["*"], "%": ["*"],
    "and": ["or"], "or": ["and"], "not in": ["in"], "in": ["not in"], "is not": ["is"], "is": ["is not"],
    "True": ["False"], "False": ["True", "None"], "None": ["False"],
}
_CAND_TOKEN = re.compile(
    r"(?P<str>[rbuRBUfF]{0,2}(?:'[^']*'|\"[^\"]*\"))|(?P<hash>#)|(?P<num>(?<![\w.])\d+(?![\w.]))"
    r"|(?P<op>//=|\+=|-=|\*=|/=|\*\*=?|<<|>>|->|<=|>=|==|!=|//|[-+*/%<>])"
    r"|(?P<word>\b(?:not\s+in|is\s+not|and|or|in|is|True|False|None|for)\b)",
    re.ASCII,
)
_COND = re.compile(r"^(\s*(?:if|elif|while)\s+)(.*?)(:\s*(?:#.*)?)$", re.ASCII)
_OPERAND_END = re.compile(r"[A-Za-z0-9_)\]'\"]")


def line_candidates(code):
    """The one-token variants of a line, in a fixed order: its tokens left to right (a string or a
    comment is left alone; an operator's sign when unary, a loop's `in`, `**`, shifts and `->`
    are not flipped), then each `- 1` before a closing bracket dropped, then the condition of an
    if/elif/while negated (or its `not` removed), then each pair of adjacent positional arguments
    of a call swapped (argument_swaps)."""
    out = []
    after_for = False
    for m in _CAND_TOKEN.finditer(code):
        kind, tok, a, b = m.lastgroup, m.group(0), m.start(), m.end()
        if kind == "hash":
            break
        if kind == "str":
            continue
        if kind == "word":
            tok = " ".join(tok.split())
            if tok == "for":
                after_for = True
                continue
            if tok == "in" and after_for:
                after_for = False  # the loop's own `in`
                continue
        if kind == "num":
            n = int(tok)
            alts = [str(n + 1)] + ([str(n - 1)] if n > 0 else [])
        elif tok in ("+", "-"):
            before = code[:a].rstrip(" \t")
            if not before or not _OPERAND_END.match(before[-1]):
                continue  # a unary sign
            if tok == "+" and (before[-1] in "'\"" or code[b:].lstrip(" \t")[:1] in ("'", '"')):
                continue  # joins strings
            alts = _FLIP[tok]
        else:
            alts = _FLIP.get(tok)
            if alts is None:
                continue
        out.extend(code[:a] + x + code[b:] for x in alts)
    for m in re.finditer(r" - 1(?=[)\]])", code, re.ASCII):
        if "#" not in code[: m.start()]:
            out.append(code[: m.start()] + code[m.end():])
    cond = _COND.match(code)
    if cond:
        head, expr, tail = cond.groups()
        neg = re.match(r"^not\s*\((.*)\)$", expr, re.ASCII) or re.match(r"^not\s+(.*)$", expr, re.ASCII)
        if neg:
            out.append(head + neg.group(1) + tail)
        elif re.fullmatch(r"[\w.]+(?:\([^()]*\))?", expr, re.ASCII):
            out.append(head + "not " + expr + tail)
        else:
            out.append(head + "not (%s)" % expr + tail)
    out.extend(argument_swaps(code))
    seen = set()
    return [x for x in out if x != code and not (x in seen or seen.add(x))][:CANDS_MAX]


# Words after which `(` opens a tuple or a condition, not a call's arguments.
_NOT_CALLEE = {"if", "elif", "while", "and", "or", "not", "in", "is", "return", "yield", "assert", "del", "for",
               "with", "except", "lambda", "else", "await", "import", "from", "as", "raise"}
_OPENS = {"(": ")", "[": "]", "{": "}"}
_KEYWORD_OR_SPLAT = re.compile(r"(?:\*|\w+[ \t]*=(?!=))", re.ASCII)
_DEFINES = re.compile(r"[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]", re.ASCII)


def argument_swaps(code):
    """The variants of a line with two adjacent positional arguments of one call swapped, calls
    left to right by their `(`: `f(a, b)` gives `f(b, a)`. Only a call whose arguments close on
    this line; keyword and `*` arguments stay; a definition's parameters are no call. Strings are
    skipped (a backslash escapes the next character); the line ends at a `#` outside a string."""
    if _DEFINES.match(code):
        return []
    in_code, quote, end, i = [], "", len(code), 0
    while i < len(code):
        ch = code[i]
        if quote:
            in_code.append(False)
            if ch == "\\":
                in_code.append(False)
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
            in_code.append(False)
        elif ch == "#":
            end = i
            break
        else:
            in_code.append(True)
        i += 1
    out = []
    for op in range(end):
        if not in_code[op] or code[op] != "(":
            continue
        if not re.search(r"[\w)\]][ \t]*$", code[:op], re.ASCII):
            continue
        word = re.search(r"(\w+)[ \t]*$", code[:op], re.ASCII)
        if word and word.group(1) in _NOT_CALLEE:
            continue
        stack, commas, close = [")"], [], -1
        for j in range(op + 1, end):
            if not in_code[j]:
                continue
            ch = code[j]
            if ch in _OPENS:
                stack.append(_OPENS[ch])
            elif ch in ")]}":
                if stack.pop() != ch:
                    break
                if not stack:
                    close = j
                    break
            elif ch == "," and len(stack) == 1:
                commas.append(j)
        if close < 0:
            continue
        bounds = [op] + commas + [close]
        args = []
        for k in range(len(bounds) - 1):
            raw = code[bounds[k] + 1: bounds[k + 1]]
            a = bounds[k] + 1 + len(raw) - len(raw.lstrip(" \t"))
            text = raw.strip(" \t")
            args.append((a, a + len(text), text))
        for (xa, xb, x), (ya, yb, y) in zip(args, args[1:]):
            if not x or not y or x == y or _KEYWORD_OR_SPLAT.match(x) or _KEYWORD_OR_SPLAT.match(y):
                continue
            out.append(code[:xa] + y + code[xb:ya] + x + code[yb:])
    return out


def _window(code, width=CANDS_WIDTH):
    code = code.strip(" \t")
    return code if len(code) <= width else code[: width - 3] + "..."


def variant_view(code, variant, side=CANDS_SIDE):
    """Variant `variant` of line `code` as tw-cands prints it: the changed text with `side`
    characters of the variant on either side, "..." where the line goes on."""
    a, b = code.strip(" \t"), variant.strip(" \t")
    p = 0
    while p < min(len(a), len(b)) and a[p] == b[p]:
        p += 1
    q = 0
    while q < min(len(a), len(b)) - p and a[len(a) - 1 - q] == b[len(b) - 1 - q]:
        q += 1
    lo, hi = max(0, p - side), min(len(b), len(b) - q + side)
    mid = b[lo:hi]
    if len(mid) > 3 * side:
        mid = mid[: 3 * side] + "..."
    return ("..." if lo > 0 else "") + mid + ("..." if hi < len(b) and not mid.endswith("...") else "")


def tw_cands(args):
    if len(args) != 1:
        raise Refused("usage: " + USAGE["cands"])
    rel, full, line = _target(args[0])
    _, code = _lines_and_code(rel, full, line)
    cands = line_candidates(code)
    print("%s:%d: %s" % (rel, line, _window(code)))
    if not cands:
        print("no one-token variants of this line")
    for j, c in enumerate(cands, 1):
        print("[%d] %s" % (j, variant_view(code, c)))
    return 0


def tw_apply(args):
    if len(args) != 2 or not re.fullmatch(r"\d+", args[1]):
        raise Refused("usage: " + USAGE["apply"])
    rel, full, line = _target(args[0])
    _refuse_test_file(rel, full, "tw-apply")
    lines, code = _lines_and_code(rel, full, line)
    cands = line_candidates(code)
    j = int(args[1])
    if not cands:
        raise Refused("%s:%d has no one-token variants: %s" % (rel, line, code.strip()[:100]))
    if not 1 <= j <= len(cands):
        raise Refused("no variant %d: tw-cands %s lists %d (1-%d)" % (j, args[0], len(cands), len(cands)))
    # "variant J of N": the agent sees when it has tried the line's last one.
    return _write_line(rel, full, line, lines, code, cands[j - 1], " (variant %d of %d)" % (j, len(cands)))


def main(argv):
    sys.dont_write_bytecode = True
    tool = os.path.basename(argv[0]) if len(argv) < 2 else argv[1]
    tool = tool[3:] if tool.startswith("tw-") else tool
    args = argv[2:]
    try:
        if tool == "test":
            return tw_test()
        if tool == "suspects":
            if args not in ([], ["-n"], ["--numbered"]):
                raise Refused("usage: " + USAGE["suspects"])
            return tw_suspects(numbered=bool(args))
        if tool == "show":
            return tw_show(args)
        if tool == "tokens":
            return tw_tokens(args)
        if tool == "edit":
            return tw_edit(args)
        if tool == "cands":
            return tw_cands(args)
        if tool == "apply":
            return tw_apply(args)
    except Refused as e:
        print("tw-%s: %s" % (tool, e))
        return 1 if not str(e).startswith("usage:") else 2
    print("usage: turnwise_tools.py test|suspects|show|tokens|edit|cands|apply ARGS", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
