"""--dag-shard and the durations file, end to end: the parts of a run give the whole run."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import (
    A_THEN_B,
    base_args,
    forked_workers,
    junit_key,
    make_modules,
    read_junit,
    read_log,
)
from support.dagtester import DagTester

from pytest_dagorder.core.shards import partition

pytestmark = pytest.mark.dag_modes("own")

TIMEOUT = 180.0
PARTS = 4

# Chains inside and across modules, a failure and what it blocks, a skip, an
# ordering-only edge, an xdist_group spanning modules, free tests.
SUITE = {
    "test_accounts": """
        def test_open():
            mark("open")

        @depends_on("test_open")
        def test_deposit():
            mark("deposit")

        @depends_on("test_deposit")
        def test_withdraw():
            mark("withdraw")

        def test_free_1():
            mark("free_1")

        @pytest.mark.xdist_group("db")
        def test_db_a():
            mark("db_a")
        """,
    "test_fees": """
        @depends_on("test_accounts.py::test_deposit")
        def test_fee():
            mark("fee")

        def test_broken():
            mark("broken")
            assert False

        @depends_on("test_broken")
        def test_after_broken():
            mark("after_broken")

        @run_after("test_broken")
        def test_report():
            mark("report")

        @pytest.mark.skip(reason="not today")
        def test_skipped():
            pass

        @depends_on("test_skipped")
        def test_needs_skipped():
            mark("needs_skipped")

        @pytest.mark.xdist_group("db")
        def test_db_b():
            mark("db_b")
        """,
    "test_misc": """
        @pytest.mark.parametrize("n", range(6))
        def test_many(n):
            mark(f"many_{n}")

        def test_free_2():
            mark("free_2")
        """,
}
#: Tests that share a part: edges (transitively) and the xdist_group.
TOGETHER = [
    {"test_accounts.py::test_open", "test_accounts.py::test_deposit",
     "test_accounts.py::test_withdraw", "test_fees.py::test_fee"},
    {"test_fees.py::test_broken", "test_fees.py::test_after_broken", "test_fees.py::test_report"},
    {"test_fees.py::test_skipped", "test_fees.py::test_needs_skipped"},
    {"test_accounts.py::test_db_a", "test_fees.py::test_db_b"},
]


def ids_in(junit: Path) -> set[str]:
    return set(read_junit(junit)[0])


@pytest.mark.parametrize("mode", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_the_parts_together_give_the_serial_runs_outcomes(
        pytester: pytest.Pytester, dagtester: DagTester, mode: list[str]) -> None:
    make_modules(pytester, **SUITE)
    whole = dagtester.run("-p", "no:randomly", "--junitxml=whole.xml")
    whole.assert_outcomes(passed=15, failed=1, skipped=3)
    want, n_whole = read_junit(pytester.path / "whole.xml")
    got: dict[str, object] = {}
    counted = 0
    for k in range(1, PARTS + 1):
        part = dagtester.run(
            "-p", "no:randomly", *mode, f"--dag-shard={k}/{PARTS}", f"--junitxml=part{k}.xml")
        assert part.ret in (0, 1), part.stdout.str()
        part.stdout.fnmatch_lines([f"dagorder: shard {k}/{PARTS}: * of 19 tests, *"])
        cases, n = read_junit(pytester.path / f"part{k}.xml")
        counted += n
        assert not set(cases) & set(got), "a test ran in two parts"
        got.update(cases)
        for group in TOGETHER:
            keys = {junit_key(nid) for nid in group}
            assert not keys & set(cases) or keys <= set(cases), f"part {k} cut {group}"
    assert counted == n_whole
    assert got == want


def test_a_part_reports_the_rest_deselected_and_collect_only_lists_it(
        pytester: pytest.Pytester, dagtester: DagTester) -> None:
    make_modules(pytester, **SUITE)
    listed: list[list[str]] = []
    for k in range(1, PARTS + 1):
        result = dagtester.run(
            "-p", "no:randomly", "--collect-only", "-q", f"--dag-shard={k}/{PARTS}")
        ids = [line for line in result.stdout.lines if "::" in line and " " not in line]
        assert ids, result.stdout.str()
        result.stdout.fnmatch_lines(
            [f"{len(ids)}/19 tests collected ({19 - len(ids)} deselected)*"])
        listed.append(ids)
    assert sorted(nid for ids in listed for nid in ids) == sorted(
        line for line in dagtester.run("-p", "no:randomly", "--collect-only", "-q").stdout.lines
        if "::" in line and " " not in line)
    # The run executes what --collect-only listed, and only that.
    result = dagtester.run("-p", "no:randomly", "--dag-shard=1/4", "-rs")
    assert result.parseoutcomes()["deselected"] == 19 - len(listed[0])


def test_the_part_is_the_same_with_and_without_xdist(
    pytester: pytest.Pytester, dagtester: DagTester
) -> None:
    make_modules(pytester, **SUITE)
    durations = pytester.path / "d.json"
    durations.write_text(json.dumps({"test_misc.py::test_many[0]": 3.0,
                                     "test_accounts.py::test_open": 2.0}), encoding="utf-8")
    common = ["--dag-shard=2/3", f"--dag-durations={durations}"]
    dagtester.run("-p", "no:randomly", *common, "--junitxml=serial.xml")
    result = dagtester.run("-p", "no:randomly", *common, "-n", "2", "--junitxml=xdist.xml")
    result.stdout.fnmatch_lines(["dagorder: shard 2/3: * of 19 tests, about * recorded*"])
    assert ids_in(pytester.path / "serial.xml") == ids_in(pytester.path / "xdist.xml")


@pytest.mark.parametrize("mode", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_the_summary_counts_the_deselected_and_an_empty_part_passes(
        pytester: pytest.Pytester, dagtester: DagTester, mode: list[str]) -> None:
    make_modules(pytester, test_chain="""
        def test_first():
            mark("first")

        @depends_on("test_first")
        def test_second():
            mark("second")
        """)
    # One component, two parts: the second part is empty.  A CI job for it
    # has nothing to run and must not fail ("no tests ran" is exit status 5).
    result = dagtester.run("-p", "no:randomly", *mode, "--dag-shard=2/2")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines([
        "dagorder: shard 2/2: 0 of 2 tests: fewer groups of tests that must stay together "
        "than parts; nothing to run, so the part passes",
        "*= 2 deselected in *"])
    assert read_log(pytester) == {}
    # Under -n the workers deselect; the summary line counts it as serially,
    # what -k left out and what the other part holds alike.
    result = dagtester.run("-p", "no:randomly", *mode, "--dag-shard=1/2", "-k", "first")
    result.assert_outcomes(passed=1, deselected=1)
    result = dagtester.run("-p", "no:randomly", *mode, "--dag-shard=2/2", "-k", "first")
    result.assert_outcomes(deselected=2)
    assert result.ret == pytest.ExitCode.OK
    # A selection that is empty before the split stays pytest's "no tests ran".
    result = dagtester.run("-p", "no:randomly", *mode, "--dag-shard=2/2", "-k", "nothing_matches")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.assert_outcomes(deselected=2)
    # A suite that declares nothing (under -n: no barrier, plain dispatch) alike.
    make_modules(pytester, test_chain="def test_first():\n    mark('first')\n")
    result = dagtester.run("-p", "no:randomly", *mode, "--dag-shard=2/2")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.assert_outcomes(deselected=1)


@pytest.mark.parametrize("value", ["0/4", "5/4", "x", "2/0"])
def test_a_bad_shard_is_a_usage_error_naming_it(
    pytester: pytest.Pytester, dagtester: DagTester, value: str
) -> None:
    make_modules(pytester, **SUITE)
    result = dagtester.run("-p", "no:randomly", f"--dag-shard={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: --dag-shard '{value}' is not valid; write K/N*"])
    assert not (pytester.path / "ran.log").exists()


def test_an_oversized_component_is_named(pytester: pytest.Pytester, dagtester: DagTester) -> None:
    make_modules(pytester, test_m=A_THEN_B, test_other="def test_c():\n    mark('c')\n")
    durations = pytester.path / ".test_durations"
    durations.write_text(json.dumps({"test_m.py::test_a": 60, "test_m.py::test_b": 60,
                                     "test_other.py::test_c": 1}), encoding="utf-8")
    result = dagtester.run(
        "-p", "no:randomly", "--dag-shard=1/2", "--dag-durations=.test_durations")
    result.stdout.fnmatch_lines([
        "dagorder: shard 1/2: 2 of 3 tests, about 2 min 0 s recorded; the largest component "
        "(2 tests tied to test_m.py::test_a) alone takes about 2 min 0 s, over a fair "
        "share*"])
    result.assert_outcomes(passed=2, deselected=1)


# -- the durations file ---------------------------------------------------------------


def recorded(path: Path) -> dict[str, float]:
    data: dict[str, float] = json.loads(path.read_text(encoding="utf-8"))
    return data


@pytest.mark.parametrize("mode", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_stored_durations_merge_and_forget_only_after_a_whole_run(
        pytester: pytest.Pytester, dagtester: DagTester, mode: list[str]) -> None:
    dagtester.ini("dag_durations = ci/durations.json\n")
    make_modules(pytester, test_m="""
        def test_slow():
            mark("slow", 0.2)

        @depends_on("test_slow")
        def test_quick():
            mark("quick")

        def test_other():
            mark("other")
        """)
    path = pytester.path / "ci" / "durations.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"test_gone.py::test_x": 5.0, "test_m.py::test_quick": 9.0,
                                "elsewhere/test_y.py::test_y": 1.0}), encoding="utf-8")
    # Part of the suite: nothing forgotten, what ran updated.
    dagtester.run(
        "-p", "no:randomly", *mode, "--dag-store-durations", "-k", "slow").assert_outcomes(
        passed=1, deselected=2)
    got = recorded(path)
    assert sorted(got) == ["elsewhere/test_y.py::test_y", "test_gone.py::test_x",
                           "test_m.py::test_quick", "test_m.py::test_slow"]
    assert got["test_m.py::test_quick"] == 9.0 and 0.2 <= got["test_m.py::test_slow"] < 9
    # One part of two (test_other is the other part): nothing forgotten either.
    dagtester.run(
        "-p", "no:randomly", *mode, "--dag-store-durations", "--dag-shard=1/2").assert_outcomes(
        passed=2, deselected=1)
    assert "test_gone.py::test_x" in recorded(path)
    # The whole suite: the tests it did not collect are gone.
    dagtester.run("-p", "no:randomly", *mode, "--dag-store-durations").assert_outcomes(passed=3)
    got = recorded(path)
    assert sorted(got) == ["test_m.py::test_other", "test_m.py::test_quick",
                           "test_m.py::test_slow"]
    assert got["test_m.py::test_quick"] < got["test_m.py::test_slow"]
    assert all(round(v, 4) == v for v in got.values())
    assert path.read_text(encoding="utf-8").count("\n") == 5  # one entry a line


def test_without_store_the_file_is_only_read_and_the_cache_is_the_default(
        pytester: pytest.Pytester, dagtester: DagTester) -> None:
    make_modules(pytester, test_m=A_THEN_B)
    path = pytester.path / "d.json"
    path.write_text('{"test_m.py::test_a": 7.0}', encoding="utf-8")
    dagtester.run(f"--dag-durations={path}", cache=True, keep_log=True).assert_outcomes(passed=2)
    assert recorded(path) == {"test_m.py::test_a": 7.0}
    # The cache still records for local runs.
    cache = pytester.path / ".pytest_cache" / "v" / "dagorder" / "durations"
    assert "test_m.py::test_a" in recorded(cache)


# Each content fails in reading the file (durations.read_file), which a serial
# run and an xdist worker do alike; what xdist adds (the controller, which
# collects nothing, says it once; the workers say nothing) does not depend on
# the content: one content under xdist.
@pytest.mark.parametrize(("mode", "content"), [
    ([], "{oops"), ([], "[1, 2]"), ([], None), (["-n", "2"], "{oops")],
    ids=["not-json-serial", "list-serial", "dir-serial", "not-json-xdist"])
def test_a_malformed_file_is_a_warning_and_the_run_goes_on(
        pytester: pytest.Pytester, dagtester: DagTester, mode: list[str],
        content: str | None) -> None:
    make_modules(pytester, test_m=A_THEN_B)
    path = pytester.path / "d.json"
    if content is None:
        path.mkdir()
    else:
        path.write_text(content, encoding="utf-8")
    result = dagtester.run("-p", "no:randomly", *mode, "--dag-durations=d.json", "--dag-shard=1/1")
    result.assert_outcomes(passed=2)
    lines = [line for line in result.stdout.lines if "durations file" in line]
    assert len(lines) == 1, result.stdout.str()
    assert lines[0].startswith("dagorder: warning: durations file ") and str(path) in lines[0]


def test_store_needs_a_file(pytester: pytest.Pytester, dagtester: DagTester) -> None:
    make_modules(pytester, test_m="def test_a():\n    mark('a')\n")
    result = dagtester.run("-p", "no:randomly", "--dag-store-durations")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --dag-store-durations needs a file to write*"])
    assert read_log(pytester) == {}


SHUFFLER = """
import os, random

