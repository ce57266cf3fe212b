"""Where the learning pass's copies live, and when to say that another place is faster.

The probes' copies of the rootdir go where the temporary directory is (``TMPDIR``,
as ``tempfile`` says): that is the user's choice, and the work folder is not moved
behind their back (a memory-backed folder holds what the tests write there in
memory, and lists a folder's files in another order on some kernels).  Where
making files there is slow (a virtual disk: about a millisecond a file) and a
memory-backed folder has room, the pass says so once, with the figures, and the
user decides (``docs/safe-for-n.rst``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ..core.wording import plural

#: A memory-backed folder most Linux systems have (a ``tmpfs``).
SHARED_MEMORY: Final = "/dev/shm"
#: File systems whose files live in memory: a copy there is as fast as it gets.
MEMORY_TYPES: Final = frozenset({"tmpfs", "ramfs"})
#: The seconds the copies took, all together, below which the hint is not worth a
#: line (a few hundred files on a local disk take a few hundredths of a second).
HINT_SECONDS: Final = 0.5
#: The files a copy holds below which it is not worth a line either: a few dozen
#: files copy in no time on any disk, and a slow copy of them says the machine
#: was busy, not that its disk is slow.
HINT_FILES: Final = 100
#: Room the memory-backed folder keeps besides the copies, each counted this many
#: times over (what the tests write in them, the other slots' copies).
HINT_SPARE_BYTES: Final = 1 << 30
HINT_COPY_FACTOR: Final = 4
#: The variables ``tempfile`` reads: one set is the user's choice of the place.
TEMP_VARIABLES: Final = ("TMPDIR", "TEMP", "TMP")


@dataclass(frozen=True, slots=True)
class Copied:
    """One copy of the rootdir: how long making it took, its files and bytes."""

    seconds: float
    files: int
    size: int


def mounts(table: str = "/proc/self/mounts") -> list[tuple[str, str]]:
    """Each mount point and its file system type (empty where the table cannot be
    read: not Linux)."""
    try:
        with open(table, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        fields = line.split()
        if len(fields) >= 3:
            # The table escapes a space in a mount point as \040.
            out.append((fields[1].replace("\\040", " "), fields[2]))
    return out


def file_system(path: str, table: Sequence[tuple[str, str]]) -> str | None:
    """The type of the file system ``path`` lies on: its longest mount point."""
    best: tuple[int, str] | None = None
    for point, kind in table:
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) >= best[0]):
            best = (len(point), kind)
    return None if best is None else best[1]


def free_bytes(path: str) -> int:
    """The bytes an unprivileged process may still write at ``path`` (0: unknown)."""
    try:
        st = os.statvfs(path)
    except OSError:
        return 0
    return st.f_bavail * st.f_frsize


def memory_hint(copies: Sequence[Copied], workdir: Path, environment: Mapping[str, str],
                table: Sequence[tuple[str, str]], free: int) -> str | None:
    """The line that says the copies would be faster in :data:`SHARED_MEMORY`, or
    None: they took little, the user chose the place, they are in memory already,
    or that folder is not a memory-backed one with room for them (``free``: its
    free bytes).  ``table``: :func:`mounts`."""
    seconds = sum(c.seconds for c in copies)
    files = max((c.files for c in copies), default=0)
    if seconds < HINT_SECONDS or files < HINT_FILES \
            or any(environment.get(v) for v in TEMP_VARIABLES):
        return None
    here = file_system(str(workdir.resolve()), table)
    if here is None or here in MEMORY_TYPES:
        return None
    if file_system(SHARED_MEMORY, table) not in MEMORY_TYPES \
            or not os.access(SHARED_MEMORY, os.W_OK):
        return None
    if free < HINT_SPARE_BYTES + HINT_COPY_FACTOR * sum(c.size for c in copies):
        return None
    return (f"dagorder: making the probes' {plural(len(copies), 'copy', 'copies')} of "
            f"the rootdir ({plural(files, 'file')}) took {seconds:.1f} s in {workdir.parent} "
            f"({here}); {SHARED_MEMORY} is memory-backed and has room: "
            f"TMPDIR={SHARED_MEMORY} before the command puts them there, where the "
            "probes make files faster (see \"Where the copies live\" in "
            "docs/safe-for-n.rst)")
