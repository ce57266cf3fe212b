"""Suites written for pytest-dependency, pytest-depends and pytest-order, run unedited.

Scenarios follow each plugin's documented behaviour; every scenario runs
serially and under ``-n 2``.  The originals are not installed here: the
takeover is exercised with stand-ins registered under their names.
"""

from __future__ import annotations

import textwrap

import pytest
from helpers import base_args, junit_key, read_junit, read_log, write_ini

MODES = ["serial", "xdist"]

PRELUDE = """\
import os

import pytest

LOG = {log!r}


def mark(name):
    with open(LOG, "a") as f:
        f.write(f"{{name}} {{os.getpid()}} 0 0\\n")

"""


def write(pytester: pytest.Pytester, **modules: str) -> None:
    """Test modules (``a__b`` = ``a/b``) with ``mark(name)`` to log what ran."""
    head = PRELUDE.format(log=str(pytester.path / "ran.log"))
    for name, body in modules.items():
        path = pytester.path / (name.replace("__", "/") + ".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(head + textwrap.dedent(body), encoding="utf-8")


def run(pytester: pytest.Pytester, mode: str, *args: str) -> pytest.RunResult:
    extra = ["-p", "no:xdist"] if mode == "serial" else ["-n", "2"]
    return pytester.runpytest_subprocess(
        *base_args(), "--strict-markers", "-rs", "--junitxml=out.xml", *extra, *args
    )


def outcomes(pytester: pytest.Pytester) -> dict[str, tuple[str, str]]:
    cases, _ = read_junit(pytester.path / "out.xml")
    return {k: (c.outcome, c.message) for k, c in cases.items()}


def check(pytester: pytest.Pytester, expected: dict[str, str]) -> dict[str, tuple[str, str]]:
    """``expected``: node id -> outcome, or ``skipped:<part of the reason>``."""
    got = outcomes(pytester)
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


@pytest.mark.parametrize("mode", MODES)
def test_dependency_module_and_class_scope(pytester: pytest.Pytester, mode: str) -> None:
    write(pytester, test_dep=DEPENDENCY_MODULE)
    result = run(pytester, mode)
    m = "test_dep.py::"
    check(pytester, {
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
    assert "needs_unmarked" not in read_log(pytester)


@pytest.mark.parametrize("mode", MODES)
def test_dependency_session_and_package_scope(pytester: pytest.Pytester, mode: str) -> None:
    (pytester.path / "pkg").mkdir()
    (pytester.path / "pkg" / "__init__.py").write_text("", encoding="utf-8")
    write(
        pytester,
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
    result = run(pytester, mode, "test_top.py", "pkg")
    check(pytester, {
        "pkg/test_two.py::test_pkg": "passed",
        "test_top.py::test_e": "passed",
        "test_top.py::test_f": "skipped:test_b",
        "test_top.py::test_g": "passed",
    })
    result.assert_outcomes(passed=5, failed=1, skipped=1)


def test_dependency_automark_and_ignore_unknown(pytester: pytest.Pytester) -> None:
    write(pytester, test_auto="""
        def test_plain():
            mark("plain")

        @pytest.mark.dependency(depends=["test_plain"])
        def test_dependent():
            mark("dependent")
        """)
    write_ini(pytester, "automark_dependency = true\n")
    run(pytester, "serial").assert_outcomes(passed=2)

    write_ini(pytester)
    # Not selected: skipped by default, ignored with the option (documented use).
    run(pytester, "serial", "-k", "dependent", "--ignore-unknown-dependency")
    check(pytester, {"test_auto.py::test_dependent": "passed"})
    result = run(pytester, "serial", "-k", "dependent", "-o", "automark_dependency=true")
    check(pytester, {"test_auto.py::test_dependent": "skipped:test_plain"})
    result.assert_outcomes(skipped=1)
    # Unmarked and no automark: skipped, or ignored with the option.
    run(pytester, "serial", "--ignore-unknown-dependency").assert_outcomes(passed=2)


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


@pytest.mark.parametrize("mode", MODES)
def test_depends(pytester: pytest.Pytester, mode: str) -> None:
    write(pytester, **DEPENDS_MODULES)
    result = run(pytester, mode, "test_use.py", "test_build.py")
    b, u = "test_build.py::", "test_use.py::"
    check(pytester, {
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


def test_order_serial_sequence(pytester: pytest.Pytester) -> None:
    write(pytester, test_ord=ORDER_MODULE)
    run(pytester, "serial").assert_outcomes(passed=10, failed=1)
    ran = list(read_log(pytester))
    assert ran[:2] == ["first", "second"]
    assert ran[-1] == "last"
    for pre, dep in [("cleanup_target", "after_failure"), ("before_class", "m"),
                     ("before_class", "plain_1"), ("p1", "after_params"),
                     ("p2", "after_params")]:
        assert ran.index(pre) < ran.index(dep), (pre, dep, ran)


def test_order_xdist_ordering_only(pytester: pytest.Pytester) -> None:
    write(pytester, test_ord=ORDER_MODULE)
    result = run(pytester, "xdist")
    # Ordering-only edges: a failed target does not skip the test after it.
    check(pytester, {"test_ord.py::test_after_failure": "passed"})
    result.assert_outcomes(passed=10, failed=1)


def test_order_ordinals_yield_to_dependencies(pytester: pytest.Pytester) -> None:
    write(pytester, test_mix="""
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
    run(pytester, "serial").assert_outcomes(passed=4)
    assert list(read_log(pytester)) == ["base", "wants_first", "middle", "almost_last"]


# -- malformed declarations: collection errors, nothing runs -------------------------

MALFORMED = """
@pytest.mark.dependency(depends="test_ok")
def test_str_depends():
    mark("x")

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


@pytest.mark.parametrize("mode", MODES)
def test_malformed_declarations_are_collection_errors(
    pytester: pytest.Pytester, mode: str
) -> None:
    write(pytester, test_bad=MALFORMED)
    result = run(pytester, mode)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    for line in [
        "*dependency on test_bad.py::test_str_depends: depends='test_ok' must be a list*",
        "*dependency on test_bad.py::test_unknown: target 'test_nope' matches no*",
        "*dependency on test_bad.py::test_bad_scope: scope='galaxy' is not one of*",
        "*test_class_scope_outside_class: scope='class' but the test is not in a class*",
        "*depends on test_bad.py::test_depends_unknown: target 'test_okk' *did you mean*",
        "*depends on test_bad.py::test_depends_bad: on=?3? must be a test name*",
        "*order on test_bad.py::test_bad_ordinal: 'soon' is not an ordinal*",
        "*order on test_bad.py::test_order_unknown: target 'test_ghost' matches no*",
        "*Interrupted: 8 errors during collection*",
    ]:
        result.stdout.fnmatch_lines([line])
    assert "Traceback" not in result.stdout.str()
    assert read_log(pytester) == {}


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


def test_takeover_of_installed_originals(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(pytest_dependency=FAKE_DEPENDENCY, conftest=TAKEOVER_CONFTEST)
    write(pytester, test_take="""
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
    result = run(pytester, "serial", "--ignore-unknown-dependency")
    result.stdout.fnmatch_lines([
        "dagorder: took over from pytest-dependency, pytest-depends, pytest-order: *"
    ])
    check(pytester, {
        "test_take.py::test_b": "passed",
        "test_take.py::test_c": "skipped:test_c depends on test_fails",
    })
    result.assert_outcomes(passed=3, failed=1, skipped=1)
    assert list(read_log(pytester))[0] == "first"


def test_no_header_line_without_originals(pytester: pytest.Pytester) -> None:
    write(pytester, test_x="""
        @pytest.mark.dependency()
        def test_a():
            pass
        """)
    result = run(pytester, "serial")
    result.assert_outcomes(passed=1)
    assert "took over" not in result.stdout.str()
