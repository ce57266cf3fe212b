"""End to end: prerequisites the planner collects outside what the command line selected.

``pytest tests/unit --dag-with-prerequisites`` with a target in
``tests/integration``: that test must be collected as pytest would have
collected it: below the directory nodes of its path,
with every conftest.py on that path loaded, so its fixtures and its
``pytest_generate_tests`` apply.  Serially and under ``-n 2``.
"""

from __future__ import annotations

import textwrap

import pytest
from helpers import make_modules, read_log
from support.dagtester import DagTester


def write(pytester: pytest.Pytester, rel: str, source: str) -> None:
    path = pytester.path / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source), encoding="utf-8")


def layout(pytester: pytest.Pytester) -> None:
    """tests/conftest.py, tests/unit/conftest.py and tests/integration/conftest.py each
    give a fixture; the integration one also parametrizes ``flavor``."""
    write(pytester, "tests/conftest.py", """
        import pytest

        @pytest.fixture
        def top():
            return "top"
        """)
    write(pytester, "tests/integration/conftest.py", """
        import pytest

        @pytest.fixture
        def db(top):
            return "db+" + top

        def pytest_generate_tests(metafunc):
            if "flavor" in metafunc.fixturenames:
                metafunc.parametrize("flavor", ["pg", "lite"])
        """)
    write(pytester, "tests/unit/conftest.py", """
        import pytest

        @pytest.fixture
        def unit_helper(top):
            return "unit+" + top
        """)
    make_modules(
        pytester,
        tests__integration__test_store="""
            def test_store(db, flavor):
                mark("test_store-" + flavor)
                assert db == "db+top"
            """,
        tests__integration__test_more="""
            def test_more(db):
                mark("test_more")
                assert db == "db+top"
            """,
        tests__unit__test_sibling="""
            def test_sibling(unit_helper):
                mark("test_sibling")
                assert unit_helper == "unit+top"
            """,
        tests__unit__test_api="""
            @depends_on("tests/integration/test_store.py::test_store")
            def test_api():
                mark("test_api")


            @depends_on("tests/unit/test_sibling.py::test_sibling")
            def test_api_sibling():
                mark("test_api_sibling")


            # A second file in the same directory: the same conftest applies.
            @depends_on("tests/integration/test_more.py::test_more")
            def test_api_more():
                mark("test_api_more")
            """,
    )


EVERY_TEST = ["test_api", "test_api_more", "test_api_sibling", "test_more", "test_sibling",
              "test_store-lite", "test_store-pg"]


def test_a_prerequisite_in_another_directory_gets_its_conftests(
    pytester: pytest.Pytester, dagtester: DagTester
) -> None:
    layout(pytester)
    result = dagtester.run("tests/unit", "--dag-with-prerequisites", "-rs")
    result.assert_outcomes(passed=7)
    ran = read_log(pytester)
    assert sorted(ran) == EVERY_TEST
    for pre in ("test_store-lite", "test_store-pg"):
        assert ran["test_api"].start >= ran[pre].end


def test_a_prerequisite_in_an_unselected_sibling_file_gets_its_conftests(
    pytester: pytest.Pytester, dagtester: DagTester
) -> None:
    layout(pytester)
    result = dagtester.run("tests/unit/test_api.py", "--dag-with-prerequisites", "-rs")
    result.assert_outcomes(passed=7)
    assert sorted(read_log(pytester)) == EVERY_TEST


def test_a_broken_conftest_on_a_prerequisites_path_is_a_collection_error(
    pytester: pytest.Pytester, dagtester: DagTester
) -> None:
    layout(pytester)
    write(pytester, "tests/integration/conftest.py", "raise RuntimeError('conftest boom')\n")
    result = dagtester.run("tests/unit", "--dag-with-prerequisites")
    assert result.ret == 2
    assert read_log(pytester) == {}
    result.stdout.fnmatch_lines([
        "pytest-dagorder: @depends_on on tests/unit/test_api.py::test_api: target "
        "'tests/integration/test_store.py::test_store' is in tests/integration*, "
        "which cannot be collected (tests/integration/conftest.py: RuntimeError: conftest boom); "
        "fix that file or the target",
        "*Interrupted: 2 errors during collection*",  # test_api_more's target is there too
    ])
    out = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in out