def pytest_collection_modifyitems(items):
    seed = os.environ.get("SHUFFLE_SEED")
    if seed:
        random.Random(int(seed)).shuffle(items)  # what -p randomly does
"""


def test_the_part_does_not_depend_on_collection_order_or_hash_seed(
        pytester: pytest.Pytester, dagtester: DagTester, monkeypatch: pytest.MonkeyPatch) -> None:
    make_modules(pytester, **SUITE)
    pytester.makeconftest(SHUFFLER)
    durations = pytester.path / "d.json"
    durations.write_text(json.dumps({"test_misc.py::test_many[3]": 2.0,
                                     "test_fees.py::test_broken": 1.0}), encoding="utf-8")
    seen = []
    for shuffle, hashseed in (("", "0"), ("1", "1"), ("2", "123")):
        monkeypatch.setenv("SHUFFLE_SEED", shuffle)
        monkeypatch.setenv("PYTHONHASHSEED", hashseed)
        result = dagtester.run("-p", "no:randomly", "--collect-only", "-q",
                               "--dag-shard=2/3", f"--dag-durations={durations}", timeout=TIMEOUT,
                               own_process="PYTHONHASHSEED takes effect when an interpreter starts")
        seen.append(sorted(line for line in result.stdout.lines
                           if "::" in line and " " not in line))
    assert seen[0] and seen[0] == seen[1] == seen[2]


def test_a_module_using_runtime_depends_stays_in_one_part(
    pytester: pytest.Pytester, dagtester: DagTester
) -> None:
    pytest.importorskip("pytest_dependency")
    pytester.makepyfile(test_runtime="""
        from pytest_dependency import depends

        def test_a():
            pass

        def test_b(request):
            depends(request, ["test_a"])

        def test_c():
            pass

        def test_d(request):
            depends(request, ["test_c"])
        """, test_free="""
        def test_x():
            pass

        def test_y():
            pass
        """)
    parts = []
    for k in (1, 2, 3):
        result = dagtester.run("-p", "no:randomly", "--collect-only", "-q", f"--dag-shard={k}/3")
        parts.append({line for line in result.stdout.lines if "::" in line and " " not in line})
    runtime = {f"test_runtime.py::test_{n}" for n in "abcd"}
    assert sum(runtime <= part for part in parts) == 1, parts
    assert set().union(*parts) == runtime | {"test_free.py::test_x", "test_free.py::test_y"}


# -- parts run one after another ------------------------------------------------------

#: Six modules, each a chain ``a -> b`` and a free ``solo``; ``b`` of the
#: modules named in $FAIL_B fails.
LOOP_MODULE = """
    def test_a():
        mark(f"{__name__}::a")

    @depends_on("test_a")
    def test_b():
        mark(f"{__name__}::b")
        assert __name__ not in os.environ.get("FAIL_B", "").split()

    def test_solo():
        mark(f"{__name__}::solo")
    """
LOOP_SUITE = {f"test_m{i}": LOOP_MODULE for i in range(1, 7)}
ALL_18 = sorted(f"test_m{i}::{t}" for i in range(1, 7) for t in ("a", "b", "solo"))


def ran_lines(pytester: pytest.Pytester) -> list[str]:
    """Every test body that ran (repeats kept), and a fresh log for the next loop."""
    log = pytester.path / "ran.log"
    if not log.exists():
        return []
    names = sorted(line.split()[0] for line in log.read_text(encoding="utf-8").splitlines())
    log.unlink()
    return names


def loop(dagtester: DagTester, parts: int, *args: str, order: list[int] | None = None,
         cache: bool = True) -> list[str]:
    """Run parts 1..N (or ``order``) one after another in this checkout: what ran."""
    for k in order or range(1, parts + 1):
        result = dagtester.run(f"--dag-shard={k}/{parts}", *args, cache=cache, keep_log=True)
        assert result.ret in (0, 1), result.stdout.str()
    return ran_lines(dagtester.pytester)


# Which part a test belongs to is decided the same way for any number of
# parts: under xdist the most parts are enough to show the workers agree.
# Under xdist one loop: the one that writes the file between parts (its
# workers must cut by the split entry the controller settled, not by the file
# as the part before left it); where the durations come from (cache or file)
# is read by the controller as by a serial run.
@pytest.mark.parametrize(("mode", "parts"), [
    ([], 2), ([], 3), ([], 5), (["-n", "2"], 5)], ids=["serial-2", "serial-3", "serial-5",
                                                       "xdist-5"])
def test_parts_run_one_after_another_in_one_checkout_run_every_test_once(
        pytester: pytest.Pytester, dagtester: DagTester, mode: list[str], parts: int) -> None:
    make_modules(pytester, **LOOP_SUITE)
    # A recorded whole run first: every part's run then records durations of
    # its own tests, to the cache and to the file.
    dagtester.run("--dag-durations=d.json", "--dag-store-durations", cache=True,
                  keep_log=True).assert_outcomes(passed=18)
    ran_lines(pytester)
    if not mode:
        assert loop(dagtester, parts) == ALL_18  # durations in the cache
    assert loop(dagtester, parts, *mode, "--dag-durations=d.json",
                "--dag-store-durations", order=list(range(parts, 0, -1))) == ALL_18


@pytest.mark.parametrize("mode", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_last_failed_part_after_part_reruns_each_failure_once(
        pytester: pytest.Pytester, dagtester: DagTester, mode: list[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    make_modules(pytester, **LOOP_SUITE)
    monkeypatch.setenv("FAIL_B", "test_m2 test_m5")
    dagtester.run(cache=True, keep_log=True).assert_outcomes(passed=16, failed=2)
    ran_lines(pytester)
    monkeypatch.delenv("FAIL_B")
    # Each part's run takes its failures out of pytest's lastfailed: the parts
    # that follow must not move, nor run everything once none is left.
    assert loop(dagtester, 3, *mode, "--lf") == [
        "test_m2::a", "test_m2::b", "test_m5::a", "test_m5::b"]
    assert loop(dagtester, 3, *mode, "--lf", order=[3, 2, 1]) == ALL_18  # none failed: all


def test_last_failed_part_after_part_says_when_a_part_has_none_left(
        pytester: pytest.Pytester, dagtester: DagTester, monkeypatch: pytest.MonkeyPatch) -> None:
    make_modules(pytester, **LOOP_SUITE)
    # Equal durations from a file: the split is the pure partition's, known here.
    ids = [f"test_m{i}.py::test_{t}" for i in range(1, 7) for t in ("a", "b", "solo")]
    (pytester.path / "d.json").write_text(json.dumps(dict.fromkeys(ids, 1.0)),
                                          encoding="utf-8")
    links = [[ids.index(nid.replace("test_b", "test_a"))] if nid.endswith("test_b") else []
             for nid in ids]
    part = partition(ids, links, [[] for _ in ids], 3, recorded=dict.fromkeys(ids, 1.0)).part
    first = next(nid.split(".py")[0] for nid, p in zip(ids, part, strict=True)
                 if p == 0 and "::test_b" in nid)
    monkeypatch.setenv("FAIL_B", first)
    common = ["--dag-durations=d.json"]
    dagtester.run(*common, cache=True, keep_log=True).assert_outcomes(passed=17, failed=1)
    ran_lines(pytester)
    monkeypatch.delenv("FAIL_B")
    heads = []
    for k in (1, 2, 3):
        result = dagtester.run(*common, "--lf", f"--dag-shard={k}/3", cache=True, keep_log=True)
        assert result.ret == 0, result.stdout.str()
        heads += [line for line in result.outlines if line.startswith("dagorder: shard")]
    assert ran_lines(pytester) == [f"{first}::a", f"{first}::b"]
    assert heads[0].startswith("dagorder: shard 1/3: 2 of 2 tests")
    assert heads[1:] == [
        f"dagorder: shard {k}/3: no failure of this part to re-run (--lf): the failures "
        "recorded when this loop over the parts began were in the parts that ran since; "
        "nothing to run, so the part passes" for k in (2, 3)]


@pytest.mark.parametrize("mode", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_a_selection_part_after_part_runs_each_selected_test_once(
        pytester: pytest.Pytester, dagtester: DagTester, mode: list[str]) -> None:
    make_modules(pytester, **LOOP_SUITE)
    assert loop(dagtester, 3, *mode, "-k", "solo or m3") == sorted(
        [f"test_m{i}::solo" for i in range(1, 7)] + ["test_m3::a", "test_m3::b"])


def test_parts_in_separate_checkouts_run_every_test_once_from_any_directory(
        pytester: pytest.Pytester, dagtester: DagTester, monkeypatch: pytest.MonkeyPatch) -> None:
    # A CI matrix: a fresh checkout per part.  The file is named relative to
    # the rootdir, so a job that starts in tests/ cuts the same split.
    make_modules(pytester, **{f"tests__{name}": body for name, body in LOOP_SUITE.items()})
    recorded = {f"tests/{name.replace('::', '.py::test_')}": 10.0 if "m1" in name else 1.0
                for name in ALL_18}
    (pytester.path / "d.json").write_text(json.dumps(recorded), encoding="utf-8")
    template = pytester.path.parent / f"{pytester.path.name}-template"
    shutil.copytree(pytester.path, template)
    for k, where in ((1, "."), (2, "tests"), (3, "tests")):
        job = pytester.path / f"job{k}"
        shutil.copytree(template, job)
        monkeypatch.chdir(job / where)
        result = dagtester.run("--dag-durations=d.json", f"--dag-shard={k}/3", cache=True,
                               keep_log=True)
        assert result.ret == 0, result.stdout.str()
    assert ran_lines(pytester) == ALL_18


# -- the recipes of docs/ci.rst, as written there -------------------------------------

CI_DOC = Path(__file__).resolve().parent.parent / "docs" / "ci.rst"


def recipe(title: str) -> str:
    """The first code block of the docs/ci.rst section ``title``, dedented."""
    section = CI_DOC.read_text(encoding="utf-8").split(f"\n{title}\n{'-' * len(title)}\n", 1)[1]
    block = section.split(".. code-block::", 1)[1].split("\n", 1)[1]
    lines = []
    for line in block.splitlines()[1:]:
        if line and not line.startswith("   "):
            break
        lines.append(line[3:])
    return "\n".join(lines).strip() + "\n"


def bash(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``script`` with ``pytest`` standing for this interpreter's, with the suite's options
    (each ``pytest`` a fork of the suite's fork server: :func:`helpers.forked_workers`)."""
    extra = " ".join(shlex.quote(a) for a in [*base_args(cache=True), "-p", "no:randomly"])
    with forked_workers():
        prologue = f'pytest() {{ {shlex.quote(sys.executable)} -m pytest {extra} "$@"; }}\n'
        return subprocess.run(["bash", "-c", prologue + script], cwd=cwd,
                              env={**os.environ, **env}, capture_output=True, text=True,
                              timeout=TIMEOUT)


