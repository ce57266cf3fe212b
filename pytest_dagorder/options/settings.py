"""The plugin's settings: options, ini keys, and one frozen record read at configure.

Every driver reads :func:`settings_of` instead of the command line, so a
value is parsed and checked once (a bad ini value is a usage error before
anything is collected) and every vocabulary has one spelling: the Literal
types below, whose members are also the option choices.
"""

from __future__ import annotations

import itertools
import os
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, cast, get_args

import pytest

from ..core.states import FAILURE_POLICIES, FailurePolicy
from ..shims.late_loading import Later
from ..shims.pytest_internals import ini_keys, rootdir_for

if TYPE_CHECKING:
    from ..core import shards
    from . import wording as options_wording
else:
    shards = Later("pytest_dagorder.core.shards")
    options_wording = Later("pytest_dagorder.options.wording")

#: Which tests must share a worker (see affinity.py): every chain along which
#: a dependent may read process state (inside a module, or across modules
#: through a session or package fixture), every chain inside a module, inside
#: a class, or none (the user's statement that tests share no process state).
AffinityMode = Literal["state", "module", "class", "none"]
AFFINITY_MODES: tuple[AffinityMode, ...] = get_args(AffinityMode)

GROUP = "dagorder"
#: The registration name of whichever driver runs the session (drivers/serial.py,
#: drivers/distributed/controller.py, drivers/distributed/worker.py); other parts
#: find the run state under it.
DRIVER_NAME = "dagorder-run"
#: --dist modes the DAG scheduler takes over: the default and worksteal (its
#: workers steal anyway), loadgroup (xdist_group marks are affinity groups),
#: loadfile and loadscope (each file, or each class and module, one group kept
#: in collection order).  Only ``each`` is refused: it runs every test on
#: every worker.
DAG_MODES = ("load", "loadgroup", "loadfile", "loadscope", "worksteal")


@dataclass(frozen=True)
class Settings:
    """What the command line and the ini file say, checked."""

    affinity: AffinityMode
    on_failure: FailurePolicy
    with_prerequisites: bool
    #: pytest-dependency's ``automark_dependency`` and ``--ignore-unknown-dependency``.
    automark_dependency: bool
    ignore_unknown_dependency: bool
    #: How many tests naming each resource may run at once (unnamed ones: 1).
    limits: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    #: The durations file (--dag-durations / ini dag_durations; None: pytest's cache),
    #: whether none are read (``none``: rank by test counts), and whether this run
    #: writes the file back (--dag-store-durations).
    durations_path: Path | None = None
    ignore_durations: bool = False
    store_durations: bool = False
    #: --dag-shard K/N as (K, N), 1-based; None: the whole suite.
    shard: tuple[int, int] | None = None
    #: The run asks for this plugin (see :func:`asks_for_plugin`); otherwise,
    #: under xdist, a suite that declares nothing is left to xdist's scheduler.
    asked: bool = False
    #: The edges file (--dag-edges / ini dag_edges; see edges_file.py).
    edges_path: Path | None = None
    #: --dag-find-missing: "" for every test, else the one node id; None: a normal run.
    find_missing: str | None = None
    #: ini dag_find_budget in seconds, and how many probe processes run at once (-n).
    find_budget: float | None = None
    find_workers: int = 1
    #: --dag-explain: the header lists every group with its reasons, and the free edges;
    #: the summary, each test's moves (the core keeps them only then).
    explain: bool = False
    #: --dag-explain=TEST_ID: the summary tells that one test's story instead ("": none).
    explain_test: str = ""
    #: ini dag_stateless_fixtures: fixtures that carry nothing from one test
    #: to another (a read-only client, a setting).  No group rests on a
    #: fixture, so they lift nothing: they only do not count as holding a
    #: group together where the header and --dag-explain say so.
    stateless_fixtures: frozenset[str] = frozenset()
    #: Seconds without a test reporting before the run says where it waits
    #: (ini dag_stall_report); 0: never.
    stall_report: float = 300.0
    #: ini dag_strict: what the originals skip through (a name
    #: that matches nothing, a cycle, a marker they cannot read) is a collection error.
    strict: bool = False

    @property
    def keeps_moves(self) -> bool:
        """The core records every test's moves (:attr:`explain` or :attr:`explain_test`)."""
        return self.explain or bool(self.explain_test)

    @property
    def cuts_or_records(self) -> bool:
        """A part is cut or durations are written: the run goes through the
        core even where the suite declares nothing (see features/sharding.py)."""
        return self.shard is not None or self.store_durations


