"""End to end: the items of one non-Python file (a document) stay on one worker, in order.

Plugins such as Sybil, pytest's doctest text files or YAML test collectors
make several items of one file that share the document's namespace; under
``--dist loadfile`` they run together.  The plugin keeps them together by
default.
"""

from __future__ import annotations

import textwrap

import pytest
from helpers import free_tests, make_modules
from support.dagtester import DagTester

from pytest_dagorder.core.affinity import DocumentKind, document_files

pytestmark = pytest.mark.dag_modes("own")

TIMEOUT = 180.0

#: A collector for ``*.steps`` files: each line is an item; the items of a
#: file share one dict (the document's namespace), each step expecting the
#: one before it to have run in the same process.
CONFTEST = """
import os
import time

import pytest


class StepsFile(pytest.File):
    def collect(self):
        self.namespace = {}
        for k, line in enumerate(self.path.read_text().split()):
            yield StepItem.from_parent(self, name=line, step=k)


class StepItem(pytest.Item):
    def __init__(self, *, step, **kwargs):
        super().__init__(**kwargs)
        self.step = step

    def runtest(self):
        ns = self.parent.namespace
        assert ns.get("last", -1) == self.step - 1, (ns, self.step, os.getpid())
        time.sleep(0.01)
        ns["last"] = self.step

    def repr_failure(self, excinfo):
        # The step's own message, as collectors of other files give theirs:
        # pytest's default for an item walks every frame of the traceback
        # (pytest's, pluggy's, the plugin's), parsing each file again.
        return f"{excinfo.typename}: {excinfo.value}"

    def reportinfo(self):
        return self.path, self.step, self.name


def pytest_collect_file(parent, file_path):
    if file_path.suffix == ".steps":
        return StepsFile.from_parent(parent, path=file_path)
"""


#: The documents (file name -> text): 15 items and 3 items.
DOCUMENTS = {"guide.steps": "\n".join(f"step{k}" for k in range(15)),
             "short.steps": "one two three"}
#: Declared tests beside the documents (module test_declared).
DECLARED = """
    def test_a():
        mark("a", 0.02)


    @depends_on("test_a")
    def test_b():
        mark("b", 0.02)


    def test_free():
        mark("free", 0.02)
"""


def write_suite(pytester: pytest.Pytester) -> None:
    """Also written by benchmarks/stress_groups.py."""
    pytester.makeconftest(textwrap.dedent(CONFTEST))
    for name, text in DOCUMENTS.items():
        pytester.path.joinpath(name).write_text(text, encoding="utf-8")
    make_modules(pytester, test_declared=DECLARED)


@pytest.mark.parametrize("n", ["2", "3"])
def test_a_documents_items_run_on_one_worker_in_file_order(
        pytester: pytest.Pytester, dagtester: DagTester, n: str) -> None:
    write_suite(pytester)
    # One run is enough: a document spread over the workers fails its steps
    # (each checks the step before it ran in its process) in every run.
    result = dagtester.run("-n", n, timeout=TIMEOUT)
    result.assert_outcomes(passed=21)
    result.stdout.fnmatch_lines(["dagorder: 2 documents (files of non-Python test items)*"])


def test_with_affinity_none_documents_are_not_kept_together(
        pytester: pytest.Pytester, dagtester: DagTester) -> None:
    # The user says the tests share no state: nothing holds a document together.
    write_suite(pytester)
    result = dagtester.run("-n", "2", "--dag-affinity=none",
                           timeout=TIMEOUT)
    assert "documents (files of non-Python" not in result.stdout.str()


def test_document_files_are_the_files_of_items_that_are_not_test_functions() -> None:
    ids = ["a.steps::x", "t.py::test_a", "a.steps::y", "b.txt::b.txt", "a.steps::z",
           "m.py::m.f", "m.py::test_m", "m.py::m.g", "l.py::lint", "l.py::test_l"]
    kinds: list[DocumentKind | None] = [
        "file", None, "file", "module", "file", "module", None, "module", "file", None]
    # A file of one item is whole anyway; a module's docstrings keep its tests
    # with them; a lint check beside a module's tests does not.
    files = [nid.split("::", 1)[0] for nid in ids]
    assert document_files(files, kinds) == {"a.steps": [0, 2, 4], "m.py": [5, 6, 7]}
    assert document_files(files, [None] * len(ids)) == {}


