"""The probe's record of whether a test changed the process's state (module-level
values below the rootdir): what the finder's hints and its same-process verdicts
rest on.  It must see a change made in place, and cost little and run none of the
suite's code whatever the modules hold.  And a probe formats no failure of a
test it runs: the finder reads only the outcomes."""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import forked_workers
from support.dagtester import DagTester

from pytest_dagorder.finder import probe_plugin, state_record

SUITE = """
    class Loud:
        calls = 0

        def __repr__(self):
            Loud.calls += 1
            return "loud"

        def __eq__(self, other):
            Loud.calls += 1
            return True

        __hash__ = object.__hash__

    thing = Loud()
    table = [[0] for _ in range(3)]
    config = {"db": {"url": "a"}, "things": [Loud()]}
    counter = 0
    numbers = list(range(1000))

    def test_nothing():
        pass

    def test_appends_inside():
        table[1].append(1)

    def test_sets_an_attribute():
        thing.x = 5

    def test_changes_a_nested_value():
        config["db"]["url"] = "b"

    def test_changes_an_item_of_an_item():
        config["things"][0].y = 1

    def test_rebinds():
        global counter
        counter += 1

    def test_replaces_a_number_far_down_a_list():
        numbers[900] = -1

    def test_reads_only():
        assert table and thing and config and numbers

    def test_no_code_of_the_suite_ran():
        assert Loud.calls == 0
"""


def test_the_state_record_sees_changes_in_place_and_runs_no_code_of_the_suite(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_state=textwrap.dedent(SUITE))
    out = pytester.path / "out.jsonl"
    monkeypatch.setenv(probe_plugin.OUT, str(out))
    monkeypatch.setenv(probe_plugin.TRACE, "1")
    # Set by this run; a probe's pytest would drop it after its first test.
    monkeypatch.delenv("PYTEST_CURRENT_TEST", raising=False)
    with forked_workers():  # a probe is a process of its own, as the finder starts it
        result = pytester.runpytest_subprocess("-p", probe_plugin.__name__, "-p", "no:randomly",
                                               "-p", "no:cacheprovider")
    result.assert_outcomes(passed=9)
    state = {json.loads(line)["id"].split("::")[1]: json.loads(line)["state"]
             for line in out.read_text().splitlines()}
    assert state == {
        "test_nothing": False,
        "test_appends_inside": True,
        "test_sets_an_attribute": True,
        "test_changes_a_nested_value": True,
        "test_changes_an_item_of_an_item": True,
        "test_rebinds": True,
        "test_replaces_a_number_far_down_a_list": True,
        "test_reads_only": False,
        "test_no_code_of_the_suite_ran": False,
    }


@pytest.mark.parametrize("value", [float("nan"), {"k": float("nan")}, [[1.0], {2: "x"}]])
def test_an_unchanged_value_has_an_unchanged_fingerprint(value: object) -> None:
    assert state_record.fingerprint(value, state_record.FINGERPRINT_DEPTH) == \
        state_record.fingerprint(value, state_record.FINGERPRINT_DEPTH)


class _Sealed:
    """Neither a container nor a buffer, and no attributes of its own."""
    __slots__ = ()


