"""Recorded durations: written to pytest's cache by every run, read by the xdist scheduler."""

from __future__ import annotations

import json

import pytest
from helpers import base_args, make_modules, read_log, runpytest, write_ini

TIMEOUT = 120.0
CACHE_FILE = (".pytest_cache", "v", "dagorder", "durations")


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """An inner run with pytest's cache on (the point of these tests)."""
    return runpytest(pytester, *base_args(cache=True), *args, timeout=TIMEOUT)


def recorded(pytester: pytest.Pytester) -> dict[str, float]:
    path = pytester.path.joinpath(*CACHE_FILE)
    data: dict[str, float] = json.loads(path.read_text(encoding="utf-8"))
    return data


def seed(pytester: pytest.Pytester, durations: object) -> None:
    path = pytester.path.joinpath(*CACHE_FILE)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(durations), encoding="utf-8")


GATED = """
def test_a():
    mark("a", 0.05)

@depends_on("test_a")
def test_b():
    mark("b")

def test_c():
    mark("c")
    assert False

@depends_on("test_c")
def test_d():
    mark("d")
"""


@pytest.mark.parametrize("n", [None, "2"])
def test_a_run_records_what_its_tests_took(pytester: pytest.Pytester, n: str | None) -> None:
    write_ini(pytester)
    make_modules(pytester, test_m=GATED)
    result = run(pytester, *(["-n", n] if n else []))
    result.assert_outcomes(passed=2, failed=1, skipped=1)
    got = recorded(pytester)
    # d never ran (skipped for its prerequisite): nothing to learn from it.
    assert sorted(got) == ["test_m.py::test_a", "test_m.py::test_b", "test_m.py::test_c"]
    assert got["test_m.py::test_a"] >= 0.05
    assert got["test_m.py::test_b"] < got["test_m.py::test_a"]


def test_a_partial_run_keeps_the_other_records(pytester: pytest.Pytester) -> None:
    write_ini(pytester)
    make_modules(pytester, test_m="""
        def test_x():
            mark("x")

        def test_y():
            mark("y")

        @depends_on("test_x")
        def test_z():
            mark("z")
        """)
    seed(pytester, {"test_m.py::test_y": 7.0, "test_m.py::test_x": 9.0})
    run(pytester, "-k", "test_x").assert_outcomes(passed=1)
    got = recorded(pytester)
    assert got["test_m.py::test_y"] == 7.0
    assert got["test_m.py::test_x"] < 9.0


# Two chains: a (2 tests) and b (3 tests).  By test counts b's is longer; by
# the recorded seconds below a's is.
CHAINS = """
def test_a1():
    mark("a1")

@depends_on("test_a1")
def test_a2():
    mark("a2")

def test_b1():
    mark("b1")

@depends_on("test_b1")
def test_b2():
    mark("b2")

@depends_on("test_b2")
def test_b3():
    mark("b3")
"""
SLOW_A = {"test_m.py::test_a1": 5.0, "test_m.py::test_a2": 5.0, "test_m.py::test_b1": 0.01,
          "test_m.py::test_b2": 0.01, "test_m.py::test_b3": 0.01}


def chains_run(pytester: pytest.Pytester, record: object, *args: str) -> tuple[str, str]:
    """Run CHAINS under -n 1 with ``record`` in the cache: (header ranking line, first test)."""
    write_ini(pytester)
    make_modules(pytester, test_m=CHAINS)
    if record is not None:
        seed(pytester, record)
    result = run(pytester, "-n", "1", "--dag-affinity=none", *args)
    result.assert_outcomes(passed=5)
    header = next(line for line in result.outlines if line.startswith("dagorder: 5 tests"))
    ran = read_log(pytester)
    assert len(ran) == 5, sorted(ran)
    return header.split("; ")[-1], min(ran.values(), key=lambda r: r.start).name


def test_xdist_ranks_ready_tests_by_recorded_seconds(pytester: pytest.Pytester) -> None:
    assert chains_run(pytester, SLOW_A) == (
        "critical path by recorded durations of 5/5 tests", "a1")


def test_without_records_the_longer_chain_in_tests_goes_first(pytester: pytest.Pytester) -> None:
    assert chains_run(pytester, None) == ("critical path by test counts", "b1")
    assert sorted(recorded(pytester)) == sorted(SLOW_A)  # recorded for the next run


def test_ignore_durations_ranks_by_counts(pytester: pytest.Pytester) -> None:
    assert chains_run(pytester, SLOW_A, "--dag-ignore-durations") == (
        "critical path by test counts", "b1")


@pytest.mark.parametrize("junk", [
    ["not", "a", "mapping"],
    {"test_m.py::test_a1": "slow", "test_m.py::test_a2": -1, "test_m.py::test_b1": None},
])
def test_a_damaged_record_is_ignored(pytester: pytest.Pytester, junk: object) -> None:
    assert chains_run(pytester, junk) == ("critical path by test counts", "b1")
    got = recorded(pytester)
    assert sorted(got) == sorted(SLOW_A)  # the junk is gone, the real figures are in
    assert all(isinstance(v, float) and v >= 0 for v in got.values())


def test_only_finite_non_negative_numbers_under_string_keys_are_kept() -> None:
    from pytest_dagorder.glue.durations import _sound

    raw = {"a": 1, "b": 0.5, "c": True, "d": float("nan"), "e": float("inf"), "f": -0.1,
           "g": "1", "h": None, "i": 0, "j": [1], 1: 2.0, "k": 10**400, "l": 1e300}
    assert _sound(raw) == {"a": 1.0, "b": 0.5, "i": 0.0}
    assert all(type(v) is float for v in _sound(raw).values())
    assert _sound([("a", 1)]) == {} and _sound(None) == {}
