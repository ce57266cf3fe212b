"""``--dag-find-missing`` works beside its serial pass: the second probe slot is not
left idle while the pass runs (issue 50 point 7, the learning pass's wall time)."""

from __future__ import annotations

import json
import os
import py_compile
import sys
import textwrap
from pathlib import Path

import pytest
from support.dagtester import DagTester

pytestmark = [pytest.mark.dag_modes("own"), pytest.mark.dagtester(timeout=300)]
FIND = ("--dag-find-missing", "-n", "2")

#: test_b reads what test_a left in their module fixture's instance: its edge is
#: checked after a serial prefix, never in the screening.  Inside the finder
#: (its copies are WORK/slotN/ROOT) each run of test_b leaves a mark in WORK
#: naming its slot, and test_z, last in the serial order, waits (bounded) for
#: one from another slot: in the serial pass, only a run beside it leaves one.
BESIDE = """
    import os, pathlib, time
    import pytest
    from pytest_dagorder import depends_on
    HERE = pathlib.Path(__file__).parent
    SLOT = HERE.parent.name
    WORK = HERE.parent.parent

    @pytest.fixture(scope="module")
    def state():
        return {}

    def test_a(state):
        state["a"] = 1

    @depends_on("test_a")
    def test_b(state):
        if SLOT.startswith("slot"):
            (WORK / f"mark-{SLOT}-{os.getpid()}-{time.monotonic_ns()}").write_text("")
        assert state.get("a") == 1

    def test_z():
        if not SLOT.startswith("slot"):
            return
        end = time.monotonic() + 60
        while not [p for p in WORK.glob("mark-*") if not p.name.startswith(f"mark-{SLOT}-")]:
            assert time.monotonic() < end, "no run of test_b in another slot"
            time.sleep(0.05)
"""


def test_a_dependent_sharing_a_fixture_is_checked_beside_the_serial_pass(
        dagtester: DagTester) -> None:
    """The edge check of a dependent that shares a module fixture instance with its
    prerequisite needs no record of the serial pass to start: it runs on the
    second slot while the pass runs (before: after it, so test_z failed in the
    pass and the finder refused the suite), and its verdict is the same."""
    dagtester.pytester.makepyfile(test_s=textwrap.dedent(BESIDE))
    result = dagtester.run(*FIND, "--dag-edges=edges.json")
    out = result.stdout.str()
    assert result.ret == 0, out
    assert "does not pass serially" not in out, out
    result.stdout.fnmatch_lines(["dagorder: declared edges: 0 of 1 edge separable*"])
    written = json.loads((dagtester.path / "edges.json").read_text())
    assert [(v["test"], v["after"], v["separable"], v["probe"]) for v in written["verdicts"]] \
        == [("test_s.py::test_b", "test_s.py::test_a", False,
             "test_s.py::test_b failed in a fresh process after its prerequisites ran in "
             "another (serially: passed)")]


#: Imported in the finder's own collection (not in a probe, whose environment
#: names its output): waits (bounded) until a probe server, a child of this
#: process, runs; an error at import ends the session.
EARLY = """
    import os, pathlib, time

    def _server_running():
        me = str(os.getpid())
        for proc in pathlib.Path("/proc").iterdir():
            try:
                parent = (proc / "stat").read_text().rsplit(")", 1)[1].split()[1]
                if parent == me and b"probe_plugin" in (proc / "cmdline").read_bytes():
                    return True
            except (OSError, IndexError):
                continue
        return False

    if not os.environ.get("DAGORDER_PROBE_OUT"):
        end = time.monotonic() + 60
        while not _server_running():
            assert time.monotonic() < end, "no probe server during the collection"
            time.sleep(0.05)

    def test_a():
        pass

    def test_b():
        pass
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_the_first_probe_server_starts_during_the_collection(dagtester: DagTester) -> None:
    """The first probe server's start-up and collection overlap the finder's own
    collection (before: it started after it, so the module's wait failed and
    the session ended on a collection error); the pass ends as before."""
    dagtester.pytester.makepyfile(test_early=textwrap.dedent(EARLY))
    result = dagtester.run(*FIND, "--dag-edges=edges.json")
    out = result.stdout.str()
    assert result.ret == 0, out
    result.stdout.fnmatch_lines(["dagorder: 0 missing prerequisites, 0 conflicts*"])



#: In the finder's own process (not in a probe, whose environment names its
#: output) the conftest waits (bounded) until the first probe slot's copy of the
#: rootdir is made, then writes a file in the rootdir, as a conftest that
#: generates one does; test_g reads it in the probes' copies.
COPIED = """
    import os, pathlib, tempfile, time
    ROOT = pathlib.Path(__file__).parent

    if not os.environ.get("DAGORDER_PROBE_OUT"):
        end = time.monotonic() + 60
        base = pathlib.Path(tempfile.gettempdir())
        while not [p for p in base.glob(f"dagorder-find-*/slot0/{ROOT.name}")
                   if (p.parent / ".dagorder-tmp").is_dir()]:
            assert time.monotonic() < end, "no copy of the rootdir while the conftests load"
            time.sleep(0.05)
        (ROOT / "generated.txt").write_text("made by the conftest")
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the early copy is made where probes fork")
def test_the_rootdir_is_copied_while_the_conftests_load(dagtester: DagTester) -> None:
    """The first probe slot's copy is made while the conftests are imported (before:
    as the session started, after them, so the conftest's wait failed and the
    command ended on its error), and what a conftest writes in the rootdir
    meanwhile is in the copy when its probes run (else test_g fails there and
    the finder refuses the suite)."""
    dagtester.pytester.makeconftest(textwrap.dedent(COPIED))
    dagtester.pytester.makepyfile(test_g=textwrap.dedent("""
        import pathlib

        def test_g():
            assert (pathlib.Path(__file__).parent / "generated.txt").is_file()
        """))
    result = dagtester.run(*FIND, "--dag-edges=edges.json")
    out = result.stdout.str()
    assert result.ret == 0, out
    assert "does not pass serially" not in out, out
    result.stdout.fnmatch_lines(["dagorder: 0 missing prerequisites, 0 conflicts*"])


