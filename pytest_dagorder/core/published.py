"""Values a test publishes for its dependents: the checks and the stores, without pytest.

A prerequisite calls ``dag.publish(key, value)``; a dependent reads
``dag.result(target)``.  In a distributed run the values cross two process
boundaries (worker -> controller -> worker), so everything here is about
what may cross and who may read it:

* a value must be something the process channel serialises by value (:data:`SCALARS`
  and the :data:`CONTAINERS` of them), checked when it is published, so the
  publishing test fails and never the worker or the controller;
* its size is bounded (:data:`MAX_VALUE_BYTES` per value,
  :data:`MAX_TEST_BYTES` per test), measured by :func:`size_of`;
* only a declared prerequisite, direct or transitive, may be read
  (:func:`readable`): any other test may still be running, so reading it
  would be a race;
* a test's values count only once the test passed; the drivers hand a
  :class:`Publication` over then (:class:`ResultStore` on a worker or in a
  serial run, :class:`Relay` on the controller) and drop it otherwise.

Values are copied when published and again for every reader, so a serial
run behaves like a distributed one: mutating a published list afterwards,
or the list a reader got, changes nothing anybody else sees.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from typing import Final

from . import wording

#: Types that cross as they are (exact types: the channel's serialiser refuses subclasses).
SCALARS: Final = (str, bytes, int, float, complex, bool, type(None))
CONTAINERS: Final = (list, tuple, dict, set, frozenset)
#: Size limits, in the bytes :func:`size_of` counts.  A value travels to the
#: controller and to every worker that runs a dependent, in the same pipe as
#: the test reports: big payloads belong in files or a service, with their
#: path or id published instead.
MAX_VALUE_BYTES: Final = 1024 * 1024
MAX_TEST_BYTES: Final = 4 * 1024 * 1024
#: Nesting deeper than this is refused: the channel's serialiser recurses.
MAX_DEPTH: Final = 100
#: Bytes counted for a number, None, a container, or one entry of a container.
ITEM_BYTES: Final = 8
#: The channel's serialiser writes ints up to 2**31 - 1 in four bytes and larger ones as
#: text, but has no text form for negative ones: below this it fails while
#: sending (struct.error), which would break the worker, not the test.
MIN_INT: Final = -(2**31)

Values = dict[str, object]


class ResultError(Exception):
    """Base class: a misuse of ``dag.publish`` / ``dag.result``, raised in the test."""


class PublishError(ResultError, ValueError):
    """A value that cannot be published: its type, its size, or its key."""

    def __init__(self, message: str, test: str, key: object) -> None:
        super().__init__(message)
        self.test = test
        self.key = key


class ReadError(ResultError, LookupError):
    """A target that cannot be read from this test (``reader``)."""

    def __init__(self, message: str, reader: str, target: str) -> None:
        super().__init__(message)
        self.reader = reader
        self.target = target


class UnpublishedKeyError(ResultError, KeyError):
    """A key that the target did not publish; ``published`` lists the ones it did."""

    def __init__(self, message: str, key: object, published: Sequence[str]) -> None:
        super().__init__(message)
        self.key = key
        self.published = tuple(published)

    def __str__(self) -> str:  # KeyError would show the repr of the message
        return str(self.args[0])


def size_of(value: object) -> int:
    """What a value counts against the limits: the UTF-8 bytes of each str, the
    bytes of each bytes value, and :data:`ITEM_BYTES` for each other scalar (an
    int's own bytes when it needs more), each container and each entry of a
    container (a key and its value are one entry).

    So ``b"x" * MAX_VALUE_BYTES`` counts exactly MAX_VALUE_BYTES: the figure an
    error reports is the one a user can check.  Only for values :func:`checked`
    accepted.  Close to, not exactly, the serialised length.
    """
    total = 0
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            total += len(v.encode("utf-8"))
        elif isinstance(v, bytes):
            total += len(v)
        elif isinstance(v, int) and not isinstance(v, bool):
            total += max(ITEM_BYTES, (abs(v).bit_length() + 7) // 8)
        elif isinstance(v, dict):
            total += ITEM_BYTES * (1 + len(v))
            for k, x in v.items():
                stack += (k, x)
        elif isinstance(v, (list, tuple, set, frozenset)):
            total += ITEM_BYTES * (1 + len(v))
            stack.extend(v)
        else:
            total += ITEM_BYTES
    return total


def checked(value: object, test: str, key: str) -> object:
    """A deep copy of ``value`` if it can cross processes; :class:`PublishError` if not.

    The error names the test, the key and where inside the value the problem
    is (``value['a'][2]``).
    """
    return _copy(value, "value", 0, set(), test, key)


def _copy(v: object, where: str, depth: int, path: set[int], test: str, key: str) -> object:
    t = type(v)
    if t in SCALARS:
        if t is int and v < MIN_INT:  # type: ignore[operator]
            raise PublishError(wording.publish_int_range(test, key, where, MIN_INT), test, key)
        if t is str and not _utf8(v):  # type: ignore[arg-type]
            raise PublishError(wording.publish_not_utf8(test, key, where), test, key)
        return v
    if t not in CONTAINERS:
        raise PublishError(wording.publish_bad_type(test, key, where, _type_name(t)), test, key)
    if depth >= MAX_DEPTH:
        raise PublishError(wording.publish_too_deep(test, key, MAX_DEPTH), test, key)
    if id(v) in path:
        raise PublishError(wording.publish_cycle(test, key, where), test, key)
    path.add(id(v))
    try:
        if isinstance(v, dict):
            out: dict[object, object] = {}
            for k, x in v.items():
                ck = _copy(k, f"{where} key {k!r}", depth + 1, path, test, key)
                out[ck] = _copy(x, f"{where}[{k!r}]", depth + 1, path, test, key)
            return out
        assert isinstance(v, (list, tuple, set, frozenset))  # t is in CONTAINERS
        return _rebuilt(t, [_copy(x, f"{where}[{n}]", depth + 1, path, test, key)
                            for n, x in enumerate(v)])
    finally:
        path.discard(id(v))


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates
        return False
    return True


def _rebuilt(t: type, items: list[object]) -> object:
    """A list, tuple, set or frozenset (``t``) of ``items``."""
    if t is list:
        return items
    if t is tuple:
        return tuple(items)
    if t is set:
        return set(items)
    return frozenset(items)


def _type_name(t: type) -> str:
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def copied(values: Mapping[str, object]) -> Values:
    """A fresh deep copy of values that were :func:`checked` already."""
    return {k: _fresh(v) for k, v in values.items()}


def _fresh(v: object) -> object:
    if isinstance(v, dict):
        return {_fresh(k): _fresh(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, set, frozenset)):
        return _rebuilt(type(v), [_fresh(x) for x in v])
    return v


class Publication:
    """What one attempt of one test published so far (a rerun starts a new one)."""

    __slots__ = ("_used", "test", "values")

    def __init__(self, test: str) -> None:
        self.test = test
        self.values: Values = {}
        self._used = 0

    def publish(self, key: object, value: object) -> None:
        test = self.test
        if type(key) is not str or not key:
            raise PublishError(wording.publish_bad_key(test, key), test, key)
        if key in self.values:
            raise PublishError(wording.publish_twice(test, key), test, key)
        copy = checked(value, test, key)
        size = size_of(copy)
        if size > MAX_VALUE_BYTES:
            raise PublishError(wording.publish_value_too_big(test, key, size, MAX_VALUE_BYTES),
                               test, key)
        if self._used + size > MAX_TEST_BYTES:
            raise PublishError(wording.publish_test_too_big(
                test, key, self._used + size, MAX_TEST_BYTES), test, key)
        self._used += size
        self.values[key] = copy

    def keys(self) -> list[str]:
        return list(self.values)


class Published(Mapping[str, object]):
    """The read-only mapping ``dag.result(target)`` returns.

    A missing key raises :class:`UnpublishedKeyError` naming the keys that
    were published (and both tests).
    """

    __slots__ = ("_reader", "_target", "_values")

    def __init__(self, values: Values, reader: str, target: str) -> None:
        self._values = values
        self._reader = reader
        self._target = target

    def __getitem__(self, key: str) -> object:
        try:
            return self._values[key]
        except (KeyError, TypeError):
            raise UnpublishedKeyError(
                wording.result_no_key(self._reader, self._target, key, list(self._values)),
                key, list(self._values)) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        # Keys only: values appear nowhere they were not asked for (--showlocals).
        return f"<results of {self._target}: keys {list(self._values)!r}>"


def requires_closure(start: int, requires: Sequence[Sequence[int]]) -> set[int]:
    """Every test ``start`` depends on through requires-pass edges, transitively.

    Ordering-only edges (``run_after``) do not count: such a prerequisite
    may have failed and the test still runs, so its values may not exist.
    """
    seen: set[int] = set()
    stack = list(requires[start])
    while stack:
        p = stack.pop()
        if p not in seen:
            seen.add(p)
            stack.extend(requires[p])
    return seen


def ordered_before(start: int, requires: Sequence[Sequence[int]],
                   after: Sequence[Sequence[int]]) -> set[int]:
    """Every test that ends before ``start`` begins, through edges of either kind."""
    seen: set[int] = set()
    stack = [*requires[start], *after[start]]
    while stack:
        p = stack.pop()
        if p not in seen:
            seen.add(p)
            stack.extend(requires[p])
            stack.extend(after[p])
    return seen


def readable(reader: int, target: int, requires: Sequence[Sequence[int]]) -> bool:
    return target in requires_closure(reader, requires)


class ResultStore:
    """Values of finished tests in one process (a worker, or a serial run), by node id.

    On a worker they come from the tests it ran itself and, ahead of each
    test that reads any, from the controller (:meth:`deliver`, called in
    the channel's receiver thread); :meth:`wait_ready` lets the reader's
    fixture wait until the controller's delivery for it has arrived.
    """

    def __init__(self) -> None:
        self._values: dict[str, Values] = {}
        self._ready: set[str] = set()
        self._cond = threading.Condition()

    def commit(self, test: str, values: Mapping[str, object]) -> None:
        with self._cond:
            self._values[test] = dict(values)

    def deliver(self, ready: Iterable[str], values: Mapping[str, Values]) -> None:
        with self._cond:
            self._values.update(values)
            self._ready.update(ready)
            self._cond.notify_all()

    def wait_ready(self, test: str, timeout: float) -> bool:
        """True once the delivery for ``test`` has arrived (False after ``timeout`` s)."""
        with self._cond:
            return self._cond.wait_for(lambda: test in self._ready, timeout)

    def get(self, test: str) -> Values:
        """A copy of what ``test`` published (empty: nothing, or it did not pass)."""
        with self._cond:
            found = self._values.get(test)
        return {} if found is None else copied(found)

    def keys_by_test(self) -> dict[str, list[str]]:
        with self._cond:
            return {t: list(v) for t, v in self._values.items() if v}


class Relay:
    """The controller's share: what each test published, and what each worker has.

    ``requires`` are the graph's requires-pass edges; ``passed(i)`` tells
    whether test ``i`` has passed for good.  :meth:`missing` walks a
    dispatched test's prerequisites and names the values its worker lacks;
    a passed prerequisite whose whole ancestry was delivered to the worker is not
    walked again for that worker, so each (worker, test) pair is visited once.
    """

    def __init__(self, requires: Sequence[Sequence[int]],
                 passed: Callable[[int], bool]) -> None:
        self.requires = requires
        self.passed = passed
        self.values: dict[int, Values] = {}
        self._delivered: dict[Hashable, set[int]] = {}
        self._complete: dict[Hashable, set[int]] = {}

    def received(self, worker: Hashable, test: int, values: Values) -> None:
        """``worker`` ran ``test``, which published ``values`` (kept if the test passes)."""
        self.values[test] = values
        self._delivered.setdefault(worker, set()).add(test)

    def settled(self, test: int) -> None:
        """``test``'s outcome is final: its values stay only if it passed."""
        if not self.passed(test):
            self.values.pop(test, None)

    def missing(self, worker: Hashable, tests: Iterable[int]) -> dict[int, Values]:
        """Values of the prerequisites of ``tests`` that ``worker`` was not sent yet.

        Recorded as delivered once returned (the caller sends them).
        """
        delivered = self._delivered.setdefault(worker, set())
        complete = self._complete.setdefault(worker, set())
        out: dict[int, Values] = {}
        seen: set[int] = set()
        stack = [p for t in tests for p in self.requires[t]]
        while stack:
            p = stack.pop()
            if p in seen or p in complete:
                continue
            seen.add(p)
            if p in self.values and p not in delivered:
                out[p] = self.values[p]
                delivered.add(p)
            stack.extend(self.requires[p])
        # A passed test ran after all of its prerequisites passed: everything
        # above it was walked now and is delivered from here on.
        complete.update(p for p in seen if self.passed(p))
        return out

    def forget(self, worker: Hashable) -> None:
        self._delivered.pop(worker, None)
        self._complete.pop(worker, None)

    def keys_by_test(self) -> dict[int, list[str]]:
        return {t: list(v) for t, v in sorted(self.values.items()) if v}