def test_the_first_record_of_an_opaque_item_equals_the_next(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The first look at a kind learns that it is opaque: that record must equal
    # the later ones, which pass the kind by (else the suite's first test reads
    # as having changed the values it holds).
    monkeypatch.setattr(state_record, "OPAQUE", set())
    value = {"k": [_Sealed(), _Sealed()]}
    first = state_record.fingerprint(value, state_record.FINGERPRINT_DEPTH)
    assert _Sealed in state_record.OPAQUE
    assert state_record.fingerprint(value, state_record.FINGERPRINT_DEPTH) == first


def test_a_value_put_in_place_of_an_equal_one_counts_as_a_change() -> None:
    first, second = [1, 2], [1, 2]
    holder = [first]
    before = state_record.fingerprint(holder, state_record.FINGERPRINT_DEPTH)
    holder[0] = second
    assert state_record.fingerprint(holder, state_record.FINGERPRINT_DEPTH) != before


def _counted(monkeypatch: pytest.MonkeyPatch, owner: object, name: str) -> list[int]:
    """Count the calls of ``owner.name`` (patched for the test): the list's one
    item, which the test may reset."""
    calls = [0]
    real = getattr(owner, name)

    def counted(*args: Any) -> Any:
        calls[0] += 1
        return real(*args)

    monkeypatch.setattr(owner, name, counted)
    return calls


class _Point:
    def __init__(self, k: int) -> None:
        self.x, self.y = [k], {"k": [k]}


def test_a_record_summarizes_only_the_first_items_of_a_dict(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A module-level registry of a thousand instances: its record summarizes the
    # first few (their identities all count), not every one of them.
    registry = {k: _Point(k) for k in range(1000)}
    calls = _counted(monkeypatch, state_record, "fingerprint")
    before = state_record.fingerprint(registry, state_record.FINGERPRINT_DEPTH)
    assert calls[0] < 50
    registry[999] = _Point(999)  # past the first items: its identity shows
    assert state_record.fingerprint(registry, state_record.FINGERPRINT_DEPTH) != before
    registry[0].x.append(1)  # inside a first item: its summary shows
    changed = state_record.fingerprint(registry, state_record.FINGERPRINT_DEPTH)
    registry[0].x.pop()
    assert changed != state_record.fingerprint(registry, state_record.FINGERPRINT_DEPTH)


def test_a_record_asks_which_modules_lie_below_the_rootdir_only_after_an_import(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(probe_plugin.OUT, str(pytester.path / "out.jsonl"))
    config = pytester.parseconfigure("-p", "no:cacheprovider")
    reporter = probe_plugin.ProbeReporter(config, pytester.path / "out.jsonl")
    asked = _counted(monkeypatch, reporter, "_below_root")
    first = reporter._state()
    assert asked[0] == len(sys.modules)
    asked[0] = 0
    assert reporter._state() == first
    assert asked[0] == 0
    pytester.makepyfile(below_root_module="VALUE = [1]\n")
    monkeypatch.syspath_prepend(pytester.path)
    __import__("below_root_module")
    try:
        assert any(k.startswith("below_root_module.") for k in reporter._state()[1])
        assert asked[0] == len(sys.modules)
    finally:
        sys.modules.pop("below_root_module", None)


def test_a_record_passes_by_only_the_interpreters_and_the_kernels_folders(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(probe_plugin.OUT, str(pytester.path / "out.jsonl"))
    config = pytester.parseconfigure("-p", "no:cacheprovider")
    reporter = probe_plugin.ProbeReporter(config, pytester.path / "out.jsonl")
    reporter.current = "test_t.py::test_t"
    prefix = str(Path(sys.prefix).resolve())
    shared = ["/dev/shm/suite.lock", "/devel/project/data.txt", f"{prefix}-other/data.txt"]
    for path in [f"{prefix}/lib/data.txt", "/dev/null", "/proc/self/status", *shared]:
        reporter._note(path)
    # Shared memory is a folder like another; a name that only starts like an
    # ignored folder's is not in it.
    assert sorted(reporter.before) == sorted(shared)


#: Module-level values of every kind a state record summarizes differently.
VALUES = """
    class Slot:
        __slots__ = ("x",)

    class Other:
        __slots__ = ("x",)

    class Plain:
        pass

    class Spare:
        pass

    table = [[k] for k in range(6)]
    deep = [[[0]], [[1]]]
    plain = list(range(100))
    mapping = {"a": [1], "b": 2, "c": {"d": [3]}}
    members = {1, 2, 3}
    pair = ([1], 2)
    frozen = frozenset({(1,), (2,)})
    slots = [Slot(), Slot()]
    thing = Plain()
    holder = Plain()
    holder.items = [[0]]
    people = [Plain(), Plain()]
    raw = bytearray(b"abc")
    number = 7
"""


def _change(m: Any, step: int) -> None:
    """The step-th change to the module of :data:`VALUES`: in place, deep, past
    the items a record looks into, rebinding, a class assigned or given
    ``__call__``, a kind of value no record saw, an instance's attribute deep
    down, its attributes' dict replaced, its class renamed, nothing."""
    [lambda: m.table[0].append(9), lambda: m.table[5].append(9),
     lambda: m.deep[0][0].append(1), lambda: m.plain.__setitem__(90, -1),
     lambda: m.plain.__setitem__(50, int("10" * 10)),
     lambda: m.plain.__setitem__(50, int("10" * 10)),  # an equal number, another object
     lambda: m.mapping["c"]["d"].append(4), lambda: m.mapping.pop("b"),
     lambda: m.mapping.__setitem__("b", 2), lambda: m.members.add(4),
     lambda: m.members.discard(1), lambda: m.pair[0].append(2),
     lambda: setattr(m.thing, "__class__", m.Spare), lambda: m.plain.append(m.Other()),
     lambda: setattr(m.thing, "x", 1), lambda: m.raw.__setitem__(0, 120),
     lambda: setattr(m, "number", 8), lambda: setattr(m, "table", [[0]]),
     lambda: setattr(m.Spare, "__call__", lambda self: None),
     lambda: delattr(m.Spare, "__call__"), lambda: setattr(m, "extra", [1]),
     lambda: delattr(m, "extra"), lambda: m.holder.items[0].append(1),
     lambda: setattr(m.people[1], "name", "x"),
     lambda: setattr(m.people[0], "__class__", m.Spare),
     lambda: setattr(m.holder, "__dict__", {"items": m.holder.items}),
     lambda: setattr(m.Spare, "__qualname__", "Renamed"), lambda: None][step]()


@contextlib.contextmanager
def _imported(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, name: str,
              source: str) -> Iterator[tuple[pytest.Config, Any]]:
    """A configured pytest and the module ``name`` of ``source`` imported
    (forgotten after)."""
    monkeypatch.setenv(probe_plugin.OUT, str(pytester.path / "out.jsonl"))
    config = pytester.parseconfigure("-p", "no:cacheprovider")
    pytester.makepyfile(**{name: textwrap.dedent(source)})
    monkeypatch.syspath_prepend(pytester.path)
    try:
        yield config, __import__(name)
    finally:
        sys.modules.pop(name, None)


@pytest.fixture
def state_values(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Iterator[
        tuple[pytest.Config, Any]]:
    """A configured pytest and the module of ``VALUES`` imported (forgotten after)."""
    with _imported(pytester, monkeypatch, "state_values", VALUES) as imported:
        yield imported


def test_a_record_taken_after_others_is_the_record_taken_afresh(
        pytester: pytest.Pytester, state_values: tuple[pytest.Config, Any]) -> None:
    # A record keeps what it worked out of a module while nothing it read
    # changed: after each change, what it says is what a reporter that never
    # saw the module before says (a change it would not see is one the fresh
    # one does not see either, and the other way round).
    config, module = state_values

    def fresh() -> tuple[dict[str, str], dict[str, object]]:
        return probe_plugin.ProbeReporter(config, pytester.path / "out.jsonl")._state()

    kept = probe_plugin.ProbeReporter(config, pytester.path / "out.jsonl")
    last = kept._state()
    for step in range(28):
        _change(module, step)
        fresh()  # a kind of value first seen is known to both from here on
        now = kept._state()
        assert now == fresh(), step
        # Past the first items of a list, the record looks at identities only.
        assert (now != last) == (step not in (1, 27)), step
        last = now


#: Two classes of one layout: the first read as an opaque object, the second (on
#: Python 3.12 on, PEP 688) as a buffer, whose bytes a record reads.
BUFFERS = """
    class Flat:
        __slots__ = ("x",)

    class Bytes:
        __slots__ = ("x",)

        def __buffer__(self, flags):
            return memoryview(b"abc")

    flats = [Flat(), Flat()]
"""


@pytest.mark.skipif(sys.version_info < (3, 12), reason="a class's __buffer__: Python 3.12 on")
def test_a_record_sees_an_items_class_change_it_did_not_look_into(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    # A record passes an opaque item by; given a class whose objects are buffers,
    # the same item is looked into: a record that kept its summary would miss it.
    with _imported(pytester, monkeypatch, "state_buffers", BUFFERS) as (config, module):
        kept = probe_plugin.ProbeReporter(config, pytester.path / "out.jsonl")
        kept._state()
        last = kept._state()
        module.flats[1].__class__ = module.Bytes
        fresh = probe_plugin.ProbeReporter(config, pytester.path / "out.jsonl")._state()
        assert kept._state() == fresh != last


def test_a_record_of_unchanged_modules_summarizes_no_value_again(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
        state_values: tuple[pytest.Config, Any]) -> None:
    # bpypolyskel's 151 test modules each hold lists of a hundred vectors: every
    # record summarizing each of them cost the traced serial pass more than the
    # tests.  Nor is an instance summarized again while its class and its
    # attributes stay (ensembl-genomio's and slurk's packages hold dozens:
    # tables, blueprints).  A value whose summary reads a buffer's bytes is
    # summarized again at every record.
    config, module = state_values
    reporter = probe_plugin.ProbeReporter(config, pytester.path / "out.jsonl")
    reporter._state()
    # The first record found a kind of value opaque (Slot): the values it
    # summarized before are summarized again, as a record afresh would.
    reporter._state()
    real = state_record.fingerprint
    summarized: list[object] = []

    def summary(value: object, depth: int) -> object:
        if depth == state_record.FINGERPRINT_DEPTH:
            summarized.append(value)
        return real(value, depth)

    monkeypatch.setattr(state_record, "fingerprint", summary)
    reporter._state()
    assert len(summarized) == 1 and summarized[0] is module.raw
    module.table[0].append(1)
    summarized.clear()
    reporter._state()
    assert len(summarized) == 2 and summarized[0] is module.table
    module.people[1].name = "y"
    summarized.clear()
    reporter._state()
    assert [v for v in summarized if v is not module.raw] == [module.people]


#: test_get reads what test_set left in the process: run alone in a fresh
#: process (the finder's check of its declared edge) it fails.  Its fixture's
#: value says when it is shown (pytest's long report of a failure shows the
#: test's arguments).
FAILS_ALONE = """
    import os
    import pytest
    from pytest_dagorder import depends_on
    STATE = {}

    class Shown:
        def __repr__(self):
            with open(os.environ["DAGORDER_E2E_LOG"], "a") as f:
                f.write("shown\\n")
            return "shown"

    @pytest.fixture
    def shown():
        return Shown()

    def test_set():
        STATE["x"] = 1

    @depends_on("test_set")
    def test_get(shown):
        assert STATE["x"] == 1
"""


@pytest.mark.dag_modes("own")
@pytest.mark.dagtester(timeout=300)
def test_a_probe_formats_no_failure_of_a_test_it_runs(
        dagtester: DagTester, monkeypatch: pytest.MonkeyPatch) -> None:
    # The finder reads only outcomes; a failure's long report reads and parses
    # the test's source, and the fresh-process checks fail by design.
    log = dagtester.path.parent / "shown.log"
    monkeypatch.setenv("DAGORDER_E2E_LOG", str(log))
    dagtester.pytester.makepyfile(test_g=textwrap.dedent(FAILS_ALONE))
    result = dagtester.run("--dag-find-missing", "-n", "2", "--dag-edges=edges.json")
    assert result.ret == 0, result.stdout.str()
    verdicts = json.loads((dagtester.path / "edges.json").read_text())["verdicts"]
    assert [(v["test"], v["separable"]) for v in verdicts] == [("test_g.py::test_get", False)]
    assert verdicts[0]["probe"].startswith("test_g.py::test_get failed in a fresh process")
    assert not log.exists(), log.read_text()


#: test_absent tries a daemon whose socket is not there (slurk's session fixture
#: tries docker's); test_present reaches a listening one.
SOCKETS = """
    import os
    import socket

    def test_absent():
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect(os.path.join(os.environ["SOCKETS"], "absent.sock"))
        except OSError:
            pass
        finally:
            s.close()

    def test_present():
        s = socket.socket(socket.AF_UNIX)
        s.connect(os.path.join(os.environ["SOCKETS"], "present.sock"))
        s.close()
"""


def test_a_connection_to_a_unix_socket_that_is_not_there_reaches_no_service(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    # A short folder: a Unix socket's path is limited to about 100 bytes.
    where = tmp_path_factory.mktemp("s")
    listening = socket.socket(socket.AF_UNIX)
    listening.bind(str(where / "present.sock"))
    listening.listen(1)
    pytester.makepyfile(test_sockets=textwrap.dedent(SOCKETS))
    out = pytester.path / "out.jsonl"
    monkeypatch.setenv("SOCKETS", str(where))
    monkeypatch.setenv(probe_plugin.OUT, str(out))
    monkeypatch.setenv(probe_plugin.TRACE, "1")
    monkeypatch.delenv("PYTEST_CURRENT_TEST", raising=False)
    try:
        with forked_workers():
            result = pytester.runpytest_subprocess("-p", probe_plugin.__name__, "-p",
                                                   "no:randomly", "-p", "no:cacheprovider")
    finally:
        listening.close()
    result.assert_outcomes(passed=2)
    services = {json.loads(line)["id"].split("::")[1]: json.loads(line)["services"]
                for line in out.read_text().splitlines()}
    assert services == {"test_absent": [], "test_present": [str(where / "present.sock")]}