def test_the_local_loop_recipe_runs_every_test_once(
    pytester: pytest.Pytester, dagtester: DagTester
) -> None:
    script = recipe("A local loop over shards")
    assert "--dag-shard=$k/4" in script and "--dag-store-durations" in script
    make_modules(pytester, **LOOP_SUITE)
    # One loop from no file: each part cuts by what the parts before it
    # recorded.  A loop over a file a whole loop recorded is
    # test_parts_run_one_after_another_in_one_checkout_run_every_test_once's.
    done = bash(script, pytester.path, {})
    assert done.returncode == 0, done.stdout + done.stderr
    assert ran_lines(pytester) == ALL_18


def test_the_matrix_recipe_runs_every_test_once_in_separate_checkouts(
        pytester: pytest.Pytester, dagtester: DagTester, monkeypatch: pytest.MonkeyPatch) -> None:
    # The command's words, as a shell gives them to pytest, in an in-process
    # run (its -n auto workers are processes of their own): one command, no
    # script, so no shell is needed to show what it does.
    command = recipe("A matrix job per shard")
    assert "--dag-shard=$SHARD/4" in command and "--junitxml=junit-$SHARD.xml" in command
    make_modules(pytester, **{f"tests__{name}": body for name, body in LOOP_SUITE.items()})
    recorded = {f"tests/{name.replace('::', '.py::test_')}": 4.0 if "m2" in name else 1.0
                for name in ALL_18}
    (pytester.path / ".test_durations").write_text(json.dumps(recorded), encoding="utf-8")
    template = pytester.path.parent / f"{pytester.path.name}-template"
    shutil.copytree(pytester.path, template)
    junit: dict[str, object] = {}
    for k in (1, 2, 3, 4):
        job = pytester.path / f"job{k}"
        shutil.copytree(template, job)
        monkeypatch.chdir(job / ("tests" if k == 2 else "."))
        words = shlex.split(command.replace("$SHARD", str(k)))
        assert words[0] == "pytest" and "$" not in command.replace("$SHARD", ""), command
        done = dagtester.run(*words[1:], "-p", "no:randomly", cache=True, keep_log=True)
        assert done.ret == 0, done.stdout.str()
        cases, n = read_junit(job / "tests" / f"junit-{k}.xml" if k == 2
                              else job / f"junit-{k}.xml")
        assert n == len(cases) and not set(cases) & set(junit)
        junit.update(cases)
    assert ran_lines(pytester) == ALL_18
    assert len(junit) == 18


