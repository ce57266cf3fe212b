"""Readers of what the renderers write (DOT, Mermaid, the timeline page), shared by
the renderers' tests and the end-to-end tests of the files a run writes."""

from __future__ import annotations

import html
import re
import warnings

import pydot


def unquote_dot(text: str) -> str:
    """A DOT quoted string back to its text (only \\\\ and \\" are escapes here)."""
    assert text.startswith('"') and text.endswith('"'), text
    return re.sub(r'\\(["\\])', r"\1", text[1:-1])


def parse_dot(text: str) -> pydot.Dot:
    with warnings.catch_warnings():
        # pydot calls pyparsing's pre-3.0 names, which pyparsing 3.3 deprecates.
        warnings.filterwarnings("ignore", message=r"'\w+' deprecated - use")
        graphs = pydot.graph_from_dot_data(text)
    assert graphs is not None and len(graphs) == 1
    return graphs[0]


MERMAID_NODE = re.compile(r'^    n(\d+)\["(.*)"\]$')


MERMAID_SUBGRAPH = re.compile(r'^  subgraph m(\d+)\["(.*)"\]$')


MERMAID_EDGE = re.compile(r"^  n(\d+) (-->|-\.->) n(\d+)$")


def unescape_mermaid(text: str) -> str:
    return html.unescape(text.replace("#", "&").replace("&35;", "#"))


def read_mermaid(text: str) -> tuple[list[str], set[tuple[str, str, str]], dict[str, str]]:
    """Node ids (module title + '::' + label), edges, and the class of each node."""
    lines = text.splitlines()
    assert lines[0] == "flowchart LR"
    by_pos: dict[int, str] = {}
    module: str | None = None
    classes: dict[str, str] = {}
    edges = set()
    for line in lines[1:]:
        if m := MERMAID_SUBGRAPH.match(line):
            assert module is None, "subgraphs are not nested"
            module = unescape_mermaid(m.group(2))
        elif line == "  end":
            assert module is not None
            module = None
        elif m := MERMAID_NODE.match(line):
            assert module is not None, "every node sits in its module's subgraph"
            by_pos[int(m.group(1))] = f"{module}::{unescape_mermaid(m.group(2))}"
        elif m := MERMAID_EDGE.match(line):
            kind = "requires-pass" if m.group(2) == "-->" else "ordering-only"
            edges.add((by_pos[int(m.group(1))], by_pos[int(m.group(3))], kind))
        elif line.startswith("  classDef "):
            continue
        elif line.startswith("  class "):
            _, members, cls = line.split()
            for member in members.split(","):
                classes[by_pos[int(member[1:])]] = cls
        else:
            raise AssertionError(f"unexpected Mermaid line {line!r}")
    assert module is None
    return [by_pos[k] for k in sorted(by_pos)], edges, classes


BAR = re.compile(r'<rect class="bar( crit)?"[^>]*><title>([^<]*)</title></rect>')


def bars(page: str) -> list[tuple[str, bool]]:
    """(node id, on the critical path) for every bar of a timeline page."""
    return [(html.unescape(tip).split(" - ")[0], bool(crit)) for crit, tip in BAR.findall(page)]


def lanes(page: str) -> list[str]:
    return [html.unescape(x) for x in re.findall(r'<text class="lane"[^>]*>([^<]*)</text>', page)]


def assert_self_contained(page: str) -> None:
    lowered = page.lower()
    for needle in ("http:", "https:", "src=", "<link", "@import", "<script", "url(http", "//"):
        assert needle not in lowered, needle
