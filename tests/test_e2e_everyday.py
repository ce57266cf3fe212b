"""End-to-end tests of everyday pytest around the DAG, serially and under ``-n 2``.

Reruns (pytest-rerunfailures), modules skipped at import, ``-k`` and
``--dag-with-prerequisites`` keeping collection order, rejection of a typo
shared by many tests, names in skip reasons, non-ascii parametrize ids, the
plugin's own modules loaded without assertion rewriting.
"""

from __future__ import annotations

import importlib.util

import pytest
from helpers import make_modules, read_log
from support.dagtester import DagTester

from pytest_dagorder.live_run.dag_run import short_names

TIMEOUT = 120.0

#: Each test runs once serially and once under two xdist workers.


def skip_reasons(result: pytest.RunResult) -> list[str]:
    """The reasons of the ``-rs`` lines, sorted."""
    return sorted(line.split(": ", 1)[1] for line in result.outlines
                  if line.startswith("SKIPPED ["))


# -- reruns: only a test's final attempt gates -----------------------------------------

needs_rerunfailures = pytest.mark.skipif(
    importlib.util.find_spec("pytest_rerunfailures") is None,
    reason="pytest-rerunfailures is not installed (the test extra has it)")

FLAKY = """
def test_flaky():
    mark("test_flaky")
    # Fails on its first attempt only (the log has no line yet).
    with open(LOG) as f:
        first = sum(1 for line in f if line.startswith("test_flaky ")) == 1
    assert not first


@depends_on("test_flaky")
def test_dependent():
    mark("test_dependent")


@depends_on("test_dependent")
def test_second():
    mark("test_second")


def test_broken():
    mark("test_broken")
    assert 0


@depends_on("test_broken")
def test_blocked():
    mark("test_blocked")
"""


@needs_rerunfailures
def test_a_prerequisite_that_passes_on_its_rerun_releases_its_dependents(
    pytester: pytest.Pytester, dagtester: DagTester
) -> None:
    make_modules(pytester, test_flaky=FLAKY)
    result = dagtester.run("-p", "rerunfailures", "--reruns", "1", "-rs")
    # test_flaky and test_broken each rerun once; only test_broken fails again.
    assert result.parseoutcomes() == {"passed": 3, "failed": 1, "skipped": 1, "rerun": 2}
    assert skip_reasons(result) == ["prerequisite test_broken failed (assert 0)"]
    result.stdout.fnmatch_lines(["*test_flaky.py::test_broken failed: blocked 1 test"])
    assert "test_flaky failed" not in result.stdout.str()


# -- skip reasons name a test by its shortest unambiguous name -------------------------

SAME_NAMES = {
    "pkg1__test_same": """
        def test_base():
            mark("pkg1.test_same.test_base")
            assert 0


        def test_unique():
            mark("pkg1.test_unique")
            assert 0
        """,
    "pkg1__test_one": """
        def test_base():
            mark("pkg1.test_one.test_base")
            assert 0
        """,
    "pkg2__test_same": """
        def test_base():
            mark("pkg2.test_base")


        @depends_on("pkg1/test_same.py::test_base")
        def test_on_same_file_name():
            mark("test_on_same_file_name")


        @depends_on("pkg1/test_one.py::test_base")
        def test_on_other_file_name():
            mark("test_on_other_file_name")


        @depends_on("pkg1/test_same.py::test_unique")
        def test_on_unique():
            mark("test_on_unique")
        """,
}


def test_skip_reasons_name_tests_by_their_shortest_unambiguous_name(
    pytester: pytest.Pytester, dagtester: DagTester
) -> None:
    make_modules(pytester, **SAME_NAMES)
    for pkg in ("pkg1", "pkg2"):  # two test_same.py files need packages
        (pytester.path / pkg / "__init__.py").write_text("")
    result = dagtester.run("-rs")
    result.assert_outcomes(passed=1, failed=3, skipped=3)
    assert skip_reasons(result) == [
        "prerequisite pkg1/test_same.py::test_base failed (assert 0)",
        "prerequisite test_one.py::test_base failed (assert 0)",
        "prerequisite test_unique failed (assert 0)",
    ]


def test_short_names_take_the_shortest_unambiguous_form() -> None:
    ids = ["a/test_x.py::test_base", "b/test_x.py::test_base", "b/test_y.py::test_base",
           "a/test_x.py::TestC::test_m", "a/test_x.py::test_p[1]"]
    assert short_names(ids) == ["a/test_x.py::test_base", "b/test_x.py::test_base",
                                "test_y.py::test_base", "TestC::test_m", "test_p[1]"]


