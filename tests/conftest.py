"""The ``dagtester`` fixture (``support.dagtester``) and its modes; the fake controller's
``recorder`` and ``harness`` (``support.xdist_fakes``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import helpers
import pytest
from helpers import import_the_plugin
from support.dagtester import DAG_MODES, MODES, SETUP, SETUP_KEYWORDS, DagTester, setup_of

if TYPE_CHECKING:
    from support.xdist_fakes import Harness, Recorder

    from pytest_dagorder.planning.facts import Facts

import_the_plugin()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{DAG_MODES}(*modes): the modes (serial, xdist, xdist4, own) dagtester "
        "runs the test in")
    config.addinivalue_line(
        "markers", f"{SETUP}({', '.join(SETUP_KEYWORDS)}): what every dagtester run of the "
        "test shares")
    config.addinivalue_line(
        "markers", f"{VERSIONS_MARKER}: set by this conftest from VERSIONS, never by hand: "
        "the versions of pytest, pluggy, pytest-xdist or execnet can change the test's "
        "outcome (.ci/run's lowest-versions pass runs only these)")
    for where in VERSIONS:
        if not names_a_test(Path(str(config.rootpath)), where):
            raise pytest.UsageError(f"tests/conftest.py VERSIONS names {where!r}: not there")


def names_a_test(root: Path, where: str) -> bool:
    """Whether the module of ``where`` exists, defines its test and holds its parameter's id."""
    path, _, name = where.partition("::")
    if not (root / path).is_file():
        return False
    source = (root / path).read_text(encoding="utf-8")
    function, _, param = name.split("::")[-1].partition("[")
    return (not function or f"def {function}(" in source) and param.rstrip("]") in source


#: The marker of the tests whose outcome the versions of pytest, pluggy,
#: pytest-xdist and execnet can change in a way the newest versions' run does
#: not already show; :func:`pytest_collection_modifyitems` sets it from
#: :data:`VERSIONS`.  The package never branches on a version: what a version
#: can change is what it reads of those packages, and what pytest prints.
VERSIONS_MARKER = "versions"
#: Node ids (a module, or a test in it with all its parameters), each with the reason.
VERSIONS: dict[str, str] = {
    # The shims (pytest_dagorder/shims/): each internal taken away, and kept (the
    # control runs beside): a release can rename, drop or reshape any of them.
    "tests/test_internals.py":
        "every pytest, pluggy and xdist internal the shims read, with and without it",
    "tests/test_collector.py":
        "the collector pause around pytest's run loop and xdist's worker (collector_pause.py)",
    "tests/test_e2e_everyday.py::test_the_plugins_modules_load_without_assertion_rewriting":
        "late_loading.py steps around pytest's assertion-rewriting import hook",
    "tests/test_e2e_outside_paths.py::test_a_prerequisite_in_another_directory_gets_its_conftests":
        "a pulled-back file is made through pytest's collection and directory nodes "
        "(pytest 9.1 changed which node gets a directory's conftest)",
    # What pytest prints around the plugin's lines (summary, -rs, --tb, error
    # tails): two pages that show most of it (the others show the same kinds).
    "tests/test_docs_output.py::test_the_page_shows_what_its_commands_print[quickstart.rst]":
        "pytest's own lines the page shows change between its releases",
    "tests/test_docs_output.py::test_the_page_shows_what_its_commands_print[results.rst]":
        "pytest's --tb=line and summary lines the page shows (pytest 8.4 prints no E line)",
    "tests/test_e2e_xdist.py::test_other_dist_mode_with_declarations_is_refused_cleanly":
        "pytest's summary line of an error (8.4 has no ' - message' tail)",
    # The serial driver over pytest's run loop.
    "tests/test_e2e_serial.py::test_on_failure_stop":
        "session.shouldstop, read by pytest's loop after each test",
    "tests/test_e2e_serial.py::test_module_fixture_teardown_error":
        "teardown towards the next test through pytest's SetupState",
    "tests/test_e2e_serial.py::test_summary_counts_only_skips_that_were_reported":
        "the terminal reporter's stats",
    # The xdist driver end to end: barrier items over pytest's SetupState and
    # runner hooks (pluggy's HookRelay), facts and reports through execnet.
    "tests/test_e2e_xdist.py::test_graph_shapes_under_two_workers":
        "the xdist driver end to end (barriers, hooks, execnet messages)",
    "tests/test_e2e_xdist.py::test_a_teardown_error_at_a_barrier_reaches_report_hooks_as_serially":
        "the barrier reports through pytest's runner hooks",
    "tests/test_e2e_xdist.py::test_exitfirst_stops_the_run":
        "-x under xdist: the controller's stop and the workers' shouldstop",
}


def versions_modules() -> list[str]:
    """The modules :data:`VERSIONS` names (.ci/run's lowest-versions pass collects only these)."""
    return sorted({where.split("::")[0] for where in VERSIONS})


def in_versions(nodeid: str) -> bool:
    """Whether :data:`VERSIONS` names the test ``nodeid`` or its module."""
    return any(nodeid == where or nodeid.startswith((f"{where}::", f"{where}["))
               for where in VERSIONS)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if in_versions(item.nodeid):
            item.add_marker(VERSIONS_MARKER)


@pytest.fixture(autouse=True)
def _fresh_workers_where_versions_matter(request: pytest.FixtureRequest,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The inner runs of a test marked ``versions`` start fresh worker interpreters
    (``helpers.forked_workers``): the lowest versions' pass checks what a new
    process does with them, and the newest versions' pass checks it alike."""
    if request.node.get_closest_marker(VERSIONS_MARKER) is not None:
        monkeypatch.setattr(helpers, "fresh_workers", VERSIONS_MARKER)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "dagtester" in metafunc.fixturenames:
        marker = metafunc.definition.get_closest_marker(DAG_MODES)
        modes = marker.args if marker is not None else MODES
        metafunc.parametrize("dagtester", modes, indirect=True)


@pytest.fixture
def dagtester(pytester: pytest.Pytester, request: pytest.FixtureRequest) -> DagTester:
    return DagTester(pytester, request.param, **setup_of(request.node))


# -- the controller with fake workers (support.xdist_fakes), for the modules that drive it --
# support.xdist_fakes is imported when a test asks for it.


@pytest.fixture
def recorder() -> Recorder:
    """What the fake controller logged and reported."""
    from support.xdist_fakes import Recorder

    return Recorder()


@pytest.fixture
def harness(pytester: pytest.Pytester, recorder: Recorder) -> Callable[..., Harness]:
    """A factory: ``harness(facts, *args, nodes=2, policy="skip")``."""
    from support.xdist_fakes import Harness, make_config

    def make(facts: Facts, *args: str, nodes: int = 2,
             policy: Literal["skip", "stop", "run"] = "skip") -> Harness:
        config = make_config(pytester, recorder, f"--dag-on-failure={policy}", *args,
                             nodes=nodes)
        return Harness(config, recorder, facts, policy=policy)

    return make


if __name__ == "__main__":  # .ci/run: python tests/conftest.py
    print("\n".join(versions_modules()))
