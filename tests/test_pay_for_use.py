"""Pay for what you use: a suite that declares nothing runs on workers left as xdist made them.

No edge, resource, exclusive test, ``xdist_group`` or ``dag`` user: the
worker installs no gate on ``pytest_runtest_protocol`` and appends no
barrier item; the controller then never holds a test back, sends every
worker its next test ahead and tells it to shut down once nothing is left
(xdist's own rule), and still ranks the tests longest first from the
durations the last run recorded.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from helpers import base_args
from support.dagtester import DagTester
from support.xdist_fakes import (
    FakeChannel,
    FakeLog,
    FakeNode,
    Harness,
    Recorder,
    make_config,
    make_facts,
)

from pytest_dagorder.deciding.decide import decide_xdist, plain_run
from pytest_dagorder.drivers.distributed import wire
from pytest_dagorder.drivers.distributed.controller import DagController, XdistUnlessDeclared
from pytest_dagorder.drivers.distributed.dispatch import PLAIN_DEPTH
from pytest_dagorder.options.settings import Settings

TIMEOUT = 120

# The inner runs go under ``-n 2`` unless a test says otherwise, never shuffled.
pytestmark = [pytest.mark.dag_modes("xdist"),
              pytest.mark.dagtester(args=("-p", "no:randomly"), timeout=TIMEOUT)]

# A conftest that writes, from inside every test's protocol on the worker,
# what stands in xdist's way: the hook caller xdist calls, the type of the
# session's item list, and the nextitem pytest was given.
PROBE = """
import json, os
import pytest

@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    caller = item.config.hook.pytest_runtest_protocol
    seen = {
        "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
        "test": item.name,
        "caller": type(caller).__module__ + "." + type(caller).__name__,
        "items": type(item.session.items).__name__,
        "count": len(item.session.items),
        "nextitem": None if nextitem is None else type(nextitem).__name__,
    }
    with open(os.path.join(str(item.config.rootpath), "probe.jsonl"), "a") as f:
        f.write(json.dumps(seen) + "\\n")
"""

NOTHING_DECLARED = """
    def test_one():
        mark("test_one")


    def test_two():
        mark("test_two")


    def test_three():
        mark("test_three")


    class TestKind:
        def test_four(self):
            mark("test_four")
"""

ONE_EDGE = """
    def test_one():
        mark("test_one")


    @depends_on("test_one")
    def test_two():
        mark("test_two")


    def test_three():
        mark("test_three")
"""


def probe(dagtester: DagTester, body: str, *args: str) -> list[dict[str, Any]]:
    dagtester.pytester.makeconftest(PROBE)
    dagtester.modules(test_m=body)
    result = dagtester.run(*args)
    assert result.ret == 0, result.stdout.str()
    lines = (dagtester.path / "probe.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_a_suite_that_declares_nothing_gets_no_worker_machinery(
        dagtester: DagTester) -> None:
    seen = probe(dagtester, NOTHING_DECLARED)
    assert sorted(s["test"] for s in seen) == ["test_four", "test_one", "test_three", "test_two"]
    for s in seen:
        assert s["worker"].startswith("gw"), s
        # pluggy's own hook caller, the session's own list of the four tests,
        # a real next test or none (the last one a worker ran).
        assert s["caller"].startswith("pluggy."), s
        assert s["items"] == "list", s
        assert s["count"] == 4, s
        assert s["nextitem"] in (None, "Function"), s
    assert sorted(dagtester.ran()) == ["test_four", "test_one", "test_three", "test_two"]


def test_one_edge_brings_the_gate_and_the_barrier(dagtester: DagTester) -> None:
    """The same probe sees the machinery as soon as the suite declares an edge."""
    seen = probe(dagtester, ONE_EDGE)
    assert {s["caller"].rsplit(".", 1)[1] for s in seen} == {"_ProtocolGate"}
    assert {s["items"] for s in seen} == {"ItemsWithTail"}


@pytest.mark.parametrize("declaration", [
    "@pytest.mark.dag_resource('db')",
    "@pytest.mark.dag_exclusive",
    "@pytest.mark.xdist_group('g')",
])
def test_resources_exclusive_tests_and_groups_keep_the_machinery(
        dagtester: DagTester, declaration: str) -> None:
    body = NOTHING_DECLARED.replace("    def test_two():",
                                    f"    {declaration}\n    def test_two():")
    seen = probe(dagtester, body)
    assert {s["items"] for s in seen} == {"ItemsWithTail"}


def test_a_dag_fixture_user_keeps_the_machinery(dagtester: DagTester) -> None:
    body = NOTHING_DECLARED.replace("def test_two():", "def test_two(dag):")
    seen = probe(dagtester, body)
    assert {s["items"] for s in seen} == {"ItemsWithTail"}


def test_on_failure_stop_keeps_the_machinery(dagtester: DagTester) -> None:
    """A stop starts nothing new: the controller must be able to hold tests back."""
    seen = probe(dagtester, NOTHING_DECLARED, "--dag-on-failure=stop")
    assert {s["items"] for s in seen} == {"ItemsWithTail"}


LONGEST_LAST = """
    def test_a():
        mark("test_a")


    def test_b():
        mark("test_b")


    def test_c():
        mark("test_c")


    def test_d():
        mark("test_d")


    def test_slow():
        mark("test_slow", sleep=0.25)
