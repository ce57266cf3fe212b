"""End to end: under -n a worker keeps each module's tests in one stretch, as
serial pytest does, so a module-scoped fixture is set up once per module on
each worker that runs it (an xdist_group spanning modules included)."""

from __future__ import annotations

import textwrap
from collections import Counter

import pytest
from support.dagtester import DagTester

pytestmark = pytest.mark.dag_modes("own")

TIMEOUT = 120.0

#: Each setup of the module fixture writes "worker module" to setups.log.
CONFTEST = """
import os

import pytest

LOG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "setups.log")


@pytest.fixture(scope="module")
def modfix(request, worker_id):
    with open(LOG, "a") as f:
        f.write(f"{worker_id} {request.module.__name__}\\n")
    return []
"""

#: Sleeps whose longest-first order (from recorded durations) interleaves
#: the modules: a long test of each module comes before the short ones.
MODULES = {
    "test_a": [("a1", 0.30), ("a2", 0.01), ("a3", 0.20)],
    "test_b": [("b1", 0.05), ("b2", 0.25)],
    "test_c": [("c1", 0.15), ("c2", 0.02), ("c3", 0.12)],
}


def write_suite(pytester: pytest.Pytester, *, group: bool, declare: bool) -> None:
    pytester.makeconftest(CONFTEST)
    for module, tests in MODULES.items():
        lines = ["import time", "import pytest", "from pytest_dagorder import depends_on", ""]
        if group and module in ("test_a", "test_b"):
            lines.append('pytestmark = pytest.mark.xdist_group("g")')
        for name, secs in tests:
            lines.append(f"def test_{name}(modfix):\n    modfix.append(1)\n"
                         f"    time.sleep({secs})\n")
        pytester.makepyfile(**{module: "\n".join(lines)})
    free = ["import time", "from pytest_dagorder import depends_on", ""]
    for k in range(8):
        if declare and k % 2:
            free.append(f'@depends_on("test_f{k - 1}")')
        free.append(f"def test_f{k}():\n    time.sleep(0.1)\n")
    pytester.makepyfile(test_free="\n".join(free))


def setups(pytester: pytest.Pytester) -> Counter[str]:
    path = pytester.path / "setups.log"
    lines = path.read_text().splitlines()
    path.unlink()
    return Counter(lines)


@pytest.mark.parametrize(("group", "declare"), [
    (False, False),  # a suite that declares nothing
    (False, True),   # with edges elsewhere (barrier items, held tests)
    (True, True),    # an xdist_group spanning two modules
])
def test_a_module_fixture_is_set_up_once_per_worker(
    pytester: pytest.Pytester, dagtester: DagTester, group: bool, declare: bool
) -> None:
    write_suite(pytester, group=group, declare=declare)
    # The first run records the durations the second ranks by.
    for _ in range(2):
        result = dagtester.run("-n", "2", cache=True, timeout=TIMEOUT)
        result.assert_outcomes(passed=16)
        counts = setups(pytester)
        assert set(counts.values()) == {1}, textwrap.dedent(f"""\
            a module fixture set up more than once on a worker: {dict(counts)}""")
        if group:
            workers = {line.split()[0] for line in counts if line.split()[1] in
                       ("test_a", "test_b")}
            assert len(workers) == 1, counts


def test_the_header_names_a_module_its_declarations_split(
    pytester: pytest.Pytester, dagtester: DagTester
) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(
        test_a="""
            from pytest_dagorder import depends_on

            def test_a1(modfix):
                pass

            @depends_on("test_b.py::test_b1")
            def test_a2(modfix):
                pass
        """,
        test_b="""
            from pytest_dagorder import depends_on

            @depends_on("test_a.py::test_a1")
            def test_b1(modfix):
                pass
        """,
    )
    result = dagtester.run("-n", "2", timeout=TIMEOUT)
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["dagorder: 1 module (test_a.py) cannot run in one stretch*"])
    assert "cannot run in one stretch" not in dagtester.run(
        "-n", "2", "-k", "not a2", timeout=TIMEOUT).stdout.str()
