"""Agent tools installed in the Python sandbox (`tw-test`, `tw-suspects`).

A tiny policy has ~1,000 bytes of context, so the tools print little and in a fixed shape:
  tw-test      runs the tests; prints up to 3 failing test ids, then "N failed, M passed".
  tw-suspects  runs the tests with a line tracer and ranks the source lines executed by failing
               tests by Ochiai suspiciousness (spectrum-based fault localization); prints the
               summary line, then up to 5 lines as "path:line: code".
Both only read the workspace: nothing is written besides what pytest itself writes (no cache,
no bytecode). They know nothing a developer running the tests would not.
"""
import io
import math
import os
import sys
import contextlib

ROOT = os.path.realpath(os.environ.get("TW_ROOT", os.getcwd()))


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
        score = nf / math.sqrt(total_f * (nf + np_))
        scored.append((-score, -nf, os.path.relpath(os.path.realpath(key[0]), ROOT), key[1], key[0]))
    scored.sort()
    shown = 0
    texts = {}
    for _, _, rel, line, f in scored:
        if f not in texts:
            try:
                with open(f, encoding="utf-8", errors="replace") as fh:
                    texts[f] = fh.read().split("\n")
            except OSError:
                texts[f] = []
        lines = texts[f]
        code_line = lines[line - 1].strip() if 0 < line <= len(lines) else ""
        if code_line.startswith(("def ", "class ", "@")) or code_line == "":
            continue
        print("%s:%d: %s" % (rel, line, code_line[:100]))
        shown += 1
        if shown == 5:
            break
    if shown == 0:
        print("no source line ran in a failing test")
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
