"""The core of published results (pytest_dagorder.core.published): checks, limits, stores, relay."""

from __future__ import annotations

import datetime
import enum
import threading
from collections import OrderedDict

import execnet
import pytest

from pytest_dagorder.core.published import (
    ITEM_BYTES,
    MAX_DEPTH,
    MAX_VALUE_BYTES,
    Publication,
    Published,
    PublishError,
    Relay,
    ResultStore,
    UnpublishedKeyError,
    checked,
    readable,
    requires_closure,
    size_of,
)


class Color(enum.IntEnum):
    RED = 1


class MyStr(str):
    pass


GOOD = [
    "text", b"bytes", 0, 2**100, -(2**31), 1.5, float("inf"), 2j, True, None,
    [1, "a"], (1, (2, 3)), {"k": {"n": [None]}}, {1, 2}, frozenset({"a"}),
    {(1, 2): b"x"}, [], {}, (),
]


@pytest.mark.parametrize("value", GOOD, ids=repr)
def test_what_execnet_serialises_is_accepted_and_copied(value: object) -> None:
    copy = checked(value, "test_a", "k")
    assert copy == value and type(copy) is type(value)
    # The claim behind the check: execnet sends it as it is.
    assert execnet.loads(execnet.dumps(copy)) == value


def test_the_copy_is_deep() -> None:
    value = {"a": [1, [2]]}
    copy = checked(value, "test_a", "k")
    value["a"][1].append(3)  # type: ignore[union-attr]
    assert copy == {"a": [1, [2]]}


@pytest.mark.parametrize(("value", "where", "name"), [
    (datetime.date(2024, 1, 1), "value", "datetime.date"),
    ({"start": [object()]}, "value['start'][0]", "object"),
    ([Color.RED], "value[0]", "test_results.Color"),
    (MyStr("x"), "value", "test_results.MyStr"),
    (OrderedDict(a=1), "value", "collections.OrderedDict"),
    ({Color.RED: 1}, "value key <Color.RED: 1>", "test_results.Color"),
    (range(3), "value", "range"),
])
def test_anything_else_is_refused_naming_test_key_and_place(
    value: object, where: str, name: str
) -> None:
    with pytest.raises(PublishError) as info:
        checked(value, "test_a", "k")
    assert str(info.value).startswith(f"test_a publishes 'k': {where} is a {name}, ")
    assert (info.value.test, info.value.key) == ("test_a", "k")
    # execnet would refuse it too (or change its type).
    try:
        back = execnet.loads(execnet.dumps(value))
    except (execnet.DumpError, execnet.DataFormatError):
        return
    assert type(back) is not type(value)


@pytest.mark.parametrize(("value", "message"), [
    ([1, -(2**31) - 1],
     "value[1] is an int below -2147483648, which cannot be sent to another process"),
    ({"k": "\ud800"}, "value['k'] is a str that cannot be encoded as UTF-8"),
])
def test_values_execnet_would_fail_on_while_sending_are_refused(
    value: object, message: str
) -> None:
    with pytest.raises(Exception):  # noqa: B017 - struct.error or DumpError, execnet's own
        execnet.dumps(value)
    with pytest.raises(PublishError, match=message.replace("[", "\\[")):
        checked(value, "test_a", "k")


def test_cycles_and_depth_are_refused() -> None:
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(PublishError, match="value\\[0\\] contains itself"):
        checked(loop, "test_a", "k")
    deep: list[object] = []
    for _ in range(MAX_DEPTH + 1):
        deep = [deep]
    with pytest.raises(PublishError, match=f"nested more than {MAX_DEPTH} levels"):
        checked(deep, "test_a", "k")
    shared = [1]
    assert checked([shared, shared], "test_a", "k") == [[1], [1]]  # a DAG is fine


def test_size_counts_bytes_of_strings_and_a_word_per_item() -> None:
    assert size_of(b"x" * 100) == 100  # what len() says: nothing added
    assert size_of("é") == 2
    assert size_of([1, 2.0, None]) == ITEM_BYTES + 3 * ITEM_BYTES + 3 * ITEM_BYTES
    assert size_of({"ab": 1}) == ITEM_BYTES + ITEM_BYTES + 2 + ITEM_BYTES
    assert size_of(["", "", ""]) == 4 * ITEM_BYTES  # empty strings still cost an entry
    assert size_of(2**200) == 26  # its bytes, at least ITEM_BYTES
    assert size_of(True) == size_of(3) == ITEM_BYTES