"""


@pytest.mark.dagtester(xdist=("-n", "1"), cache=True)
def test_recorded_durations_still_rank_a_suite_that_declares_nothing(
        dagtester: DagTester) -> None:
    """The second run starts the test the first run found longest, though it is collected last."""
    dagtester.pytester.makeconftest(PROBE)
    dagtester.modules(test_m=LONGEST_LAST)
    first = dagtester.run()
    assert first.ret == 0, first.stdout.str()
    (dagtester.path / "probe.jsonl").unlink()
    second = dagtester.run()
    assert second.ret == 0, second.stdout.str()
    second.stdout.fnmatch_lines(["*critical path by recorded durations of 5/5 tests*"])
    order = [s["test"] for s in map(json.loads,
                                    (dagtester.path / "probe.jsonl").read_text().splitlines())]
    assert order[0] == "test_slow", order
    assert sorted(order) == ["test_a", "test_b", "test_c", "test_d", "test_slow"]
    seen = json.loads((dagtester.path / "probe.jsonl").read_text().splitlines()[0])
    assert seen["items"] == "list", seen


# -- the controller, with fake workers ---------------------------------------------------


class PlainHarness(Harness):
    """The adapter harness for a plan that declares nothing: no barrier is ever sent."""

    def check(self) -> None:
        seen: set[int] = set()
        for node, send in self.journal:
            assert send, f"{node} was sent an empty list"
            assert self.barrier not in send, f"{node} was sent the barrier: {send}"
            for i in send:
                assert i not in seen, f"{self.ids[i]} sent twice"
                seen.add(i)
        for node in self.nodes:
            if self.sched.phases.run is not None and not self.sched.phases.run.machine.ready_count:
                assert not node.queue or node.shutting_down, f"{node} never told to stop"
            # The lookahead rule: a worker starts its head only once it holds a
            # next index or was told to shut down.
            if node.queue and len(node.queue) < 2:
                assert node.shutting_down, f"{node} holds {node.queue} with no next"
        if len(self.reported) == len(self.ids):
            assert self.sched.tests_finished

    def drain_plain(self, *nodes: FakeNode, duration: float = 1.0) -> None:
        for _ in range(10 * len(self.ids) + 10):
            if self.sched.tests_finished:
                return
            runnable = [n for n in nodes if len(n.queue) >= 2
                        or (n.queue and n.shutting_down)]
            assert runnable, f"deadlock: queues {[n.queue for n in nodes]}"
            node = runnable[0]
            self.run(node, str(self.name(node.queue[0])), duration=duration)
        raise AssertionError("the run did not end")


@pytest.mark.parametrize("duration", [1.0, 0.001])  # one test at a time; batches
@pytest.mark.parametrize(("tests", "nodes"), [(1, 2), (3, 2), (7, 2), (12, 3), (300, 2)])
def test_the_controller_never_leaves_a_worker_without_its_next_test(
        pytester: pytest.Pytester, recorder: Recorder, tests: int, nodes: int,
        duration: float) -> None:
    names = [f"t{k}" for k in range(tests)]
    payload = make_facts(dict.fromkeys(names, ""), graph=False)
    config = make_config(pytester, recorder, nodes=nodes)
    h = PlainHarness(config, recorder, payload)
    workers = h.start(*[f"gw{k}" for k in range(nodes)])
    if tests >= PLAIN_DEPTH * nodes:
        # Nothing recorded: one test a round, each worker three ahead.
        assert [len(n.queue) for n in workers] == [PLAIN_DEPTH] * nodes
        assert [n.sends[0] for n in workers] == [[k] for k in range(nodes)]
    h.drain_plain(*workers, duration=duration)
    assert h.reported == set(h.ids)
    assert all(n.shutting_down for n in workers)


def test_the_controller_decides_plain_from_the_census_every_hello_carries() -> None:
    plain = make_facts({"a": "", "b": ""}, graph=False)
    chain = make_facts({"a": "", "b": "a"})
    for facts in (plain, chain):
        assert wire.check_hello(wire.hello(facts.census())) == facts.census()
    settings = Settings(affinity="state", on_failure="skip", with_prerequisites=False,
                        ignore_durations=False, automark_dependency=False,
                        ignore_unknown_dependency=False)
    assert plain_run(plain.census(), settings, "load")
    assert not plain_run(chain.census(), settings, "load")
    # Two tests of one file: --dist loadfile keeps them together, one after the other.
    assert not plain_run(plain.census(), settings, "loadfile")
    # --dag-on-failure=stop must be able to withhold tests.
    stop = dataclasses.replace(settings, on_failure="stop")
    assert not plain_run(plain.census(), stop, "load")
    # The full facts decide alike.
    assert decide_xdist(plain, settings, {}).plain and not decide_xdist(chain, settings, {}).plain


# -- each process loads only the parts of the plugin its run uses -------------------

#: Every module of this package the process loaded, written at its very end
#: (``modules-main.json``, ``modules-gw0.json``, ...).
MODULES_PROBE = """
import json, sys