SETTINGS = pytest.StashKey[Settings]()


def addoption(parser: pytest.Parser) -> None:
    """Declare the plugin's options and ini keys.

    Over 60 lines: a table of declarations read top to bottom, one entry per
    option or key with its help, in the order ``pytest --help`` lists them;
    no entry depends on another, so a split would only scatter the table.
    """
    group = parser.getgroup(GROUP, "dependency DAG scheduling (pytest-dagorder)")
    group.addoption(
        "--dag-with-prerequisites",
        action="store_true",
        default=False,
        help="Also run every (transitive) prerequisite of the selected tests",
    )
    group.addoption(
        "--dag-affinity",
        choices=AFFINITY_MODES,
        default=None,
        help="Keep tests on one worker, in serial order, where a dependent may read what "
        "its prerequisites left in the process (state: every declared edge), only along "
        "edges inside a module, only inside a class, or never (default: ini dag_affinity, "
        "else state)",
    )
    group.addoption(
        "--dag-on-failure",
        choices=FAILURE_POLICIES,
        default=None,
        help="What a failed prerequisite does: skip its dependents, stop the run, "
        "or run them anyway (default: ini dag_on_failure, else skip)",
    )
    group.addoption(
        "--dag-limit",
        action="append",
        default=[],
        metavar="NAME=N",
        help="Let up to N tests that use resource NAME run at once (repeatable; "
        "default 1 per resource; adds to ini dag_limits)",
    )
    group.addoption(
        "--dag-durations",
        default=None,
        metavar="PATH",
        help="Read recorded durations from this JSON file (node id -> seconds, as "
        "pytest-split's .test_durations; relative to the rootdir) instead of pytest's "
        "cache; none: read none, rank ready tests by the number of tests left on their "
        "longest path (default: ini dag_durations)",
    )
    group.addoption(
        "--dag-store-durations",
        action="store_true",
        default=False,
        help="Write this run's durations into the --dag-durations file, merged with "
        "what it holds",
    )
    group.addoption(
        "--dag-shard",
        default=None,
        metavar="K/N",
        help="Run only the K-th of N parts of the suite (1-based), split so that no "
        "dependency crosses parts and balanced on recorded durations",
    )
    group.addoption(
        "--dag-explain",
        nargs="?",
        const=EXPLAIN_ALL,
        default=None,
        metavar="TEST_ID",
        help="List every affinity group with the reason it was formed, and every "
        "dependency left free (under -n); after the run, why tests waited or did not run "
        "(or the one TEST_ID's story: declared, ready, sent, ended)",
    )
    parser.addini("dag_stateless_fixtures", "Fixtures that carry no state from one test to "
                  "another: not named as holding an affinity group together (they lift no "
                  "edge; dag_shares_nothing does)",
                  type="args", default=[])
    # A CI-wide setting and a project's policy: ini keys (per run: -o KEY=VALUE).
    parser.addini("dag_stall_report", "When no test has reported for this many seconds, "
                  "print which test each worker runs and its stack, once, and keep "
                  "waiting (0: never)", default="300")
    parser.addini("dag_strict", "Make a collection error (exit status 2) of what "
                  "pytest-dependency, pytest-depends and pytest-order skip or warn "
                  "through: a name that matches nothing, a cycle, a marker they cannot "
                  "read", type="bool", default=False)
    parser.addini("dag_durations", "Default for --dag-durations (relative to the ini file)",
                  default="")
    _add_find_options(group, parser)
    parser.addini("dag_affinity", "Default for --dag-affinity", default="state")
    parser.addini("dag_limits", "Resource limits, one NAME=N per line", type="linelist",
                  default=[])
    parser.addini("dag_on_failure", "Default for --dag-on-failure", default="skip")


