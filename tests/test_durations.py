"""Recorded durations: written to pytest's cache by every run, read by the xdist scheduler."""

from __future__ import annotations

import json

import pytest
from helpers import A_THEN_B, runpytest
from support.dagtester import DagTester

TIMEOUT = 120.0
CACHE_FILE = (".pytest_cache", "v", "dagorder", "durations")

#: Inner runs keep pytest's cache (where the durations are recorded) unless a
#: test reads a durations file instead; tests not in both modes give ``-n`` themselves.
pytestmark = [pytest.mark.dagtester(cache=True, timeout=TIMEOUT), pytest.mark.dag_modes("own")]


def recorded(dagtester: DagTester) -> dict[str, float]:
    path = dagtester.path.joinpath(*CACHE_FILE)
    data: dict[str, float] = json.loads(path.read_text(encoding="utf-8"))
    return data


def seed(dagtester: DagTester, durations: object) -> None:
    path = dagtester.path.joinpath(*CACHE_FILE)
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


@pytest.mark.dag_modes("serial", "xdist")
def test_a_run_records_what_its_tests_took(dagtester: DagTester) -> None:
    dagtester.modules(test_m=GATED)
    result = dagtester.run()
    result.assert_outcomes(passed=2, failed=1, skipped=1)
    got = recorded(dagtester)
    # d never ran (skipped for its prerequisite): nothing to learn from it.
    assert sorted(got) == ["test_m.py::test_a", "test_m.py::test_b", "test_m.py::test_c"]
    assert got["test_m.py::test_a"] >= 0.05
    assert got["test_m.py::test_b"] < got["test_m.py::test_a"]


def test_a_partial_run_keeps_the_other_records(dagtester: DagTester) -> None:
    dagtester.modules(test_m="""
        def test_x():
            mark("x")

        def test_y():
            mark("y")

        @depends_on("test_x")
        def test_z():
            mark("z")
        """)
    seed(dagtester, {"test_m.py::test_y": 7.0, "test_m.py::test_x": 9.0})
    dagtester.run("-k", "test_x").assert_outcomes(passed=1)
    got = recorded(dagtester)
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


def chains_run(dagtester: DagTester, record: object, *args: str,
               printed: list[str] | None = None) -> tuple[str, str]:
    """Run CHAINS under -n 1 with ``record`` in the cache: (header ranking line, first test);
    the run's output lines go to ``printed``."""
    dagtester.modules(test_m=CHAINS)
    if record is not None:
        seed(dagtester, record)
    result = dagtester.run("-n", "1", "--dag-affinity=none", *args)
    result.assert_outcomes(passed=5)
    if printed is not None:
        printed += result.outlines
    header = next(line for line in result.outlines if line.startswith("dagorder: 5 tests"))
    ran = dagtester.ran()
    assert len(ran) == 5, sorted(ran)
    return header.split("; ")[-1], min(ran.values(), key=lambda r: r.start).name


def test_xdist_ranks_ready_tests_by_recorded_seconds(dagtester: DagTester) -> None:
    assert chains_run(dagtester, SLOW_A) == (
        "critical path by recorded durations of 5/5 tests", "a1")


def test_without_records_the_longer_chain_in_tests_goes_first(dagtester: DagTester) -> None:
    assert chains_run(dagtester, None) == ("critical path by test counts", "b1")
    assert sorted(recorded(dagtester)) == sorted(SLOW_A)  # recorded for the next run


def test_durations_none_ranks_by_counts_and_the_cache_still_records(
        dagtester: DagTester) -> None:
    # The ini's file would rank a first; none reads it not, nor writes it.
    path = dagtester.path / "d.json"
    path.write_text(json.dumps(SLOW_A), encoding="utf-8")
    dagtester.ini("dag_durations = d.json\n")
    printed: list[str] = []
    assert chains_run(dagtester, None, "--dag-durations=none", printed=printed) == (
        "critical path by test counts", "b1")
    assert [line for line in printed if "durations file" in line] == []  # none is no file
    assert json.loads(path.read_text(encoding="utf-8")) == SLOW_A
    assert sorted(recorded(dagtester)) == sorted(SLOW_A)  # for a run without none