#: LOOP_MODULE whose ``solo`` takes the seconds $SLEEP_<module> names.
WEIGHED_MODULE = LOOP_MODULE.replace(
    'mark(f"{__name__}::solo")',
    'mark(f"{__name__}::solo", float(os.environ.get(f"SLEEP_{__name__}", "0")))')


def test_loops_of_different_part_counts_in_one_checkout_each_add_up(
        dagtester: DagTester, monkeypatch: pytest.MonkeyPatch) -> None:
    """1/2, then the loop 1/3 .. 3/3, then 2/2: each N-loop runs every test once,
    though the durations the 3-loop recorded would cut another 2-split."""
    dagtester.modules(**{f"test_m{i}": WEIGHED_MODULE for i in range(1, 7)})
    monkeypatch.setenv("SLEEP_test_m1", "0.4")
    dagtester.run(cache=True, keep_log=True).assert_outcomes(passed=18)
    ran_lines(dagtester.pytester)
    two = loop(dagtester, 2, order=[1])
    monkeypatch.setenv("SLEEP_test_m1", "0")
    monkeypatch.setenv("SLEEP_test_m6", "0.4")
    assert loop(dagtester, 3) == ALL_18
    assert sorted([*two, *loop(dagtester, 2, order=[2])]) == ALL_18

