"""End to end: odd collections under -n (and serially where it applies).

Duplicate node ids, a conftest that reorders ``session.items`` after the plan
was made, and hooks of other plugins reading ``session.items`` on a worker.
"""

from __future__ import annotations

import pytest
from helpers import (
    A_THEN_B,
    LOG_NAME,
    assert_after,
    make_modules,
    read_log,
)
from support.dagtester import DagTester

pytestmark = pytest.mark.dag_modes("own")



def no_crash(result: pytest.RunResult) -> None:
    text = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in text, text
    assert "Traceback" not in text, text


DUPLICATED = """
def test_one():
    mark("one")


def test_two():
    mark("two")
"""


def test_duplicate_node_ids_without_declarations_run_under_xdist(
    pytester: pytest.Pytester, dagtester: DagTester,
) -> None:
    make_modules(pytester, test_dup=DUPLICATED)
    # The log names repeat: count lines instead of reading them as a map.
    result = dagtester.run("-n", "2", "--keep-duplicates", "test_dup.py", "test_dup.py")
    no_crash(result)
    result.assert_outcomes(passed=4)
    names = sorted(line.split()[0] for line in
                   (pytester.path / LOG_NAME).read_text().splitlines())
    assert names == ["one", "one", "two", "two"]


def test_duplicate_node_ids_beside_a_dependency_chain_under_xdist(
    pytester: pytest.Pytester, dagtester: DagTester,
) -> None:
    make_modules(pytester, test_dup=DUPLICATED, test_chain="""
        def test_a():
            mark("a")


        @depends_on("test_a")
        def test_b():
            mark("b")
    """)
    result = dagtester.run("-n", "2", "--keep-duplicates", "test_dup.py", "test_dup.py",
                           "test_chain.py")
    no_crash(result)
    result.assert_outcomes(passed=6)


REORDERING_CONFTEST = """
def pytest_collection_finish(session):
    # After the plan: put the dependents first (a plugin that shuffles, say).
    session.items.reverse()
"""


@pytest.mark.parametrize("extra", [[], ["-p", "no:xdist"]], ids=["xdist", "serial"])
def test_items_reordered_after_the_plan_still_run_in_dependency_order(
    pytester: pytest.Pytester, dagtester: DagTester, extra: list[str]
) -> None:
    pytester.makeconftest(REORDERING_CONFTEST)
    make_modules(pytester, test_x="""
        def test_a():
            mark("a", 0.3)


        @depends_on("test_a")
        def test_b():
            mark("b")


        @depends_on("test_b")
        def test_c():
            mark("c")


        def test_free():
            mark("free")
    """)
    args = [*extra, "-rs"] if extra else ["-n", "2", "--dag-affinity=none"]
    result = dagtester.run(*args)
    no_crash(result)
    ran = read_log(pytester)
    if extra:
        # Serially pytest runs the reversed list; what cannot run yet is skipped.
        assert "c" not in ran
        result.stdout.fnmatch_lines(["*has not run yet (tests were reordered)*"])
    else:
        result.assert_outcomes(passed=4)
        assert_after(ran, [("a", "b"), ("b", "c")])


SESSION_ITEMS_CONFTEST = """
import json
import os

def pytest_sessionfinish(session):
    # A plugin that looks at every item at the end (its function, its name).
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return  # the controller collects nothing
    names = [item.function.__name__ for item in session.items]
    names.append(session.items[-1].name)
    names += [it.name for it in session.items[:]]
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(f"items-{worker}.json", "w") as f:
        json.dump({"names": names, "len": len(session.items)}, f)
"""


def test_hooks_of_other_plugins_never_see_the_barrier_in_session_items(
    pytester: pytest.Pytester, dagtester: DagTester,
) -> None:
    pytester.makeconftest(SESSION_ITEMS_CONFTEST)
    make_modules(pytester, test_x=A_THEN_B)
    result = dagtester.run("-n", "2")
    no_crash(result)
    result.assert_outcomes(passed=2)
    import json

    for worker in ("gw0", "gw1"):
        seen = json.loads((pytester.path / f"items-{worker}.json").read_text())
        assert seen["len"] == 2
        assert "barrier" not in " ".join(seen["names"]), seen


@pytest.mark.parametrize("extra", [["-n", "2"], ["-p", "no:xdist"]], ids=["xdist", "serial"])
def test_depending_on_a_duplicated_node_id_is_a_clean_error(
    pytester: pytest.Pytester, dagtester: DagTester, extra: list[str]
) -> None:
    make_modules(pytester, test_dup=DUPLICATED, test_user="""
        @depends_on("test_dup.py::test_one")
        def test_uses():
            mark("uses")
    """)
    result = dagtester.run(*extra, "--keep-duplicates", "test_dup.py", "test_dup.py",
                           "test_user.py")
    no_crash(result)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert not (pytester.path / LOG_NAME).exists()
    result.stdout.fnmatch_lines([
        "*@depends_on on test_user.py::test_uses: 'test_dup.py::test_one' is ambiguous: "
        "test_dup.py::test_one was collected more than once*"])