def pytest_unconfigure(config):
    name = config.workerinput["workerid"] if hasattr(config, "workerinput") else "main"
    with open(f"modules-{name}.json", "w") as f:
        json.dump(sorted(m for m in sys.modules if m.startswith("pytest_dagorder")), f)
"""

#: What no process of a run that declares nothing needs: the renderers, the
#: foreign plugins' readers, the thread-pool runners (a name ending in "."
#: stands for its package's modules).
UNUSED = ("pytest_dagorder.render.", "pytest_dagorder.live_run.visual", "pytest_dagorder.runners.",
          "pytest_dagorder.migration.depends", "pytest_dagorder.migration.dependency",
          "pytest_dagorder.migration.order", "pytest_dagorder.migration.sorting",
          "pytest_dagorder.finder.find_missing", "pytest_dagorder.finder.probe_plugin",
          "pytest_dagorder.declaring.edges_file", "pytest_dagorder.core.missing")
#: ... nor, serially, the core's run, the affinity groups or the shards.
UNUSED_SERIALLY = ("pytest_dagorder.core.state_machine", "pytest_dagorder.core.shards",
                   "pytest_dagorder.live_run.dag_run", "pytest_dagorder.features.sharding",
                   "pytest_dagorder.core.affinity")
#: xdist's controller and worker sides (the probe whether a DSession runs excepted).
DISTRIBUTED = "pytest_dagorder.drivers.distributed."
PROBE_OF_XDIST = "pytest_dagorder.shims.xdist_internals"
#: What only an xdist worker runs, besides its plugin (drivers/distributed/worker.py).
WORKER_PARTS = tuple(f"pytest_dagorder.drivers.distributed.{name}" for name in (
    "barrier", "facts_shipping", "sent_ahead", "exit_forwarding"))


def loaded_modules(dagtester: DagTester) -> dict[str, list[str]]:
    """Run NOTHING_DECLARED in a fresh process; each process's loaded package modules."""
    dagtester.pytester.makeconftest(MODULES_PROBE)
    dagtester.modules(test_m=NOTHING_DECLARED)
    result = dagtester.run(own_process="which modules of the plugin a process imports is "
                           "the point")
    result.assert_outcomes(passed=4)
    return {path.stem.removeprefix("modules-"): json.loads(path.read_text())
            for path in sorted(dagtester.path.glob("modules-*.json"))}


def unneeded(modules: list[str], *names: str) -> list[str]:
    return [m for m in modules if m != PROBE_OF_XDIST and any(
        m == name or (name.endswith(".") and m.startswith(name)) for name in names)]


# xdist installed but not asked for (no ``-n``, no ``-p no:xdist``): the plugin
# must find out that no DSession runs without loading its xdist sides.
@pytest.mark.dag_modes("own")
def test_a_serial_run_that_declares_nothing_loads_only_the_serial_driver(
        dagtester: DagTester) -> None:
    found = loaded_modules(dagtester)
    assert list(found) == ["main"]
    assert "pytest_dagorder.drivers.serial" in found["main"]
    assert unneeded(found["main"], *UNUSED, *UNUSED_SERIALLY, DISTRIBUTED) == []