def configure(config: pytest.Config) -> Settings:
    """Read and check every setting once; kept in ``config.stash``."""
    settings = Settings(
        affinity=cast(AffinityMode, _choice(config, "affinity", AFFINITY_MODES)),
        on_failure=cast(FailurePolicy, _choice(config, "on_failure", FAILURE_POLICIES)),
        with_prerequisites=bool(config.getoption("dag_with_prerequisites", False)),
        automark_dependency=_truthy(_ini(config, "automark_dependency")),
        ignore_unknown_dependency=bool(config.getoption("ignore_unknown_dependency", False)),
        **_explain_settings(config),
        strict=bool(config.getini("dag_strict")),
        stateless_fixtures=frozenset(map(str, config.getini("dag_stateless_fixtures"))),
        limits=MappingProxyType({
            **_limits(config.getini("dag_limits"), "ini dag_limits"),
            **_limits(config.getoption("dag_limit") or (), "--dag-limit"),
        }),
    )
    settings = replace(settings, **_ci_settings(config), **_find_settings(config),
                       asked=asks_for_plugin(config), stall_report=_stall_report(config))
    config.stash[SETTINGS] = settings
    return settings


#: The value of --dag-durations (and ini dag_durations) that reads no durations
#: (any case; a file of that name is ``./none``).
NO_DURATIONS = "none"

#: The options that name a file; each is relative to the rootdir.
PATH_OPTIONS = ("--dag-edges", "--dag-durations", "--dag-graph", "--dag-timeline")


def check_path_values(config: pytest.Config) -> None:
    """A path option's value that pytest also took for a test path: a usage error.

    pytest finds the rootdir (and the ini file whose settings apply) before
    any plugin has added its options: in ``--dag-edges PATH``, the space
    form, ``PATH`` counts there as a test path.  A value that moved the
    rootdir, or that is among the test paths, would silently change what
    runs; ``--dag-edges=PATH`` is never misread.
    """
    try:
        tokens = [*shlex.split(os.environ.get("PYTEST_ADDOPTS", "")),
                  *map(str, config.invocation_params.args)]
    except ValueError:
        return  # pytest itself refuses such PYTEST_ADDOPTS
    given = [(name, value) for name, value in itertools.pairwise(tokens)
             if name in PATH_OPTIONS and not value.startswith("-")]
    if not given:
        return
    paths = [str(a) for a in config.getoption("file_or_dir", None) or ()]
    for name, value in given:
        if value in paths:
            raise pytest.UsageError(options_wording.path_value_taken(name, value, None))
    seen = rootdir_for(config, [*paths, *(value for _, value in given)])
    meant = rootdir_for(config, paths)
    if seen is None or meant is None or seen == meant or seen != (
            config.rootpath, config.inipath):
        return
    name, value = given[0]
    raise pytest.UsageError(options_wording.path_value_taken(name, value, (seen, meant)))


