"""The state record of a probe's traced serial pass: a summary of the
module-level values of the modules below the rootdir (what a test may leave
for a later one in its process), taken at every test's end, and what keeps
it cheap: a value's summary (:func:`fingerprint`) is taken again only when
what it read may have changed (:class:`_Watch`, :class:`_Reads`), a module's
watched names only when one was bound or removed (:class:`ModuleRecord`), and
all of it is checked in one pass at C speed (:class:`WholeRecord`).  Builtin
operations only: no code of the suite runs (``probe_plugin.ProbeReporter._state``
takes the records)."""

from __future__ import annotations

import functools
import itertools
import operator
import sys
import types
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Final

#: How deep :func:`fingerprint` looks into containers and instances, how many
#: items of each container it looks into (of all: their identities), and how
#: much of a string or a buffer (an array) it compares whole: the cost stays
#: bounded per value, whatever the suite's modules hold.
FINGERPRINT_DEPTH: Final = 3
FINGERPRINT_ITEMS: Final = 4
FINGERPRINT_TEXT: Final = 256
FINGERPRINT_BYTES: Final = 1 << 16
#: Immutable values compared by value.
_LEAVES: Final = frozenset({type(None), bool, int, float, complex, str, bytes})
#: Kinds of module-level values a state record passes by (all callable, or modules).
_DEFINITIONS: Final = frozenset({
    types.FunctionType, types.BuiltinFunctionType, types.ModuleType, type,
    types.MethodType, functools.partial})
#: An object's identity, as ``id`` gives it but without ``id``'s audit event: the
#: probe's own audit hook (a Python call) would run for each (5 x the cost).
_identity: Final = object.__hash__
_SEQUENCES: Final = (list, tuple, set, frozenset)
_ITERATE: Final[dict[type, Callable[[Any], Iterator[object]]]] = {
    list: list.__iter__, tuple: tuple.__iter__, set: set.__iter__,
    frozenset: frozenset.__iter__}
#: Types whose instances are neither containers nor have attributes nor a
#: buffer: compared by identity, and not looked into as items (asked once: the
#: exception costs).
OPAQUE: set[type] = set()


def fingerprint(value: object, depth: int) -> object:
    """A comparable summary of ``value`` that changes when the value does, built
    from builtin operations only: no ``repr``, no ``__eq__``, ``__hash__`` or
    ``__iter__`` of the suite's classes is called.

    A container carries its identity (rebinding a name to an equal new object
    counts), its length, the identities of all its items (C speed: an item put
    in place of another, a number changed in a list, shows) and the summaries
    of its first items, down to ``depth``; an instance its attributes; a buffer
    its size and a hash of its bytes.  Not seen: a change inside a mutable item
    past the first ones or below ``depth`` (the former ``repr``, cut at 2,000
    characters, missed those past the cut, and cost bpypolyskel's serial pass
    20 x the plain run: every test module holds lists of vectors).

    Over 60 lines: one dispatch by kind of value (leaf, dict, sequence,
    instance, buffer) inside one ``try`` that makes any refusal the identity;
    it recurses per item, for every module-level value after every test of
    the serial pass."""
    kind = type(value)
    if kind in _LEAVES:
        if kind is float:
            # nan != nan would invent a change at every test.
            return value if value == value else "nan"
        if (kind is str or kind is bytes) and len(value) > FINGERPRINT_TEXT:  # type: ignore[arg-type]
            return (kind.__name__, len(value), hash(value))  # type: ignore[arg-type]
        return (kind.__name__, value)  # 1 == 1.0 == True would hide a change
    mark: tuple[object, ...] = (kind.__qualname__, _identity(value))
    if depth <= 0:
        return mark
    try:
        # The identities of all items say whether one was put in place of
        # another; only the first mutable ones are looked into (an immutable
        # one changes only by being replaced).
        if isinstance(value, dict):
            keys, values = tuple(dict.keys(value)), tuple(dict.values(value))
            return (*mark, len(keys), hash((*map(_identity, keys), *map(_identity, values))),
                    _first(values, depth - 1))
        if kind in _SEQUENCES or isinstance(value, _SEQUENCES):
            items = _items(value, kind)
            return (*mark, len(items), hash(tuple(map(_identity, items))),
                    _first(items, depth - 1))
        if (attrs := _attrs(value)) is not None:
            # Its attributes as a level of their own: ``module.thing.x = 1`` and
            # ``module.things[0].x = 1`` show.
            return (*mark, fingerprint(attrs, depth))
        if kind in OPAQUE:
            return mark
        try:
            view = memoryview(value)  # type: ignore[arg-type]
        except TypeError:
            OPAQUE.add(kind)
            return mark
        with view:
            if view.nbytes <= FINGERPRINT_BYTES:
                return (*mark, view.nbytes, hash(view.tobytes()))
            return (*mark, view.nbytes)
    except Exception:  # a value that refuses to be looked into: its identity
        return mark


