"""The package's layers: imports point one way, and the core stays free of pytest.

Read from the source (ast), so an import inside a function counts too: a
cycle dodged that way still fails here.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "pytest_dagorder"

#: The package's rooms (its folders), lowest first: a module imports its own room
#: or a room listed before it, never one after; no two rooms import each other.  The
#: three rooms of the core import none of the others.  ``plugin`` stands alone, last.
ROOMS: tuple[str, ...] = (
    "core",       # plain values in, decisions out
    "runners",    # DagScheduler and DagExecutor over the core
    "render",     # graph export and timeline, from plain values
    "shims",      # every use of an internal of pytest, pluggy, xdist or the interpreter
    "options",    # options, ini keys, markers, and the sentences that name them
    "declaring",  # what a suite declares, read into plain edges
    "migration",  # the takeover of pytest-dependency / pytest-depends / pytest-order
    "features",   # recorded durations, --dag-shard, the stall report
    "live_run",   # the run as it goes, and what it writes at the end
    "planning",   # from a collected session to a plan and its facts
    "deciding",   # every decision about a run
    "drivers",    # the serial run, and the xdist run (drivers/distributed)
    "finder",     # --dag-find-missing and its probe processes
    "plugin",     # the entry point: hooks only
)
#: A room's rank in :data:`ROOMS`.
LAYERS: dict[str, int] = {room: i for i, room in enumerate(ROOMS)}
#: The rooms that import neither pytest nor xdist (and nothing past ``core``).
CORE_ROOMS = ("core", "runners", "render")
CORE_FORBIDDEN = ("pytest", "_pytest", "xdist", "execnet", "pluggy")
#: Process-wide policy the pytest glue owns: the core only schedules.
CORE_POLICY = ("gc",)


@functools.cache
def modules() -> Mapping[str, Path]:
    """The package's modules by dotted name (read once a process: every test of this
    file and every module's ``imports_of`` asks)."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).with_suffix("")
        name = ".".join(rel.parts).removesuffix(".__init__")
        if name != "__init__":
            out[name] = path
    return out


@functools.cache
def tree_of(path: Path) -> ast.Module:
    """``path`` parsed, once a process (several tests walk every module; none
    changes a tree)."""
    return ast.parse(path.read_text(), str(path))


def imports_of(name: str, path: Path) -> tuple[set[str], set[str]]:
    """(package modules, outside top-level modules) that ``name`` imports anywhere."""
    tree = tree_of(path)
    package = name.split(".")[:-1] if path.name != "__init__.py" else name.split(".")
    inside: set[str] = set()
    outside: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("pytest_dagorder."):
                    inside.add(alias.name.removeprefix("pytest_dagorder."))
                else:
                    outside.add(alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                outside.add((node.module or "").split(".")[0])
                continue
            base = package[: len(package) - (node.level - 1)]
            target = [*base, *(node.module.split(".") if node.module else [])]
            if node.module is None:  # from . import x, y: each may be a module
                for alias in node.names:
                    inside.add(".".join([*target, alias.name]))
            else:
                inside.add(".".join(target))
    known = set(modules()) | {""}
    return {m for m in inside if m in known and m}, outside


def layer(name: str) -> int:
    return LAYERS[name.split(".")[0]]


def room(name: str) -> str:
    """A module's room: its top folder, but the xdist run's own (``drivers.distributed``)."""
    parts = name.split(".")
    return ".".join(parts[:2]) if parts[:2] == ["drivers", "distributed"] else parts[0]


def test_every_module_sits_in_a_layer_folder() -> None:
    assert sorted(m for m in modules() if m.split(".")[0] not in LAYERS) == []


def test_every_room_says_its_job_in_one_line() -> None:
    for init in sorted(PACKAGE.rglob("__init__.py")):
        if init.parent == PACKAGE:
            continue
        summary = (ast.get_docstring(ast.parse(init.read_text())) or "").split("\n")[0]
        assert summary.endswith("."), f"{init.relative_to(PACKAGE)}: {summary!r}"


def test_no_two_rooms_import_each_other() -> None:
    """Rooms of one rank too (the serial driver and drivers/distributed)."""
    pairs = {(room(name), room(m)) for name, path in modules().items()
             for m in imports_of(name, path)[0] if room(m) != room(name)}
    assert sorted((a, b) for a, b in pairs if (b, a) in pairs) == []


@pytest.mark.parametrize("name", sorted(modules()))
def test_imports_point_down(name: str) -> None:
    inside, outside = imports_of(name, modules()[name])
    up = sorted(m for m in inside if layer(m) > layer(name))
    assert not up, f"{name} ({room(name)}) imports rooms after its own: {up}"
    assert "plugin" not in inside, "nothing imports the entry point"
    if room(name) in CORE_ROOMS:
        outside_core = sorted(m for m in inside if room(m) != room(name) and room(m) != "core")
        assert not outside_core, f"{name} imports past the core: {outside_core}"
        assert not set(CORE_FORBIDDEN) & outside, f"core module {name} imports {outside}"
        policy = set(CORE_POLICY) & outside
        assert not policy, f"core module {name} imports {policy}"


def test_no_import_cycle() -> None:
    graph = {name: imports_of(name, path)[0] for name, path in modules().items()}
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                raise AssertionError("import cycle: " + " -> ".join([*path, node, nxt]))
            if nxt not in state:
                visit(nxt, [*path, node])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [])


