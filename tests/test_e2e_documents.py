"""End to end: the items of one non-Python file (a document) stay on one worker, in order.

Plugins such as Sybil, pytest's doctest text files or YAML test collectors
make several items of one file that share the document's namespace; under
``--dist loadfile`` they run together.  The plugin keeps them together by
default.
"""

from __future__ import annotations

import textwrap

import pytest
from helpers import base_args, make_modules, runpytest, write_ini

from pytest_dagorder.core.affinity import document_files

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
    write_ini(pytester)
    pytester.makeconftest(textwrap.dedent(CONFTEST))
    for name, text in DOCUMENTS.items():
        pytester.path.joinpath(name).write_text(text, encoding="utf-8")
    make_modules(pytester, test_declared=DECLARED)


@pytest.mark.parametrize("n", ["2", "3"])
def test_a_documents_items_run_on_one_worker_in_file_order(
        pytester: pytest.Pytester, n: str) -> None:
    write_suite(pytester)
    for _ in range(2):
        result = runpytest(pytester, *base_args(), "-n", n, timeout=TIMEOUT)
        result.assert_outcomes(passed=21)
    result.stdout.fnmatch_lines(["dagorder: 2 documents (files of non-Python test items)*"])


def test_with_affinity_none_documents_are_not_kept_together(
        pytester: pytest.Pytester) -> None:
    # The user says the tests share no state: nothing holds a document together.
    write_suite(pytester)
    result = runpytest(pytester, *base_args(), "-n", "2", "--dag-affinity=none",
                       timeout=TIMEOUT)
    assert "documents (files of non-Python" not in result.stdout.str()


def test_document_files_are_the_files_of_items_without_a_module() -> None:
    ids = ["a.steps::x", "t.py::test_a", "a.steps::y", "b.txt::b.txt", "a.steps::z"]
    modules = [None, "t.py", None, None, None]
    assert document_files(modules, ids) == {"a.steps": [0, 2, 4]}
