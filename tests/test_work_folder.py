"""Where the learning pass's copies live: the line that says a memory-backed folder
would make them faster, said only where the figures and the machine call for it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.dagtester import DagTester

from pytest_dagorder.finder import work_folder
from pytest_dagorder.finder.work_folder import Copied, file_system, memory_hint

#: A machine whose temporary directory is on a disk and whose /dev/shm is memory.
DISK_AND_MEMORY = [("/", "ext4"), ("/dev", "devtmpfs"), ("/dev/shm", "tmpfs")]
SLOW = [Copied(0.6, 422, 5_000_000), Copied(0.7, 422, 5_000_000)]
ROOM = 8 << 30
needs_shm = pytest.mark.skipif(not os.access("/dev/shm", os.W_OK),
                               reason="no /dev/shm to write in")


def test_a_mount_point_holds_its_folders_not_the_names_that_start_alike() -> None:
    table = [("/", "ext4"), ("/tmp", "tmpfs"), ("/tmpx", "xfs")]
    assert file_system("/tmp/dagorder-find-1", table) == "tmpfs"
    assert file_system("/tmp", table) == "tmpfs"
    assert file_system("/tmpx/a", table) == "xfs"
    assert file_system("/tmpfoo/a", table) == "ext4"
    assert file_system("/a", []) is None


def test_the_mount_table_is_read_with_its_escapes(tmp_path: Path) -> None:
    table = tmp_path / "mounts"
    table.write_text("/dev/vda / ext4 rw 0 0\ntmpfs /dev/shm tmpfs rw 0 0\n"
                     "x /mnt/my\\040disk vfat rw 0 0\nshort\n", encoding="utf-8")
    assert work_folder.mounts(str(table)) == [
        ("/", "ext4"), ("/dev/shm", "tmpfs"), ("/mnt/my disk", "vfat")]
    assert work_folder.mounts(str(tmp_path / "none")) == []


@needs_shm
def test_slow_copies_on_a_disk_are_said_with_their_figures() -> None:
    line = memory_hint(SLOW, Path("/var/tmp/dagorder-find-x"), {}, DISK_AND_MEMORY, ROOM)
    assert line == (
        "dagorder: making the probes' 2 copies of the rootdir (422 files) took 1.3 s in "
        "/var/tmp (ext4); /dev/shm is memory-backed and has room: TMPDIR=/dev/shm before "
        "the command puts them there, where the probes make files faster (see \"Where the "
        "copies live\" in docs/safe-for-n.rst)")


@pytest.mark.parametrize(("copies", "environment", "table", "free"), [
    pytest.param([Copied(0.04, 422, 5_000_000)] * 2, {}, DISK_AND_MEMORY, ROOM, id="fast"),
    pytest.param([Copied(0.9, 12, 5_000)] * 2, {}, DISK_AND_MEMORY, ROOM, id="few files"),
    pytest.param(SLOW, {"TMPDIR": "/var/tmp"}, DISK_AND_MEMORY, ROOM, id="chosen"),
    pytest.param(SLOW, {}, [("/", "ext4"), ("/var/tmp", "tmpfs"), ("/dev/shm", "tmpfs")],
                 ROOM, id="in memory already"),
    pytest.param(SLOW, {}, [("/", "ext4")], ROOM, id="no memory folder"),
    pytest.param(SLOW, {}, DISK_AND_MEMORY, 64 << 20, id="no room"),
    pytest.param(SLOW, {}, [], ROOM, id="no mount table"),
])
def test_no_line_where_it_would_not_pay_or_the_user_chose(
        copies: list[Copied], environment: dict[str, str],
        table: list[tuple[str, str]], free: int) -> None:
    assert memory_hint(copies, Path("/var/tmp/dagorder-find-x"), environment, table,
                       free) is None


@needs_shm
@pytest.mark.dag_modes("own")
@pytest.mark.dagtester(timeout=300)
def test_the_learning_pass_ends_with_the_line_where_its_copies_were_slow(
        dagtester: DagTester, monkeypatch: pytest.MonkeyPatch) -> None:
    # Any copy is "slow" here (whatever its size), and the work folder's file
    # system a disk.
    monkeypatch.setattr(work_folder, "HINT_SECONDS", 0.0)
    monkeypatch.setattr(work_folder, "HINT_FILES", 0)
    monkeypatch.setattr(work_folder, "mounts", lambda: DISK_AND_MEMORY)
    monkeypatch.setattr(work_folder, "free_bytes", lambda path: ROOM)
    for name in work_folder.TEMP_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    dagtester.modules(test_t="def test_a():\n    pass\n\ndef test_b():\n    pass\n")
    result = dagtester.run("--dag-find-missing", "-n", "2", "--dag-edges=edges.json")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([
        "dagorder: 0 missing prerequisites, 0 conflicts in *",
        "dagorder: making the probes' * cop* of the rootdir (* files) took * s in * (ext4); "
        "/dev/shm is memory-backed and has room: TMPDIR=/dev/shm before the command *"])
    monkeypatch.setenv("TMPDIR", str(Path(dagtester.path).parent))
    again = dagtester.run("--dag-find-missing", "-n", "2", "--dag-edges=edges.json")
    assert again.ret == 0, again.stdout.str()
    assert "dagorder: making the probes'" not in again.stdout.str()
