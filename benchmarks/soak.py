"""Soak: many random suites, each run checked against an oracle that ignores the plugin.

Every round generates a suite from a seed - a random DAG over a few modules,
``depends_on`` (requires-pass) and ``run_after`` (order only) edges, tests
that fail, xfail, are skipped, error in a fixture's setup or teardown, or
crash their worker (``os._exit``) - and runs it serially or with a random
``-n`` from 1 to 8, a random ``--dag-affinity`` and sometimes
``--dag-on-failure=run``.  What must come out is computed from the spec
alone (the documented rules: a prerequisite passed only if its setup, call
and teardown passed; a test with a requires-pass prerequisite that did not
pass is skipped, before its fixtures; ``run_after`` orders only; a crashed
test is failed and its dependents are skipped).

Checked per run: each test's outcome in the JUnit XML (and, for blocked
tests, that the reason names a direct prerequisite that did not pass), the
number of testcases equals the number of tests, no test body ran twice or
ran although it had to be skipped, no dependent started before its
prerequisite's body ended (start/end times logged by every body), the exit
status, and no hang (each run under a timeout).

Run: ``python benchmarks/soak.py --minutes 5 [--seed S] [--jobs 1]``; it stops
by itself and prints the counts and the seeds of failing runs; a single
seed is replayed with ``--only SEED --keep DIR`` (the suite is kept there).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench_cpu import compile_plugin

# The tests' JUnit reader: the checkout's root on the path (run as a script).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.helpers import read_junit

KINDS = ["pass", "fail", "xfail", "skip", "setup_error", "teardown_error", "crash"]
RUN_TIMEOUT = 180.0

CONFTEST = """\
import pytest


@pytest.fixture
def setup_boom():
    raise RuntimeError("soak: setup error")


@pytest.fixture
def teardown_boom():
    yield
    raise RuntimeError("soak: teardown error")
