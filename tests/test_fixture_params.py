"""A bare target names the instance with the same parameters of a wider-scoped fixture.

pytest groups the tests of a parametrized module- or class-scoped fixture
by parameter (one instance at a time); a dependent that reads what its
target left in that instance must depend on the target of the same
parameter, as a bare name already means the same repetition under
pytest-repeat (tests/test_repeat.py).
"""

from __future__ import annotations

import pytest
from helpers import make_modules, read_log
from support.dagtester import DagTester

pytestmark = pytest.mark.dag_modes("own")

TIMEOUT = 180.0

SUITE = """
    @pytest.fixture(scope="module", params=["sqlite", "pg"])
    def db(request):
        return {"name": request.param, "rows": []}


    def test_insert(db):
        mark(f"insert-{db['name']}")
        db["rows"].append(1)


    @depends_on("test_insert")
    def test_count(db):
        mark(f"count-{db['name']}")
        assert db["rows"] == [1]


    @pytest.mark.parametrize("flavour", ["a", "b"], scope="module")
    def test_store(flavour):
        mark(f"store-{flavour}")
        STORE.append(flavour)


    @pytest.mark.parametrize("flavour", ["a", "b"], scope="module")
    @depends_on("test_store")
    def test_read(flavour):
        mark(f"read-{flavour}")
        assert STORE[-1] == flavour


    STORE = []


    @pytest.fixture(scope="class", params=["eur", "usd"])
    def cart(request):
        return {"currency": request.param, "items": []}


    class TestCart:
        def test_add(self, cart):
            mark(f"add-{cart['currency']}")
            cart["items"].append("apple")

        @depends_on("test_add")
        def test_total(self, cart):
            mark(f"total-{cart['currency']}")
            assert cart["items"] == ["apple"]


    @pytest.fixture(params=[1, 2])
    def size(request):
        return request.param


    def test_make(size):
        mark(f"make-{size}")


    @depends_on("test_make")
    def test_after_every_size(size):
        # A function-scoped fixture keeps nothing between tests: the bare
        # name still means every instance.
        mark(f"after-{size}")
"""

#: pytest's own order (it groups by the wider-scoped parameters).
PYTEST_ORDER = [
    "test_insert[sqlite]", "test_count[sqlite]", "test_insert[pg]", "test_count[pg]",
    "test_store[a]", "test_read[a]", "test_store[b]", "test_read[b]",
    "TestCart::test_add[eur]", "TestCart::test_total[eur]",
    "TestCart::test_add[usd]", "TestCart::test_total[usd]",
    "test_make[1]", "test_make[2]", "test_after_every_size[1]", "test_after_every_size[2]",
]


def test_serially_the_order_and_outcomes_are_plain_pytests(
    pytester: pytest.Pytester, dagtester: DagTester
) -> None:
    make_modules(pytester, test_p=SUITE)
    listed = dagtester.run("-p", "no:xdist", "--collect-only", "-q",
                           timeout=TIMEOUT)
    assert [line.split("::", 1)[1] for line in listed.outlines
            if line.startswith("test_p.py::")] == PYTEST_ORDER
    result = dagtester.run("-p", "no:xdist", timeout=TIMEOUT)
    result.assert_outcomes(passed=16)
    ran = read_log(pytester)
    # Each dependent saw the instance its own target filled, not a rebuilt one.
    assert {"count-sqlite", "count-pg", "read-a", "read-b", "total-eur", "total-usd"} <= set(ran)


FAILING = """
    @pytest.fixture(scope="module", params=["sqlite", "pg"])
    def db(request):
        return {"name": request.param, "rows": []}


    def test_insert(db):
        mark(f"insert-{db['name']}")
        assert db["name"] != "sqlite"
        db["rows"].append(1)


    @depends_on("test_insert")
    def test_count(db):
        mark(f"count-{db['name']}")
        assert db["rows"] == [1]
"""


@pytest.mark.parametrize("extra", [["-p", "no:xdist"], ["-n", "2"]], ids=["serial", "xdist"])
def test_a_dependent_waits_only_for_the_target_of_its_parameter(
        pytester: pytest.Pytester, dagtester: DagTester, extra: list[str]) -> None:
    """insert[sqlite] fails: count[pg] still runs (it depends on insert[pg] only)."""
    make_modules(pytester, test_f=FAILING)
    result = dagtester.run(*extra, "-rs", timeout=TIMEOUT)
    result.assert_outcomes(passed=2, failed=1, skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED*prerequisite test_insert[[]sqlite[]] failed*"])
    assert set(read_log(pytester)) == {"insert-sqlite", "insert-pg", "count-pg"}


def test_under_xdist_the_outcomes_are_the_serial_ones(
    pytester: pytest.Pytester, dagtester: DagTester
) -> None:
    make_modules(pytester, test_p=SUITE)
    result = dagtester.run("-n", "2", timeout=TIMEOUT)
    result.assert_outcomes(passed=16)