def _one_path(value: object, key: str) -> str:
    """An ini key that names one file: a list (TOML) or several lines is a usage error."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else None
    if text is None and isinstance(value, (list, tuple)) and len(value) == 1:
        text = str(value[0])
    if text is None or len(text.strip().splitlines()) > 1:
        raise pytest.UsageError(
            f"ini {key} = {value!r} is not one path; name one file, e.g. {key} = "
            f"{'.test_durations' if key == 'dag_durations' else 'dag-edges.json'}")
    return text.strip()


def _ci_settings(config: pytest.Config) -> dict[str, Any]:
    """The durations file and the shard (see durations.py and sharding.py)."""
    path: Path | None = None
    option = config.getoption("dag_durations", None)
    ini = _one_path(config.getini("dag_durations"), "dag_durations")
    if option is not None and not str(option).strip():
        raise pytest.UsageError(
            "--dag-durations='' names no file; name one, e.g. --dag-durations=.test_durations, "
            f"or give --dag-durations={NO_DURATIONS} to rank by test counts")
    given = f"--dag-durations={option}" if option else f"ini dag_durations = {ini}"
    ignore = (str(option) if option else ini).lower() == NO_DURATIONS
    if option and not ignore:
        # The rootdir, not the current directory: a part run from tests/ must
        # read the file every other part reads.
        path = config.rootpath / str(option)
    elif ini and not ignore:
        path = (config.inipath.parent if config.inipath else config.rootpath) / ini
    store = bool(config.getoption("dag_store_durations", False))
    if store and ignore:
        # pytest's cache is still written (features/durations.py); no file is named.
        raise pytest.UsageError(
            f"--dag-store-durations has no file to write: {given} reads and "
            "writes none; name a file with --dag-durations=PATH, or leave out "
            "--dag-store-durations")
    if store and path is None:
        raise pytest.UsageError(
            "--dag-store-durations needs a file to write: name one with "
            "--dag-durations=PATH or ini dag_durations (e.g. .test_durations)")
    spec = config.getoption("dag_shard", None)
    shard = None
    if spec is not None:
        try:
            shard = shards.parse_spec(str(spec))
        except shards.ShardSpecError as exc:
            raise pytest.UsageError(options_wording.shard_spec_invalid(exc.spec)) from None
    return {"durations_path": path, "ignore_durations": ignore, "store_durations": store,
            "shard": shard}


#: What ``-p`` names this plugin by: its entry point and its modules.
PLUGIN_NAMES = frozenset({"dagorder", "pytest_dagorder", "pytest_dagorder.plugin"})


def asks_for_plugin(config: pytest.Config) -> bool:
    """Whether the run asks for this plugin rather than only having it installed.

    ``-p dagorder`` (on the command line, in ``addopts`` or
    ``PYTEST_ADDOPTS``), any ``--dag-*`` option given a value, or any
    ``dag_*`` ini key set.
    """
    if PLUGIN_NAMES.intersection(map(str, config.getoption("plugins", None) or ())):
        return True
    if any(name.startswith("dag_") and value not in (None, False, "", [], ())
           for name, value in vars(config.option).items()):
        return True
    return any(key.startswith("dag_") for key in ini_keys(config))
#: --dag-explain given alone: the whole run (see :func:`keep_bare_explain`).
EXPLAIN_ALL = "all"


def keep_bare_explain(args: list[str]) -> bool:
    """Rewrite each bare ``--dag-explain`` of ``args`` in place to
    ``--dag-explain=all``; True if there was one.

    The option takes an optional TEST_ID, which argparse would read off the
    next word too: ``pytest --dag-explain tests`` would lose its path.  Only
    the ``=`` form names a test, so the bare form means what it always did.
    """
    bare = [k for k, arg in enumerate(args) if arg == "--dag-explain"]
    for k in bare:
        args[k] = f"--dag-explain={EXPLAIN_ALL}"
    return bool(bare)


def _explain_settings(config: pytest.Config) -> dict[str, Any]:
    """--dag-explain (the whole run) or --dag-explain=TEST_ID (a node id), checked."""
    value = config.getoption("dag_explain", None)
    if value is None or value == EXPLAIN_ALL:
        return {"explain": value is not None, "explain_test": ""}
    if "::" not in str(value):
        raise pytest.UsageError(options_wording.explain_not_a_test(str(value)))
    return {"explain": False, "explain_test": str(value)}


def _stall_report(config: pytest.Config) -> float:
    value = config.getini("dag_stall_report")
    try:
        seconds = float(str(value).strip())
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < float("inf"):
        raise pytest.UsageError(
            f"ini dag_stall_report {value!r} is not valid; give a number of seconds (0 "
            "turns the report off), e.g. -o dag_stall_report=600")
    return seconds


def settings_of(config: pytest.Config) -> Settings:
    """The settings read at configure (read now if the plugin was not configured)."""
    found = config.stash.get(SETTINGS, None)
    return found if found is not None else configure(config)


def _choice(config: pytest.Config, name: str, choices: tuple[str, ...]) -> str:
    """A setting from the command line, else the ini file, checked against ``choices``."""
    value = config.getoption(f"dag_{name}") or config.getini(f"dag_{name}")
    if value not in choices:
        raise pytest.UsageError(
            f"dag_{name} = {value!r} is not valid; choose one of {', '.join(choices)}"
        )
    return str(value)


def _limits(entries: Iterable[str], where: str) -> dict[str, int]:
    """``NAME=N`` entries; a malformed or non-positive one is a usage error."""
    out: dict[str, int] = {}
    for entry in entries:
        name, sep, count = str(entry).partition("=")
        name = name.strip()
        try:
            limit = int(count.strip()) if sep else 0
        except ValueError:
            limit = 0
        if not name or limit < 1:
            raise pytest.UsageError(
                f"{where} {entry!r} is not valid; write NAME=N with N a whole number of at "
                "least 1, e.g. --dag-limit postgres=2"
            )
        out[name] = limit
    return out


def _ini(config: pytest.Config, name: str) -> object:
    try:
        return config.getini(name)
    except ValueError:  # nobody defined it (the original is installed but not loaded)
        return False


def _truthy(value: object) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "yes", "y", "true", "t", "on")
    return bool(value)


def _add_find_options(group: pytest.OptionGroup, parser: pytest.Parser) -> None:
    """Options of the edges file and of ``--dag-find-missing`` (finder/find_missing.py)."""
    group.addoption(
        "--dag-edges",
        default=None,
        metavar="PATH",
        help="Read extra edges and resources from this JSON file (relative to the "
        "rootdir); --dag-find-missing writes what it finds there (default: ini dag_edges)",
    )
    group.addoption(
        "--dag-find-missing",
        nargs="?",
        const="",
        default=None,
        metavar="TEST_ID",
        help="Run no tests: find the prerequisites and shared resources the selected "
        "tests (or the one TEST_ID) need but do not declare, with probe runs (-n of them at once)",
    )
    parser.addini("dag_find_budget", "Start no new probe of --dag-find-missing after this "
                  "many seconds (per run: -o dag_find_budget=SECONDS)", default="")
    parser.addini("dag_edges", "Default for --dag-edges (relative to the ini file)",
                  default="")


def edges_path(config: pytest.Config, option: object) -> Path | None:
    """The edges file ``--dag-edges`` (``option``) names, else ini ``dag_edges``;
    also before the command line is parsed (the finder's first probe server
    starts then, ``finder.find_missing.copy_early``), given the option's early value."""
    ini = _one_path(config.getini("dag_edges"), "dag_edges")
    if option:
        # The rootdir, as every path option: run from a subfolder, the
        # edges file and the durations file are read where every run reads them.
        return config.rootpath / str(option)
    if ini:
        return (config.inipath.parent if config.inipath else config.rootpath) / ini
    return None


def _find_settings(config: pytest.Config) -> dict[str, Any]:
    """The edges file and --dag-find-missing's settings, checked."""
    path = edges_path(config, config.getoption("dag_edges", None))
    find = config.getoption("dag_find_missing", None)
    if find is not None and find and "::" not in find:
        raise pytest.UsageError(
            f"--dag-find-missing={find!r} is not a test id; name one test as "
            "path::name, or put --dag-find-missing after the paths to search every test")
    raw = str(config.getini("dag_find_budget")).strip()
    try:
        budget = float(raw) if raw else None
    except ValueError:
        budget = -1.0
    if budget is not None and not 0 < budget < float("inf"):
        raise pytest.UsageError(
            f"ini dag_find_budget {raw!r} is not valid; give a number of seconds above 0, "
            "e.g. -o dag_find_budget=600")
    workers = config.getoption("numprocesses", None)
    return {"edges_path": path, "find_missing": find, "find_budget": budget,
            "find_workers": max(1, int(workers)) if isinstance(workers, int) else 1}


#: The environment before the conftests configured (``--dag-find-missing``'s probes get it).
ENVIRONMENT = pytest.StashKey[dict[str, str]]()
