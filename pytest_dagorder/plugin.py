"""The pytest entry point: options, markers, and which driver runs the session.

Hooks only; nothing imports this module.  One driver is registered per
process:

* an xdist worker gets :class:`~pytest_dagorder.drivers.distributed.worker.DagWorker` (ships the
  plan; hosts the hidden barrier items only if the suite declares something,
  decided after its collection), decided at configure, where
  ``config.workerinput`` tells;
* an xdist controller gets :class:`~pytest_dagorder.drivers.distributed.controller.DagController`
  (schedules through the core), and any other process
  :class:`~pytest_dagorder.drivers.serial.SerialRunner` (reorders and skips
  in-process), decided at session start, once xdist's own configure has
  registered its DSession or not.

Where an internal the barriers need is gone (a pytest or pluggy release
this plugin does not know), neither xdist side is registered: the run is
plain xdist's, and the controller says so in one line.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .shims.pytest_internals import (
    assertion_rewriting_paused,
    barriers_blocker,
    collect_all_under_lf,
)

# The package's modules load as plain Python: pytest would rewrite their
# asserts, at a cost to every process's start (see assertion_rewriting_paused).
# Only what every process needs loads here; each driver, the migration
# readers and the renderers load when first used (shims/late_loading.py, under the
# same pause), so a process pays only for the parts its run uses.
with assertion_rewriting_paused():
    from . import migration
    from .live_run import visual_options
    from .options import settings
    from .options.markers import DEPENDS_ON, EXCLUSIVE, RESOURCE, RUN_AFTER, SHARES_NOTHING
    from .options.settings import DRIVER_NAME
    from .shims.late_loading import Later

if TYPE_CHECKING:
    from .declaring import edges_file
    from .drivers import serial
    from .drivers.distributed import controller, worker
    from .features import durations, sharding
    from .finder import find_missing
    from .live_run import dag_fixture
    from .live_run.dag_fixture import Dag
    from .shims import xdist_internals
else:
    controller = Later("pytest_dagorder.drivers.distributed.controller")
    worker = Later("pytest_dagorder.drivers.distributed.worker")
    xdist_internals = Later("pytest_dagorder.shims.xdist_internals")
    find_missing = Later("pytest_dagorder.finder.find_missing")
    serial = Later("pytest_dagorder.drivers.serial")
    dag_fixture = Later("pytest_dagorder.live_run.dag_fixture")
    durations = Later("pytest_dagorder.features.durations")
    edges_file = Later("pytest_dagorder.declaring.edges_file")
    sharding = Later("pytest_dagorder.features.sharding")


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser,
                                  args: list[str]) -> Generator[None, None, None]:
    """pytest-dependency, pytest-depends and pytest-order are blocked here, before
    their ``pytest_configure`` (see migration.takeover).

    With plugin autoload disabled, ``-p dagorder -n 8`` must still bring xdist.

    Registered here, after the entry points and ``-p`` options were handled
    and before the command line is parsed for good, xdist's options (``-n``)
    are known in time.  ``pytest_plugins = ["xdist"]`` would not do: on
    pytest 8 it registers xdist's package (no hooks) under the name its
    entry point needs, so ``-n`` would be lost even with autoload on.

    pytest parsed the known options before this hook: xdist's are added to
    that early namespace, for the plugins whose own hook of this name reads
    them (pytest-cov decides there whether the run is distributed; its
    implementation is ``tryfirst`` too, hence a wrapper here, ahead of it
    whatever the order of the ``-p`` options).
    """
    migration.take_over_early(early_config)
    if settings.keep_bare_explain(args):
        # pytest found the initial conftests' paths in its early parse, which
        # read the word after a bare --dag-explain as its TEST_ID.
        early_config.known_args_namespace.file_or_dir = (
            parser.parse_known_args(args).file_or_dir)
    # Before the copy: its probe server's command line says whether xdist is there.
    _bring_xdist(early_config, parser, args)
    if getattr(early_config.known_args_namespace, "dag_find_missing", None) is not None:
        # The probes' environment: as the command started, before any conftest changed it.
        early_config.stash[settings.ENVIRONMENT] = dict(os.environ)
        # The paths as parsed now that xdist's options are known: pytest's early
        # parse took the value of a ``-n 2`` it did not know yet for a path.
        find_missing.copy_early(early_config, parser.parse_known_args(args).file_or_dir)
    return (yield)


def _bring_xdist(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    pm = early_config.pluginmanager
    if pm.has_plugin("xdist") or pm.is_blocked("xdist"):
        return
    try:
        import xdist.plugin
    except ImportError:  # pragma: no cover - a declared dependency
        return
    if not pm.is_registered(xdist.plugin):
        pm.register(xdist.plugin, "xdist")
        known = early_config.known_args_namespace
        for name, value in vars(parser.parse_known_args(args)).items():
            if not hasattr(known, name):
                setattr(known, name, value)


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    settings.addoption(parser)
    migration.addoption(parser, pluginmanager)
    visual_options.addoption(parser.getgroup(settings.GROUP))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{DEPENDS_ON}(*targets): run only after the targets passed; "
        "otherwise skip (pytest-dagorder)",
    )
    config.addinivalue_line(
        "markers",
        f"{RUN_AFTER}(*targets): run after the targets ended, whatever their "
        "outcome (pytest-dagorder)",
    )
    config.addinivalue_line(
        "markers",
        f"{RESOURCE}(*names): at most --dag-limit NAME=N tests naming a resource run at "
        "once, across workers (default 1) (pytest-dagorder)",
    )
    config.addinivalue_line(
        "markers",
        f"{EXCLUSIVE}: nothing else runs on any worker while this test runs (pytest-dagorder)",
    )
    config.addinivalue_line(
        "markers",
        f"{SHARES_NOTHING}: under -n, the test's dependency edges do not keep it on its "
        "prerequisites' worker: it reads no process state they left (pytest-dagorder)",
    )

    found = settings.configure(config)
    if not hasattr(config, "workerinput"):
        settings.check_path_values(config)
        # The finder writes the file: it says itself, before its search,
        # what keeps it from reading or writing there.
        if found.edges_path is not None and found.find_missing is None:
            _check_edges_file(config, found.edges_path)
    if found.durations_path is not None or found.shard is not None:
        _durations_configure(config)
    migration.configure(config)
    if found.find_missing is not None and not hasattr(config, "workerinput"):
        _register_finder(config)
    if hasattr(config, "workerinput") and barriers_blocker(config) is None:
        _register_worker(config)
    visual_options.configure(config)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    config = session.config
    if config.pluginmanager.has_plugin(DRIVER_NAME) or hasattr(config, "workerinput"):
        return  # a worker (registered at configure, or left to plain xdist)
    if not _xdist_controller_active(config):
        _register_serial(config)
    elif (missing := barriers_blocker(config)) is not None:
        _register_plain_xdist(config, missing)
    else:
        _register_controller(config)


@pytest.hookimpl(tryfirst=True)
def pytest_collection(session: pytest.Session) -> None:
    config = session.config
    found = settings.settings_of(config)
    if (found.durations_path is not None or found.shard is not None) and not hasattr(
            config, "workerinput"):
        durations.announce(config, durations.problems(config))


def pytest_sessionfinish(session: pytest.Session) -> None:
    if settings.settings_of(session.config).shard is not None:  # only a part can be empty
        sharding.settle_exit_status(session)


@pytest.fixture
def dag(request: pytest.FixtureRequest) -> Dag:
    """Publish values for dependents (``dag.publish``), read a prerequisite's (``dag.result``)."""
    __tracebackhide__ = True
    return dag_fixture.dag_of(request)


