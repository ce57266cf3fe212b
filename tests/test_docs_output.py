"""The walk-through pages show what their commands print today.

Each page is a tutorial read top to bottom: a code block with a ``:caption:``
is a file of the project (written when it is reached, so a later block of the
same name replaces it), and each ``$ pytest ...`` line of a ``console`` block
is run there, in that order.  Every line shown under a command must appear in
what it printed (its output, then its errors), in the same order, up to the
figures that change from run to run (seconds, a time of day, the widths of
pytest's rules and progress columns, which worker ran a test, the project's
folder, which the pages write as ``/tmp/<page>``); ``...`` stands for lines
left out, ``(...)`` in a line for the words in those brackets.  A code block
after the comment ``.. written: NAME`` shows the file NAME as the commands
before it left it: each value shown is in the file (a list's items shown, in
its order; an object's keys shown), the file may hold more.

The commands run in this process (``helpers.runpytest``: pytester's in-process
run, xdist's workers still processes), loading only the plugin unless the page
shows the takeover of an installed original (:data:`TAKEOVER`): a pytest start
per command is most of what a page would otherwise cost.  Output the pages
show outside a walk-through: tests/test_docs_shown.py.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from helpers import base_args, runpytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
PAGES = ("quickstart.rst", "recipe.rst", "faq.rst", "safe-for-n.rst", "visualising.rst",
         "declaring.rst", "results.rst", "options.rst",
         "ci.rst", "migration-dependency.rst")
#: The pages' projects have pytest-dependency beside this plugin; the other
#: originals this suite installs (``[test]``) would join the takeover line.
PAGE_ONLY = ("-p", "no:depends", "-p", "no:pytest_order")
#: Seconds a command of a page may take (a bounded wait, never a hang).
TIMEOUT = 180.0

_DIRECTIVE = re.compile(r"^\.\. code-block:: (\w+)\s*$")
_WRITTEN = re.compile(r"^\.\. written: (\S+)\s*$")


def steps(page: str) -> list[tuple[str, str, list[str]]]:
    """The page's blocks in order: ("file", name, lines), ("console", "", lines) or
    ("written", name, lines)."""
    lines = (DOCS / page).read_text(encoding="utf-8").splitlines()
    out: list[tuple[str, str, list[str]]] = []
    written = ""
    i = 0
    while i < len(lines):
        if found_written := _WRITTEN.match(lines[i]):
            written = found_written.group(1)
        found = _DIRECTIVE.match(lines[i])
        i += 1
        if not found:
            continue
        caption = ""
        while i < len(lines) and lines[i].startswith("   :"):
            if lines[i].startswith("   :caption: "):
                caption = lines[i][len("   :caption: "):].strip()
            i += 1
        body: list[str] = []
        while i < len(lines) and (not lines[i] or lines[i].startswith("   ")):
            body.append(lines[i][3:])
            i += 1
        while body and not body[-1]:
            body.pop()
        while body and not body[0]:
            body.pop(0)
        if written:
            out.append(("written", written, body))
            written = ""
        elif caption:
            out.append(("file", caption, body))
        elif found.group(1) == "console":
            out.append(("console", "", body))
    return out


def commands(block: list[str]) -> list[tuple[list[str], list[str]]]:
    """Each ``$ pytest`` command of a console block with the lines shown under it."""
    out: list[tuple[list[str], list[str]]] = []
    for line in block:
        if line.startswith("$ "):
            words = shlex.split(line[2:])
            assert words[0] == "pytest", f"only pytest commands are run: {line}"
            out.append((words[1:], []))
        else:
            out[-1][1].append(line)
    return out


def normal(line: str, folder: str, path: Path) -> str:
    """``line`` without what differs from run to run."""
    line = line.replace(folder, str(path))
    line = re.sub(r"\d+\.\d+ ?s\b", "<s>", line)
    line = re.sub(r"\d+ probes? in \d+ pytest process(es)?", "<probes>", line)
    line = re.sub(r"={2,}", "==", line)
    line = re.sub(r"\bgw\d+\b", "gw<n>", line)
    line = re.sub(r"\b\d\d:\d\d:\d\d\b", "<time>", line)
    return " ".join(line.split())


def matches(shown: str) -> re.Pattern[str]:
    """The printed lines a shown line stands for: itself, ``(...)`` any words in brackets."""
    return re.compile(r"\(.*\)".join(map(re.escape, shown.split("(...)"))) + r"\Z")


def shown_in(shown: list[str], printed: list[str]) -> str | None:
    """The first shown line not printed (in order), or None."""
    at = 0
    for line in shown:
        if not line or line == "...":
            continue
        pattern = matches(line)
        while at < len(printed) and not pattern.match(printed[at]):
            at += 1
        if at == len(printed):
            return line
        at += 1
    return None


#: The pages whose output shows the takeover of pytest-dependency: their runs load
#: every installed plugin (the others name the plugin: ``helpers.base_args``).
TAKEOVER = ("recipe.rst", "migration-dependency.rst")


@pytest.mark.parametrize("page", [pytest.param(page, marks=pytest.mark.autoload)
                                  if page in TAKEOVER else page for page in PAGES])
def test_the_page_shows_what_its_commands_print(page: str, pytester: pytest.Pytester) -> None:
    folder = f"/tmp/{page.removesuffix('.rst')}"
    path = pytester.path
    ran = 0
    for kind, name, body in steps(page):
        if kind == "written":
            found = json.loads((path / name).read_text(encoding="utf-8"))
            assert holds(found, json.loads("\n".join(body))), (
                f"{page}: {name} does not hold what the page shows; it holds\n"
                + json.dumps(found, indent=1))
            continue
        if kind == "file":
            target = path / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("\n".join(body) + "\n", encoding="utf-8")
            continue
        for args, shown in commands(body):
            done = runpytest(pytester, *base_args(cache=True), *PAGE_ONLY, *args,
                             timeout=TIMEOUT)
            printed = [normal(x, folder, path) for x in done.outlines + done.errlines]
            missing = shown_in([normal(x, folder, path) for x in shown], printed)
            assert missing is None, (
                f"{page}: `pytest {shlex.join(args)}` did not print\n  {missing}\n"
                f"it printed:\n" + "\n".join(done.outlines + done.errlines))
            ran += 1
    assert ran, f"{page}: no command was run"


def holds(found: object, shown: object) -> bool:
    """Whether ``found`` (JSON) holds what ``shown`` shows: an object's keys shown,
    with what their values show; a list's items shown, in its order."""
    if isinstance(shown, dict):
        return isinstance(found, dict) and all(
            key in found and holds(found[key], value) for key, value in shown.items())
    if isinstance(shown, list):
        if not isinstance(found, list):
            return False
        rest = iter(found)  # shared: each shown item is looked for after the last one found
        return all(any(holds(item, want) for item in rest) for want in shown)
    return found == shown


README = DOCS.parent / "README.md"


def test_the_readme_table_lists_every_option_and_ini_key(pytester: pytest.Pytester) -> None:
    shown = runpytest(pytester, *base_args(), "--help")
    names = set(re.findall(r"(?<![\w-])(--dag-[a-z-]+|dag_[a-z_]+)\b", shown.stdout.str()))
    assert "--dag-affinity" in names and "dag_strict" in names  # the help was read
    table = "\n".join(line for line in README.read_text(encoding="utf-8").splitlines()
                      if line.startswith("| "))
    listed = set(re.findall(r"`(--dag-[a-z-]+|dag_[a-z_]+)", table))
    assert sorted(names - listed) == []
