"""Suites written for pytest-dependency, pytest-depends and pytest-order, run unedited.

Scenarios follow each plugin's documented behaviour; every scenario runs
serially and under ``-n 2``, with every installed plugin loaded (the
module is marked ``autoload``).  The takeover is exercised twice: with
stand-ins registered under the originals' names (that one test turns plugin
autoload off, so it runs whether or not the originals are installed), and,
at the end of this file, with the real pytest-dependency, pytest-depends and
pytest-order when they are installed (the ``test`` extra installs them;
skipped otherwise).
"""

from __future__ import annotations

import importlib.util
import textwrap

import pytest
from helpers import junit_key
from support.dagtester import DagTester

#: The takeover is what this module tests: inner runs load every installed plugin;
#: every run writes the JUnit XML that :func:`check` reads.  No ini: a suite as
#: its authors left it (warnings are not errors).
pytestmark = [pytest.mark.autoload,
              pytest.mark.dagtester(ini=None,
                                    args=("--strict-markers", "-rs", "--junitxml=out.xml"))]

PRELUDE = """\
import os

import pytest

LOG = {log!r}


def mark(name):
    with open(LOG, "a") as f:
        f.write(f"{{name}} {{os.getpid()}} 0 0\\n")

"""


def write(dagtester: DagTester, **modules: str) -> None:
    """Test modules (``a__b`` = ``a/b``) with ``mark(name)`` to log what ran."""
    head = PRELUDE.format(log=str(dagtester.path / "ran.log"))
    for name, body in modules.items():
        path = dagtester.path / (name.replace("__", "/") + ".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(head + textwrap.dedent(body), encoding="utf-8")


def check(dagtester: DagTester, expected: dict[str, str]) -> dict[str, tuple[str, str]]:
    """``expected``: node id -> outcome, or ``skipped:<part of the reason>``."""
    got = dagtester.outcomes()
    for nodeid, want in expected.items():
        outcome, message = got[junit_key(nodeid)]
        kind, _, reason = want.partition(":")
        assert outcome == kind, (nodeid, outcome, message)
        assert reason in message, (nodeid, message)
    return got


# -- pytest-dependency ------------------------------------------------------------

DEPENDENCY_MODULE = """
@pytest.mark.dependency()
@pytest.mark.xfail(reason="deliberate fail")
def test_a():
    assert False


@pytest.mark.dependency()
def test_b():
    mark("b")


@pytest.mark.dependency(depends=["test_a"])
def test_c():
    mark("c")


@pytest.mark.dependency(depends=["test_b"])
def test_d():
    mark("d")


@pytest.mark.dependency(depends=["test_b", "test_c"])
def test_e():
    mark("e")


@pytest.mark.dependency(depends=["later"])  # declared before its prerequisite
def test_early():
    mark("early")


@pytest.mark.dependency(name="later")
def test_named():
    mark("named")


@pytest.mark.dependency
class TestBox:
    def test_put(self):
        mark("put")

    @pytest.mark.dependency(depends=["TestBox::test_put"])   # module-scope name
    def test_get(self):
        mark("get")

    @pytest.mark.dependency(depends=["test_put"], scope="class")
    def test_peek(self):
        mark("peek")

    @pytest.mark.xfail(reason="deliberate fail")
    def test_broken(self):
        assert False

    @pytest.mark.dependency(depends=["test_broken"], scope="class")
    def test_after_broken(self):
        mark("after_broken")


@pytest.mark.parametrize("x", [
    pytest.param(1, marks=pytest.mark.dependency(name="one")),
    pytest.param(0, marks=[pytest.mark.dependency(name="zero"),
                           pytest.mark.xfail(reason="zero")]),
])
def test_param(x):
    assert x


@pytest.mark.dependency(depends=["one"])
def test_needs_one():
    mark("needs_one")


@pytest.mark.dependency(depends=["zero"])
def test_needs_zero():
    mark("needs_zero")


@pytest.mark.dependency()
@pytest.mark.parametrize("n", [1, 2])
def test_inst(n):
    pass


@pytest.mark.dependency(depends=["test_inst[2]"])
def test_needs_inst2():
    mark("needs_inst2")


def test_unmarked():
    mark("unmarked")


@pytest.mark.dependency(depends=["test_unmarked"])
def test_needs_unmarked():
    mark("needs_unmarked")
"""


def test_dependency_module_and_class_scope(dagtester: DagTester) -> None:
    write(dagtester, test_dep=DEPENDENCY_MODULE)
    result = dagtester.run()
    m = "test_dep.py::"
    check(dagtester, {
        m + "test_b": "passed",
        m + "test_c": "skipped:test_a",
        m + "test_d": "passed",
        m + "test_e": "skipped:test_c",
        m + "test_early": "passed",
        m + "TestBox::test_get": "passed",
        m + "TestBox::test_peek": "passed",
        m + "TestBox::test_after_broken": "skipped:test_broken",
        m + "test_needs_one": "passed",
        m + "test_needs_zero": "skipped:test_param[0]",
        m + "test_needs_inst2": "passed",
        m + "test_needs_unmarked": "skipped:not marked with @pytest.mark.dependency",
    })
    result.assert_outcomes(passed=13, skipped=5, xfailed=3)
    assert "needs_unmarked" not in dagtester.ran()


def test_dependency_session_and_package_scope(dagtester: DagTester) -> None:
    (dagtester.path / "pkg").mkdir()
    (dagtester.path / "pkg" / "__init__.py").write_text("", encoding="utf-8")
    write(
        dagtester,
        pkg__test_one="""
            @pytest.mark.dependency()
            def test_a():
                mark("a")

            @pytest.mark.dependency()
            def test_b():
                assert False

            class TestClass:
                @pytest.mark.dependency()
                def test_b(self):
                    mark("cls_b")
            """,
        pkg__test_two="""
            @pytest.mark.dependency(depends=["pkg/test_one.py::test_a"], scope="package")
            def test_pkg():
                mark("pkg")
            """,
        test_top="""
            @pytest.mark.dependency(depends=["pkg/test_one.py::test_a"], scope="session")
            def test_e():
                mark("e")

            @pytest.mark.dependency(depends=["pkg/test_one.py::test_b"], scope="session")
            def test_f():
                mark("f")

            @pytest.mark.dependency(depends=["pkg/test_one.py::TestClass::test_b"],
                                    scope="session")
            def test_g():
                mark("g")
            """,
    )
    # Reversed on the command line: the order must come from the edges.
    result = dagtester.run("test_top.py", "pkg")
    check(dagtester, {
        "pkg/test_two.py::test_pkg": "passed",
        "test_top.py::test_e": "passed",
        "test_top.py::test_f": "skipped:test_b",
        "test_top.py::test_g": "passed",
    })
    result.assert_outcomes(passed=5, failed=1, skipped=1)


@pytest.mark.dag_modes("serial")
def test_dependency_automark_and_ignore_unknown(dagtester: DagTester) -> None:
    write(dagtester, test_auto="""
        def test_plain():
            mark("plain")

        @pytest.mark.dependency(depends=["test_plain"])
        def test_dependent():
            mark("dependent")
        """)
    dagtester.ini("automark_dependency = true\n")
    dagtester.run().assert_outcomes(passed=2)

    dagtester.ini()
    # Not selected: skipped by default, ignored with the option (documented use).
    dagtester.run("-k", "dependent", "--ignore-unknown-dependency")
    check(dagtester, {"test_auto.py::test_dependent": "passed"})
    result = dagtester.run("-k", "dependent", "-o", "automark_dependency=true")
    check(dagtester, {"test_auto.py::test_dependent": "skipped:test_plain"})
    result.assert_outcomes(skipped=1)
    # Unmarked and no automark: skipped, or ignored with the option.
    dagtester.run("--ignore-unknown-dependency").assert_outcomes(passed=2)


# -- pytest-depends -----------------------------------------------------------------

DEPENDS_MODULES = {
    "test_build": """
        def test_build_exists():
            mark("exists")

        @pytest.mark.depends(on=["test_build_exists"])
        def test_version():
            mark("version")

        @pytest.mark.depends(on="test_version")             # a lone string
        @pytest.mark.depends(on=["test_fails"])             # several markers add up
        def test_both():
            mark("both")

        def test_fails():
            assert False

        @pytest.mark.depends(name="p_ok")
        @pytest.mark.parametrize("x", [
            1,
            pytest.param(0, marks=pytest.mark.depends(name="p_bad")),
        ])
        def test_p(x):
            assert x

        @pytest.mark.depends(on=["p_bad"])
        def test_needs_bad():
            mark("needs_bad")

        @pytest.mark.depends(on=["test_p[1]"])
        def test_needs_p1():
            mark("needs_p1")

        class TestGroup:
            def test_one(self):
                mark("one")

            @pytest.mark.depends(on=["test_one"])           # same class
            def test_two(self):
                mark("two")
        """,
    "test_use": """
        @pytest.mark.depends(on=["test_build.py"])          # a whole file
        def test_needs_file():
            mark("needs_file")

        @pytest.mark.depends(on=["test_build.py::TestGroup"])   # a class
        def test_needs_class():
            mark("needs_class")

        @pytest.mark.depends(on=["test_build.py::test_version"])
        def test_needs_version():
            mark("needs_version")
        """,
}


def test_depends(dagtester: DagTester) -> None:
    write(dagtester, **DEPENDS_MODULES)
    result = dagtester.run("test_use.py", "test_build.py")
    b, u = "test_build.py::", "test_use.py::"
    check(dagtester, {
        b + "test_version": "passed",
        b + "test_both": "skipped:test_fails",
        b + "test_needs_bad": "skipped:test_p[0]",
        b + "test_needs_p1": "passed",
        b + "TestGroup::test_two": "passed",
        u + "test_needs_file": "skipped:",
        u + "test_needs_class": "passed",
        u + "test_needs_version": "passed",
    })
    result.assert_outcomes(passed=8, failed=2, skipped=3)


# -- pytest-order -------------------------------------------------------------------

ORDER_MODULE = """
@pytest.mark.order("last")
def test_z_last():
    mark("last")


def test_plain_1():
    mark("plain_1")


@pytest.mark.order(after="test_cleanup_target")
def test_after_failure():
    mark("after_failure")


def test_cleanup_target():
    mark("cleanup_target")
    assert False


@pytest.mark.order(index=1)
def test_second():
    mark("second")


@pytest.mark.order(0)
def test_first():
    mark("first")


@pytest.mark.order(before=["TestLate", "test_plain_1"])
def test_before_class():
    mark("before_class")


class TestLate:
    def test_m(self):
        mark("m")


@pytest.mark.order(after="test_p")
def test_after_all_params():
    mark("after_params")


@pytest.mark.parametrize("n", [1, 2])
def test_p(n):
    mark(f"p{n}")
"""


@pytest.mark.dag_modes("serial")
def test_order_serial_sequence(dagtester: DagTester) -> None:
    write(dagtester, test_ord=ORDER_MODULE)
    dagtester.run().assert_outcomes(passed=10, failed=1)
    ran = list(dagtester.ran())
    assert ran[:2] == ["first", "second"]
    assert ran[-1] == "last"
    for pre, dep in [("cleanup_target", "after_failure"), ("before_class", "m"),
                     ("before_class", "plain_1"), ("p1", "after_params"),
                     ("p2", "after_params")]:
        assert ran.index(pre) < ran.index(dep), (pre, dep, ran)


@pytest.mark.dag_modes("xdist")
def test_order_xdist_ordering_only(dagtester: DagTester) -> None:
    write(dagtester, test_ord=ORDER_MODULE)
    result = dagtester.run()
    # Ordering-only edges: a failed target does not skip the test after it.
    check(dagtester, {"test_ord.py::test_after_failure": "passed"})
    result.assert_outcomes(passed=10, failed=1)


@pytest.mark.dag_modes("serial")
def test_order_ordinals_yield_to_dependencies(dagtester: DagTester) -> None:
    write(dagtester, test_mix="""
        @pytest.mark.dependency()
        def test_base():
            mark("base")

        @pytest.mark.order("first")
        @pytest.mark.dependency(depends=["test_base"])
        def test_wants_first():
            mark("wants_first")

        @pytest.mark.order(-2)
        def test_almost_last():
            mark("almost_last")

        def test_middle():
            mark("middle")
        """)
    dagtester.run().assert_outcomes(passed=4)
    assert list(dagtester.ran()) == ["base", "wants_first", "middle", "almost_last"]


def test_self_references_as_the_originals_take_them(dagtester: DagTester) -> None:
    # Seen in public suites: pytest-order ignores a test placed after (or
    # before) itself; pytest-dependency skips a test that depends on itself
    # (it has no outcome yet when its own is looked up), and so its
    # dependents, and one whose depends= is a string.
    write(dagtester, test_self="""
        def test_a():
            mark("a")

        @pytest.mark.order(after="test_b")
        def test_b():
            mark("b")

        @pytest.mark.order(before=["test_c", "test_a"])
        def test_c():
            mark("c")

        @pytest.mark.dependency(depends=["test_d"])
        def test_d():
            mark("d")

        @pytest.mark.dependency(depends=["test_d"])
        def test_e():
            mark("e")

        @pytest.mark.dependency(depends="test_a")
        def test_f():
            mark("f")
        """)
    result = dagtester.run()
    check(dagtester, {
        "test_self.py::test_a": "passed",
        "test_self.py::test_b": "passed",
        "test_self.py::test_c": "passed",
        "test_self.py::test_d": "skipped:test_d depends on 'test_d', itself",
        "test_self.py::test_e": "skipped:test_d",
        # A string is read letter by letter there: always skipped.
        "test_self.py::test_f": "skipped:test_f has depends='test_a', a string",
    })
    result.assert_outcomes(passed=3, skipped=3)
    ran = list(dagtester.ran())
    assert sorted(ran) == ["a", "b", "c"]
    if dagtester.mode == "serial":
        assert ran == ["c", "a", "b"]  # test_c's own name ignored, test_a still after it


def test_dependency_cycles_skip_as_in_pytest_dependency(
    dagtester: DagTester
) -> None:
    # pytest-dependency never reorders: on a cycle the test whose prerequisite
    # comes later is skipped, then the rest of the cycle behind it.  A cycle
    # that needs a depends_on edge is still a collection error.
    write(dagtester, test_cyc="""
        @pytest.mark.dependency(depends=["test_y", "test_y"])
        def test_x():
            mark("x")

        @pytest.mark.dependency(depends=["test_z"])
        def test_y():
            mark("y")

        @pytest.mark.dependency(depends=["test_x"])
        def test_z():
            mark("z")

        @pytest.mark.dependency()
        def test_free():
            mark("free")

        @pytest.mark.dependency(depends=["test_free"])
        def test_after_free():
            mark("after_free")
        """)
    result = dagtester.run()
    check(dagtester, {
        "test_cyc.py::test_x": "skipped:test_x depends on test_cyc.py::test_y, which comes "
                               "after it on a dependency cycle (test_cyc.py::test_x -> "
                               "test_cyc.py::test_y -> test_cyc.py::test_z -> test_cyc.py::test_x)",
        "test_cyc.py::test_y": "skipped:test_y depends on test_cyc.py::test_z",
        "test_cyc.py::test_z": "skipped:test_x",
        "test_cyc.py::test_free": "passed",
        "test_cyc.py::test_after_free": "passed",
    })
    result.assert_outcomes(passed=2, skipped=3)
    assert sorted(dagtester.ran()) == ["after_free", "free"]

    write(dagtester, test_cyc="""
        from pytest_dagorder import depends_on

        @pytest.mark.dependency(depends=["test_y"])
        def test_x():
            mark("x")

        @depends_on("test_x")
        @pytest.mark.dependency()
        def test_y():
            mark("y")
        """)
    result = dagtester.run()
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*dependency cycle: test_cyc.py::test_x -> test_cyc.py::test_y*"])
    assert not list(dagtester.ran())


def test_arguments_the_originals_ignore_are_ignored_with_a_warning(
    dagtester: DagTester
) -> None:
    # Seen in a public suite: depends=[...], force=True.  pytest-dependency
    # and pytest-depends read their own keywords and let anything else pass.
    write(dagtester, test_extra="""
        @pytest.mark.dependency()
        def test_main():
            mark("main")

        @pytest.mark.dependency("stray", depends=["test_main"], force=True)
        def test_delete():
            mark("delete")

        @pytest.mark.depends(on=["test_main"], strict=True)
        def test_follow():
            mark("follow")
        """)
    result = dagtester.run("-W", "always::pytest.PytestWarning")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines([
        "*test_extra.py:*: PytestWarning: @pytest.mark.dependency on test_extra.py::test_delete: "
        "unexpected arguments 'stray', force ignored, as pytest-dependency ignores them*",
        "*test_extra.py:*: PytestWarning: @pytest.mark.depends on test_extra.py::test_follow: "
        "unexpected argument strict ignored, as pytest-depends ignores it*",
    ], consecutive=False)
    # Once, however many workers collected the tests.
    summary = result.stdout.str().split("warnings summary")[-1]
    assert summary.count("test_delete: unexpected arguments") == 1, summary
    places = [ln for ln in result.outlines if ln.startswith("test_extra.py:")]
    assert len(places) == len(set(places)) == 2, summary
    ran = list(dagtester.ran())
    assert ran.index("main") < ran.index("delete") and ran.index("main") < ran.index("follow")

    # Warnings made errors (filterwarnings = error is common): a collection
    # error naming each test, nothing run, no internal error.
    # Only these warnings: an in-process run may also warn that pytest_dagorder
    # was imported before assertion rewriting could see it.
    result = dagtester.run("-W", "error:@pytest.mark:pytest.PytestWarning")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines([
        "*dependency on test_extra.py::test_delete: unexpected arguments*"
        "(a warning, made an error by the warning filters)*",
        "*Interrupted: 2 errors during collection*",
    ], consecutive=False)
    result.stdout.no_fnmatch_line("*INTERNALERROR*")
    assert not (dagtester.path / "ran.log").exists()


# -- malformed declarations: collection errors, nothing runs -------------------------

MALFORMED = """
@pytest.mark.dependency(depends=["test_nope"])
def test_unknown():
    mark("x")

@pytest.mark.dependency(depends=["test_ok"], scope="galaxy")
def test_bad_scope():
    mark("x")

@pytest.mark.dependency(depends=["test_ok"], scope="class")
def test_class_scope_outside_class():
    mark("x")

@pytest.mark.depends(on=["test_okk"])
def test_depends_unknown():
    mark("x")

@pytest.mark.depends(on=[3])
def test_depends_bad():
    mark("x")

@pytest.mark.order("soon")
def test_bad_ordinal():
    mark("x")

@pytest.mark.order(after="test_ghost")
def test_order_unknown():
    mark("x")

@pytest.mark.dependency()
def test_ok():
    mark("ok")
"""


def test_malformed_declarations_are_collection_errors(
    dagtester: DagTester
) -> None:
    write(dagtester, test_bad=MALFORMED)
    result = dagtester.run()
    assert result.ret == pytest.ExitCode.INTERRUPTED
    # Names that match nothing skip (pytest-dependency, pytest-depends) or
    # warn (pytest-order, whose sorter reports them): no errors; see test_dropin.py.
    for line in [
        "*dependency on test_bad.py::test_bad_scope: scope='galaxy' is not one of*",
        "*test_class_scope_outside_class: scope='class' but the test is not in a class*",
        "*depends on test_bad.py::test_depends_bad: on=?3? must be a test name*",
        "*Interrupted: 3 errors during collection*",
    ]:
        result.stdout.fnmatch_lines([line])
    assert "test_nope" not in result.stdout.str()
    assert "Traceback" not in result.stdout.str()
    assert dagtester.ran() == {}


UNREADABLE_ORDER = """
@pytest.mark.order("soon")
def test_bad_ordinal():
    mark("x")

def test_other():
    mark("other")
"""


def test_an_order_marker_its_sorter_cannot_read_under_warnings_as_errors(
    dagtester: DagTester
) -> None:
    """pytest-order's sorter warns of an order it cannot read; where warnings are
    errors, pytest-order alone ends in an internal error.  Here: a usage error
    naming the test, nothing run."""
    pytest.importorskip("pytest_order")
    dagtester.ini()  # warnings are errors
    write(dagtester, test_order_bad=UNREADABLE_ORDER)
    result = dagtester.run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*pytest-order could not read an order marker: "
                                 "Unknown order attribute:'soon' (an order marker of "
                                 "test_order_bad.py::test_bad_ordinal)*"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    assert dagtester.ran() == {}


# -- coexistence: the originals are blocked, one header line says so -------------------

FAKE_DEPENDENCY = '''
"""Stand-in for pytest-dependency: its option names, its result store, depends()."""
import pytest

SCOPES = {"session": pytest.Session, "package": pytest.Package,
          "module": pytest.Module, "class": pytest.Class}


class DependencyManager:
    @classmethod
    def get_manager(cls, item, scope):
        node = item.getparent(SCOPES[scope])
        if node is None:
            return None
        if not hasattr(node, "dependency_manager"):
            node.dependency_manager = cls(scope)
        return node.dependency_manager

    def __init__(self, scope):
        self.scope = scope
        self.results = {}

    def add_result(self, item, name, rep):
        if name is None:
            name = item.nodeid if self.scope == "session" else item.nodeid.split("::", 1)[1]
        self.results.setdefault(name, {})[rep.when] = rep.outcome


def depends(request, other, scope="module"):
    manager = DependencyManager.get_manager(request.node, scope)
    for name in other:
        phases = manager.results.get(name, {})
        if [phases.get(w) for w in ("setup", "call", "teardown")] != ["passed"] * 3:
            pytest.skip(f"{request.node.name} depends on {name}")


def pytest_addoption(parser):
    parser.addini("automark_dependency", "", type="bool", default=False)
    parser.addoption("--ignore-unknown-dependency", action="store_true", default=False)


def pytest_runtest_setup(item):
    pytest.fail("the original pytest-dependency acted")
'''

TAKEOVER_CONFTEST = """
import pytest

pytest_plugins = ["pytest_dependency"]


class Original:
    def pytest_runtest_setup(self, item):
        pytest.fail("an original plugin acted")

    def pytest_collection_modifyitems(self, items):
        items.reverse()


def pytest_configure(config):
    config.pluginmanager.register(Original(), "depends")
    # pytest-order registers its sorter from its own pytest_configure.
    config.pluginmanager.register(Original(), "orderingplugin")
"""


@pytest.mark.dag_modes("serial")
def test_takeover_of_installed_originals(
    dagtester: DagTester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Autoload off: the real originals, if installed, must not load next to
    # the stand-ins (the stand-in module shadows the real pytest_dependency).
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    dagtester.pytester.makepyfile(pytest_dependency=FAKE_DEPENDENCY, conftest=TAKEOVER_CONFTEST)
    write(dagtester, test_take="""
        from pytest_dependency import depends

        @pytest.mark.dependency()
        def test_a():
            mark("a")

        @pytest.mark.dependency()
        def test_fails():
            assert False

        @pytest.mark.depends(on=["test_a"])
        def test_b(request):
            depends(request, ["test_a"])       # runtime check, in-process
            mark("b")

        def test_c(request):
            depends(request, ["test_fails"])
            mark("c")

        @pytest.mark.order("first")
        def test_first():
            mark("first")
        """)
    result = dagtester.run("-p", "dagorder", "--ignore-unknown-dependency")
    result.stdout.fnmatch_lines([
        "dagorder: took over from pytest-dependency, pytest-depends, pytest-order: *"
    ])
    check(dagtester, {
        "test_take.py::test_b": "passed",
        "test_take.py::test_c": "skipped:test_c depends on test_fails",
    })
    result.assert_outcomes(passed=3, failed=1, skipped=1)
    assert next(iter(dagtester.ran())) == "first"


NO_ORIGINALS = ("-p", "no:dependency", "-p", "no:depends", "-p", "no:pytest_order")


@pytest.mark.dag_modes("serial")
def test_no_header_line_without_originals(dagtester: DagTester) -> None:
    write(dagtester, test_x="""
        @pytest.mark.dependency()
        def test_a():
            pass
        """)
    # The originals may be installed: switched off, nothing is taken over.
    result = dagtester.run(*NO_ORIGINALS)
    result.assert_outcomes(passed=1)
    assert "took over" not in result.stdout.str()


def test_depends_options_without_pytest_depends(dagtester: DagTester) -> None:
    # A team that uninstalled pytest-depends keeps its configuration: its ini
    # keys and flags are defined here then, and keep their meaning.
    write(dagtester, test_dps="""
        def test_a():
            assert False

        @pytest.mark.depends(on=["test_a"])
        def test_b():
            mark("b")

        @pytest.mark.depends(on=["test_nope"])
        def test_c():
            mark("c")
        """)
    dagtester.pytester.makeini("[pytest]\nfailed_dependency_action = run\n")
    result = dagtester.run(*NO_ORIGINALS, "--strict-config",
                 "--missing-dependency-action=fail")
    check(dagtester, {
        "test_dps.py::test_a": "failed",
        "test_dps.py::test_b": "passed",  # run: the failed dependency only orders
        "test_dps.py::test_c": "failed:depends on test_nope, which was not found",
    })
    result.assert_outcomes(passed=1, failed=2)
    result = dagtester.run(*NO_ORIGINALS, "--list-processed-dependencies", mode="serial")
    result.stdout.fnmatch_lines(["Dependencies:", "  test_dps.py::test_b depends on",
                                 "    test_dps.py::test_a"])


# -- the real originals installed: takeover, and none of their hooks acts ------------

REAL_MODULES = {
    "pytest-dependency": "pytest_dependency",
    "pytest-depends": "pytest_depends",
    "pytest-order": "pytest_order",
}
INSTALLED = [label for label, mod in REAL_MODULES.items() if importlib.util.find_spec(mod)]


def needs(*labels: str) -> pytest.MarkDecorator:
    """Skip unless the real originals named are installed (the ``test`` extra has them)."""
    missing = [label for label in labels if label not in INSTALLED]
    return pytest.mark.skipif(bool(missing), reason=f"{', '.join(missing)} not installed")


# Written by every process (controller, workers) at the start and end of the
# session: which plugins of the originals are registered, and which hook
# implementations of theirs any hook would call.
HOOK_PROBE = """
import os

import pytest

ORIGINALS = ("pytest_dependency", "pytest_depends", "pytest_order")
PROBE = {probe!r}


def _theirs(pm):
    found = set()
    for name, plugin in pm.list_name_plugin():
        if plugin is None:
            continue
        module = getattr(plugin, "__name__", None) or type(plugin).__module__
        if module.split(".")[0] in ORIGINALS:
            found.add(f"plugin {{name}}")
    for hook_name in dir(pm.hook):
        caller = getattr(pm.hook, hook_name)
        for impl in getattr(caller, "get_hookimpls", lambda: [])():
            module = getattr(impl.plugin, "__name__", None) or type(impl.plugin).__module__
            if module.split(".")[0] in ORIGINALS:
                found.add(f"hook {{hook_name}} of {{impl.plugin_name}}")
    return sorted(found)


def _probe(session, when):
    role = "worker" if hasattr(session.config, "workerinput") else "main"
    with open(PROBE, "a") as f:
        f.write(f"{{when}} {{role}} {{os.getpid()}} {{_theirs(session.config.pluginmanager)}}\\n")


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session):
    _probe(session, "start")


def pytest_sessionfinish(session):
    _probe(session, "finish")
"""


def probe_conftest(dagtester: DagTester) -> None:
    probe = dagtester.path / "probe.log"
    (dagtester.path / "conftest.py").write_text(
        textwrap.dedent(HOOK_PROBE.format(probe=str(probe))), encoding="utf-8"
    )


def assert_no_original_acts(dagtester: DagTester) -> None:
    lines = (dagtester.path / "probe.log").read_text(encoding="utf-8").splitlines()
    roles = [line.split()[1] for line in lines]
    assert roles.count("main") == 2, lines
    if dagtester.mode != "serial":
        assert roles.count("worker") == 2 * 2, lines
    for line in lines:
        assert line.endswith(" []"), line


REAL_TAKEOVER = """
@pytest.mark.dependency()
def test_a():
    mark("a")


@pytest.mark.dependency()
def test_fails():
    assert False


@pytest.mark.dependency(depends=["test_late"])      # declared before its prerequisite
def test_early():
    mark("early")


@pytest.mark.dependency()
def test_late():
    mark("late")


@pytest.mark.dependency()
@pytest.mark.parametrize("n", [1, 2])
def test_p(n):
    mark(f"p{n}")


@pytest.mark.dependency(depends=["test_p"])          # base name: pytest-dependency skips
def test_needs_all_p():
    mark("needs_all_p")


@pytest.mark.depends(on=["test_a"])
def test_depends_a():
    mark("depends_a")


@pytest.mark.depends(on=["test_fails"])
def test_depends_fails():
    mark("depends_fails")


@pytest.mark.order(after="test_fails")
def test_order_after_fails():
    mark("order_after_fails")


@pytest.mark.order(1)
@pytest.mark.order(2)                                 # pytest-order parametrizes: so do we
def test_two_ordinals(request):
    mark(request.node.name)


@pytest.mark.order("last")
def test_last():
    mark("last")
"""


@needs(*INSTALLED or ["pytest-dependency"])
def test_real_originals_are_taken_over(dagtester: DagTester) -> None:
    write(dagtester, test_take=REAL_TAKEOVER)
    probe_conftest(dagtester)
    result = dagtester.run()
    out = result.stdout.str()
    assert out.count("dagorder: took over from") == 1, out
    result.stdout.fnmatch_lines([
        f"dagorder: took over from {', '.join(INSTALLED)}: their markers are read by "
        "pytest-dagorder, their plugins are disabled"
    ])
    m = "test_take.py::"
    check(dagtester, {
        m + "test_early": "passed",
        m + "test_needs_all_p": "skipped:which names no test of this run",
        m + "test_depends_a": "passed",
        m + "test_depends_fails": "skipped:test_fails",
        m + "test_order_after_fails": "passed",
        m + "test_two_ordinals[index=1]": "passed",
        m + "test_two_ordinals[index=2]": "passed",
    })
    result.assert_outcomes(passed=10, failed=1, skipped=2)
    assert_no_original_acts(dagtester)
    if dagtester.mode == "serial":
        assert list(dagtester.ran())[-1] == "last"


@needs("pytest-dependency", "pytest-depends")
def test_real_originals_do_not_skip(dagtester: DagTester) -> None:
    """With ``--dag-on-failure=run`` nobody skips: both originals would."""
    write(
        dagtester,
        test_run="""
            @pytest.mark.dependency()
            def test_fails():
                assert False

            @pytest.mark.dependency(depends=["test_fails"])
            def test_dependency_dependent():
                mark("dependency_dependent")

            @pytest.mark.depends(on=["test_fails"])
            def test_depends_dependent():
                mark("depends_dependent")
            """,
        test_unresolved="""
            @pytest.mark.depends(on=["test_nowhere.py::test_x"])
            def test_never():
                mark("never")
            """,
    )
    # pytest-depends skips on an unresolved name at run time: so do we.
    result = dagtester.run("test_unresolved.py")
    check(dagtester, {"test_unresolved.py::test_never":
                     "skipped:depends on 'test_nowhere.py::test_x', which names no test"})
    result = dagtester.run("--dag-on-failure=run", "test_run.py")
    result.assert_outcomes(passed=2, failed=1)
    assert {"dependency_dependent", "depends_dependent"} <= set(dagtester.ran())


@pytest.mark.dag_modes("serial")
@needs("pytest-dependency")
def test_real_dependency_options(dagtester: DagTester) -> None:
    """Its options exist once, whoever defines them; -p no:dagorder gives it back."""
    write(dagtester, test_opt="""
        @pytest.mark.dependency(depends=["test_late"])
        def test_early():
            mark("early")

        @pytest.mark.dependency()
        def test_late():
            mark("late")

        def test_plain():
            mark("plain")

        @pytest.mark.dependency(depends=["test_plain"])
        def test_needs_plain():
            mark("needs_plain")
        """)
    # Defined by pytest-dependency, read by pytest-dagorder.
    dagtester.run("--ignore-unknown-dependency").assert_outcomes(passed=4)
    dagtester.run("-o", "automark_dependency=true").assert_outcomes(passed=4)
    # pytest-dependency switched off: pytest-dagorder defines them itself.
    result = dagtester.run("-p", "no:dependency", "--ignore-unknown-dependency")
    result.assert_outcomes(passed=4)
    assert "took over from pytest-dependency" not in result.stdout.str()
    # pytest-dagorder switched off: the original acts alone, and does not reorder.
    result = dagtester.run("-p", "no:dagorder", "-p", "no:pytest_order")
    check(dagtester, {"test_opt.py::test_early": "skipped:test_early depends on test_late"})
    assert "dagorder" not in result.stdout.str()


@pytest.mark.dag_modes("serial")
@needs("pytest-order")
def test_real_order_options_are_honoured(dagtester: DagTester) -> None:
    write(dagtester, test_ign="""
        @pytest.mark.order(2)
        def test_b():
            mark("b")

        @pytest.mark.order(1)
        def test_a():
            mark("a")
        """)
    result = dagtester.run("--order-scope=module", "--sparse-ordering")
    # pytest-order's sorter honours them (migration/sorting.py): none is ignored.
    assert "ignored options" not in result.stdout.str()
    result.assert_outcomes(passed=2)
    assert list(dagtester.ran()) == ["a", "b"]


# -- pytest-dependency's runtime depends(request, [...]) ------------------------------

BUSY = """
import time


@pytest.mark.parametrize("k", range(8))
def test_busy(k):
    time.sleep(0.05)
"""

RUNTIME_GROUP = """
from pytest_dependency import depends

STATE = {}


@pytest.mark.dependency()
def test_a():
    STATE["a"] = os.getpid()
    mark("a")


@pytest.mark.order(after="test_a")          # an edge: same affinity group as test_a
def test_b(request):
    depends(request, ["test_a"])
    assert STATE["a"] == os.getpid()
    mark("b")


@pytest.mark.dependency(depends=["test_a"])
def test_c(request):
    depends(request, ["test_a"])
    mark("c")


@pytest.mark.dependency()
def test_broken():
    assert False


@pytest.mark.order(after="test_broken")
def test_needs_broken(request):
    depends(request, ["test_broken"])
    mark("needs_broken")
"""


@needs("pytest-dependency")
# Under xdist on four workers: a group split by chance would rarely come together.
# One run is enough: with the group split (--dag-affinity=none) test_b and test_c
# are skipped in every run (4 of 4 tried).
@pytest.mark.dag_modes("serial", "xdist4")
def test_runtime_depends_in_one_affinity_group(dagtester: DagTester) -> None:
    write(dagtester, test_rt=RUNTIME_GROUP, test_busy1=BUSY, test_busy2=BUSY)
    result = dagtester.run()
    m = "test_rt.py::"
    check(dagtester, {
        m + "test_b": "passed",
        m + "test_c": "passed",
        m + "test_needs_broken":
            "skipped:test_needs_broken depends on test_broken, which did not pass "
            "(call failed)",
    })
    result.assert_outcomes(passed=19, failed=1, skipped=1)
    pids = {name: int(line.split()[1]) for name, line in _raw_log(dagtester).items()}
    assert pids["a"] == pids["b"] == pids["c"], pids


def _raw_log(dagtester: DagTester) -> dict[str, str]:
    path = dagtester.path / "ran.log"
    return {line.split()[0]: line for line in path.read_text(encoding="utf-8").splitlines()}


@needs("pytest-dependency")
def test_runtime_depends_on_a_test_of_another_module_scope(
    dagtester: DagTester
) -> None:
    write(
        dagtester,
        test_one="""
            @pytest.mark.dependency()
            def test_a():
                mark("a")
            """,
        test_two="""
            from pytest_dependency import depends

            @pytest.mark.order(after="test_one.py::test_a")
            def test_module_scope(request):
                depends(request, ["test_a"])              # module scope: not this module's
                mark("module_scope")

            def test_later(request):
                depends(request, ["test_z"])
                mark("later")

            @pytest.mark.dependency()
            def test_z():
                mark("z")
            """,
    )
    result = dagtester.run()
    reason = "which names no test of this run marked with @pytest.mark.dependency in its module"
    check(dagtester, {"test_two.py::test_module_scope": f"skipped:test_module_scope depends on "
                                                       f"test_a, {reason}"})
    if dagtester.mode == "serial":
        check(dagtester, {"test_two.py::test_later":
                         "skipped:test_later depends on test_z, which has not run yet: a "
                         "runtime depends() does not order tests"})
    result.stdout.fnmatch_lines(["SKIPPED [[]1[]] test_two.py:*: test_module_scope depends on*"])


NOT_HERE = (
    "did not run in this worker process before it: a runtime depends() sees only tests of "
    "{name}'s own affinity group"
)


@pytest.mark.dag_modes("xdist")
@needs("pytest-dependency")
def test_runtime_depends_on_a_test_running_elsewhere(dagtester: DagTester) -> None:
    """The named test runs at the same time on the other worker: no result here."""
    started = dagtester.path / "started"
    write(
        dagtester,
        test_slow=f"""
            import time

            @pytest.mark.dependency()
            def test_slow():
                open({str(started)!r}, "w").close()
                time.sleep(1.0)
                mark("slow")
            """,
        test_fast=f"""
            import time
            from pytest_dependency import depends

            def test_fast(request):
                deadline = time.time() + 10
                while not os.path.exists({str(started)!r}) and time.time() < deadline:
                    time.sleep(0.01)
                depends(request, ["test_slow.py::test_slow"], scope="session")
                mark("fast")
            """,
    )
    result = dagtester.run()
    check(dagtester, {"test_fast.py::test_fast":
                     "skipped:test_fast depends on test_slow.py::test_slow, which "
                     + NOT_HERE.format(name="test_fast") + " (--dag-affinity=state)"})
    result.assert_outcomes(passed=1, skipped=1)


@pytest.mark.dag_modes("xdist4")
@needs("pytest-dependency")
def test_runtime_depends_without_affinity(dagtester: DagTester) -> None:
    """--dag-affinity=none: the dependent passes only if it landed on the same worker."""
    write(dagtester, test_rt=RUNTIME_GROUP, test_busy1=BUSY, test_busy2=BUSY)
    # One run: test_runtime_depends_in_one_affinity_group's note says with the
    # group split test_b and test_c are skipped in every run (4 of 4 tried).
    dagtester.run("--dag-affinity=none")
    got = dagtester.outcomes()
    log = _raw_log(dagtester)
    pid_a = int(log["a"].split()[1])
    for name in ("test_b", "test_c"):
        outcome, message = got[junit_key(f"test_rt.py::{name}")]
        short = name.removeprefix("test_")
        if short in log:
            assert outcome == "passed" and int(log[short].split()[1]) == pid_a, (name, log)
        else:
            assert outcome == "skipped", (name, outcome, message)
            assert message == (
                f"{name} depends on test_a, which " + NOT_HERE.format(name=name)
                + " (--dag-affinity=none) that an edge runs first; declare the "
                "dependency with @pytest.mark.dependency(depends=[...]) to have it "
                "scheduled"
            ), message


UNEDITED = """
import pathlib

from pytest_dependency import depends


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("shared")


@pytest.fixture(scope="module")
def account(request, workdir):
    # A module-scoped fixture that checks its prerequisite at run time.
    depends(request, ["test_create"])
    return (workdir / "account").read_text()


@pytest.mark.dependency()
def test_create(workdir):
    (workdir / "account").write_text("42")
    mark("create")


@pytest.mark.dependency()
def test_read(request, workdir):
    depends(request, ["test_create"])
    assert (workdir / "account").read_text() == "42"
    mark("read")


def test_uses_fixture(account):
    assert account == "42"
    mark("uses_fixture")


@pytest.mark.dependency()
def test_update(request, workdir):
    depends(request, ["test_read"])
    (workdir / "account").write_text("43")
    mark("update")


def test_delete(request, workdir):
    depends(request, ["test_update"])
    (workdir / "account").unlink()
    mark("delete")
"""


@needs("pytest-dependency")
@pytest.mark.dag_modes("serial", "xdist4")
def test_an_unedited_runtime_depends_module_gives_its_serial_result(
        dagtester: DagTester) -> None:
    write(dagtester, test_flow=UNEDITED, test_busy1=BUSY, test_busy2=BUSY)
    # One run is enough: with the module split (--dag-affinity=none) 3 or 4 of
    # its tests are skipped in every run (4 of 4 tried).
    result = dagtester.run()
    result.assert_outcomes(passed=21)
    pids = {int(line.split()[1]) for name, line in _raw_log(dagtester).items()
            if name in ("create", "read", "uses_fixture", "update", "delete")}
    assert len(pids) == 1, pids
    if dagtester.mode != "serial":
        result.stdout.fnmatch_lines([
            "dagorder: runtime depends() in 1 module: each runs on one worker, "
            "in collection order"])


def test_the_plan_knows_each_readers_marker_without_loading_the_reader() -> None:
    """The names the package uses to pick the readers a plan needs are the readers' own."""
    from pytest_dagorder import migration
    from pytest_dagorder.migration import dependency, depends, order

    readers = (dependency.DependencyReader, depends.DependsReader, order.OrderReader)
    names = (migration.DEPENDENCY_MARK, migration.DEPENDS_MARK, migration.ORDER_MARK)
    assert [r.marker for r in readers] == list(names)