# -- one function per driver: each loads its modules only in a process that uses it --


def _xdist_controller_active(config: pytest.Config) -> bool:
    return xdist_internals.xdist_controller_active(config)


def _durations_configure(config: pytest.Config) -> None:
    """A durations file or a shard: refuse to overwrite a file not read whole, take
    the split's durations (see features/durations.py), let ``--lf`` collect everything."""
    if settings.settings_of(config).shard is not None and config.getoption("lf", False):
        collect_all_under_lf(config)
    if hasattr(config, "workerinput"):
        return
    durations.refuse_unread(config)
    if settings.settings_of(config).shard is not None:
        durations.split_basis(config)


def _check_edges_file(config: pytest.Config, path: Path) -> None:
    """An edges file that cannot be read is a usage error before any process
    collects: serially and under ``-n`` alike (a worker's collection error
    would be xdist's INTERNALERROR, the reason never shown)."""
    try:
        edges_file.read(path)
    except edges_file.EdgesFileError as exc:
        raise pytest.UsageError(str(exc)) from None


def _register_worker(config: pytest.Config) -> None:
    config.pluginmanager.register(worker.DagWorker(config), DRIVER_NAME)


def _register_controller(config: pytest.Config) -> None:
    config.pluginmanager.register(controller.DagController(config), DRIVER_NAME)


def _register_plain_xdist(config: pytest.Config, missing: str) -> None:
    config.pluginmanager.register(controller.PlainXdist(missing), "dagorder-plain-xdist")


def _register_serial(config: pytest.Config) -> None:
    config.pluginmanager.register(serial.SerialRunner(config), DRIVER_NAME)


def _register_finder(config: pytest.Config) -> None:
    config.pluginmanager.register(find_missing.MissingFinder(config), "dagorder-find-missing")