def test_the_standalone_runner_imports_without_pytest() -> None:
    code = ("import sys; from pytest_dagorder import DagScheduler, Task; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            f"{CORE_FORBIDDEN!r}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == "[]"


def test_the_decorators_still_come_from_the_package_top() -> None:
    code = ("import pytest_dagorder, pytest_dagorder.options.markers as m; "
            "assert pytest_dagorder.depends_on is m.depends_on; "
            "from pytest_dagorder import run_after; assert run_after is m.run_after")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


#: What the core must not word: xdist, pytest and the plugins a suite migrates from
#: (pytest-dependency's marker and run-time ``depends()``, pytest-depends, pytest-order)
#: are the business of the layers that drive or read them.
FOREIGN_WORDS = ("xdist", "execnet", "--dist", "-p no:", "pytest", "depends()")
#: This plugin's own pytest markers and ini keys (``dag_exclusive``, ``dag_limits``):
#: the glue that reads them words them.
PYTEST_NAMES = re.compile(r"\bdag_[a-z]+(?:_[a-z]+)*\b")
#: A command-line option, pytest's, a plugin's or this plugin's own (``--lf``, ``-n``,
#: ``--dag-affinity=none``): the glue that reads it words it.
OPTION = re.compile(r"(?<![\w-])(--[a-z][\w-]*|-[a-zA-Z](?![\w-]))")


def said_by(path: Path) -> list[str]:
    """The strings of a module a user may read: its constants, docstrings aside, the
    plugin's own name taken out (a timeline file names its maker)."""
    tree = tree_of(path)
    docstrings = {id(node.value) for node in ast.walk(tree)
                  if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)}
    return [node.value.replace("pytest-dagorder", "") for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in docstrings]


@pytest.mark.parametrize("name", sorted(m for m in modules() if room(m) in CORE_ROOMS))
def test_the_core_words_nothing_of_pytest_xdist_or_other_plugins(name: str) -> None:
    """The core's sentences are about the DAG: no option, no other plugin, no pytest."""
    said = said_by(modules()[name])
    assert [text for text in said if any(word in text for word in FOREIGN_WORDS)] == []
    assert [text for text in said if OPTION.search(text)] == []
    assert [text for text in said if PYTEST_NAMES.search(text)] == []


#: What only the xdist side knows, anywhere in a core module's text (code, comments,
#: docstrings): xdist and execnet by name, xdist's --dist modes and worker ids, and
#: the node-id syntax (``path::name``; a slice ``[::-1]`` is not one).
XDIST_WORDS = re.compile(
    r"xdist|execnet|--dist\b|\bload(?:file|scope|group)\b|\bworksteal\b|\bgw\d|(?<!\[)::")


def core_text_naming_xdist(text: str) -> list[str]:
    """The lines of ``text`` that name xdist, execnet or node-id syntax."""
    return [line.strip() for line in text.splitlines() if XDIST_WORDS.search(line)]


def test_the_core_knows_nothing_of_xdist_or_node_ids() -> None:
    """The adapters pass plain values (file paths split off, a scope per test,
    worker handles): the core's own text never names xdist, execnet, a
    ``--dist`` mode or how a node id is spelled."""
    found = {path.name: lines for path in sorted((PACKAGE / "core").glob("*.py"))
             if (lines := core_text_naming_xdist(path.read_text()))}
    assert found == {}


@pytest.mark.parametrize("line", ["path = nid.split(\"::\", 1)[0]", "if dist == \"loadfile\":",
                                  "as ``--dist loadscope`` sends them", "execnet refuses it",
                                  "held on gw0", "an ``xdist_group``"])
def test_the_xdist_check_catches_each_kind(line: str) -> None:
    assert core_text_naming_xdist(line) == [line]


