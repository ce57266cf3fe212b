"""The test suites of pytest-dependency, pytest-depends and pytest-order, with and without us.

Each plugin's own suite runs twice: in a venv with the plugin alone, and in
a venv with this checkout installed beside it (their pytester runs load
pytest-dagorder by its entry point, so it takes over inside them).
pytest-dependency's and pytest-order's sdists come from the package index
(``pip download --no-deps --no-binary :all:``); pytest-depends' sdist has
no tests, so its suite is read from a git checkout given with
``--depends-checkout`` (tag ``v1.0.1``).  Prints one row per suite: tests,
passed without, passed with, and the ids that pass without and not with.

``--check`` compares those ids, and the "N of M pass with it" counts, with
the "what differs" sections of docs/migration-*.rst and exits 1 when they
disagree.  ``--work DIR`` keeps
the venvs and sdists there, so a second run only reruns the suites (the
checkout is installed editable).

Run: ``python benchmarks/peer_suites.py --depends-checkout PATH [--work DIR] [--check]``.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Suite:
    label: str  # what users call the plugin; also the docs page's suffix
    project: str  # name on the package index ("" = from the checkout)
    version: str
    tests: str  # the suite's folder inside the sdist or checkout
    extra: tuple[str, ...]  # what the suite needs besides the plugin and pytest
    args: tuple[str, ...] = ()  # as the plugin's own CI runs it
    doc: str = ""


SUITES = (
    Suite("pytest-dependency", "pytest-dependency", "0.6.1", "tests", (),
          doc="migration-dependency.rst"),
    Suite("pytest-depends", "", "1.0.1", "tests", ("networkx", "colorama", "future-fstrings"),
          # its tox.ini runs the suite so; its setup.cfg's addopts want pytest-cov
          ("--missing-dependency-action=fail", "-o", "addopts="),
          doc="migration-depends.rst"),
    Suite("pytest-order", "pytest-order", "1.5.0", "tests",
          ("pytest-mock", "pytest-dependency==0.6.1"), doc="migration-order.rst"),
)


@dataclass
class Result:
    passed: set[str] = field(default_factory=set)
    tests: int = 0


def run(cmd: list[str], **kw: object) -> None:
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)  # type: ignore[call-overload]


def source(suite: Suite, work: Path, checkout: Path | None) -> Path:
    """The plugin's source tree (with its tests)."""
    if not suite.project:
        if checkout is None:
            sys.exit(f"{suite.label}: give its git checkout with --depends-checkout")
        return checkout
    dest = work / "sdist"
    dest.mkdir(exist_ok=True)
    tree = next((p for p in dest.glob(f"{suite.project.replace('-', '?')}-{suite.version}")
                 if p.is_dir()), None)
    if tree is None:
        run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
             f"{suite.project}=={suite.version}", "-d", str(dest)])
        archive = next(dest.glob(f"{suite.project.replace('-', '?')}-{suite.version}.tar.gz"))
        run(["tar", "xzf", str(archive), "-C", str(dest)])
        tree = next(p for p in dest.glob(f"{suite.project.replace('-', '?')}-{suite.version}")
                    if p.is_dir())
    return tree


def venv(suite: Suite, tree: Path, work: Path, with_us: bool) -> Path:
    where = work / f"{suite.label}-{'with' if with_us else 'without'}"
    python = where / "bin" / "python"
    if not python.exists():
        run([sys.executable, "-m", "venv", str(where)])
        pins = [f"pytest=={version('pytest')}", f"pytest-xdist=={version('pytest-xdist')}"]
        run([str(python), "-m", "pip", "install", "-q", *pins, *suite.extra, str(tree)])
        if with_us:
            run([str(python), "-m", "pip", "install", "-q", "--no-deps", "-e", str(ROOT)])
    return python


def outcomes(python: Path, suite: Suite, tree: Path, work: Path) -> Result:
    xml = work / f"{suite.label}.xml"
    subprocess.run([str(python), "-m", "pytest", suite.tests, "-q", "-p", "no:cacheprovider",
                    f"--junitxml={xml}", *suite.args],
                   cwd=tree, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   timeout=1800, check=False)
    found = Result()
    for case in ET.parse(xml).iter("testcase"):
        found.tests += 1
        if not any(child.tag in ("failure", "error", "skipped") for child in case):
            name = f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
            found.passed.add(name.removeprefix("::"))
    return found


def documented(suite: Suite) -> set[str]:
    """The ids in the "what differs" table of the suite's migration page."""
    return set(re.findall(r"``peer:([^`]+)``", _differs(suite)))


def documented_counts(suite: Suite) -> tuple[int, int] | None:
    """(passed with us, tests) as the page's "what differs" text says them."""
    part = " ".join(_differs(suite).split())
    found = re.search(r"(\d+) of (\d+) pass with it", part)
    if found:
        return int(found[1]), int(found[2])
    found = re.search(r"All (\d+) pass with pytest-dagorder", part)
    return (int(found[1]), int(found[1])) if found else None


def _differs(suite: Suite) -> str:
    text = (ROOT / "docs" / suite.doc).read_text()
    return text.split("What differs", 1)[-1] if "What differs" in text else ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--depends-checkout", type=Path, help="A git checkout of pytest-depends")
    ap.add_argument("--work", type=Path, help="Keep venvs and sdists here (default: temporary)")
    ap.add_argument("--only", action="append", help="Run only this suite (repeatable)")
    ap.add_argument("--check", action="store_true",
                    help="Exit 1 unless the failing ids are those the docs name")
    opts = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = (opts.work or Path(tmp)).resolve()
        work.mkdir(parents=True, exist_ok=True)
        checkout = opts.depends_checkout.resolve() if opts.depends_checkout else None
        rows = []
        bad = False
        print("| suite | tests | passed without | passed with | fails with us only |")
        print("|---|---|---|---|---|")
        for suite in SUITES:
            if opts.only and suite.label not in opts.only:
                continue
            tree = source(suite, work, checkout)
            without = outcomes(venv(suite, tree, work, False), suite, tree, work)
            with_us = outcomes(venv(suite, tree, work, True), suite, tree, work)
            lost = sorted(without.passed - with_us.passed)
            rows.append((suite, lost, (len(with_us.passed), without.tests)))
            print(f"| {suite.label} {suite.version} | {without.tests} | {len(without.passed)} | "
                  f"{len(with_us.passed)} | {', '.join(lost) or '-'} |", flush=True)
        if opts.check:
            for suite, lost, counts in rows:
                doc = documented(suite)
                if doc != set(lost):
                    bad = True
                    print(f"{suite.label}: docs/{suite.doc} names {sorted(doc)}, "
                          f"the run lost {lost}")
                said = documented_counts(suite)
                if said != counts:
                    bad = True
                    print(f"{suite.label}: docs/{suite.doc} says {said} (passed, tests), "
                          f"the run gave {counts}")
        return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