def test_under_xdist_the_controller_and_the_workers_load_only_their_side(
        dagtester: DagTester) -> None:
    found = loaded_modules(dagtester)
    assert sorted(found) == ["gw0", "gw1", "main"]
    controller = found.pop("main")
    assert "pytest_dagorder.drivers.distributed.controller" in controller
    assert unneeded(controller, *UNUSED, "pytest_dagorder.drivers.serial",
                    "pytest_dagorder.drivers.distributed.worker", *WORKER_PARTS) == []
    for modules in found.values():
        assert "pytest_dagorder.drivers.distributed.worker" in modules
        assert unneeded(modules, *UNUSED, "pytest_dagorder.drivers.serial",
                        "pytest_dagorder.drivers.distributed.controller",
                        "pytest_dagorder.drivers.distributed.scheduling") == []


# -- installed is not opted in: xdist schedules a suite that declares nothing -------------

#: One module of the 20-test suite (4 files): ``test_2_use`` reads what
#: ``test_1_create``, the test before it, stored; no declarations.
STORE_THEN_USE = """
    STORE = {}


    def test_1_create():
        mark(f"{__name__}.create", 0.02)
        STORE["x"] = 1


    def test_2_use():
        mark(f"{__name__}.use")
        assert STORE["x"] == 1


    def test_3():
        mark(f"{__name__}.3", 0.02)


    def test_4():
        mark(f"{__name__}.4", 0.02)


    def test_5():
        mark(f"{__name__}.5", 0.02)
"""

FILES = ("test_a", "test_b", "test_c", "test_d")

#: A module of what declares nothing to this plugin: tests of a file and of
#: a class, and an ``xdist_group``.
UNDECLARED_SHAPES = """
    import pytest


    def test_1():
        pass


    def test_2():
        pass


    @pytest.mark.xdist_group("g")
    def test_3():
        pass


    class TestKind:
        def test_4(self):
            pass

        def test_5(self):
            pass
"""


def store_then_use(dagtester: DagTester, *args: str) -> pytest.RunResult:
    dagtester.modules(**dict.fromkeys(FILES, STORE_THEN_USE))
    return dagtester.run("-v", *args)


@pytest.mark.autoload  # the plugin loads by its entry point, not asked for by name
@pytest.mark.parametrize(("dist", "scheduler"), [
    ("load", "LoadScheduling"), ("worksteal", "WorkStealingScheduling")])
def test_installed_is_not_opted_in_xdist_schedules_a_suite_that_declares_nothing(
        dagtester: DagTester, dist: str, scheduler: str) -> None:
    result = store_then_use(dagtester, "--dist", dist)
    assert "-p dagorder" not in " ".join(base_args())
    result.stdout.fnmatch_lines([f"scheduling tests via {scheduler}"])
    assert "dagorder: 20 tests" not in result.stdout.str()
    ran = dagtester.ran()
    assert len(ran) == 20
    # xdist hands each worker a run of consecutive tests to start with, so
    # the first file's use follows its create on the same worker; a
    # scheduler handing out one test a worker at a time separates them.
    if dist == "load":
        # Two each of 20 tests on 2 workers.
        assert ran["test_a.create"].pid == ran["test_a.use"].pid != ran["test_a.3"].pid
        assert ran["test_a.3"].pid == ran["test_a.4"].pid
    else:
        # Half the tests each; a worker steals from the end of the other's
        # queue, never its first two.
        assert ran["test_a.create"].pid == ran["test_a.use"].pid != ran["test_c.create"].pid
    result.stdout.fnmatch_lines(["*PASSED test_a.py::test_2_use*"])


@pytest.mark.autoload
@pytest.mark.parametrize(("dist", "scheduler"), [
    ("load", "LoadScheduling"), ("loadfile", "LoadFileScheduling"),
    ("loadscope", "LoadScopeScheduling"), ("loadgroup", "LoadGroupScheduling"),
    ("worksteal", "WorkStealingScheduling"), ("each", "EachScheduling"),
    ("no", "LoadScheduling")])  # xdist makes "no" under -n its "load"
def test_installed_is_not_opted_in_for_any_dist_mode(
        dagtester: DagTester, dist: str, scheduler: str) -> None:
    """Files of several tests, classes, a document and ``xdist_group`` marks are
    xdist's own business, not declarations: xdist's scheduler, no header."""
    dagtester.modules(**dict.fromkeys(FILES, UNDECLARED_SHAPES))
    dagtester.pytester.makefile(".txt", doc=">>> 1 + 1\n2\n>>> 2 + 2\n4\n")
    result = dagtester.run("-v", "--dist", dist, "--doctest-glob=doc.txt")
    result.stdout.fnmatch_lines([f"scheduling tests via {scheduler}"])
    result.stdout.no_fnmatch_line("dagorder: * tests*")
    result.stdout.no_fnmatch_line("*affinity group*")
    # 5 tests a file and the document, on each worker under "each".
    result.assert_outcomes(passed=21 * (2 if dist == "each" else 1))


