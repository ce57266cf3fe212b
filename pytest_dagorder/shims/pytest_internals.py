"""Every use of a pytest or pluggy internal, one function each.

Checked against pytest 8.4 and 9.2, pluggy 1.5 and 1.7, pytest-xdist 3.8
(pyproject.toml allows pytest <10, pluggy <2, pytest-xdist <4).  Each
function says what it touches and why no public API does the job, checks
that the internal is still there before it relies on it, and otherwise
does what docs/limitations.rst lists as its fallback: a release that
renames one degrades this plugin, never the pytest run.  The names looked
up are the module constants below, so a test can rename one to see the
fallback.  pytest-xdist's are in ``shims/xdist_internals.py`` (only
the xdist driver uses them); those of the plugins taken over
(pytest-dependency, pytest-depends, pytest-order) in ``migration/runtime.py``.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from types import CodeType, FunctionType, MethodType
from typing import Any, NoReturn, SupportsIndex, overload

import pluggy
import pytest

#: Where each internal is looked up (module, then attribute names).
REWRITE_MODULE = "_pytest.assertion.rewrite"
REWRITE_HOOK = "AssertionRewritingHook"
ITEM_LOCATION_FLAG = "_use_item_location"
RUNNER_MODULE = "_pytest.runner"
SETUP_STATE = ("SetupState", "_setupstate", "teardown_exact")
TERMINAL_STATS = "stats"
LASTFAILED_PLUGIN = "lfplugin"
LASTFAILED_KEY = "cache/lastfailed"
#: pytest-testmon's collecting plugin, its collector, and the collector's
#: name of the test after the running one (``None``: the batch ends here).
TESTMON_COLLECTOR = ("TestmonCollect", "testmon", "_next_test_name")
#: The part of the cache provider's ``--lf`` that leaves files and tests out of
#: the collection (the rest deselects, through ``pytest_deselected``).
LASTFAILED_COLLECTION = "lfplugin-collwrapper"
FIXTURE_INFO = "_fixtureinfo"
#: The hook caller the worker's gate stands in for: xdist's worker loop
#: calls it through ``config.hook``.
PROTOCOL_HOOK = "pytest_runtest_protocol"
#: pytest's ``Node.nodeid``: a property the barrier overrides to report as a test.
NODE_ID = "nodeid"
#: The hooks pytest's runner calls to report a phase (``call_and_report``).
REPORT_HOOKS = ("pytest_runtest_makereport", "pytest_runtest_logreport")
#: What pytest's run loop reads after each test to end the session early.
SHOULD_STOP = "shouldstop"


def _lookup(module: str, *names: str) -> Any:
    """``module.names[0].names[1]...``, or None where any part is missing."""
    try:
        found: Any = importlib.import_module(module)
    except ImportError:
        return None
    for name in names:
        found = getattr(found, name, None)
    return found


# -- pytest ----------------------------------------------------------------------


def skip_here(reason: str) -> NoReturn:
    """Skip the current test, reported at the test's own location.

    ``_use_item_location`` is pytest's private switch for exactly this (the
    skip marker uses it).  Fallback: a plain skip, whose report then points
    at this line instead of the test.
    """
    exception = pytest.skip.Exception
    if _takes_item_location(exception):
        raise exception(reason, **{ITEM_LOCATION_FLAG: True})
    raise exception(reason)


_TAKES_ITEM_LOCATION: dict[type[BaseException], bool] = {}


def _takes_item_location(exception: type[BaseException]) -> bool:
    """Whether pytest's skip exception still takes the flag (read once per class)."""
    known = _TAKES_ITEM_LOCATION.get(exception)
    if known is None:
        try:
            known = ITEM_LOCATION_FLAG in inspect.signature(exception).parameters
        except (TypeError, ValueError):  # no signature to read
            known = False
        _TAKES_ITEM_LOCATION[exception] = known
    return known


def barriers_blocker(config: pytest.Config) -> str | None:
    """Which internal the worker's barrier items need is missing (None: all there).

    Asked up front, by the controller before it takes over an ``-n`` run and
    by each worker at configure: without them the run falls back to plain
    xdist scheduling (see docs/limitations.rst).
    """
    cls_name, _, method = SETUP_STATE
    if not callable(getattr(_lookup(RUNNER_MODULE, cls_name), method, None)):
        return f"pytest's {cls_name}.{method}"
    if not _relay_holds(config, PROTOCOL_HOOK):
        return f"pluggy's HookRelay.{PROTOCOL_HOOK}"
    # The barrier reports a teardown error as the test it speaks for, through
    # the hooks pytest's runner calls (xdist checks a report's node id).
    if not isinstance(inspect.getattr_static(pytest.Item, NODE_ID, None), property):
        return f"pytest's Item.{NODE_ID} property"
    for hook in REPORT_HOOKS:
        if not _relay_holds(config, hook):
            return f"pluggy's HookRelay.{hook}"
    return None