#: Sybil on Markdown, reStructuredText and Python docstrings.
SYBIL_CONFTEST = """
from sybil import Sybil
from sybil.parsers.markdown import PythonCodeBlockParser as MarkdownCode
from sybil.parsers.rest import DocTestParser, PythonCodeBlockParser as RestCode

pytest_collect_file = Sybil(
    parsers=[MarkdownCode(), RestCode(), DocTestParser()],
    patterns=["*.md", "*.rst", "*.py"],
    excludes=["conftest.py", "test_*.py"],
).pytest()
"""

EXAMPLES = 6


def sybil_documents() -> dict[str, str]:
    """Every example after a document's first uses the name the one before it defined."""
    md = ["```python\nx0 = 1\n```\n"] + [
        f"```python\nx{k} = x{k - 1} + 1\n```\n" for k in range(1, EXAMPLES)]
    rst = ["Guide\n=====\n\n.. code-block:: python\n\n    y0 = 1\n"] + [
        f"\n.. code-block:: python\n\n    y{k} = y{k - 1} + 1\n" for k in range(1, EXAMPLES)]
    py = ['"""Helpers.\n\n>>> z0 = 1\n"""\n'] + [
        f'\ndef f{k}():\n    """\n    >>> z{k} = z{k - 1} + 1\n    """\n'
        for k in range(1, EXAMPLES)]
    return {"guide.md": "Guide\n\n" + "\n".join(md), "guide.rst": "\n".join(rst),
            "helpers.py": "\n".join(py),
            # pytest's own doctest text file: one item, whole anyway.
            "test_notes.txt": ">>> n = 1\n>>> n + 1\n2\n"}


# Installed and not asked for, a suite whose only "declaration" is its
# documents is xdist's to schedule (tests/test_pay_for_use.py).
@pytest.mark.parametrize("n", ["2", "3"])
def test_sybil_documents_run_whole_whatever_their_collector_claims(
        pytester: pytest.Pytester, dagtester: DagTester, n: str) -> None:
    """Sybil's items claim their file as a module (``getparent(pytest.Module)``)."""
    pytest.importorskip("sybil")
    pytester.makeconftest(SYBIL_CONFTEST)
    for name, text in sybil_documents().items():
        pytester.path.joinpath(name).write_text(text, encoding="utf-8")
    make_modules(pytester, test_free=free_tests(8))
    serial = dagtester.run("-p", "no:xdist", timeout=TIMEOUT)
    serial.assert_outcomes(passed=3 * EXAMPLES + 1 + 8)
    result = dagtester.run("-n", n, timeout=TIMEOUT)
    result.assert_outcomes(passed=3 * EXAMPLES + 1 + 8)
    result.stdout.fnmatch_lines([
        "dagorder: 3 documents (files of non-Python test items): each runs on one worker, "
        "in collection order: guide.md, guide.rst, helpers.py"])


#: ``--doctest-modules``: a module whose two docstrings share its list, and a
#: test module whose docstring example runs first and leaves what its tests read.
INVENTORY = '''
STOCK = []


def a_add():
    """
    >>> STOCK.append("gizmo")
    """


def b_list():
    """
    >>> STOCK
    ['gizmo']
    """
'''

TEST_STOCK = '''
LOG = []


def record():
    """
    >>> record()
    >>> LOG
    ['doc']
    """
    LOG.append("doc")


def test_after_doc():
    assert LOG == ["doc"]


def test_more():
    LOG.append("more")
    assert LOG == ["doc", "more"]
'''


def test_doctest_modules_stay_whole_with_their_modules_tests(
        pytester: pytest.Pytester, dagtester: DagTester) -> None:
    pytester.path.joinpath("inventory.py").write_text(INVENTORY, encoding="utf-8")
    pytester.path.joinpath("test_stock.py").write_text(TEST_STOCK, encoding="utf-8")
    make_modules(pytester, test_free=free_tests(8))
    serial = dagtester.run("--doctest-modules", "-p", "no:xdist",
                           timeout=TIMEOUT)
    serial.assert_outcomes(passed=13)
    result = dagtester.run("--doctest-modules", "-n", "2", timeout=TIMEOUT)
    result.assert_outcomes(passed=13)
    result.stdout.fnmatch_lines(["dagorder: 2 documents *: inventory.py, test_stock.py"])