@pytest.mark.autoload
@pytest.mark.parametrize("ask", [
    ["-p", "dagorder"], ["--dag-affinity=state"], ["-o", "dag_on_failure=skip"], ["ini"]])
def test_a_run_that_asks_for_the_plugin_gets_its_scheduler(
        dagtester: DagTester, ask: list[str]) -> None:
    """Longest first from recorded durations is what such a run asked for."""
    if ask == ["ini"]:
        dagtester.ini("dag_affinity = state\n")
        result = store_then_use(dagtester)
    else:
        result = store_then_use(dagtester, *ask)
    result.stdout.fnmatch_lines(["scheduling tests via DependencyScheduling",
                                 "dagorder: 20 tests*"])


@pytest.mark.autoload
def test_a_suite_that_declares_something_gets_the_dag_scheduler_unasked(
        dagtester: DagTester) -> None:
    dagtester.modules(test_m=ONE_EDGE)
    result = dagtester.run("-v")
    result.stdout.fnmatch_lines(["scheduling tests via DependencyScheduling",
                                 "dagorder: 3 tests, 1 dependenc*"])
    result.assert_outcomes(passed=3)
    ran = dagtester.ran()
    assert ran["test_two"].start >= ran["test_one"].end


@pytest.mark.autoload
def test_a_controller_left_to_xdist_loads_no_scheduler_of_its_own(
        dagtester: DagTester) -> None:
    found = loaded_modules(dagtester)
    controller = found.pop("main")
    assert "pytest_dagorder.drivers.distributed.controller" in controller
    assert unneeded(controller, "pytest_dagorder.drivers.distributed.scheduling",
                    "pytest_dagorder.drivers.distributed.dispatch",
                    "pytest_dagorder.planning.plan") == []


class FakeDSession:
    """What :func:`hand_over_scheduler` touches of xdist's DSession."""

    def __init__(self) -> None:
        self.sched: Any = None


@pytest.mark.parametrize("dsession", [True, False], ids=["handed-over", "forwarded"])
@pytest.mark.parametrize("plain", [True, False], ids=["declares-nothing", "declares"])
def test_the_stand_in_chooses_at_the_first_collection(
        pytester: pytest.Pytester, recorder: Recorder, plain: bool, dsession: bool) -> None:
    """xdist's scheduler for a suite that declares nothing (its plan never asked
    for), the DAG scheduler otherwise, told every worker and collection xdist's
    was; DSession then calls the chosen one directly, or the stand-in hands on
    (where DSession's attribute is not there)."""
    from xdist.scheduler import LoadScheduling

    # No affinity: a group's chain would go out whole, ahead of its first test.
    config = make_config(pytester, recorder, "--dag-affinity=none")
    payload = make_facts({"a": "", "b": "" if plain else "a", "c": "", "d": ""},
                         graph=not plain)
    controller = DagController(config)
    inner = LoadScheduling(config)
    stand_in = XdistUnlessDeclared(inner, controller, config, FakeLog())
    fake = FakeDSession()
    if dsession:
        fake.sched = stand_in
        config.pluginmanager.register(fake, "dsession")
    nodes = [FakeNode("gw0"), FakeNode("gw1")]
    channels = [FakeChannel(payload), FakeChannel(payload)]
    for node, channel in zip(nodes, channels, strict=True):
        controller.channels[node] = channel
        stand_in.add_node(node)
    for node in nodes:
        stand_in.add_node_collection(node, payload.ids)
    sched = fake.sched if dsession else stand_in
    assert sched.collection_is_completed
    sched.schedule()
    if plain:
        assert (fake.sched is inner) == dsession
        assert controller.sched is None
        assert wire.plan_request() not in channels[0].sent
        assert wire.barriers() not in channels[0].sent + channels[1].sent
        # xdist's own first hand-out: two consecutive tests each, then shutdown.
        assert [n.sends for n in nodes] == [[[0, 1]], [[2, 3]]]
        assert all(n.shutting_down for n in nodes)
    else:
        assert controller.sched is not None
        assert (fake.sched is controller.sched) == dsession
        # The workers are told to host the barrier before any test.
        assert channels[0].sent == [wire.barriers(), wire.plan_request()]
        assert channels[1].sent == [wire.barriers()]
        assert sorted(sched.nodes, key=lambda n: n.gateway.id) == nodes
        # Every dispatch ends with the barrier: b waits for a.
        assert all(send[-1] == len(payload.ids) for n in nodes for send in n.sends)
        assert 1 not in [i for n in nodes for i in n.sent]
