"""Output the pages show that is not a walk-through's (tests/test_docs_output.py
runs those): each is produced here as cheaply as it can be and compared.

- docs/executor.rst: the error of a task whose prerequisite was skipped, from
  the page's ``DagExecutor`` block run with a ``fetch`` that fails.
- docs/how-it-works.rst: the asyncio snippet that never returns, run in a
  process of its own (the loop it leaves waiting cannot be ended in this one).
- docs/remote.rst: the usage error for a worker of another version.  No second
  machine here: a local worker that announces the version shown (as an older
  install there would) gets it.
- docs/safe-for-n.rst: the header's and the summary's lines on what affinity
  groups cost.  A run that prints them needs a suite of 120 tests and seconds
  of measured time; each line comes from one function
  (``options/wording.py``: ``groups_header``, ``group_cost``), called here
  with the figures shown.  The page wraps each at its width; the run prints
  one line (the summary two).
- docs/visualising.rst: the demo suite's graph, docs/_static/examples-graph.dot,
  which the page's picture is drawn from (by graphviz, which this suite does
  not need: the picture must name every test the graph holds), and the
  timeline page (its tests; bars and seconds are one run's).
- README.md: the skip reasons its prose quotes for its example when
  ``test_create_user`` fails, from that example with the test made to fail
  (serially: the reasons are the same under ``-n``).

Not compared, and why: docs/performance.md's figures are measurements (seconds,
CPU) that differ from run to run, each beside the command that took it;
docs/_static/timeline.png is a browser's picture of timeline.html.  Blocks
that show commands without output (the ``text`` blocks of options.rst and
others, index.rst's and README.md's ``$ pytest -n 4``) show nothing to
compare.  Messages quoted in a sentence (README.md's apart) are not searched for.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import base_args, runpytest

import pytest_dagorder
from pytest_dagorder import PrerequisiteFailed
from pytest_dagorder.options import wording

DOCS = Path(__file__).resolve().parent.parent / "docs"


def block(page: str, first: str) -> list[str]:
    """The lines of the page's literal or code block whose first line starts with
    ``first``, without their indentation."""
    lines = (DOCS / page).read_text(encoding="utf-8").splitlines()
    start = next(k for k, line in enumerate(lines) if line.strip().startswith(first))
    indent = len(lines[start]) - len(lines[start].lstrip())
    end = start
    while end < len(lines) and (not lines[end].strip()
                                or len(lines[end]) - len(lines[end].lstrip()) >= indent):
        end += 1
    body = [line[indent:] for line in lines[start:end]]
    while body and not body[-1]:
        body.pop()
    return body


def words(lines: list[str]) -> str:
    return " ".join(" ".join(lines).split())


def test_executor_shows_the_error_of_a_task_whose_prerequisite_was_skipped() -> None:
    code = "\n".join(block("executor.rst", "from pytest_dagorder import DagExecutor"))
    shown = words(block("executor.rst", "prerequisite parse"))
    # The names the page's block uses; tasks are named by __qualname__, so
    # they are defined at the top of a namespace, as in the page.
    names: dict[str, object] = {"url": "https://example.org/feed"}
    exec("def fetch(url):\n    raise OSError('no network')\n\n"
         "def parse(): ...\n\ndef index(): ...\n", names)
    with pytest.raises(PrerequisiteFailed) as info:
        exec(code, names)
    assert str(info.value) == shown


def test_how_it_works_shows_an_asyncio_snippet_that_never_returns(tmp_path: Path) -> None:
    """It waits for ever once the event loop logged the ``TypeError`` (as the
    page says): still running a second after that line, and then ended here."""
    code = "\n".join(block("how-it-works.rst", "import asyncio"))
    log = tmp_path / "stderr.txt"
    with log.open("w") as err:
        proc = subprocess.Popen([sys.executable, "-c", code], stderr=err)
    try:
        deadline = time.monotonic() + 60
        while "TypeError" not in log.read_text() and proc.poll() is None:
            assert time.monotonic() < deadline, "no TypeError logged in 60 s"
            time.sleep(0.05)
        time.sleep(1.0)
        assert proc.poll() is None, f"it returned ({proc.returncode}):\n{log.read_text()}"
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert ("TypeError: StopIteration interacts badly with generators and cannot be raised "
            "into a Future") in log.read_text()


def test_remote_shows_the_usage_error_for_a_worker_of_another_version(
        pytester: pytest.Pytester) -> None:
    shown = block("remote.rst", "ERROR: ")
    assert len(shown) == 1
    theirs = re.search(r"a worker runs pytest-dagorder (\S+),", shown[0])
    assert theirs, shown
    pytester.makeconftest(f"""
        import os

        if os.environ.get("PYTEST_XDIST_WORKER"):
            import pytest_dagorder.drivers.distributed.wire

            pytest_dagorder.drivers.distributed.wire.__version__ = {theirs.group(1)!r}
    """)
    pytester.makepyfile(test_x="""
        from pytest_dagorder import depends_on

        def test_a():
            pass

        @depends_on("test_a")
        def test_b():
            pass
    """)
    result = runpytest(pytester, *base_args(), "-n", "1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert shown[0] in result.errlines, (
        f"this process runs pytest-dagorder {pytest_dagorder.__version__}; it printed\n"
        + "\n".join(result.errlines))


def test_safe_for_n_shows_the_header_on_what_the_groups_cost() -> None:
    shown = words(block("safe-for-n.rst", "dagorder: 3 affinity groups keep"))
    assert shown == wording.groups_header(3, 41, 120, (2.10, 9.80, 7.70))


def test_safe_for_n_shows_the_summary_on_what_the_groups_cost() -> None:
    shown = words(block("safe-for-n.rst", "dagorder: affinity groups cost at least"))
    assert shown.endswith(" ...")
    printed = " ".join(wording.group_cost(
        3.10, 14.20, 13.90, 10.80, [("the group of tests/test_big.py::test_first", 40, 9.80)],
    ).split())
    assert printed.startswith(shown.removesuffix(" ...")), printed


#: The demo suite, the graph and the timeline the visualising page pictures.
EXAMPLES = DOCS / "examples"
GRAPH = DOCS / "_static" / "examples-graph.dot"
TIMELINE = DOCS / "_static" / "timeline.html"
_TEST_ID = re.compile(r"docs/examples/\w+\.py::[^\s\"<]+")


def test_the_demo_graph_and_timeline_are_the_demo_suites(pytester: pytest.Pytester) -> None:
    """The page's commands run the demo under ``-n 4`` from the repository's
    root; the graph is the same serially (``group`` is in the JSON form only),
    so one process makes it, in a copy (the root's conftest.py is this
    suite's).  The timeline's bars and seconds are one run's: it must show
    the tests a run of the demo executes, on four lanes."""
    shutil.copytree(EXAMPLES, pytester.path / "docs" / "examples",
                    ignore=shutil.ignore_patterns("__pycache__"))
    pytester.makeini("[pytest]\n")
    out = pytester.path / "graph.dot"
    timeline = pytester.path / "timeline.html"
    result = runpytest(pytester, *base_args(), "docs/examples", f"--dag-graph={out}",
                       f"--dag-timeline={timeline}")
    assert result.ret == pytest.ExitCode.OK, "\n".join(result.outlines)
    assert GRAPH.read_text(encoding="utf-8") == out.read_text(encoding="utf-8")
    picture = GRAPH.with_suffix(".svg").read_text(encoding="utf-8")
    tests = set(re.findall(r'^\s*"([^"]+)" \[label=', GRAPH.read_text(encoding="utf-8"), re.M))
    assert tests and sorted(t for t in tests if t not in picture) == []
    shown = TIMELINE.read_text(encoding="utf-8")
    assert set(_TEST_ID.findall(shown)) == set(_TEST_ID.findall(timeline.read_text("utf-8")))
    assert " executed on 4 lanes;" in shown


README = DOCS.parent / "README.md"


def test_readme_shows_the_skip_reasons_of_its_example(pytester: pytest.Pytester) -> None:
    """README's example with ``test_create_user`` failing (what its prose
    describes) gives the skip reasons the prose quotes, ``(...)`` standing for
    the first line of the failure."""
    text = README.read_text(encoding="utf-8")
    code = text.split("```python\n# test_users.py\n", 1)[1].split("```", 1)[0]
    failing = code.replace('USERS["ann"] = "s3cret"', 'raise RuntimeError("database down")')
    assert failing != code
    pytester.makepyfile(test_users=failing)
    result = runpytest(pytester, *base_args(), "-rs")
    result.assert_outcomes(failed=1, passed=1, skipped=2)
    prose = " ".join(text.split())
    for test, quoted in (("test_login", "prerequisite test_create_user failed (...)"),
                         ("test_checkout", "prerequisite test_login was skipped: "
                                           "test_create_user failed (...)")):
        assert f"`{test}` is reported SKIPPED with `{quoted}`" in prose or (
            f"`{test}` with `{quoted}`" in prose), quoted
        pattern = re.compile(r"SKIPPED \[1\] test_users\.py:\d+: "
                             + r"\(.*\)".join(map(re.escape, quoted.split("(...)"))) + r"$")
        assert any(pattern.search(line) for line in result.outlines), (
            f"{test}: no skip reason {quoted!r} in\n" + "\n".join(result.outlines))