"""


@dataclass
class Test:
    index: int
    module: int
    kind: str
    requires: list[int] = field(default_factory=list)
    after: list[int] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"test_{self.index}"


@dataclass
class Spec:
    seed: int
    tests: list[Test]
    modules: int
    workers: int  # 0: serial
    affinity: str
    on_failure: str

    def args(self) -> list[str]:
        out = ["-p", "no:xdist"] if self.workers == 0 else [
            "-n", str(self.workers), "--max-worker-restart=20"]
        return [*out, f"--dag-affinity={self.affinity}", f"--dag-on-failure={self.on_failure}"]


def generate(seed: int) -> Spec:
    rng = random.Random(seed)
    modules = rng.randint(1, 4)
    count = rng.randint(4, 40)
    workers = rng.choice([0, 1, 2, 2, 3, 4, 5, 6, 7, 8])
    weights = [70, 8, 4, 4, 4, 4, 0 if workers == 0 else 3]
    crashes = 0
    tests: list[Test] = []
    for i in range(count):
        kind = rng.choices(KINDS, weights)[0]
        # A crash costs a worker restart; a few per run keep the run short.
        if kind == "crash":
            crashes += 1
            if crashes > 2:
                kind = "pass"
        t = Test(i, rng.randrange(modules), kind)
        for p in sorted(rng.sample(range(i), min(i, rng.choice([0, 1, 1, 2, 3])))):
            (t.requires if rng.random() < 0.75 else t.after).append(p)
        tests.append(t)
    return Spec(seed, tests, modules, workers, rng.choice(["module", "class", "none"]),
                "run" if rng.random() < 0.15 else "skip")


def target(t: Test, p: Test) -> str:
    return p.name if p.module == t.module else f"test_m{p.module}.py::{p.name}"


def write(spec: Spec, root: Path, log: Path) -> None:
    (root / "pytest.ini").write_text("[pytest]\n")
    (root / "conftest.py").write_text(CONFTEST)
    head = textwrap.dedent(f"""\
        import os
        import time

        import pytest

        from pytest_dagorder import depends_on, run_after

        LOG = {str(log)!r}


        def note(what, name):
            with open(LOG, "a") as f:
                f.write(f"{{what}} {{name}} {{time.time()!r}} {{os.getpid()}}\\n")

        """)
    bodies: list[list[str]] = [[head] for _ in range(spec.modules)]
    for t in spec.tests:
        lines = []
        if t.requires:
            lines.append("@depends_on(" + ", ".join(
                repr(target(t, spec.tests[p])) for p in t.requires) + ")")
        if t.after:
            lines.append("@run_after(" + ", ".join(
                repr(target(t, spec.tests[p])) for p in t.after) + ")")
        args = ""
        body = "pass"
        if t.kind == "fail":
            body = "assert 0, 'soak: fails'"
        elif t.kind == "xfail":
            lines.append("@pytest.mark.xfail(reason='soak: xfail', strict=True)")
            body = "assert 0, 'soak: expected'"
        elif t.kind == "skip":
            lines.append("@pytest.mark.skip(reason='soak: skip')")
        elif t.kind == "setup_error":
            args = "setup_boom"
        elif t.kind == "teardown_error":
            args = "teardown_boom"
        elif t.kind == "crash":
            body = "os._exit(3)"
        lines.append(f"def {t.name}({args}):")
        lines.append(f"    note('S', {t.name!r})")
        if t.kind == "crash":
            lines.append("    note('C', " + repr(t.name) + ")")
            lines.append(f"    {body}")
        else:
            lines.append("    try:")
            lines.append(f"        {body}")
            lines.append("    finally:")
            lines.append(f"        note('E', {t.name!r})")
        bodies[t.module].append("\n".join(lines) + "\n\n")
    for m, parts in enumerate(bodies):
        (root / f"test_m{m}.py").write_text("".join(parts))


@dataclass(frozen=True)
class Expected:
    outcome: str  # junit: passed, failed, error, skipped
    runs: bool  # the body runs
    passed: bool  # counts as passed for its dependents
    blocked_by: tuple[str, ...] = ()  # names of direct prerequisites that did not pass


def oracle(spec: Spec) -> list[Expected]:
    """What each test must do, from the spec and the documented rules alone."""
    out: list[Expected] = []
    for t in spec.tests:  # every prerequisite has a smaller index
        failed = tuple(spec.tests[p].name for p in t.requires if not out[p].passed)
        if failed and spec.on_failure == "skip":
            out.append(Expected("skipped", False, False, failed))
            continue
        outcome = {"pass": "passed", "fail": "failed", "xfail": "skipped", "skip": "skipped",
                   "setup_error": "error", "teardown_error": "error",
                   # xdist reports a crash as a failure outside the call: in the
                   # junit xml an error ("worker 'gw0' crashed while running ...").
                   "crash": "error"}[t.kind]
        out.append(Expected(outcome, t.kind not in ("skip", "setup_error"), t.kind == "pass"))
    return out


@dataclass
class Result:
    problems: list[str]
    tests: int
    faults: int
    seconds: float


def check(spec: Spec, keep: Path | None = None) -> Result:
    faults = sum(t.kind != "pass" for t in spec.tests)
    with tempfile.TemporaryDirectory() as tmp:
        root = keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        log = root / "soak.log"
        log.unlink(missing_ok=True)
        write(spec, root, log)
        junit = root / "junit.xml"
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA",
               f"--junitxml={junit}", *spec.args()]
        start = time.perf_counter()
        try:
            proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True,
                                  timeout=RUN_TIMEOUT, env=dict(os.environ, PYTHONHASHSEED="0"))
        except subprocess.TimeoutExpired:
            return Result([f"hang: no end within {RUN_TIMEOUT:.0f} s"], len(spec.tests), faults,
                          RUN_TIMEOUT)
        seconds = time.perf_counter() - start
        problems = compare(spec, proc, junit, log)
        if problems:
            problems.append("output tail:\n" + proc.stdout[-1500:] + proc.stderr[-800:])
    return Result(problems, len(spec.tests), faults, seconds)


def compare(spec: Spec, proc: subprocess.CompletedProcess[str], junit: Path,
            log: Path) -> list[str]:
    expected = oracle(spec)
    problems: list[str] = []
    want_rc = 0 if all(e.outcome in ("passed", "skipped") for e in expected) else 1
    if proc.returncode != want_rc:
        problems.append(f"exit status {proc.returncode}, expected {want_rc}")
    if "INTERNALERROR" in proc.stdout + proc.stderr:
        problems.append("INTERNALERROR")
    if not junit.exists():
        return [*problems, "no junit xml"]
    cases, count = read_junit(junit)
    if count != len(spec.tests) or len(cases) != len(spec.tests):
        problems.append(f"{count} testcases ({len(cases)} distinct) for {len(spec.tests)} tests")
    for t, e in zip(spec.tests, expected, strict=True):
        key = f"test_m{t.module}::{t.name}"
        got = cases.get(key)
        if got is None:
            problems.append(f"{key}: missing from the junit xml")
            continue
        outcome, message = got.outcome, got.message
        if outcome != e.outcome:
            problems.append(f"{key} ({t.kind}): {outcome} {message!r}, expected {e.outcome}"
                            + (f" (blocked by {', '.join(e.blocked_by)})" if e.blocked_by else ""))
        elif t.kind == "crash" and not e.blocked_by and "crashed" not in message:
            problems.append(f"{key}: crash reported as {message!r}")
        elif e.blocked_by and not (message.startswith("prerequisite ") and any(
                re.search(rf"\b{n}\b", message.split(": ")[0])
                for n in e.blocked_by)):
            problems.append(f"{key}: reason {message!r} names none of {e.blocked_by}")
    starts: dict[str, list[float]] = {}
    ends: dict[str, float] = {}
    if log.exists():
        for line in log.read_text().splitlines():
            what, name, when, _pid = line.split()
            if what == "S":
                starts.setdefault(name, []).append(float(when))
            else:
                ends[name] = float(when)
    for t, e in zip(spec.tests, expected, strict=True):
        ran = starts.get(t.name, [])
        if len(ran) > 1:
            problems.append(f"{t.name} ran {len(ran)} times")
        if ran and not e.runs:
            problems.append(f"{t.name} ran but must not have ({t.kind}, blocked by "
                            f"{e.blocked_by})")
        if not ran and e.runs:
            problems.append(f"{t.name} did not run ({t.kind})")
        if not ran:
            continue
        for p in [*t.requires, *t.after]:
            pre = spec.tests[p].name
            if pre in starts:
                # A crashed prerequisite has no end mark: its start bounds it.
                end = ends.get(pre, starts[pre][0])
                if ran[0] < end:
                    problems.append(f"order: {t.name} started {end - ran[0]:.4f} s before "
                                    f"{pre} ended")
    return problems


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=5.0)
    ap.add_argument("--seed", type=int, default=int(time.time()) % 100000,
                    help="first seed (default: from the clock); run k uses seed + k")
    ap.add_argument("--only", type=int, help="run this one seed and print its spec")
    ap.add_argument("--keep", type=Path, help="with --only: write the suite here")
    opts = ap.parse_args()
    compile_plugin()
    if opts.only is not None:
        spec = generate(opts.only)
        print(f"seed {spec.seed}: {len(spec.tests)} tests, args {' '.join(spec.args())}")
        for t, e in zip(spec.tests, oracle(spec), strict=True):
            print(f"  m{t.module} {t.name} {t.kind} requires={t.requires} after={t.after} "
                  f"-> {e.outcome}")
        r = check(spec, opts.keep)
        print("\n".join(r.problems) or "ok")
        sys.exit(1 if r.problems else 0)
    deadline = time.monotonic() + opts.minutes * 60
    runs = tests = faults = violations = 0
    failing: list[int] = []
    seed = opts.seed
    print(f"soak from seed {seed} for {opts.minutes} min", flush=True)
    while time.monotonic() < deadline:
        spec = generate(seed)
        r = check(spec)
        runs += 1
        tests += r.tests
        faults += r.faults
        if r.problems:
            violations += len(r.problems) - 1
            failing.append(seed)
            print(f"FAIL seed {seed} ({' '.join(spec.args())}):", flush=True)
            print("  " + "\n  ".join(r.problems), flush=True)
        seed += 1
    print(f"runs {runs}, tests {tests}, faults injected {faults}, violations {violations}, "
          f"failing seeds {failing or 'none'}")
    sys.exit(1 if failing else 0)


if __name__ == "__main__":
    main()
