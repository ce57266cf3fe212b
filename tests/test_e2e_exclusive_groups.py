"""End to end: a test that runs alone or holds a resource keeps its group's worker."""

from __future__ import annotations

import pytest
from helpers import free_tests
from support.dagtester import DagTester

#: Each test gives ``-n`` itself.
pytestmark = pytest.mark.dag_modes("own")

#: A module chain that carries state in a module global, with an exclusive
#: reader in the middle; an xdist_group whose member runs alone; a limited
#: member; and free tests that keep the other workers busy.
SUITE = {
    "test_chain": """
        STATE = {}


        def test_setup():
            STATE["ready"] = os.getpid()
            mark("setup", 0.05)


        @depends_on("test_setup")
        @pytest.mark.dag_exclusive
        def test_reader():
            assert STATE.get("ready") == os.getpid(), "state lost"
            mark("reader", 0.05)


        @depends_on("test_reader")
        def test_after():
            assert STATE.get("ready") == os.getpid(), "state lost"
            mark("after")
    """,
    "test_limited": """
        STATE = {}


        def test_limited_setup():
            STATE["ready"] = os.getpid()
            mark("limited_setup")


        @depends_on("test_limited_setup")
        @pytest.mark.dag_resource("db")
        def test_limited():
            assert STATE.get("ready") == os.getpid(), "state lost"
            mark("limited")
    """,
    "test_grouped": """
        SEEN = []


        @pytest.mark.xdist_group("g")
        def test_first():
            SEEN.append(os.getpid())
            mark("first", 0.05)


        @pytest.mark.xdist_group("g")
        @pytest.mark.dag_exclusive
        def test_alone_in_group():
            assert SEEN == [os.getpid()], "state lost"
            mark("alone_in_group", 0.05)


    """,
    "test_db": """
        @pytest.mark.dag_resource("db")
        def test_db_elsewhere():
            mark("db_elsewhere", 0.2)
    """,
    "test_free": free_tests(12),
}


@pytest.mark.parametrize("dist", ["load", "loadgroup"])
def test_exclusive_and_limited_members_run_on_their_groups_worker(
        dagtester: DagTester, dist: str) -> None:
    dagtester.modules(**SUITE)
    dagtester.run("-n", "3", "--dist", dist).assert_outcomes(passed=20)
    ran = dagtester.ran()
    assert ran["reader"].pid == ran["setup"].pid == ran["after"].pid
    assert ran["limited"].pid == ran["limited_setup"].pid
    assert ran["alone_in_group"].pid == ran["first"].pid
    for name in ("reader", "alone_in_group"):
        lone = ran[name]
        beside = [r.name for r in ran.values()
                  if r.name != name and r.start < lone.end and lone.start < r.end]
        assert beside == [], (name, beside)