@pytest.mark.parametrize(("ini", "args", "message"), [
    ("", ["--dag-durations=none", "--dag-store-durations"],
     "ERROR: --dag-store-durations has no file to write: --dag-durations=none reads and "
     "writes none; name a file with --dag-durations=PATH, or leave out --dag-store-durations"),
    ("dag_durations = None\n", ["--dag-store-durations"],
     "ERROR: --dag-store-durations has no file to write: ini dag_durations = None reads*"),
    ("dag_durations = d.json\n", ["--dag-durations="],
     "ERROR: --dag-durations='' names no file; name one, e.g. "
     "--dag-durations=.test_durations, or give --dag-durations=none to rank by test counts"),
], ids=["none-and-store", "ini-none-and-store", "empty"])
def test_a_durations_value_that_names_no_file_is_a_usage_error(
        dagtester: DagTester, ini: str, args: list[str], message: str) -> None:
    dagtester.modules(test_m=A_THEN_B)
    dagtester.ini(ini)
    result = dagtester.run(*args, cache=False)
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, out
    result.stderr.fnmatch_lines([message])
    assert "Traceback" not in out and dagtester.ran() == {}


@pytest.mark.parametrize("junk", [
    ["not", "a", "mapping"],
    {"test_m.py::test_a1": "slow", "test_m.py::test_a2": -1, "test_m.py::test_b1": None},
])
def test_a_damaged_record_is_ignored(dagtester: DagTester, junk: object) -> None:
    assert chains_run(dagtester, junk) == ("critical path by test counts", "b1")
    got = recorded(dagtester)
    assert sorted(got) == sorted(SLOW_A)  # the junk is gone, the real figures are in
    assert all(isinstance(v, float) and v >= 0 for v in got.values())


def test_only_finite_non_negative_numbers_under_string_keys_are_kept() -> None:
    from pytest_dagorder.features.durations import _sound

    raw = {"a": 1, "b": 0.5, "c": True, "d": float("nan"), "e": float("inf"), "f": -0.1,
           "g": "1", "h": None, "i": 0, "j": [1], 1: 2.0, "k": 10**400, "l": 1e300}
    assert _sound(raw) == {"a": 1.0, "b": 0.5, "i": 0.0}
    assert all(type(v) is float for v in _sound(raw).values())
    assert _sound([("a", 1)]) == {} and _sound(None) == {}


# -- the durations file (--dag-durations) ---------------------------------------------


#: 500 records as a committed file holds them, and a test module they belong to.
MANY = {f"test_m.py::test_{k}": round(0.5 + k / 1000, 4) for k in range(500)}

#: Hand edits that leave a file this plugin cannot read whole: (name, the last line).
SPOILT = [
    ("trailing-comma", '  "test_x.py::test_y": 1.0,\n}\n'),
    ("negative", '  "test_x.py::test_y": -1.0\n}\n'),
    ("string", '  "test_x.py::test_y": "1.0"\n}\n'),
    ("nan", '  "test_x.py::test_y": NaN\n}\n'),
    ("huge", '  "test_x.py::test_y": 1e309\n}\n'),
    ("nested", '  "test_x.py::test_y": {"call": 1.0}\n}\n'),
    ("null", '  "test_x.py::test_y": null\n}\n'),
    ("twice", '  "test_m.py::test_0": 1.0\n}\n'),
]


def spoilt(last: str) -> str:
    """:data:`MANY` as a file, with ``last`` as its final record."""
    body = json.dumps(MANY, indent=2, sort_keys=True)
    return body[:-2] + ",\n" + last


