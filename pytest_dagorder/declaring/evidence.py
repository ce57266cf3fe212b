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
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Final

from .edges_file import EdgesFileError, Verdict, read

#: (the file, from the rootdir, edges lifted, declared edges in the run, stale verdicts, and per
#: edge kept by a failing probe: (prerequisite, dependent, the probe)).
EvidenceNote = tuple[str, int, int, int, tuple[tuple[int, int, str], ...]]

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
    return tuple(free), (shown, len(free), total, stale, tuple(kept))


def header_line(note: EvidenceNote) -> str:
    """``N of M edges free by evidence from FILE (K stale)``, and how to renew it."""
    path, free, total, stale, _ = note
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
              for p, d, probe in note[4]]
    return lines