# -- selections keep collection order where no edge forces a change --------------------

ABC = """
def test_a():
    mark("test_a")


@depends_on("test_a")
def test_b():
    mark("test_b")


def test_c():
    mark("test_c")


@depends_on("test_c")
def test_d():
    mark("test_d")
    assert os.environ.get("FIXED")
"""


def collected_names(result: pytest.RunResult) -> list[str]:
    return [line.rsplit("::", 1)[-1] for line in result.outlines
            if "::" in line and " " not in line]


def test_k_keeps_collection_order(pytester: pytest.Pytester, dagtester: DagTester) -> None:
    make_modules(pytester, test_m=ABC)
    result = dagtester.run("--collect-only", "-q", "-k", "b or c")
    assert collected_names(result) == ["test_b", "test_c"]
    result = dagtester.run("-k", "b or c", "-rs")
    # Under -n as serially, the summary counts what the workers deselected.
    result.assert_outcomes(passed=1, skipped=1, deselected=2)
    assert sorted(read_log(pytester)) == ["test_c"]


def test_pulled_back_prerequisites_take_their_collection_place(
    pytester: pytest.Pytester, dagtester: DagTester
) -> None:
    make_modules(pytester, test_m=ABC)
    args = ("-k", "b or c", "--dag-with-prerequisites")
    result = dagtester.run("--collect-only", "-q", *args)
    assert collected_names(result) == ["test_a", "test_b", "test_c"]
    result = dagtester.run(*args)
    result.assert_outcomes(passed=3, deselected=1)
    assert sorted(read_log(pytester)) == ["test_a", "test_b", "test_c"]
    # Node ids on the command line: test_a is never collected by the session;
    # the planner's copy goes just before the test that needs it.
    result = dagtester.run("--collect-only", "-q", "test_m.py::test_b",
                           "test_m.py::test_c", "--dag-with-prerequisites")
    assert collected_names(result) == ["test_a", "test_b", "test_c"]


def test_last_failed_with_prerequisites_counts_what_it_pulled_back(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, dagtester: DagTester
) -> None:
    make_modules(pytester, test_m=ABC, test_other="def test_other():\n    pass\n")
    # --lf needs the cache
    first = dagtester.run(cache=True, mode="serial", timeout=TIMEOUT)
    first.assert_outcomes(passed=4, failed=1)
    monkeypatch.setenv("FIXED", "1")
    result = dagtester.run("--lf", "--dag-with-prerequisites", cache=True)
    result.assert_outcomes(passed=2)
    assert sorted(read_log(pytester)) == ["test_c", "test_d"]
    if dagtester.mode == "serial":
        result.stdout.fnmatch_lines([
            "collected 1 item",
            "dagorder: 1 prerequisite pulled back into the run (--dag-with-prerequisites): "
            "2 tests in all",
        ])
    else:
        result.stdout.fnmatch_lines(["2 workers [2 items]"])


# -- non-ascii parametrize ids: both spellings name the test ---------------------------

UNICODE_IDS = r"""
@pytest.mark.parametrize("word", ["ünï", "plain"])
def test_p(word):
    mark("test_p-" + word.encode("unicode_escape").decode("ascii"))
    assert word == "plain"


@depends_on("test_p[ünï]")
def test_raw():
    mark("test_raw")


@depends_on("test_p[\\xfcn\\xef]")
def test_escaped():
    mark("test_escaped")


@depends_on("test_p[plain]")
def test_plain():
    mark("test_plain")
"""


# Both spellings are resolved while planning, alike serially and in a worker;
# what xdist adds is the node ids crossing to the controller, which only the
# raw ids make non-ASCII (escaped, they are ASCII as any): raw only under xdist.
@pytest.mark.dag_modes("own")
@pytest.mark.parametrize(("mode", "escaping"), [
    ("serial", "escaped"), ("serial", "raw"), ("xdist", "raw")],
    ids=["serial-escaped", "serial-raw", "xdist-raw"])
def test_non_ascii_ids_are_targets_in_both_spellings(
    pytester: pytest.Pytester, dagtester: DagTester, mode: str, escaping: str
) -> None:
    ini = ("disable_test_id_escaping_and_forfeit_all_rights_to_community_support = true\n"
           if escaping == "raw" else "")
    dagtester.ini(ini)
    make_modules(pytester, test_u=UNICODE_IDS)
    result = dagtester.run("-rs", mode=mode)
    result.assert_outcomes(passed=2, failed=1, skipped=2)
    assert sorted(read_log(pytester)) == ["test_p-\\xfcn\\xef", "test_p-plain", "test_plain"]


