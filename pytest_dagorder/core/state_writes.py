"""What a test module's own code writes that outlives one test: read from its source.

Pure (``ast`` only).  Serial pytest lets a test read what an earlier test
of its module left in the process; the affinity rule (see affinity.py)
keeps two tests joined by an edge on one worker only when they may share
such state.  One kind is visible in the module's source: code inside its
functions (tests, fixtures, helpers, methods) that writes

* a module-level name (a ``global`` statement);
* an attribute or item of something it did not create itself: a
  module-level name, an imported module (``os.environ[...] = ...``), a
  class (``cls.x``, ``self.__class__.x``, ``request.cls.x``,
  ``request.module.x``), or what hangs below ``self`` (``self.cache[k]``:
  a class attribute reached through the instance; ``self.x = ...`` alone
  is not, pytest makes a new instance for every test);
* the same through a mutating method call (``STATE.append(...)``,
  ``self.seen.add(...)``) or ``setattr``/``delattr``.

It also names the parameters whose object the code writes into that way
(``shared["id"] = ...``, ``store.set(...)``): when such a parameter is a
session-scoped fixture, tests that use it pass state along.

What it cannot see: state written through an alias (``x = STATE;
x[...] = ...``), by methods other than the common mutators (an API client's
``post``), in another module (a helper, a conftest), or outside the process
(files, databases, services).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

#: Method names that change their receiver in place (list, dict, set, deque,
#: and the ``set`` of key-value stores; not an HTTP client's ``put``).
MUTATORS = frozenset({
    "append", "appendleft", "extend", "extendleft", "insert", "remove", "pop", "popleft",
    "popitem", "clear", "update", "setdefault", "add", "discard", "sort", "reverse",
    "set", "__setitem__", "__delitem__", "__setattr__",
})
#: Attribute names that lead from an object to shared state (a class, a module).
SHARED_LINKS = frozenset({"cls", "module", "__class__", "__dict__"})


@dataclass(frozen=True)
class Writes:
    """What the module's functions write (see the module docstring)."""

    #: Some function writes module-level or class-level state.
    module_state: bool
    #: Parameter names whose object some function writes into.
    into_params: frozenset[str]


NOTHING = Writes(False, frozenset())


def module_writes(source: str | bytes) -> Writes | None:
    """What ``source`` (a test module's text) writes; None if it does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    state = False
    params: set[str] = set()
    # Functions outside any function (module level, or methods of classes):
    # a nested function is read with the one around it, whose names it sees.
    todo: list[ast.stmt] = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found_state, found_params = _function_writes(node)
            state = state or found_state
            params |= found_params
        elif isinstance(node, ast.ClassDef):
            todo += node.body
        elif isinstance(node, ast.If | ast.Try | ast.With):
            todo += [s for s in ast.iter_child_nodes(node) if isinstance(s, ast.stmt)]
    return Writes(state, frozenset(params))


def _function_writes(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[bool, set[str]]:
    args = fn.args
    arg_names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    arg_names += [a.arg for a in (args.vararg, args.kwarg) if a is not None]
    first = arg_names[0] if arg_names else None
    params = set(arg_names)
    local = set(params)
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            local.add(node.id)
        elif isinstance(node, ast.arg):
            local.add(node.arg)  # of a nested function or lambda
        elif isinstance(node, ast.alias):
            local.add((node.asname or node.name).split(".", 1)[0])
    state = False
    into: set[str] = set()

    def written(target: ast.expr) -> None:
        """``target`` (a receiver's expression) is written into."""
        nonlocal state
        root, links = _root(target)
        if root is None:
            return
        if links & SHARED_LINKS:
            state = True
        elif root.id == first and root.id in ("self", "cls"):
            # self.x = ... (depth 1) is the test's own instance; deeper, or a
            # classmethod's cls, is the class's.
            state = state or root.id == "cls" or root is not target
        elif root.id in params:
            into.add(root.id)
        elif root.id not in local:
            state = True

    for node in ast.walk(fn):
        if isinstance(node, ast.Global):
            state = True
        elif isinstance(node, ast.Attribute | ast.Subscript) and isinstance(
                node.ctx, ast.Store | ast.Del):
            written(node.value)  # a.b.c = 1 and a.b[c] = 1 write into a.b
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in MUTATORS:
                written(func.value)
            elif (isinstance(func, ast.Name) and func.id in ("setattr", "delattr")
                  and node.args):
                written(node.args[0])
    return state, into


def _root(expr: ast.expr) -> tuple[ast.Name | None, frozenset[str]]:
    """The name an attribute/item/call chain starts from, and the attribute names on the way.

    ``type(self).x`` counts as reaching ``__class__``.
    """
    links: set[str] = set()
    node = expr
    while True:
        if isinstance(node, ast.Attribute):
            links.add(node.attr)
            node = node.value
        elif isinstance(node, ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name) and node.func.id == "type" and node.args:
                links.add("__class__")
                node = node.args[0]
            else:
                node = node.func
        elif isinstance(node, ast.Name):
            return node, frozenset(links)
        else:
            return None, frozenset(links)