def report_phase(item: pytest.Item, call: pytest.CallInfo[None]) -> None:
    """Report ``call`` for ``item`` as pytest's runner reports a phase.

    ``_pytest.runner.call_and_report`` is private; its two hook calls are
    public hooks, checked up front by :func:`barriers_blocker`.
    """
    make, log = (getattr(item.ihook, hook) for hook in REPORT_HOOKS)
    log(report=make(item=item, call=call))


def can_stop(session: pytest.Session) -> bool:
    """Whether ``session`` still has the flag pytest's run loop stops on."""
    return hasattr(session, SHOULD_STOP)


def stop_after_this_test(session: pytest.Session, message: str) -> None:
    """End ``session``'s run loop after the current test, as ``-x`` does
    (``Session.shouldstop``; callers ask :func:`can_stop` first)."""
    setattr(session, SHOULD_STOP, message)


def teardown_towards(session: pytest.Session, nextitem: pytest.Item | None) -> None:
    """Tear down the fixtures ``nextitem`` does not share, as pytest does between tests.

    ``Session._setupstate`` is pytest's fixture stack; nothing public tears
    down "up to" an item.  Checked up front by :func:`barriers_blocker`; if
    it has gone since, the error is reported on the last test, as a failing
    teardown would be.
    """
    _, attr, method = SETUP_STATE
    teardown = getattr(getattr(session, attr, None), method, None)
    if teardown is None:
        raise RuntimeError(f"pytest-dagorder: pytest's session has no {attr}.{method}; "
                           "run with -p no:dagorder")
    teardown(nextitem)


#: What pytest takes from a test once its protocol ended (``runtestprotocol``).
TEARDOWN_STATE = ("funcargs", "_request")


def teardown_view(item: pytest.Item) -> dict[str, object]:
    """What the report hooks of ``item``'s teardown read that pytest clears after it.

    Taken before the test starts: ``funcargs`` is filled in place during
    setup, and both are only unbound (set to None, False) at the end.  Read
    by :func:`as_in_teardown`.  An item without them (not a function)
    gives an empty view.
    """
    return {name: getattr(item, name) for name in TEARDOWN_STATE if hasattr(item, name)}


@contextmanager
def as_in_teardown(item: pytest.Item, view: dict[str, object]) -> Iterator[None]:
    """``item`` as its own teardown's report hooks saw it, while inside.

    A barrier reports a deferred fixture teardown on the last test that used
    the fixture, after that test's protocol ended; serially those report
    hooks run inside the test's teardown, where a plugin still reads
    ``item.funcargs`` (pytest-benchmark does).  ``funcargs`` is public on a
    test function, ``_request`` is pytest's own; nothing public restores them.
    Fallback: an attribute pytest no longer clears is left as it is.
    """
    kept = {name: getattr(item, name) for name in view if hasattr(item, name)}
    for name, value in view.items():
        setattr(item, name, value)
    try:
        yield
    finally:
        for name, value in kept.items():
            setattr(item, name, value)


def ini_keys(config: pytest.Config) -> frozenset[str]:
    """The ini keys the configuration file (or ``-o``) sets, whatever their value.

    pytest has no public way to tell a key set to its default from one not
    set: ``Config._inicfg`` (pytest 9, overrides included) or
    ``Config.inicfg`` (pytest 8, file only), and the ``-o`` option.
    Fallback, where neither is a mapping: the ``-o`` keys only.
    """
    keys = {str(entry).partition("=")[0].strip()
            for entry in config.getoption("override_ini", None) or ()}
    table = getattr(config, "_inicfg", None)
    if not isinstance(table, Mapping):
        table = config.__dict__.get("inicfg")  # an attribute before pytest 9
    if isinstance(table, Mapping):
        keys.update(map(str, table))
    return frozenset(keys)