def _items(value: Any, kind: type) -> tuple[object, ...]:
    """The items of a builtin sequence or set (or of an instance of a subclass), by
    the builtin type's own iteration: a subclass's ``__iter__`` is the suite's code."""
    return tuple(_ITERATE[kind](value) if kind in _ITERATE else
                 next(it for t, it in _ITERATE.items() if isinstance(value, t))(value))


def _first(items: tuple[object, ...], depth: int) -> tuple[object, ...]:
    """The summaries of the first ``FINGERPRINT_ITEMS`` items worth looking into
    (not a leaf, not opaque): only those are summarized, not every item's (a
    dict of a thousand instances cost a record a thousand summaries, kept four)."""
    # Of a list of a hundred vectors (opaque) or numbers, none is looked into:
    # their types asked at C speed, as the loop below would pass each by.
    kinds = set(map(type, items))
    if kinds <= _LEAVES or kinds - _LEAVES <= OPAQUE:
        return ()
    inner: list[object] = []
    for v in items:
        if type(v) not in _LEAVES and type(v) not in OPAQUE:
            summary = fingerprint(v, depth)
            # A kind learned opaque just now is passed by, as every later record
            # passes it by: else the first record of a value holding one (shapepy's
            # dict of ``range`` objects) differs from the next, and the first test
            # reads as having changed a test module's values.
            if type(v) not in OPAQUE:
                inner.append(summary)
                if len(inner) == FINGERPRINT_ITEMS:
                    break
    return tuple(inner)


#: ``type.__flags__`` read past any metaclass (no code of the suite runs).
_FLAGS: Final = type.__dict__["__flags__"].__get__
#: CPython's ``Py_TPFLAGS_IMMUTABLETYPE`` (3.10 on): no attribute of the type,
#: nor the class of an instance of it, can be assigned.
_IMMUTABLE: Final = 1 << 8


def _fixed(kind: type) -> bool:
    """Whether an object of this type keeps its type and what the type says
    (``__qualname__``, ``__call__``): an immutable type's, unless a module's (a
    module's class may be set to a subclass)."""
    return bool(_FLAGS(kind) & _IMMUTABLE) and not issubclass(kind, types.ModuleType)


