"""The plugin pauses the cyclic garbage collector for its bulk work, never while a test runs.

``gc.disable()`` is process-wide: a pause taken by another thread while a
test runs would change how the test runs (objects that close a connection
or release a lock in ``__del__`` would linger).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest
from support.dagtester import DagTester

from pytest_dagorder.shims.collector_pause import UntilTestsBegin

TIMEOUT = 120


@pytest.fixture
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def in_thread(body: threading.Thread) -> None:
    if body.ident is None:
        body.start()
    body.join(timeout=10)
    assert not body.is_alive()


@pytest.mark.usefixtures("collector_on")
def test_another_thread_pauses_the_collector_until_the_first_test_begins() -> None:
    gate = UntilTestsBegin()
    seen: list[bool] = []

    def pause() -> None:
        with gate.paused():
            seen.append(gc.isenabled())

    in_thread(threading.Thread(target=pause))
    assert seen == [False]
    assert gc.isenabled()
    gate.begin()
    in_thread(threading.Thread(target=pause))
    assert seen == [False, True]
    assert gc.isenabled()


@pytest.mark.usefixtures("collector_on")
def test_the_first_test_begins_only_after_a_pause_under_way_has_ended() -> None:
    gate = UntilTestsBegin()
    inside, release = threading.Event(), threading.Event()

    def pause() -> None:
        with gate.paused():
            inside.set()
            release.wait(timeout=10)

    helper = threading.Thread(target=pause)
    helper.start()
    assert inside.wait(timeout=10)
    beginning = threading.Thread(target=gate.begin)
    beginning.start()
    beginning.join(timeout=0.5)
    assert beginning.is_alive()  # held while the collector is off
    release.set()
    in_thread(helper)
    beginning.join(timeout=10)
    assert not beginning.is_alive()
    assert gc.isenabled()


def suite(n: int) -> str:
    """``n`` short tests, every fifth depending on the one before: each records
    whether the collector was on in its setup, body and teardown."""
    parts = ["""
import gc


@pytest.fixture
def watched():
    mark(f"setup {gc.isenabled()}")
    yield
    mark(f"teardown {gc.isenabled()}")
"""]
    for k in range(n):
        deco = f'@depends_on("test_{k - 1}")\n' if k % 5 == 4 else ""
        parts.append(f"""
{deco}def test_{k}(watched):
    mark(f"call {{gc.isenabled()}}", sleep=0.01)
""")
    return "\n".join(parts)


@pytest.mark.dag_modes("xdist")
@pytest.mark.dagtester(timeout=TIMEOUT)
@pytest.mark.parametrize("declares", [True, False], ids=["declares", "declares-nothing"])
def test_no_test_runs_with_the_collector_paused_under_xdist(
        dagtester: DagTester, declares: bool) -> None:
    body = suite(80)
    if not declares:
        body = body.replace("@depends_on", "# @depends_on")
    dagtester.modules(test_m=body, test_n=body)
    result = dagtester.run()
    result.assert_outcomes(passed=160)
    lines = (dagtester.path / "ran.log").read_text().splitlines()
    states = [line.split()[1] for line in lines]
    assert len(states) == 3 * 160
    assert set(states) == {"True"}