def rootdir_for(config: pytest.Config, args: Sequence[str]) -> tuple[Path, Path | None] | None:
    """The rootdir and ini file pytest finds for this command line with ``args``
    as its test paths, or None where that cannot be told.

    pytest finds the rootdir before any plugin has added its options, so the
    value of ``--dag-edges PATH`` (space form) counts there as a test path.
    ``_pytest.config.findpaths.determine_setup`` (keyword arguments; pytest 9
    added ``override_ini`` and a fourth result) answers what it finds with
    and without it.  Fallback, where it is gone or takes other arguments:
    None (nothing is said).
    """
    try:
        from _pytest.config.findpaths import determine_setup

        kwargs: dict[str, Any] = {
            "inifile": config.getoption("inifilename", None),
            "args": list(args),
            "rootdir_cmd_arg": config.getoption("rootdir", None) or None,
            "invocation_dir": config.invocation_params.dir,
        }
        if "override_ini" in inspect.signature(determine_setup).parameters:
            kwargs["override_ini"] = config.getoption("override_ini", None)
        found = determine_setup(**kwargs)
        rootpath, inipath = found[0], found[1]
    except Exception:
        return None
    if not isinstance(rootpath, Path) or not (inipath is None or isinstance(inipath, Path)):
        return None
    return rootpath, inipath


def _relay_holds(config: pytest.Config, name: str) -> bool:
    """Whether pluggy's hook relay keeps the caller of hook ``name`` as a plain attribute."""
    relay = config.pluginmanager.hook
    return isinstance(getattr(relay, "__dict__", {}).get(name), pluggy.HookCaller)


def replace_hook_caller(config: pytest.Config, name: str,
                        make: Callable[[Any], object]) -> bool:
    """Put ``make(original)`` in place of one hook caller on the relay; False if it
    is not where pluggy kept it (nothing is replaced then).

    pluggy's ``HookRelay`` holds hook callers as plain attributes, which is
    how xdist's worker loop looks ``pytest_runtest_protocol`` up.
    """
    if not _relay_holds(config, name):
        return False
    relay = config.pluginmanager.hook
    setattr(relay, name, make(getattr(relay, name)))
    return True


class ItemsWithTail(list[pytest.Item]):
    """``session.items`` on a worker: the real tests, and one hidden item one past the end.

    xdist's worker loop fetches what it runs by index (``session.items[i]``),
    so the hidden item needs an index; everything else that reads the list
    (its length, iteration, a conftest's ``pytest_sessionfinish``) sees
    only the real tests.
    """

    def __init__(self, items: Sequence[pytest.Item], tail: pytest.Item) -> None:
        super().__init__(items)
        self.tail = tail

    @overload
    def __getitem__(self, index: SupportsIndex) -> pytest.Item: ...

    @overload
    def __getitem__(self, index: slice) -> list[pytest.Item]: ...

    def __getitem__(self, index: SupportsIndex | slice) -> pytest.Item | list[pytest.Item]:
        # xdist reads an item five times a test (twice to run it, once per
        # report): as few calls as can be.  A slice never equals an int.
        if index == len(self):
            return self.tail
        return list.__getitem__(self, index)


def index_past_end(session: pytest.Session, tail: pytest.Item) -> None:
    """Give ``tail`` the index ``len(session.items)``, for xdist's worker loop.

    ``session.items`` is replaced by an :class:`ItemsWithTail` holding the
    same tests, which relies on xdist reading the list from the session as
    it runs.  Where another plugin has put its own list type there, that
    one is kept and ``tail`` appended (the fallback: the hidden item is
    then in ``session.items`` for whoever reads it after collection, but
    still never passed to a hook).
    """
    if type(session.items) is list:
        session.items = ItemsWithTail(session.items, tail)
    else:
        session.items.append(tail)


def _terminal_stats(config: pytest.Config) -> dict[str, list[Any]] | None:
    """The terminal reporter's ``stats`` (its counts by outcome), where it has one."""
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    stats = getattr(terminal, TERMINAL_STATS, None)
    return stats if isinstance(stats, dict) else None


def undo_deselected(config: pytest.Config, items: Sequence[pytest.Item]) -> None:
    """Remove ``items`` from the terminal's "deselected" count.

    They were deselected (``-k``, ``--lf``) and then pulled back in as
    prerequisites; ``pytest_deselected`` has no inverse, so the terminal
    reporter's ``stats`` list is edited.  Fallback: the count includes them.
    """
    stats = _terminal_stats(config)
    if stats is None or not isinstance(stats.get("deselected"), list):
        return
    gone = {id(it) for it in items}
    stats["deselected"] = [it for it in stats["deselected"] if id(it) not in gone]