class _Reads:
    """What a summary read that may change, kept to check at C speed whether it
    did: the mutable builtin containers it read the items of (a dict's keys and
    values as its views) and those items, as tuples that together hold them in
    order (kept alive: an identity is not reused while they are held); the
    objects it met whose class may change (``typed``) and their classes; and
    of those it looked into (``looked``) what it asked of each
    (:func:`_looks`).  Joined by lists of references (:meth:`joined`): no item
    is copied again."""

    __slots__ = ("attrs", "containers", "kinds", "lengths", "looked", "marks", "owners",
                 "parts", "typed")

    def __init__(self, containers: list[Any], lengths: tuple[int, ...],
                 parts: list[tuple[object, ...]], typed: Sequence[object] = (),
                 looked: Sequence[object] = ()) -> None:
        self.containers, self.lengths, self.parts = containers, lengths, parts
        self.typed, self.looked = typed, looked
        self.kinds: tuple[type, ...] = tuple(map(type, typed)) if typed else ()
        # Those with an attributes' dict (their class says so, and stays).
        self.owners = [o for o in looked if type(o).__dictoffset__] if looked else ()
        # (A module's record, most of them, looks into none: asked nothing.)
        self.marks, self.attrs = _looks(looked, self.owners) if looked else _NONE

    @staticmethod
    def of(containers: list[Any], typed: Sequence[object] = (),
           looked: Sequence[object] = ()) -> _Reads:
        """What ``containers`` hold now, and what ``typed`` and ``looked`` are."""
        return _Reads(containers, tuple(map(len, containers)),
                      [tuple(itertools.chain.from_iterable(containers))], typed, looked)

    @staticmethod
    def joined(reads: Iterable[_Reads]) -> _Reads:
        """One after the other."""
        containers: list[Any] = []
        lengths: list[int] = []
        parts: list[tuple[object, ...]] = []
        typed: list[object] = []
        kinds: list[type] = []
        looked: list[object] = []
        owners: list[object] = []
        names: list[object] = []
        claims: list[object] = []
        attrs: list[object] = []
        for r in reads:
            containers += r.containers
            lengths += r.lengths
            parts += r.parts
            if r.typed:
                typed += r.typed
                kinds += r.kinds
                looked += r.looked
                owners += r.owners
                names += r.marks[0]
                claims += r.marks[1]
                attrs += r.attrs
        out = _Reads(containers, tuple(lengths), parts)
        out.typed, out.kinds, out.looked, out.owners = typed, tuple(kinds), looked, owners
        out.marks, out.attrs = (tuple(names), tuple(claims)), tuple(attrs)
        return out

    def same(self) -> bool:
        """Whether each container holds the very items it held and each object met
        is as it was (identities compared at C speed, never ``==``); False if one
        changed meanwhile (a thread of the suite's: "changed size during
        iteration") or refuses to be asked."""
        try:
            if not (tuple(map(len, self.containers)) == self.lengths
                    and all(map(operator.is_, itertools.chain.from_iterable(self.containers),
                                itertools.chain.from_iterable(self.parts)))):
                return False
            if not self.typed:  # (nor looked: those are typed too)
                return True
            if not all(map(operator.is_, map(type, self.typed), self.kinds)):
                return False
            marks, attrs = _looks(self.looked, self.owners)
            return marks == self.marks and all(map(operator.is_, attrs, self.attrs))
        except Exception:
            return False


#: What :func:`_looks` says of no object.
_NONE: Final[tuple[tuple[tuple[object, ...], tuple[object, ...]], tuple[object, ...]]] = (
    ((), ()), ())
#: The builtin containers :func:`fingerprint` tells apart by ``isinstance``.
_CLAIMS: Final = (dict, list, tuple, set, frozenset)
_QUALNAME: Final = operator.attrgetter("__qualname__")


def _looks(looked: Sequence[object], owners: Sequence[object]) -> tuple[
        tuple[tuple[object, ...], tuple[object, ...]], tuple[object, ...]]:
    """What :func:`fingerprint` asks of each object whose class may change that
    it looks into, besides the class (``typed`` holds them too): the class's
    ``__qualname__`` and which of :data:`_CLAIMS` the object is an instance of
    (``__class__`` may be a property); and each of ``owners``' attributes'
    dict, compared by identity.  At C speed: no loop of Python code."""
    names = tuple(map(_QUALNAME, map(type, looked)))
    claims = tuple(zip(*(map(isinstance, looked, itertools.repeat(c)) for c in _CLAIMS),
                       strict=True))
    attrs = tuple(map(object.__getattribute__, owners, itertools.repeat("__dict__")))
    return (names, claims), attrs


