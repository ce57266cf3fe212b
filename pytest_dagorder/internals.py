"""Every use of a pytest, pluggy or pytest-xdist internal, one function each.

Checked against pytest 8.4 and 9.2, pluggy 1.5 and 1.6, pytest-xdist 3.8
(the ranges pyproject.toml pins).  Each function says what it touches and
why no public API does the job; a new release that breaks one breaks it
here.  pytest-dependency's internals have their own module
(``migration/runtime.py``), as they are that plugin's, not pytest's.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import CodeType, FunctionType, MethodType
from typing import Any, NoReturn

import pytest
from _pytest.assertion.rewrite import AssertionRewritingHook


def skip_here(reason: str) -> NoReturn:
    """Skip the current test, reported at the test's own location.

    ``_use_item_location`` is pytest's private switch for exactly this (the
    skip marker uses it); without it the report would point into this file.
    """
    raise pytest.skip.Exception(reason, _use_item_location=True)


def teardown_towards(session: pytest.Session, nextitem: pytest.Item | None) -> None:
    """Tear down the fixtures ``nextitem`` does not share, as pytest does between tests.

    ``Session._setupstate`` is pytest's fixture stack; nothing public tears
    down "up to" an item.
    """
    session._setupstate.teardown_exact(nextitem)


def take_nodeid(item: pytest.Item, other: pytest.Item) -> None:
    """Give ``item`` the node id of ``other`` (kept in ``_id`` since pytest 9.2)."""
    attr = "_id" if hasattr(other, "_id") else "_nodeid"
    setattr(item, attr, getattr(other, attr))


def replace_hook_caller(config: pytest.Config, name: str,
                        make: Callable[[Any], object]) -> None:
    """Put ``make(original)`` in place of one hook caller on the relay.

    pluggy's ``HookRelay`` holds hook callers as plain attributes, which is
    how xdist's worker loop looks ``pytest_runtest_protocol`` up.
    """
    relay = config.pluginmanager.hook
    setattr(relay, name, make(getattr(relay, name)))


def undo_deselected(config: pytest.Config, items: Sequence[pytest.Item]) -> None:
    """Remove ``items`` from the terminal's "deselected" count.

    They were deselected (``-k``, ``--lf``) and then pulled back in as
    prerequisites; ``pytest_deselected`` has no inverse, so the terminal
    reporter's ``stats`` list is edited.
    """
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    if terminal is None or "deselected" not in terminal.stats:
        return
    gone = {id(it) for it in items}
    terminal.stats["deselected"] = [it for it in terminal.stats["deselected"]
                                    if id(it) not in gone]


def collect_quietly(collector: pytest.Collector) -> list[pytest.Item | pytest.Collector]:
    """``collector``'s children, without the hooks that would report them.

    The planner looks for a prerequisite outside the session's selection;
    ``session.perform_collect`` would add it to the run and report it.
    """
    return list(collector.collect())


def directory_nodes(known: Sequence[pytest.Item]) -> dict[Path, pytest.Collector]:
    """The session's directory nodes above ``known``, by path (for :func:`module_in_tree`)."""
    have: dict[Path, pytest.Collector] = {}
    for item in known:
        for node in item.listchain():
            if isinstance(node, pytest.Directory):
                have.setdefault(node.path, node)
    return have


def module_in_tree(
    session: pytest.Session, path: Path, directories: dict[Path, pytest.Collector]
) -> pytest.Module | pytest.CollectReport:
    """A module node for a file the session did not collect, where pytest would put it.

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

    A directory that fails to collect (its conftest.py raises or skips)
    comes back as its failed report.
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
    for directory in below:
        made = parent.ihook.pytest_collect_directory(path=directory, parent=parent)
        if made is None:
            break  # not a directory pytest collects: the module hangs above it
        report: pytest.CollectReport = made.ihook.pytest_make_collect_report(collector=made)
        if not report.passed:
            return report
        directories[directory] = parent = made
    return pytest.Module.from_parent(parent, path=path)


def fixture_functions(item: pytest.Item) -> list[Any]:
    """The functions of the fixtures ``item`` uses (``Function._fixtureinfo``; no public API)."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return []
    return [defs[-1].func for defs in info.name2fixturedefs.values() if defs]