class DeselectedOnAWorker:
    """Stands in the terminal's "deselected" list for a test a worker deselected.

    The controller has no item for it; the terminal only counts the entries.
    (No ``__slots__``: plugins that walk every stats entry read ``__dict__``.)
    """


def count_deselected(config: pytest.Config, n: int) -> None:
    """Add ``n`` to the terminal's "deselected" count (the xdist controller).

    The workers deselect (``-k``, ``--dag-shard``) in their own collection;
    ``pytest_deselected`` takes items, which the controller does not have,
    and its other implementations expect real ones.  So the terminal
    reporter's ``stats`` list gets ``n`` placeholders.  Fallback: the
    summary line leaves the count out, as plain xdist does.
    """
    stats = _terminal_stats(config)
    if n <= 0 or stats is None:
        return
    entries = stats.setdefault("deselected", [])
    if isinstance(entries, list):
        entries.extend([DeselectedOnAWorker()] * n)


def collect_quietly(collector: pytest.Collector) -> list[pytest.Item | pytest.Collector]:
    """``collector``'s children, without the hooks that would report them.

    The planner looks for a prerequisite outside the session's selection;
    ``session.perform_collect`` would add it to the run and report it.
    """
    return list(collector.collect())


def directory_nodes(known: Sequence[pytest.Item]) -> dict[Path, pytest.Collector]:
    """The session's directory nodes above ``known``, by path (for :func:`file_in_tree`)."""
    have: dict[Path, pytest.Collector] = {}
    for item in known:
        for node in item.listchain():
            if isinstance(node, pytest.Directory):
                have.setdefault(node.path, node)
    return have


def file_in_tree(
    session: pytest.Session, path: Path, directories: dict[Path, pytest.Collector]
) -> list[pytest.Collector] | pytest.CollectReport:
    """The collectors of a file the session did not collect, where pytest would put them.

    The file may lie outside the paths on the command line (``pytest
    tests/unit`` with a target in ``tests/integration``).  Its module hangs
    below the directory nodes of its path, as pytest's collection builds
    them: from the deepest one in ``directories`` (the session's own, see
    :func:`directory_nodes`: fixtures pytest 9.1+ registered on that node
    object stay visible), then one new node per directory, each made by
    ``pytest_collect_directory`` and collected through
    ``pytest_make_collect_report``, and added to ``directories`` for the next
    file.  pytest's own implementation of that hook is what imports a
    directory's conftest.py (and the fixture manager's wrapper what gives
    that conftest's fixtures to the node, once); nothing public loads a
    conftest.  Once loaded, the conftest's hooks (``pytest_generate_tests``)
    reach the module as well.  The directories' other files are never
    imported.

    The file's collectors are made by pytest's collection hooks (so a
    conftest's ``pytest_collect_file`` and ``pytest_pycollect_makemodule``
    apply): those its new directory node made while collected, else (the
    directory is the session's, or ignores the file) by calling
    ``pytest_collect_file``, else (a name outside ``python_files``) by
    ``pytest_pycollect_makemodule``, as for a file named on the command
    line: the target names it.  A directory that fails to collect (its
    conftest.py raises or skips) comes back as its failed report.
    """
    parent: pytest.Collector = session
    below: list[Path] = []
    for directory in path.parents:
        if directory in directories:
            parent = directories[directory]
            break
        below.insert(0, directory)
    else:
        # No directory of the session on this path: start at the rootdir.
        root = session.config.rootpath
        below = [d for d in below if d == root or root in d.parents]
    children: Sequence[object] | None = None  # of `parent`, if collected here
    for directory in below:
        made = parent.ihook.pytest_collect_directory(path=directory, parent=parent)
        if made is None:
            children = None
            break  # not a directory pytest collects: the module hangs above it
        report: pytest.CollectReport = made.ihook.pytest_make_collect_report(collector=made)
        if not report.passed:
            return report
        directories[directory] = parent = made
        children = report.result
    found = [c for c in children or () if isinstance(c, pytest.Collector) and c.path == path]
    if not found:  # `parent` was the session's, or it ignored the file the target names
        made_by = parent.ihook.pytest_collect_file(file_path=path, parent=parent)
        found = [c for c in made_by if isinstance(c, pytest.Collector)]
    if not found:
        # Outside python_files: the target names the file, as a command line
        # would (pytest collects a file named there whatever its name).
        module = parent.ihook.pytest_pycollect_makemodule(module_path=path, parent=parent)
        found = [module] if isinstance(module, pytest.Collector) else []
    return found


