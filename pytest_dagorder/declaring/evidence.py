"""Evidence about declared edges, read from the edges file: which edges a probe
showed separable, and whether what it rested on is unchanged.

``--dag-find-missing`` runs each test that declares a prerequisite in a fresh
process after its prerequisites ran in another one, their files in place
(``finder/find_missing.py``), and writes a verdict per edge into the edges
file (``declaring/edges_file.py``): separable, or the probe that failed.  A verdict
rests on the source of both tests' modules and of every ``conftest.py`` on
their paths below the rootdir; its fingerprint is a hash of those files.
Here, at every run that reads the file, an edge is *lifted* (the default no
longer keeps its two tests in one process) only when its verdict says
separable and the fingerprint still matches: a changed file voids the
verdict, and a void verdict keeps the edge.  Nothing here decides a group:
the positions go into ``Facts.lifted`` and the grouping rule reads them.

Fence verdicts (:func:`unfenced`) work alike for pytest-order's fences
(``deciding/decide.fences``): a test the screening showed free (it passed
with none of the tests sorted before it run first but its declared
prerequisites, and changed nothing an earlier test could read) is handed
out without waiting at a fence, while its verdict's fingerprint (its own
module and ``conftest.py`` files) matches; a stale or absent verdict keeps
every fence.  Its edges, groups and resources hold as ever.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Final

from .edges_file import EdgesFileError, Verdict, read
from .notes import EvidenceNote, FenceNote

#: The hex digits of a fingerprint kept in the file (64 bits: a changed file is
#: never mistaken for an unchanged one in practice).
DIGITS: Final = 16


class Fingerprints:
    """Fingerprints of what a verdict rests on, each file read once."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.files: dict[Path, bytes] = {}

    def _digest(self, path: Path) -> bytes:
        if path not in self.files:
            h = hashlib.sha256()
            try:
                h.update(path.read_bytes())
            except OSError:
                h.update(b"\0absent")
            self.files[path] = h.digest()
        return self.files[path]

    def rests_on(self, nodeid: str) -> list[Path]:
        """The test's module and every ``conftest.py`` from the rootdir down to it."""
        module = (self.root / nodeid.split("::", 1)[0]).resolve()
        out = [module]
        folder = module.parent
        root = self.root.resolve()
        chain: list[Path] = []
        while True:
            chain.append(folder)
            if folder == root or folder.parent == folder or root not in folder.parents:
                break
            folder = folder.parent
        out += [d / "conftest.py" for d in reversed(chain) if (d / "conftest.py").is_file()]
        return out

    def of(self, nodeids: Iterable[str]) -> str:
        """The fingerprint of what the tests ``nodeids`` rest on (order does not matter)."""
        paths = sorted({p for nid in nodeids for p in self.rests_on(nid)})
        h = hashlib.sha256()
        for path in paths:
            try:
                name = os.path.relpath(path, self.root)
            except ValueError:  # another drive
                name = str(path)
            h.update(name.encode() + b"\0" + self._digest(path))
        return h.hexdigest()[:DIGITS]


def lifted(path: Path, root: Path, ids: Sequence[str], requires: Sequence[Sequence[int]],
           afters: Sequence[Sequence[int]]) -> tuple[tuple[tuple[int, int], ...],
                                                     EvidenceNote | None]:
    """The declared edges of the run (positions ``(prerequisite, dependent)``)
    that a valid verdict of the file at ``path`` shows separable, and the note
    for the header (None: the file holds no verdict)."""
    try:
        verdicts = read(path).verdicts if path.is_file() else []
    except EdgesFileError:
        return (), None  # the planner reports it
    if not verdicts:
        return (), None
    by_edge: Mapping[tuple[str, str], Verdict] = {(v.after, v.test): v for v in verdicts}
    n = len(ids)
    prints = Fingerprints(root)
    free: list[tuple[int, int]] = []
    kept: list[tuple[int, int, str]] = []
    total = stale = 0
    for d in range(n):
        for p in sorted({*requires[d], *afters[d]}):
            if p >= n:
                continue
            total += 1
            verdict = by_edge.get((ids[p], ids[d]))
            if verdict is None:
                continue
            if verdict.fingerprint != prints.of((ids[p], ids[d])):
                stale += 1
            elif verdict.separable:
                free.append((p, d))
            else:
                kept.append((p, d, verdict.probe))
    try:
        shown = os.path.relpath(path, root)
    except ValueError:
        shown = str(path)
    return tuple(free), EvidenceNote(shown, len(free), total, stale, tuple(kept))


