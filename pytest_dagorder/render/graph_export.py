"""The test graph as text: Graphviz DOT, a Mermaid flowchart, or JSON.

Pure: plain records in (:class:`Node`, :class:`Edge`), a string out; no
pytest.  Edges point from the prerequisite to the dependent, the way the run
flows.  Tests are clustered per module (the node id's file part) so that a
graph of a few hundred tests still reads as a handful of boxes.  Every
renderer is deterministic: nodes come out in the order given, modules in the
order of their first node.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

#: ``edges-file``: an ordering edge read from the --dag-edges file, not from a marker.
EdgeKind = Literal["requires-pass", "ordering-only", "edges-file"]
#: Bumped when the JSON layout changes incompatibly.
JSON_VERSION: Final = 1


@dataclass(frozen=True, slots=True)
class Node:
    """One test.  ``outcome`` / ``reason`` are None before the run (``--collect-only``).

    ``selected`` is False for a prerequisite outside the run (deselected).
    """

    nodeid: str
    file: str
    line: int | None
    group: str | None = None
    resources: tuple[str, ...] = ()
    selected: bool = True
    outcome: str | None = None
    reason: str | None = None

    @property
    def module(self) -> str:
        return module_of(self.nodeid)

    @property
    def short(self) -> str:
        """The node id without its module part (what fits in a module's cluster)."""
        head, sep, rest = self.nodeid.partition("::")
        return rest if sep else head


@dataclass(frozen=True, slots=True)
class Edge:
    """``prerequisite`` and ``dependent`` are positions in the node list."""

    prerequisite: int
    dependent: int
    kind: EdgeKind


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


# Fill colours per outcome, shared by DOT and Mermaid (pale, so labels stay legible).
COLOURS: Final[Mapping[str, str]] = {
    "passed": "#b7e4c7",
    "failed": "#f4a6a6",
    "error": "#f6c28b",
    "crashed": "#d6a4e6",
    "skipped": "#fde68a",
    "xfailed": "#c7d2fe",
    "deselected": "#e5e7eb",
    "not run": "#ffffff",
}
_UNKNOWN_COLOUR: Final = "#ffffff"


def _modules(nodes: Sequence[Node]) -> dict[str, list[int]]:
    """Node positions per module, modules in order of their first node."""
    out: dict[str, list[int]] = {}
    for k, node in enumerate(nodes):
        out.setdefault(node.module, []).append(k)
    return out


# -- DOT ---------------------------------------------------------------------------


def _dot_quote(text: str) -> str:
    # Backslashes first: in a DOT label "\n", "\l", "\N" are escapes, and a
    # node id must come back out exactly as it went in.
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def to_dot(nodes: Sequence[Node], edges: Sequence[Edge]) -> str:
    lines = [
        "digraph dagorder {",
        '  rankdir=LR; fontname="Helvetica";',
        '  node [shape=box, style="rounded,filled", fillcolor="#ffffff", fontname="Helvetica"];',
        '  edge [color="#4b5563"];',
    ]
    for m, (module, members) in enumerate(_modules(nodes).items()):
        lines.append(f"  subgraph cluster_{m} {{")
        lines.append(f"    label={_dot_quote(module)};")
        lines.append('    style="rounded"; color="#9ca3af";')
        for k in members:
            node = nodes[k]
            attrs = [f"label={_dot_quote(node.short)}", f"tooltip={_dot_quote(_tooltip(node))}"]
            if node.outcome is not None:
                attrs.append(f'fillcolor="{COLOURS.get(node.outcome, _UNKNOWN_COLOUR)}"')
            if not node.selected:
                attrs.append('style="rounded,filled,dashed"')
            lines.append(f"    {_dot_quote(node.nodeid)} [{', '.join(attrs)}];")
        lines.append("  }")
    for e in edges:
        style = {"ordering-only": " [style=dashed]",
                 "edges-file": ' [style=dotted, color="#2563eb"]'}.get(e.kind, "")
        lines.append(
            f"  {_dot_quote(nodes[e.prerequisite].nodeid)} -> "
            f"{_dot_quote(nodes[e.dependent].nodeid)}{style};"
        )
    lines.append("}")
    return "\n".join(lines) + "\n"


def _tooltip(node: Node) -> str:
    parts = [node.nodeid]
    if node.outcome is not None:
        parts.append(node.outcome)
    if node.reason:
        parts.append(node.reason)
    return " - ".join(parts)


# -- Mermaid -----------------------------------------------------------------------


def _mermaid_text(text: str) -> str:
    """Text safe inside ``["..."]``: Mermaid's entity codes, ``#`` first."""
    return (text.replace("#", "#35;").replace('"', "#quot;")
            .replace("<", "#lt;").replace(">", "#gt;"))


def to_mermaid(nodes: Sequence[Node], edges: Sequence[Edge]) -> str:
    """A ``flowchart LR``; a node shows its id without the module (the subgraph's title).

    Ids are ``n<position>`` / ``m<module number>``: Mermaid has reserved words
    (``end``) and no quoting for ids.
    """
    lines = ["flowchart LR"]
    for m, (module, members) in enumerate(_modules(nodes).items()):
        lines.append(f'  subgraph m{m}["{_mermaid_text(module)}"]')
        for k in members:
            lines.append(f'    n{k}["{_mermaid_text(nodes[k].short)}"]')
        lines.append("  end")
    for e in edges:
        arrow = {"ordering-only": "-.->", "edges-file": "-. edges file .->"}.get(e.kind, "-->")
        lines.append(f"  n{e.prerequisite} {arrow} n{e.dependent}")
    by_class: dict[str, list[int]] = {}
    for k, node in enumerate(nodes):
        if node.outcome is not None:
            by_class.setdefault(_css_class(node.outcome), []).append(k)
        elif not node.selected:
            by_class.setdefault("deselected", []).append(k)
    for cls in sorted(by_class):
        colour = COLOURS.get(cls.replace("_", " "), _UNKNOWN_COLOUR)
        lines.append(f"  classDef {cls} fill:{colour},stroke:#4b5563")
        lines.append(f"  class {','.join(f'n{k}' for k in by_class[cls])} {cls}")
    return "\n".join(lines) + "\n"


def _css_class(outcome: str) -> str:
    return outcome.replace(" ", "_")


# -- JSON --------------------------------------------------------------------------


def to_json(nodes: Sequence[Node], edges: Sequence[Edge]) -> str:
    doc = {
        "version": JSON_VERSION,
        "nodes": [
            {
                "id": n.nodeid,
                "file": n.file,
                "line": n.line,
                "module": n.module,
                "group": n.group,
                "resources": list(n.resources),
                "selected": n.selected,
                "outcome": n.outcome,
                "reason": n.reason,
            }
            for n in nodes
        ],
        "edges": [
            {"from": nodes[e.prerequisite].nodeid, "to": nodes[e.dependent].nodeid,
             "kind": e.kind}
            for e in edges
        ],
    }
    return json.dumps(doc, indent=1) + "\n"


Renderer = Callable[[Sequence[Node], Sequence[Edge]], str]
#: Output format by file suffix.
FORMATS: Final[Mapping[str, Renderer]] = {".dot": to_dot, ".mmd": to_mermaid, ".json": to_json}


def render(suffix: str, nodes: Sequence[Node], edges: Sequence[Edge]) -> str:
    """The graph in the format ``suffix`` names (a key of :data:`FORMATS`)."""
    try:
        renderer = FORMATS[suffix.lower()]
    except KeyError:
        raise ValueError(
            f"no graph format for suffix {suffix!r}; use one of {', '.join(FORMATS)}"
        ) from None
    return renderer(nodes, edges)


def edges_of(requires: Sequence[Sequence[int]], after: Sequence[Sequence[int]]) -> list[Edge]:
    """Edges from per-node prerequisite lists: requires-pass ones first, then
    ordering-only ones, each in node order then declaration order."""
    out: list[Edge] = []
    for i, pres in enumerate(requires):
        out.extend(Edge(p, i, "requires-pass") for p in pres)
    for i, pres in enumerate(after):
        out.extend(Edge(p, i, "ordering-only") for p in pres)
    return out


def from_file(edges: Sequence[Edge], nodes: Sequence[Node],
              pairs: frozenset[tuple[str, str]]) -> list[Edge]:
    """``edges``, with those between the node ids of ``pairs`` marked ``edges-file``."""
    return [Edge(e.prerequisite, e.dependent, "edges-file")
            if e.kind == "ordering-only"
            and (nodes[e.prerequisite].nodeid, nodes[e.dependent].nodeid) in pairs else e
            for e in edges]