def _attrs(value: object) -> dict[str, object] | None:
    """The dict :func:`fingerprint` reads an object's attributes from, else None
    (:func:`_reads` reads it the same way)."""
    if not type(value).__dictoffset__:
        return None
    attrs = object.__getattribute__(value, "__dict__")
    return attrs if isinstance(attrs, dict) else None


class ModuleRecord:
    """A module's names as a state record last saw them (the values kept alive)
    and the values it looks at (:class:`_Watch`), with their summaries."""

    def __init__(self, name: str, keys: tuple[str, ...], values: tuple[object, ...]) -> None:
        self.keys, self.values = keys, values
        self.watched: list[_Watch] = []
        #: The values whose type may change, their types, whether each is callable.
        self.moving = tuple(v for v in values if not _fixed(type(v)))
        self.kinds = tuple(map(type, self.moving))
        self.calls = tuple(map(callable, self.moving))
        for key, value in zip(keys, values, strict=True):
            # Most of a module's names are its functions and classes: one set
            # lookup passes them by before the three checks.
            if (type(value) in _DEFINITIONS or key.startswith("__") or callable(value)
                    or isinstance(value, type(sys))):
                continue
            self.watched.append(_Watch(f"{name}.{key}", value))
        #: The last summaries, and what all of them read (None: one reads more).
        self.last: dict[str, object] = {}
        self.reads: _Reads | None = None
        self.opaque = -1

    def holds(self, keys: tuple[str, ...], values: tuple[object, ...]) -> bool:
        """Whether the module's names are those seen (by identity, never by ``==``),
        and what a type decided of each is what it decided then."""
        return (keys == self.keys and len(values) == len(self.values)
                and all(map(operator.is_, values, self.values))
                and all(map(operator.is_, map(type, self.moving), self.kinds))
                and tuple(map(callable, self.moving)) == self.calls)

    def summaries(self) -> dict[str, object]:
        """Each looked-at value's summary: the last ones while nothing any of
        them read changed (one check for the module), else each value's own
        (:meth:`_Watch.summary`)."""
        if self.reads is not None and self.opaque == len(OPAQUE) and self.reads.same():
            return self.last
        self.opaque = len(OPAQUE)
        self.last = {w.key: w.summary() for w in self.watched}
        reads = [w.reads for w in self.watched]
        self.reads = None if None in reads else _Reads.joined(
            r for r in reads if r is not None)
        return self.last


class WholeRecord:
    """What a state record read of all the modules below the rootdir, checked
    at the next record in one pass at C speed (bpypolyskel: some 30,000 names
    and items of 156 modules, where a check per module cost as much again):
    each module's names and values (its dict's views; a name rebound or added
    shows) and the containers its summaries read, the values whose type may
    change (their types, whether callable), the kinds ``OPAQUE`` holds.  The
    modules with a value summarized at every record (``restless``) are
    summarized again in their order."""

    def __init__(self, rooted: list[tuple[str, object]], modules: list[ModuleRecord],
                 values: dict[str, object], opaque: int) -> None:
        self.rooted, self.modules, self.values, self.opaque = rooted, modules, values, opaque
        self.restless = [(i, m) for i, m in enumerate(modules) if m.reads is None]
        reads: list[_Reads] = []
        for (_, module), m in zip(rooted, modules, strict=True):
            names = vars(module)
            # What the module's record was made of (the copy _watched took).
            reads.append(_Reads([dict.keys(names), dict.values(names)],
                                (len(m.keys), len(m.values)), [m.keys, m.values]))
            if m.reads is not None:
                reads.append(m.reads)
        self.reads = _Reads.joined(reads)
        self.moving = tuple(v for m in modules for v in m.moving)
        self.kinds = tuple(k for m in modules for k in m.kinds)
        self.calls = tuple(c for m in modules for c in m.calls)

    def holds(self) -> bool:
        """Whether nothing the last record read changed (its restless values aside)."""
        return (self.opaque == len(OPAQUE) and self.reads.same()
                and all(map(operator.is_, map(type, self.moving), self.kinds))
                and tuple(map(callable, self.moving)) == self.calls)

    def again(self) -> dict[str, object]:
        """The record's values once :meth:`holds`: the last ones, with the restless
        modules' summaries taken again.  Where one finds a kind of value opaque,
        the modules after it are summarized knowing it, those before it not,
        as a record taking each module in turn does."""
        values = self.values
        for i, m in self.restless:
            opaque = len(OPAQUE)
            fresh = m.summaries()
            if len(OPAQUE) != opaque:
                values = {}
                for j, other in enumerate(self.modules):
                    values.update(other.last if j <= i else other.summaries())
                return values  # self.opaque no longer holds: the next record is taken anew
            if any(values[k] != v for k, v in fresh.items()):
                values = {**values, **fresh}
        self.values = values
        return values