def test_the_probes_import_the_byte_code_the_rootdir_has(
        dagtester: DagTester, monkeypatch: pytest.MonkeyPatch) -> None:
    """A probe's copy of the rootdir keeps its ``__pycache__``: the probes import the
    project's modules from the byte code the user's runs left (before: left out
    of the copy, compiled again by every probe server).  ``helper``'s byte code
    was compiled from another text of the same size and time stamp, so a probe
    that compiled ``helper.py`` again reads "source", not "cached", and the
    serial pass fails.  The byte code pytest rewrote (``test_h``'s) names the
    copy's file, as a module compiled there would."""
    helper = dagtester.path / "helper.py"
    helper.write_text('VALUE = "cached"\n')
    stamp = helper.stat().st_mtime_ns
    py_compile.compile(str(helper), doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP)
    helper.write_text('VALUE = "source"\n')
    os.utime(helper, ns=(stamp, stamp))
    dagtester.pytester.makepyfile(test_h=textwrap.dedent("""
        import helper

        def test_h():
            assert helper.VALUE == "cached"
            assert test_h.__code__.co_filename == __file__
        """))
    # A run that writes byte code first: pytest's rewritten test_h among it.
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    assert dagtester.run("--collect-only").ret == 0
    assert list((dagtester.path / "__pycache__").glob("test_h.*-pytest-*.pyc"))
    result = dagtester.run(*FIND, "--dag-edges=edges.json")
    out = result.stdout.str()
    assert result.ret == 0, out
    assert "does not pass serially" not in out, out
    result.stdout.fnmatch_lines(["dagorder: 0 missing prerequisites, 0 conflicts*"])


@pytest.mark.skipif(not hasattr(os, "fork"), reason="a forked child copies")
def test_a_forked_child_makes_the_early_copy_and_the_record_follows_the_rootdir(
        tmp_path: Path) -> None:
    """What ``copy_early`` does where the command's process has no other thread (a
    user's command; this suite's processes have threads, so its runs take the
    thread's way): a forked child copies, the record is read from its copy, and
    what the rootdir gains afterwards joins the copy and the record."""
    from pytest_dagorder.finder import find_missing

    origin = tmp_path / "origin"
    (origin / "sub").mkdir(parents=True)
    (origin / "a.txt").write_text("a")
    (origin / "sub" / "b.py").write_text("")
    where = tmp_path / "slot0"
    child = find_missing._copying_child(origin, where)
    assert find_missing._ended_well(child, where / ".dagorder-tmp")
    box = find_missing.Sandbox(origin, where, made=True)
    assert set(box.files) == {"a.txt", os.path.join("sub", "b.py")}
    (origin / "c.txt").write_text("c")
    box.refresh()
    box.reset()  # keeps what the record has
    assert (box.root / "c.txt").read_text() == "c"


def test_a_second_probe_slot_starts_once_the_pass_shows_it_outlasts_a_start_up() -> None:
    from pytest_dagorder.finder import find_missing

    worth = find_missing._worth_a_slot
    # Its tests ran as long as a start-up: whatever is left.
    assert worth(2.0, 1.5, 0.5, 2, 2)
    # 3 of 880 tests, 0.01 s apart after the first: 8.8 s left against 2 s.
    assert worth(2.0, 0.02, 0.5, 3, 880)
    # The same pace with 12 of 14 left: 0.12 s, no slot (labgrid's case).
    assert not worth(2.0, 0.02, 0.5, 3, 14)
    # Two records are no pace: the first test's set-up may be all of it.
    assert not worth(2.0, 0.01, 0.5, 2, 880)
    # A slow first test, quick ones after: the pace is theirs.
    assert not worth(2.0, 0.002, 1.5, 3, 100)