def fixture_functions(item: pytest.Item) -> list[Any]:
    """The functions of the fixtures ``item`` uses (``Function._fixtureinfo``; no public API).

    Fallback, where it is gone or of another shape: none.
    """
    defs_by_name = getattr(getattr(item, FIXTURE_INFO, None), "name2fixturedefs", None)
    if not isinstance(defs_by_name, dict):
        return []
    return [getattr(defs[-1], "func", None) for defs in defs_by_name.values() if defs]


def wide_fixtures(item: pytest.Item) -> list[tuple[str, str, str]] | None:
    """The fixtures of ``item`` wider than function scope: (name, scope, where defined).

    ``where`` is the node id the definition applies below (``FixtureDef.baseid``):
    two tests of a module using the same name and ``where`` share one instance
    (for a class-scoped one, within one class).  From ``Function._fixtureinfo``,
    the closure pytest resolved for the item (autouse fixtures and those other
    fixtures request included); no public API lists a fixture's scope.
    Fallback, where it is gone or of another shape: None (the caller then
    assumes the test shares state).
    """
    defs_by_name = getattr(getattr(item, FIXTURE_INFO, None), "name2fixturedefs", None)
    if not isinstance(defs_by_name, dict):
        return None if isinstance(item, pytest.Function) else []
    found: list[tuple[str, str, str]] = []
    for name, defs in defs_by_name.items():
        if not defs:
            continue
        scope = getattr(defs[-1], "scope", None)
        if not isinstance(scope, str):
            return None
        if scope != "function":
            found.append((str(name), scope, str(getattr(defs[-1], "baseid", ""))))
    return found


def fixture_files(item: pytest.Item) -> dict[str, str]:
    """The file defining each fixture ``item`` uses, by name (the function of its
    last ``FixtureDef``, from ``Function._fixtureinfo``; no public API): a
    fixture whose ``where`` is "" comes from a plugin or from a ``conftest.py``
    at the rootdir, and only its file tells which.

    Fallback, where it is gone or of another shape: a name left out.
    """
    defs_by_name = getattr(getattr(item, FIXTURE_INFO, None), "name2fixturedefs", None)
    if not isinstance(defs_by_name, dict):
        return {}
    out: dict[str, str] = {}
    for name, defs in defs_by_name.items():
        func = getattr(defs[-1], "func", None) if defs else None
        if callable(func):
            with suppress(ValueError):  # a cycle of __wrapped__: the outer function's file
                func = inspect.unwrap(func)
        code = getattr(getattr(func, "__func__", func), "__code__", None)
        if isinstance(code, CodeType):
            out[str(name)] = code.co_filename
    return out


#: pytest's and xdist's fixtures that pass nothing from one test to another
#: although wider ones stand behind them: a fresh directory per test (from
#: the session's factory, which counts only when requested itself) and
#: immutable strings.
PER_TEST_BUILTINS = frozenset({"tmp_path", "tmpdir"})
IMMUTABLE_BUILTINS = frozenset({"worker_id", "testrun_uid"})


def requested_fixtures(item: pytest.Item) -> list[tuple[str, str, str]] | None:
    """The fixtures wider than function scope that ``item`` requests by name,
    directly or through the fixtures it requests: (name, scope, where defined).

    ``where`` is the node id the definition applies below (``FixtureDef.baseid``):
    two tests using the same name and ``where`` share one instance (of a
    session or package fixture, in one worker process).  Autouse fixtures
    the test does not name hand it no value, so they are left out.  From
    ``Function._fixtureinfo``, the closure pytest resolved for the item; no
    public API lists a fixture's scope or what it requests.  Fallback, where
    it is gone or of another shape: None for a test function (the caller
    then assumes it shares state), nothing for other items.
    """
    info = getattr(item, FIXTURE_INFO, None)
    defs_by_name = getattr(info, "name2fixturedefs", None)
    if not isinstance(defs_by_name, dict):
        return None if isinstance(item, pytest.Function) else []
    todo = [str(name) for name in getattr(info, "argnames", ()) or ()]
    seen = set(todo)
    found: list[tuple[str, str, str]] = []
    while todo:
        name = todo.pop()
        defs = defs_by_name.get(name)
        if not defs or name in IMMUTABLE_BUILTINS:
            continue
        fixturedef = defs[-1]
        scope = getattr(fixturedef, "scope", None)
        if not isinstance(scope, str):
            return None
        if scope != "function":
            found.append((name, scope, str(getattr(fixturedef, "baseid", ""))))
        for arg in () if name in PER_TEST_BUILTINS else getattr(fixturedef, "argnames", ()):
            if arg not in seen:
                seen.add(arg)
                todo.append(str(arg))
    return sorted(found)