@pytest.mark.dag_modes("serial", "xdist")
@pytest.mark.parametrize("last", [text for _, text in SPOILT], ids=[n for n, _ in SPOILT])
def test_store_refuses_a_file_it_cannot_read_whole_and_runs_nothing(
        dagtester: DagTester, last: str) -> None:
    dagtester.modules(test_m=A_THEN_B)
    path = dagtester.path / ".test_durations"
    path.write_text(spoilt(last), encoding="utf-8")
    before = path.read_bytes()
    result = dagtester.run("-k", "test_a", "--dag-durations=.test_durations",
                           "--dag-store-durations", cache=False)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    result.stderr.fnmatch_lines([
        f"ERROR: --dag-store-durations would overwrite durations file '{path}', which it "
        "cannot read whole: *; fix the file (or move it away to start a new one) and run again"])
    assert dagtester.ran() == {}
    assert path.read_bytes() == before


def test_store_merges_with_what_the_file_holds_when_it_writes(
        dagtester: DagTester, monkeypatch: pytest.MonkeyPatch) -> None:
    path = dagtester.path / ".test_durations"
    path.write_text(json.dumps(MANY, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    # Another run (another part of the suite) writes the file while this one runs.
    dagtester.modules(test_m=A_THEN_B + f"""

    def test_c():
        import json
        mark("c")
        with open({str(path)!r}) as f:
            record = json.load(f)
        record["test_other.py::test_z"] = float(os.environ["OTHER_RECORD"])
        with open({str(path)!r}, "w") as f:
            json.dump(record, f, indent=2)
    """)
    monkeypatch.setenv("OTHER_RECORD", "3.0")
    dagtester.run("-k", "test_a or test_c", "--dag-durations=.test_durations",
                  "--dag-store-durations", cache=False).assert_outcomes(passed=2, deselected=1)
    got = json.loads(path.read_text(encoding="utf-8"))
    assert {k: got[k] for k in MANY} == MANY
    assert got["test_other.py::test_z"] == 3.0
    assert {"test_m.py::test_a", "test_m.py::test_c"} <= set(got)
    assert "test_m.py::test_b" not in got
    assert not list(dagtester.path.glob(".*.tmp"))
    # What the other run wrote cannot be read whole: it is left as it is.
    monkeypatch.setenv("OTHER_RECORD", "-3.0")
    result = dagtester.run("-k", "test_a or test_c", "--dag-durations=.test_durations",
                           "--dag-store-durations", cache=False)
    result.assert_outcomes(passed=2, deselected=1)
    result.stdout.fnmatch_lines([f"dagorder: warning: durations file '{path}' not written: "
                                 "it changed during the run and cannot be read whole now*"])
    assert json.loads(path.read_text(encoding="utf-8")) == {**got, "test_other.py::test_z": -3}


def pytest_split_estimate(dagtester: DagTester, path: str) -> str:
    """What pytest-split makes of a durations file: its estimate for group 1 of 2."""
    result = runpytest(dagtester.pytester, "-p", "no:cacheprovider", "-p", "no:dagorder", "-p",
                       "pytest_split.plugin", "--splits", "2", "--group", "1",
                       f"--durations-path={path}", "--collect-only", "-q", timeout=TIMEOUT)
    line = next(line for line in result.outlines if "Running group 1/2" in line)
    return line.split("estimated duration: ")[1]


SPLIT_STYLE = {"test_m.py::test_a": 5.0, "test_m.py::test_b": 7.25, "test_m.py::test_c": 1}


@pytest.mark.parametrize("layout", ["pytest-split", "pairs", "bom"])
def test_a_rewrite_keeps_the_files_layout_and_pytest_split_still_reads_it(
        dagtester: DagTester, layout: str) -> None:
    pytest.importorskip("pytest_split")
    dagtester.modules(test_m=A_THEN_B + "\n\n    def test_c():\n        mark('c')\n")
    path = dagtester.path / ".test_durations"
    if layout == "pairs":  # what pytest-split wrote before its 0.3
        text = json.dumps([[k, v] for k, v in SPLIT_STYLE.items()], indent=4)
    else:  # what pytest-split writes: four spaces, sorted keys, no final newline
        text = json.dumps(SPLIT_STYLE, indent=4, sort_keys=True)
    path.write_bytes(("\ufeff" if layout == "bom" else "").encode() + text.encode())
    result = dagtester.run("-k", "test_c", "--dag-durations=.test_durations",
                           "--dag-store-durations", "--dag-shard=2/2", cache=False)
    result.assert_outcomes(passed=1, deselected=2)
    # The file was read (a BOM included): its durations balanced the parts.
    # test_a -> test_b lies in part 1: no "largest component" line in this part.
    result.stdout.fnmatch_lines(["dagorder: shard 2/2: 1 of 1 test, about 1.0 s recorded"])
    data = path.read_bytes()
    assert data.startswith(b"\xef\xbb\xbf") == (layout == "bom")
    written = data.decode("utf-8-sig")
    raw = json.loads(written)
    got = dict(raw) if layout == "pairs" else raw
    assert got["test_m.py::test_a"] == 5.0 and got["test_m.py::test_b"] == 7.25
    assert got["test_m.py::test_c"] != 1
    if layout == "pairs":
        assert isinstance(raw, list) and written == json.dumps(raw, indent=4)
    else:
        assert written == json.dumps(got, indent=4, sort_keys=True)
        assert not written.endswith("\n")
    if layout != "bom":  # pytest-split itself reads no BOM; its group 1 is test_a, test_b
        assert pytest_split_estimate(dagtester, ".test_durations").startswith("12.25s")


def warnings_of(result: pytest.RunResult) -> list[str]:
    return [line for line in result.outlines if line.startswith("dagorder: warning:")]


@pytest.mark.dag_modes("serial", "xdist")
def test_each_problem_with_the_file_is_one_warning_line_serially_and_under_xdist(
        dagtester: DagTester) -> None:
    dagtester.modules(test_m=A_THEN_B)
    path = dagtester.path / "d.json"
    path.write_text('{"test_m.py::test_a": 1.5, "x::a": -1, "x::b": "2", "x::c": NaN, '
                    '"x::d": 1e309, "x::e": [1], "test_m.py::test_b": 2}', encoding="utf-8")
    result = dagtester.run("--dag-durations=d.json", cache=False)
    result.assert_outcomes(passed=2)
    assert warnings_of(result) == [
        f"dagorder: warning: durations file '{path}': 5 of 7 records ignored, not a duration "
        "in seconds (a number from 0 up): 'x::a', 'x::b', 'x::c' and 2 more"]
    path.write_text('{"test_m.py::test_a": 1.5,}', encoding="utf-8")
    result = dagtester.run("--dag-durations=d.json", cache=False)
    result.assert_outcomes(passed=2)
    assert [line.split(" ignored: ")[0] for line in warnings_of(result)] == [
        f"dagorder: warning: durations file '{path}'"]


@pytest.mark.dag_modes("serial", "xdist")
def test_a_shard_without_recorded_durations_says_so(
        dagtester: DagTester) -> None:
    dagtester.modules(test_m=A_THEN_B, test_n=A_THEN_B)
    result = dagtester.run("--dag-durations=missing.json", "--dag-shard=1/2", cache=False)
    result.assert_outcomes(passed=2, deselected=2)
    assert warnings_of(result) == [
        f"dagorder: warning: --dag-shard 1/2 without recorded durations (durations file "
        f"'{dagtester.path / 'missing.json'}' does not exist): the parts are balanced by test "
        "count; record them with --dag-durations=PATH --dag-store-durations"]
    result = dagtester.run("--dag-shard=2/2")  # the cache, empty
    result.assert_outcomes(passed=2, deselected=2)
    assert [line.split(" (")[1].split(")")[0] for line in warnings_of(result)] == [
        "pytest's cache holds none"]


def test_help_says_the_file_is_relative_to_the_rootdir(dagtester: DagTester) -> None:
    result = dagtester.run("--help", cache=False)
    assert "relative to the rootdir" in " ".join(
        " ".join(result.outlines).split("--dag-durations=PATH", 1)[1].split("--dag-", 1)[0]
        .split())