# -- a typo shared by many tests is reported once --------------------------------------

def many_with_typo(tests: int) -> str:
    body = ['pytestmark = pytest.mark.depends_on("test_bse")', "",
            "def test_base():", "    mark('test_base')", ""]
    body += [f"def test_{k}():\n    mark('test_{k}')\n" for k in range(tests)]
    body += ['@depends_on("test_bas")', "def test_other_typo():", "    mark('x')", ""]
    return "\n".join(body)


def test_a_typo_shared_by_many_tests_is_reported_once(
    pytester: pytest.Pytester, dagtester: DagTester
) -> None:
    make_modules(pytester, test_many=many_with_typo(200))
    result = dagtester.run()
    assert result.ret == 2
    assert read_log(pytester) == {}
    result.stdout.fnmatch_lines([
        "pytest-dagorder: @depends_on inherited by test_many.py::test_base, "
        "test_many.py::test_0, test_many.py::test_1 and 199 more: target 'test_bse' "
        "matches no collected test; did you mean 'test_base'*",
    ])
    # The short summary repeats each error, cut to the terminal width except on CI
    # (pytest never cuts there), so count in the error sections only.
    out = result.stdout.str()
    sections = out.split("short test summary info")[0]
    # test_other_typo has both: its own typo, and the module's one (listed above).
    assert sections.count("target 'test_bse' matches no collected test") == 1
    assert sections.count("target 'test_bas' matches no collected test") == 1
    assert "Interrupted: 2 errors during collection" in out


# -- prerequisites in modules skipped at import ----------------------------------------

SKIPPED_MODULES = {
    "test_needs_x": """
        pytest.importorskip("no_such_module_for_dagorder")


        def test_base():
            mark("test_base")
        """,
    "test_off": """
        pytest.skip("off on this platform", allow_module_level=True)


        def test_setup():
            mark("test_setup")
        """,
    "test_dep": """
        @depends_on("test_needs_x.py::test_base")
        def test_on_import_skip():
            mark("test_on_import_skip")


        @depends_on("test_off.py")
        def test_on_module_skip():
            mark("test_on_module_skip")


        @run_after("test_off.py::test_setup")
        def test_after_skipped_module():
            mark("test_after_skipped_module")


        @depends_on("test_on_import_skip")
        def test_indirect():
            mark("test_indirect")


        def test_free():
            mark("test_free")
        """,
}

IMPORT_SKIP_REASONS = [
    "prerequisite module test_needs_x.py was skipped: could not import "
    "'no_such_module_for_dagorder': No module named 'no_such_module_for_dagorder'",
    "prerequisite module test_off.py was skipped: off on this platform",
    "prerequisite test_on_import_skip was skipped",
]


@pytest.mark.parametrize("selection", ["dependents only", "all"])
def test_prerequisites_in_modules_skipped_at_import(
    pytester: pytest.Pytester, dagtester: DagTester, selection: str
) -> None:
    make_modules(pytester, **SKIPPED_MODULES)
    args = ["test_dep.py"] if selection == "dependents only" else []
    result = dagtester.run("-rs", *args)
    reasons = skip_reasons(result)
    if selection == "all":
        # pytest's own reports of the two modules, as without the plugin.
        reasons.remove("could not import 'no_such_module_for_dagorder': "
                       "No module named 'no_such_module_for_dagorder'")
        reasons.remove("off on this platform")
    assert reasons == IMPORT_SKIP_REASONS
    assert result.ret == 0
    assert sorted(read_log(pytester)) == ["test_after_skipped_module", "test_free"]
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


@pytest.mark.parametrize("how", ["raise SystemExit('boom')", "raise RuntimeError('boom')"])
def test_a_target_in_a_file_that_fails_on_import_is_a_collection_error(
    pytester: pytest.Pytester, dagtester: DagTester, how: str
) -> None:
    pytester.makepyfile(helper_boom=how + "\n")
    make_modules(pytester, test_dep="""
        @depends_on("helper_boom.py::test_x")
        def test_dep():
            mark("test_dep")
        """)
    result = dagtester.run()
    assert result.ret == 2
    assert read_log(pytester) == {}
    kind = how.split()[1].split("(")[0]
    result.stdout.fnmatch_lines([
        "pytest-dagorder: @depends_on on test_dep.py::test_dep: target 'helper_boom.py::test_x' "
        f"is in helper_boom.py, which cannot be collected ({kind}: boom); "
        "fix that file or the target",
        "*Interrupted: 1 error during collection*",
    ])
    out = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in out
    assert "Traceback" not in out