def test_the_xdist_check_lets_slices_and_workers_pass() -> None:
    assert core_text_naming_xdist("path[::-1]\na worker's load\ndownload") == []


@pytest.mark.parametrize("text", ["--dag-affinity=none lifts it", "add --lf", "under -n",
                                  "@pytest.mark.dependency", "a runtime depends() sees",
                                  "which execnet cannot send", "run alone (dag_exclusive)"])
def test_the_check_catches_options_and_foreign_names(text: str) -> None:
    assert (any(word in text for word in FOREIGN_WORDS) or OPTION.search(text)
            or PYTEST_NAMES.search(text))


@pytest.mark.parametrize("text", ["a -> b", "prerequisite test_a-1 failed", "K/N, e.g. 2/4",
                                  "non-Python test items", "run_after"])
def test_the_check_lets_the_dag_s_words_pass(text: str) -> None:
    assert not any(word in text for word in FOREIGN_WORDS) and not OPTION.search(text)
    assert not PYTEST_NAMES.search(text)


def test_the_package_loads_its_own_modules_late_only_through_the_loader() -> None:
    """No module of the package is imported inside a function (the loader's own pause aside).

    What a run may not need loads through ``shims/late_loading.py``: named there
    with the run that needs it, and loaded as plain Python.
    """
    inner = []
    for name, path in [*modules().items(), ("", PACKAGE / "__init__.py")]:
        tree = tree_of(path)
        for func in ast.walk(tree):
            if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(func):
                if (isinstance(node, ast.ImportFrom) and node.level > 0) or (
                        isinstance(node, ast.Import) and any(
                            a.name.startswith("pytest_dagorder") for a in node.names)):
                    inner.append(f"{name}:{node.lineno} in {func.name}")
    assert [site for site in inner if not site.startswith("shims.late_loading:")] == []


def test_every_module_loaded_late_exists_and_is_named_with_its_reason() -> None:
    from pytest_dagorder.shims.late_loading import LATE, Later

    for name, late in LATE.items():
        assert late.why and importlib.util.find_spec(name) is not None, name
    # The package root's names loaded on first use are all in the table, and all there.
    import pytest_dagorder

    assert {n for late in LATE.values() for n in late.public} <= set(pytest_dagorder.__all__)
    assert all(hasattr(pytest_dagorder, n) for n in pytest_dagorder.__all__)
    with pytest.raises(AttributeError, match="module 'pytest_dagorder' has no attribute 'x'"):
        pytest_dagorder.x  # noqa: B018
    with pytest.raises(ModuleNotFoundError, match="not among the modules loaded late"):
        Later("pytest_dagorder.shims.nothing")


def test_a_module_loaded_late_loads_on_its_first_public_name_only() -> None:
    """pytest reads a plugin module's every global, private names too: that loads nothing."""
    code = ("import sys; from pytest_dagorder.shims.late_loading import Later; "
            "m = Later('pytest_dagorder.declaring.edges_file'); "
            "assert getattr(m, '_pytestfixturefunction', None) is None; "
            "assert 'pytest_dagorder.declaring.edges_file' not in sys.modules; "
            "m.apply; assert 'pytest_dagorder.declaring.edges_file' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


MAX_LINES = 62
MAX_METHODS = 20
#: How a unit's docstring states why it is over the size: the phrase, then the
#: reason ("Over 60 lines: a table of ...", "Over 20 methods, in one class on purpose: ...").
SAID_LONG = re.compile(r"Over 60 lines[,:]\s*\S")
SAID_BIG = re.compile(r"Over 20 methods[,:]\s*\S")


def oversized_units() -> list[str]:
    """Every class over 20 methods and function over about 60 lines of the package
    whose docstring does not say why, as ``module.Name (size)``."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
        for node in ast.walk(tree_of(path)):
            doc = ast.get_docstring(node) if isinstance(
                node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) else None
            if isinstance(node, ast.ClassDef):
                methods = [f for f in node.body
                           if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]
                if len(methods) > MAX_METHODS and not SAID_BIG.search(doc or ""):
                    found.append(f"{name}.{node.name} ({len(methods)} methods)")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_LINES and not SAID_LONG.search(doc or ""):
                    found.append(f"{name}.{node.name} ({lines} lines)")
    return found


def test_units_are_small_or_say_why() -> None:
    """Issue 52 point 5: no class of the package has over 20 methods and no function
    is over about 60 lines unless its docstring says why, in the form
    "Over 20 methods: ..." or "Over 60 lines: ..." (a split that reads better is
    the other way out)."""
    found = oversized_units()
    assert not found, "over the size, no reason said:\n" + "\n".join(found)