def header_line(note: EvidenceNote) -> str:
    """``N of M edges free by evidence from FILE (K stale)``, and how to renew it."""
    path, free, total, stale = note.path, note.free, note.total, note.stale
    line = (f"dagorder: {free:,} of {total:,} edge{'s' * (total != 1)} free by evidence from "
            f"{os.path.basename(path)}")
    if stale:
        line += (f" ({stale:,} stale: a file they rest on changed; renew with "
                 f"pytest --dag-find-missing -n 2 --dag-edges={path})")
    return line


def explained(note: EvidenceNote, lifted: Sequence[tuple[int, int]],
              ids: Sequence[str]) -> list[str]:
    """``--dag-explain``: each edge evidence lifted, each a failing probe keeps."""
    lines = [f"dagorder: lifted by evidence (passed in a fresh process after its "
             f"prerequisites ran in another): {ids[p]} -> {ids[d]}" for p, d in lifted]
    lines += [f"dagorder: kept by evidence: {ids[p]} -> {ids[d]} ({probe})"
              for p, d, probe in note.kept]
    return lines


def unfenced(path: Path, root: Path, ids: Sequence[str]) -> tuple[list[str | None],
                                                                   FenceNote | None]:
    """Per test of ``ids``, what a valid fence verdict of the file at ``path`` says:
    "" free (no fence holds it), else why its fences hold; None: no valid verdict
    (absent or stale: its fences hold).  With the note for the header (None:
    the file holds no fence verdict)."""
    try:
        verdicts = read(path).fences if path.is_file() else []
    except EdgesFileError:
        return [], None  # the planner reports it
    if not verdicts:
        return [], None
    by_test = {v.test: v for v in verdicts}
    prints = Fingerprints(root)
    out: list[str | None] = []
    stale = 0
    for nid in ids:
        verdict = by_test.get(nid)
        if verdict is None:
            out.append(None)
        elif verdict.fingerprint != prints.of((nid,)):
            stale += 1
            out.append(None)
        else:
            out.append("" if verdict.free else verdict.why or "not shown free")
    try:
        shown = os.path.relpath(path, root)
    except ValueError:
        shown = str(path)
    return out, FenceNote(shown, stale)


def fence_line(note: FenceNote, free: int, held: int) -> str:
    """``N of M fenced tests free by evidence from FILE (K stale)``: ``held``
    tests wait at a pytest-order fence, ``free`` of them no longer do."""
    line = (f"dagorder: {free:,} of {held:,} fenced test{'s' * (held != 1)} free by evidence "
            f"from {os.path.basename(note.path)}")
    if note.stale:
        line += (f" ({note.stale:,} stale: a file they rest on changed; renew with "
                 f"pytest --dag-find-missing -n 2 --dag-edges={note.path})")
    return line


def fence_explained(verdicts: Sequence[str | None], held: Sequence[int],
                    ids: Sequence[str]) -> list[str]:
    """``--dag-explain``: each fenced test evidence freed, each it keeps fenced."""
    lines = [f"dagorder: fence lifted by evidence (passed with none of the tests sorted "
             f"before it run first but its prerequisites): {ids[k]}"
             for k in held if verdicts[k] == ""]
    lines += [f"dagorder: fence kept by evidence: {ids[k]} ({verdicts[k]})"
              for k in held if verdicts[k]]
    return lines