# -- the plugin's own modules skip assertion rewriting; test modules do not ------------

PLAIN_PLUGIN = """
import sys

from _pytest.assertion.rewrite import AssertionRewritingHook


def test_the_plugin_loaded_plain():
    assert any(isinstance(f, AssertionRewritingHook) for f in sys.meta_path)
    loaded = {n: m for n, m in sys.modules.items() if n.startswith("pytest_dagorder.")}
    # Loaded on demand, once the hook was back: the driver of this process, the graph.
    driver = ("pytest_dagorder.drivers.distributed.worker" if "PYTEST_XDIST_WORKER" in os.environ
              else "pytest_dagorder.drivers.serial")
    assert driver in loaded and "pytest_dagorder.core.graph" in loaded
    rewritten = {n for n, m in loaded.items() if isinstance(m.__loader__, AssertionRewritingHook)}
    assert rewritten <= EARLY


@depends_on("test_the_plugin_loaded_plain")
def test_rewritten():
    x = 1
    assert x == 2
"""

#: The controller's own modules (under -n), checked at its end.
PLAIN_CONFTEST = """
import sys

from _pytest.assertion.rewrite import AssertionRewritingHook


def pytest_terminal_summary(terminalreporter):
    loaded = {n: m for n, m in sys.modules.items() if n.startswith("pytest_dagorder.")}
    rewritten = {n for n, m in loaded.items() if isinstance(m.__loader__, AssertionRewritingHook)}
    terminalreporter.write_line(f"{len(loaded)} loaded, rewritten: {sorted(rewritten - EARLY)}")
"""

#: What loads before the plugin can pause the rewriter: the package (with the
#: loader its public names go through) and the module that pauses it (all
#: rewritten, as any plugin's modules are).
EARLY = """
EARLY = {"pytest_dagorder.plugin", "pytest_dagorder.core", "pytest_dagorder.core.errors",
         "pytest_dagorder.shims", "pytest_dagorder.shims.pytest_internals",
         "pytest_dagorder.shims.late_loading"}
"""


@pytest.mark.autoload  # the plugin loads by its entry point, after the early ``-p``
def test_the_plugins_modules_load_without_assertion_rewriting(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, dagtester: DagTester
) -> None:
    """Rewriting them costs every process time where no bytecode is written;
    the hook goes back in place: test modules are rewritten as ever, and
    pytest warns of nothing (warnings are errors here).

    pytest marks for rewriting the modules a regular install of a plugin
    lists; an editable install (this project's own) lists none, so an early
    ``-p`` plugin marks the package here, as a regular install would be.
    """
    make_modules(pytester, test_plain=PLAIN_PLUGIN + EARLY)
    pytester.makeconftest(PLAIN_CONFTEST + EARLY)
    pytester.makepyfile(mark_dagorder="""
        import pytest

        pytest.register_assert_rewrite("pytest_dagorder")
        """)
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    result = dagtester.run("-p", "mark_dagorder",
                           own_process="what importing the plugin's modules does is the point")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["E       assert 1 == 2", "* loaded, rewritten: []"])


# -- suggestions for an unknown target name other tests only ---------------------------

SUGGESTIONS = """
import pytest
from pytest_dagorder import depends_on

def test_find():
    pass

@depends_on("test_serch")
def test_other():
    pass

@depends_on("test_serach")
def test_search():
    pass
"""


@pytest.mark.dag_modes("serial")
def test_a_suggestion_names_another_test_never_a_directory_or_the_test_itself(
    pytester: pytest.Pytester, dagtester: DagTester
) -> None:
    pytester.mkdir("tests")
    (pytester.path / "tests" / "test_s.py").write_text(SUGGESTIONS)
    result = dagtester.run()
    assert result.ret == 2
    lines = [ln for ln in result.outlines if "matches no collected test" in ln
             and ln.startswith("pytest-dagorder: ")]
    assert len(lines) == 2, result.stdout.str()
    other = next(ln for ln in lines if "on tests/test_s.py::test_other" in ln)
    assert other.endswith("did you mean 'test_search'?"), other
    search = next(ln for ln in lines if "on tests/test_s.py::test_search" in ln)
    assert search.endswith("did you mean 'test_other'?"), search