def test_publication_limits_per_value_and_per_test() -> None:
    pub = Publication("test_a")
    fits = b"x" * MAX_VALUE_BYTES  # exactly 1 MiB: at the limit, not over it
    pub.publish("a", fits)
    with pytest.raises(PublishError, match="1,048,577 bytes, over the limit of 1 MiB per value"):
        pub.publish("b", fits + b"x")
    for k in "bcd":
        pub.publish(k, fits)
    with pytest.raises(PublishError, match="over the limit of 4 MiB per test"):
        pub.publish("e", 0)
    assert pub.keys() == ["a", "b", "c", "d"]


def test_publication_keys() -> None:
    pub = Publication("test_a")
    pub.publish("k", 1)
    with pytest.raises(PublishError, match="'k' twice"):
        pub.publish("k", 1)
    for bad in ("", 3, None, b"k"):
        with pytest.raises(PublishError, match="a key must be a non-empty str"):
            pub.publish(bad, 1)
    assert pub.values == {"k": 1}


def test_published_is_read_only_and_names_the_keys_there_are() -> None:
    got = Published({"user_id": 1, "name": "ann"}, "test_b", "test_a")
    assert dict(got) == {"user_id": 1, "name": "ann"} and len(got) == 2
    with pytest.raises(TypeError):
        got["x"] = 1  # type: ignore[index]
    with pytest.raises(UnpublishedKeyError) as info:
        got["user"]
    assert str(info.value) == "test_b reads 'user' from test_a, which published only " \
        "'user_id', 'name'"
    assert isinstance(info.value, KeyError) and info.value.published == ("user_id", "name")
    assert got.get("user") is None  # Mapping.get still works
    assert "ann" not in repr(got)


def test_only_requires_edges_make_a_test_readable() -> None:
    #  0 <- 1 <- 2,  3 unrelated,  4 <- 2 through after (not requires)
    requires = [[], [0], [1], [], []]
    assert requires_closure(2, requires) == {0, 1}
    assert readable(2, 0, requires) and readable(2, 1, requires)
    assert not readable(2, 3, requires) and not readable(2, 4, requires)
    assert not readable(0, 1, requires) and not readable(2, 2, requires)


def test_store_waits_for_its_delivery_bounded() -> None:
    store = ResultStore()
    assert not store.wait_ready("t::b", 0.05)
    timer = threading.Timer(0.05, store.deliver, (["t::b"], {"t::a": {"x": [1]}}))
    timer.start()
    assert store.wait_ready("t::b", 10)
    got = store.get("t::a")
    got["x"].append(2)  # type: ignore[attr-defined]
    assert store.get("t::a") == {"x": [1]} and store.get("t::zzz") == {}


def test_relay_sends_each_value_to_each_worker_once() -> None:
    # 0 -> 1 -> 2 -> 3 (a chain), and 4 -> 3
    requires = [[], [0], [1], [2, 4], []]
    passed: set[int] = set()
    relay = Relay(requires, passed.__contains__)
    relay.received("w1", 0, {"a": 0})
    passed.add(0)
    relay.settled(0)
    assert relay.missing("w2", [1]) == {0: {"a": 0}}
    assert relay.missing("w2", [1]) == {}  # held now
    assert relay.missing("w1", [1]) == {}  # it published it
    relay.received("w2", 1, {"b": 1})
    passed.add(1)
    relay.settled(1)
    relay.received("w3", 4, {"e": 4})
    relay.settled(4)  # 4 failed: its values are dropped
    relay.received("w1", 2, {})
    passed.add(2)
    relay.settled(2)
    assert relay.missing("w3", [3]) == {0: {"a": 0}, 1: {"b": 1}, 2: {}}
    assert relay.missing("w4", [3]) == {0: {"a": 0}, 1: {"b": 1}, 2: {}}
    relay.forget("w4")
    assert relay.missing("w4", [3]) == {0: {"a": 0}, 1: {"b": 1}, 2: {}}
    assert relay.keys_by_test() == {0: ["a"], 1: ["b"]}


def test_relay_walks_the_ancestry_once_per_worker() -> None:
    n = 2000
    requires = [[i - 1] if i else [] for i in range(n)]
    calls = 0

    def passed(i: int) -> bool:
        nonlocal calls
        calls += 1
        return True

    relay = Relay(requires, passed)
    for i in range(1, n):
        relay.missing("w", [i])
    assert calls < 3 * n  # a chain: linear in its length, not quadratic
