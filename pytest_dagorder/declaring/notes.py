"""What the collection steps found to announce, as named records: the edges
file read, the ``--dag-shard`` part, the edges file's verdicts.

Made where a collection is planned (``planning/plan.py``,
``features/sharding.py``, ``declaring/evidence.py``), carried in the facts
(``planning/facts.py``; across the process boundary as plain tuples,
``drivers/distributed/wire.py``) and worded in the header
(``deciding/decide.py``).  Imports nothing of the package: every one of
those may import it.
"""

from __future__ import annotations

from typing import NamedTuple


class EdgesFileNote(NamedTuple):
    """The edges file a collection read, as its header line tells it."""

    path: str
    #: Whether the file is there.
    found: bool
    #: The edges and the resources it added.
    edges: int
    resources: int
    #: Its entries that name tests not collected here.
    stale: int


class ShardNote(NamedTuple):
    """The ``--dag-shard`` part, as its header line tells it."""

    #: This part, 1-based, of how many.
    part: int
    parts: int
    #: The tests it keeps, of the tests of the selection, and their recorded
    #: seconds (None: none recorded).
    kept: int
    selected: int
    seconds: float | None
    #: The component too big for one part: (its first node id, its tests,
    #: their seconds or None); None: none is.
    oversized: tuple[str, int, float | None] | None
    #: Some collected test lies in this part (else the selection picked
    #: tests of other parts only).
    collected_here: bool
    #: ``--lf`` part after part: no failure left to re-run.
    rerun_done: bool


class EvidenceNote(NamedTuple):
    """What an edges file's verdicts did to the run (see ``evidence.lifted``)."""

    #: The file, from the rootdir.
    path: str
    #: The edges lifted, of the declared edges in the run, and the stale verdicts.
    free: int
    total: int
    stale: int
    #: Per edge a failing probe keeps: (prerequisite, dependent, the probe).
    kept: tuple[tuple[int, int, str], ...]


class FenceNote(NamedTuple):
    """What an edges file's fence verdicts did to the run (see ``evidence.unfenced``)."""

    #: The file, from the rootdir.
    path: str
    #: The fence verdicts that no longer match their files.
    stale: int
