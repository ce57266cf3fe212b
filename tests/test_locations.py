"""``internals.fill_locations``: pytest's own locations, computed once per file.

Every item's filled location is compared with what pytest computes for it
afresh (the cached property's function, uncached), over the shapes a test
function can take: module and class tests, nested classes, parametrized,
decorated (wrapped or not), imported from another file, static methods,
unittest and doctest items.
"""

from __future__ import annotations

import gc

import pytest

from pytest_dagorder.shims.pytest_internals import fill_locations

SHARED = """
def test_imported():
    pass
"""

MODULE = """
import functools
import unittest

import pytest

from shared import test_imported


def test_plain():
    pass


@pytest.mark.parametrize("x", [1, 2])
def test_param(x):
    pass


def wrap(fn):
    @functools.wraps(fn)
    def inner(*a, **k):
        return fn(*a, **k)
    return inner


@wrap
def test_wrapped():
    pass


@pytest.mark.skip
def test_marked():
    pass


class TestOuter:
    def test_method(self):
        pass

    @staticmethod
    def test_static():
        pass

    class TestInner:
        def test_deep(self):
            pass


class TestCaseStyle(unittest.TestCase):
    def test_unittest(self):
        pass


def test_doc():
    '''
    >>> 1 + 1
    2
    '''
"""


def uncached_location(item: pytest.Item) -> tuple[str, int | None, str]:
    return pytest.Item.location.func(item)  # type: ignore[attr-defined, no-any-return]


def test_filled_locations_are_pytests_own(pytester: pytest.Pytester,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(shared=SHARED, test_module=MODULE)
    pytester.makepyfile(test_other="def test_a():\n    pass\n\ndef test_b():\n    pass\n")
    pytester.syspathinsert()
    items, _ = pytester.inline_genitems("--doctest-modules", "-p", "no:cacheprovider")
    names = sorted(it.name for it in items)
    assert "test_unittest" in names and "test_deep" in names and "test_imported" in names
    assert any("test_doc" in n and "::" not in n for n in (it.nodeid for it in items)) or any(
        type(it).__name__ == "DoctestItem" for it in items)

    for item in items:  # as a worker has them: located by nobody yet
        item.__dict__.pop("location", None)
    calls: list[str] = []
    original = pytest.Function.reportinfo

    def counting(self: pytest.Function) -> tuple[object, int | None, str]:
        calls.append(self.nodeid)
        return original(self)

    monkeypatch.setattr(pytest.Function, "reportinfo", counting)
    fill_locations(items)
    monkeypatch.undo()
    filled = {it.nodeid for it in items if "location" in vars(it)}

    for item in items:
        assert item.location == uncached_location(item), item.nodeid
    # pytest located one plain test per file of code, not every test: the
    # other plain tests of test_other.py and test_module.py were filled.
    other = [c for c in calls if c.startswith("test_other.py")]
    assert other == ["test_other.py::test_a"]
    module = [c for c in calls if c.startswith("test_module.py")]
    assert "test_module.py::test_plain" in module
    assert "test_module.py::TestOuter::test_method" not in module
    assert "test_module.py::test_param[2]" not in module
    assert "test_module.py::TestOuter::TestInner::test_deep" in filled
    # A wrapped function, a unittest or a doctest item is left for pytest to
    # locate when it runs.
    assert not {"test_module.py::test_wrapped", "test_module.py::TestCaseStyle::test_unittest",
                "test_module.py::test_module.test_doc"} & filled


def test_locations_are_stored_without_building_a_dict_per_test(
        pytester: pytest.Pytester) -> None:
    # Reading an item's __dict__ makes CPython build one dict object per
    # item: 20,000 more objects for every garbage collection pass on every
    # worker.  pytest builds it only for the tests a process runs.
    pytester.makepyfile(test_one="".join(f"def test_{i}():\n    pass\n\n" for i in range(60)))
    items, _ = pytester.inline_genitems("-p", "no:cacheprovider", "-p", "no:dagorder")
    gc.collect()
    before = sum(type(o) is dict for o in gc.get_objects())
    fill_locations(items)
    built = sum(type(o) is dict for o in gc.get_objects()) - before
    assert built < 10  # pytest's own location of the first test builds one
    assert [it.location for it in items] == [uncached_location(it) for it in items]


def test_a_test_object_that_cannot_be_had_is_left_to_pytest(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_one="def test_a():\n    pass\n\ndef test_b():\n    pass\n")
    items, _ = pytester.inline_genitems("-p", "no:cacheprovider")
    for item in items:
        item.__dict__.pop("location", None)

    def broken(self: pytest.Function) -> object:
        raise RuntimeError("no object")

    monkeypatch.setattr(pytest.Function, "obj", property(broken))
    fill_locations(items)  # no exception out of the planner's hook
    assert not any("location" in vars(it) for it in items)