def fill_locations(items: Sequence[pytest.Item]) -> None:
    """Compute ``item.location`` of many plain test functions at once, the cheap way.

    pytest computes an item's location (a cached property) when the item
    starts, each on its own: ``reportinfo`` resolves the test function's file
    anew every time (a path made absolute, its existence checked, the
    relative path looked up), about 60 us a test, and the xdist controller's
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
    builds it only for the tests a process runs.
    """
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
    """
    cache = getattr(config, "cache", None)
    if cache is None or not nodeids:
        return
    saved = cache.get("cache/lastfailed", {})
    if not isinstance(saved, dict):
        return
    merged = {**saved, **dict.fromkeys(nodeids, True)}
    if merged != saved:
        cache.set("cache/lastfailed", merged)


def resuming(config: pytest.Config) -> bool:
    """Whether ``--lf`` or ``--sw`` may narrow the run to where the last one failed."""
    return bool(config.getoption("lf", False) or config.getoption("stepwise", False))


# -- pytest-xdist -----------------------------------------------------------------


def xdist_controller_active(config: pytest.Config) -> bool:
    """Whether xdist's DSession runs this session (it registers as "dsession").

    Asked from our ``pytest_sessionstart``, which runs after every plugin's
    ``pytest_configure``, so after xdist's, which registers DSession.
    """
    return config.pluginmanager.has_plugin("dsession")


def xdist_node_count(config: pytest.Config) -> int:
    """How many workers xdist starts (``xdist.workermanage.parse_tx_spec_config``)."""
    from xdist.workermanage import parse_tx_spec_config

    return len(parse_tx_spec_config(config))


def replace_xdist_sendevent(
        config: pytest.Config,
        make: Callable[[Callable[..., None], Callable[[object], None]], Callable[..., None]],
) -> bool:
    """On a worker, put ``make(sendevent, send)`` in place of the ``sendevent`` of
    xdist's worker side, ``send`` being its channel's; False if there is none.

    xdist registers that ``WorkerInteractor`` without a name, from source
    execnet sent, so it is found by its class name, not imported.  Every
    event xdist's worker sends goes through its ``sendevent``.
    """
    interactor = next((p for p in config.pluginmanager.get_plugins()
                       if type(p).__name__ == "WorkerInteractor"), None)
    inner = getattr(interactor, "sendevent", None)
    send = getattr(getattr(interactor, "channel", None), "send", None)
    if inner is None or send is None:
        return False
    interactor.sendevent = make(inner, send)  # type: ignore[union-attr]
    return True


def wrap_xdist_receiver(node: Any,
                        make: Callable[[Callable[[Any], None]], Callable[[Any], None]]) -> bool:
    """On the controller, put ``make(process)`` in place of ``node.process_from_remote``;
    False if there is none.

    xdist makes that method the worker channel's callback right after
    ``pytest_configure_node``, so a replacement set there is the one used.
    """
    process = getattr(node, "process_from_remote", None)
    if process is None:
        return False
    node.process_from_remote = make(process)
    return True


def xdist_collection_diff(first: Sequence[str], other: Sequence[str],
                          first_id: str, other_id: str) -> str:
    """xdist's own message for workers that collected different tests."""
    from xdist.report import report_collection_diff

    return str(report_collection_diff(list(first), list(other), first_id, other_id))


@contextmanager
def assertion_rewriting_paused() -> Iterator[None]:
    """Import what is imported inside as plain Python, not through pytest's assertion rewriter.

    pytest rewrites the asserts of every module of a distribution that has a
    ``pytest11`` entry point, so this whole package: each module parsed and
    compiled from source, its bytecode cached only where bytecode may be
    written (``PYTHONDONTWRITEBYTECODE``, common in CI containers, stops
    that, and then every process pays again).  This package's asserts are
    internal invariants, not tests: rewritten, they say nothing more to a
    user, and rewriting its modules cost every pytest process, controller
    and each worker alike, about 0.4 s of CPU (measured: ``python -X
    importtime -m pytest --co`` under ``PYTHONDONTWRITEBYTECODE=1``).  The
    rewriter is an import hook on ``sys.meta_path``; nothing public exempts
    a plugin's modules from it.  It is taken off only while the plugin's
    own modules load (at plugin load, on pytest's one thread) and put back
    where it was, so test modules and conftests are rewritten as always.
    """
    paused = [(k, f) for k, f in enumerate(sys.meta_path) if isinstance(f, AssertionRewritingHook)]
    for _, finder in paused:
        sys.meta_path.remove(finder)
    try:
        yield
    finally:
        for k, finder in paused:
            sys.meta_path.insert(k, finder)