class _Watch:
    """A module-level value a state record looks at and its summary
    (:func:`fingerprint`), taken again only when what the summary read may have
    changed: the items of each mutable builtin container it looked into
    (:class:`_Reads`), or the kinds of value ``OPAQUE`` holds; a value whose
    summary reads more (an instance's attributes, a buffer's bytes) is summarized
    at every record.  The record is the one summarizing every value at every
    record gives, at a fraction of its cost (bpypolyskel's 151 test modules each
    hold lists of a hundred vectors)."""

    __slots__ = ("key", "known", "opaque", "reads", "value")

    def __init__(self, key: str, value: object) -> None:
        self.key, self.value = key, value
        self.known: object = None
        self.reads: _Reads | None = None
        self.opaque = -1

    def summary(self) -> object:
        if self.reads is not None and self.opaque == len(OPAQUE) and self.reads.same():
            return self.known
        # Counted before the summary: one that finds a new opaque kind differs
        # from the next, which knows it, and is taken again.
        self.opaque = len(OPAQUE)
        self.known = fingerprint(self.value, FINGERPRINT_DEPTH)
        containers: list[Any] = []
        typed: list[object] = []
        looked: list[object] = []
        try:
            self.reads = _Reads.of(containers, typed, looked) \
                if _reads(self.value, FINGERPRINT_DEPTH, (containers, typed, looked)) else None
        except Exception:  # changed meanwhile (a thread), or refused: summarized at the next record
            self.reads = None
        return self.known


def _reads(value: Any, depth: int,
           into: tuple[list[Any], list[object], list[object]]) -> bool:
    """Append to ``into`` what :func:`fingerprint` reads of ``value`` at ``depth``
    that may change: the mutable builtin containers whose items it reads (a
    dict's keys and values as its views), the objects whose class may change
    (their class says which items it looks into), and those of them it looks
    into (:func:`_looks`: an instance's attributes are its dict's items).  True
    when that is all it reads that may change; False where it reads more (a
    buffer's bytes, the items of a list or set of a class of the suite's,
    which iterates them its own way)."""
    containers, typed, looked = into
    kind = type(value)
    if kind in _LEAVES:
        return True
    if not _fixed(kind):
        typed.append(value)
        looked.append(value)
    if depth <= 0:
        return True
    if isinstance(value, dict):  # a subclass too: read as a dict
        containers += (dict.keys(value), dict.values(value))
        items: tuple[object, ...] = tuple(dict.values(value))
    elif kind is list or kind is set:
        containers.append(value)
        items = tuple(value)
    elif isinstance(value, tuple | frozenset):  # immutable: their items stay
        items = _items(value, kind)
    elif isinstance(value, _SEQUENCES):
        return False
    elif (attrs := _attrs(value)) is not None:
        return _reads(attrs, depth, into)
    else:
        return kind in OPAQUE
    kinds = set(map(type, items))
    if not all(map(_fixed, kinds)):
        typed += [v for v in items if not _fixed(type(v))]
    looked_into = 0
    for v in items:  # the items _first looks into, in its order
        if type(v) not in _LEAVES and type(v) not in OPAQUE:
            if not _reads(v, depth - 1, into):
                return False
            looked_into += 1
            if looked_into == FINGERPRINT_ITEMS:
                break
    return True