def fill_locations(items: Sequence[pytest.Item]) -> None:
    """Compute ``item.location`` of many plain test functions at once, the cheap way.

    pytest computes an item's location (a cached property) when the item
    starts, each on its own: ``reportinfo`` resolves the test function's file
    anew every time (a path made absolute, its existence checked, the
    relative path looked up), which adds up over a large suite (see
    docs/performance.md), and the xdist controller's
    own skip reports need the locations of tests no worker ran.  For a plain
    function (``pytest.Function`` itself, code neither wrapped nor placed
    elsewhere) the location is the relative path of the code's file, the
    code's first line - 1 and ``getmodpath()``: the path part is the same
    for every test whose code comes from one file.  It is taken from
    pytest's own ``location`` of the first such test, and used only if that
    answer has exactly this shape; the others' are stored where the cached
    property looks (pytest's values, computed once per file).  Any other item
    is left for pytest to compute.

    Stored as a plain attribute, never through ``item.__dict__`` (nor
    ``vars(item)``): reading an instance's ``__dict__`` makes CPython build a
    dict object for it, one more object per test for every garbage
    collection pass to traverse, on every worker for every test, where pytest
    builds it only for the tests a process runs.  That needs ``location`` to
    be a ``functools.cached_property``; if it is not, pytest computes every
    location itself (the fallback: slower, same values).
    """
    if not isinstance(inspect.getattr_static(pytest.Item, "location", None),
                      functools.cached_property):
        return
    files: dict[str, str | None] = {}
    prefixes: dict[int, str | None] = {}  # see _modpath
    for item in items:
        if type(item) is not pytest.Function:
            continue
        try:
            code = _plain_code(item.obj)
            if code is None:
                continue
            line = code.co_firstlineno - 1
            if code.co_filename not in files:
                path, lineno, domain = item.location  # pytest's own (and now cached)
                same = lineno == line and domain == item.getmodpath()
                files[code.co_filename] = path if same else None
                continue
        except Exception:  # pytest reports a broken test object itself, when it runs
            continue
        known = files[code.co_filename]
        if known is not None:
            # One pytest cached already is this same value (the file's first
            # test showed the shape holds); looking would build the dict.
            item.location = (known, line, _modpath(item, prefixes))


def _modpath(item: pytest.Function, prefixes: dict[int, str | None]) -> str:
    """``item.getmodpath()``, with the part of its parent made once per parent.

    pytest joins the names from the module down: a test in a module is its
    own name, one in a class ``Class.name`` (``Outer.Inner.name``).
    """
    parent = item.parent
    key = id(parent)
    if key not in prefixes:
        if isinstance(parent, pytest.Module):
            prefixes[key] = ""
        elif isinstance(parent, pytest.Class):
            prefixes[key] = parent.getmodpath() + "."
        else:
            prefixes[key] = None  # some other collector: pytest's own walk
    prefix = prefixes[key]
    return item.getmodpath() if prefix is None else prefix + item.name


def _plain_code(obj: object) -> CodeType | None:
    """The code of a test function that pytest would locate by its code alone."""
    func = obj.__func__ if isinstance(obj, MethodType) else obj
    if (type(func) is not FunctionType or hasattr(func, "__wrapped__")
            or hasattr(func, "__pytest_wrapped__") or hasattr(func, "place_as")):
        return None
    return func.__code__


def keep_in_lastfailed(config: pytest.Config, nodeids: Sequence[str]) -> None:
    """Add ``nodeids`` to the set ``--lf`` re-runs (pytest's cache key "cache/lastfailed").

    pytest drops a skipped test from that set; a test skipped because its
    prerequisite failed never passed, so the next ``--lf`` must run it
    again.  Called after pytest's own plugin saved the set at session end.
    The cache is public API, the key and the shape of its value are the
    cache provider's own: without that plugin, or with a value of another
    shape, nothing is kept (the fallback: the next ``--lf`` leaves out the
    tests that were skipped for a prerequisite).
    """
    cache = getattr(config, "cache", None)
    if (cache is None or not nodeids
            or not config.pluginmanager.has_plugin(LASTFAILED_PLUGIN)):
        return
    saved = cache.get(LASTFAILED_KEY, {})
    if not isinstance(saved, dict) or not all(isinstance(k, str) for k in saved):
        return
    merged = {**saved, **dict.fromkeys(nodeids, True)}
    if merged != saved:
        cache.set(LASTFAILED_KEY, merged)


def collect_all_under_lf(config: pytest.Config) -> None:
    """Let ``--lf`` collect every test and deselect what did not fail, instead of
    leaving files and tests out of the collection.

    ``--dag-shard`` cuts the parts from the whole collection, so that a part
    does not move when what failed last changes (a loop over the parts
    changes it after each one).  The cache provider registers its
    collection-narrowing helper under a name at configure (before this
    plugin's configure); no public switch leaves it out.  Where the name is
    gone, nothing is done (the fallback: under ``--lf`` the parts are cut
    from the failures' files alone, and may move between parts of a loop).
    """
    pm = config.pluginmanager
    helper = pm.get_plugin(LASTFAILED_COLLECTION)
    if helper is not None:
        pm.unregister(helper)


def resuming(config: pytest.Config) -> bool:
    """Whether ``--lf`` or ``--sw`` may narrow the run to where the last one failed."""
    return bool(config.getoption("lf", False) or config.getoption("stepwise", False))


def testmon_selects(config: pytest.Config) -> bool:
    """Whether pytest-testmon narrows the run to the tests its changes affect
    (``--testmon``; its ``config.testmon_config``, read here only)."""
    return bool(getattr(getattr(config, "testmon_config", None), "select", False))


def testmon_batch_ends(config: pytest.Config) -> None:
    """Make pytest-testmon send the coverage it holds with the running test's teardown report.

    pytest-testmon (2.2) sends a worker's coverage to the controller on a
    teardown report, in batches: every 250 tests, and at the test whose
    ``nextitem`` is None (under plain xdist, each worker's last).  Under the
    barrier no real test is given None (its successor is not known when it
    starts, see ``drivers/distributed/barrier.py``), so a worker's last batch was
    never sent.  No public API ends a batch: its collector's name of the
    next test, read at the teardown report, is set to None.  Without that
    attribute (another release) nothing changes: such tests are selected
    again (docs/neighbours.rst).
    """
    plugin_name, collector_name, attribute = TESTMON_COLLECTOR
    collector = getattr(config.pluginmanager.get_plugin(plugin_name), collector_name, None)
    if collector is not None and hasattr(collector, attribute):
        setattr(collector, attribute, None)


@contextmanager
def assertion_rewriting_paused() -> Iterator[None]:
    """Import what is imported inside as plain Python, not through pytest's assertion rewriter.

    pytest rewrites the asserts of every module of a distribution that has a
    ``pytest11`` entry point, so this whole package: each module parsed and
    compiled from source, its bytecode cached only where bytecode may be
    written (``PYTHONDONTWRITEBYTECODE``, common in CI containers, stops
    that, and then every process pays again).  This package's asserts are
    internal invariants, not tests: rewritten, they say nothing more to a
    user, and rewriting its modules costs every pytest process, controller
    and each worker alike, several times the plugin's plain import time
    where no bytecode is written (``PYTHONDONTWRITEBYTECODE=1``; figures in
    docs/performance.md).  The
    rewriter is an import hook on ``sys.meta_path``; nothing public exempts
    a plugin's modules from it.  It is taken off only while the plugin's
    own modules load (at plugin load, on pytest's one thread) and put back
    where it was, so test modules and conftests are rewritten as always.
    Fallback, where pytest's module or class is not found: nothing is paused
    (the package's modules are rewritten, as any plugin's).
    """
    hook = _lookup(REWRITE_MODULE, REWRITE_HOOK)
    if not isinstance(hook, type):
        yield
        return
    paused = [(k, f) for k, f in enumerate(sys.meta_path) if isinstance(f, hook)]
    for _, finder in paused:
        sys.meta_path.remove(finder)
    try:
        yield
    finally:
        for k, finder in paused:
            sys.meta_path.insert(k, finder)
