"""End-to-end tests of the ``dag`` fixture: results a prerequisite publishes, read by
its dependents, serially and under ``-n 4 --dag-affinity=none``.

Under xdist a value read on another worker than the one that published it has
travelled worker -> controller -> worker; the tests below prove that some did
by making producers run on distinct workers at once (a file handshake: each
waits until every producer of its round is running, on a worker of its own).
"""

from __future__ import annotations

import importlib.util
import json
import textwrap
from pathlib import Path

import pytest
from support.dagtester import DagTester

#: Under xdist, four workers and no affinity: links land on distinct workers.
pytestmark = pytest.mark.dagtester(xdist=("-n", "4", "--dag-affinity=none"))

needs_rerunfailures = pytest.mark.skipif(
    importlib.util.find_spec("pytest_rerunfailures") is None,
    reason="pytest-rerunfailures is not installed (the test extra has it)")


def helpers_source(root: Path) -> str:
    """Inner helpers: the worker's name, a round handshake, a log of what each link saw."""
    return textwrap.dedent(f"""\
        import json
        import os
        import time

        ROOT = {str(root)!r}
        WORKERS = 4


        def worker():
            return os.environ.get("PYTEST_XDIST_WORKER", "serial")


        def handshake(round_name):
            # Under xdist: wait until WORKERS tests of this round run at the same
            # time, each on a worker of its own (so they ran on distinct workers).
            if worker() == "serial":
                return
            here = os.path.join(ROOT, "handshake", round_name)
            os.makedirs(here, exist_ok=True)
            open(os.path.join(here, worker()), "w").close()
            deadline = time.time() + 90
            while len(os.listdir(here)) < WORKERS:
                assert time.time() < deadline, (
                    f"round {{round_name}}: only {{sorted(os.listdir(here))}} arrived")
                time.sleep(0.05)


        def note(name, **seen):
            with open(os.path.join(ROOT, "seen.jsonl"), "a") as f:
                f.write(json.dumps({{"test": name, "worker": worker(), **seen}}) + "\\n")
        """)


def read_notes(dagtester: DagTester) -> dict[str, dict[str, object]]:
    path = dagtester.path / "seen.jsonl"
    out: dict[str, dict[str, object]] = {}
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        out[entry["test"]] = entry
    return out


def setup(dagtester: DagTester, **modules: str) -> None:
    (dagtester.path / "dagio.py").write_text(helpers_source(dagtester.path))
    (dagtester.path / "accounts").mkdir()
    dagtester.modules(**modules)


# -- create -> read -> update -> delete, links on different workers -----------------

# Four accounts, each through create -> read -> update -> delete against a
# small file-backed service (the accounts directory, shared by all workers).
# Every link reads its own account's previous link and its neighbour's
# (account k+1): the two ran at the same time on distinct workers (the
# handshake of their round), so under xdist at least one of the two values
# every link reads was published on another worker.
CRUD = """
import uuid

import pytest
from dagio import ROOT, handshake, note, worker

N = 4
STORE = os.path.join(ROOT, "accounts")


def path(account):
    return os.path.join(STORE, account)


def prerequisites(step, k):
    return pytest.mark.depends_on(f"{step}[{k}]", f"{step}[{(k + 1) % N}]")


def steps(step):
    return [pytest.param(k, marks=prerequisites(step, k)) for k in range(N)]


@pytest.mark.parametrize("k", range(N))
def test_create(dag, k):
    handshake("create")
    account = f"acc-{k}-{uuid.uuid4().hex}"
    with open(path(account), "w") as f:
        f.write("100")
    dag.publish("account", account)
    dag.publish("worker", worker())
    note(f"create[{k}]")


@pytest.mark.parametrize("k", steps("test_create"))
def test_read(dag, k):
    handshake("read")
    mine = dag.result(f"test_create[{k}]")
    theirs = dag.result(f"test_create[{(k + 1) % N}]")
    for account in (mine["account"], theirs["account"]):
        with open(path(account)) as f:
            assert f.read() == "100"
    dag.publish("account", mine["account"])
    dag.publish("worker", worker())
    note(f"read[{k}]", producers=[mine["worker"], theirs["worker"]])


@pytest.mark.parametrize("k", steps("test_read"))
def test_update(dag, k):
    handshake("update")
    mine = dag.result(f"test_read[{k}]")
    theirs = dag.result(f"test_read[{(k + 1) % N}]")
    assert os.path.exists(path(theirs["account"]))
    with open(path(mine["account"]), "w") as f:
        f.write("150")
    dag.publish("account", mine["account"])
    dag.publish("balance", 150)
    dag.publish("worker", worker())
    note(f"update[{k}]", producers=[mine["worker"], theirs["worker"]])


@pytest.mark.parametrize("k", steps("test_update"))
def test_delete(dag, k):
    handshake("delete")
    mine = dag.result(f"test_update[{k}]")
    theirs = dag.result(f"test_update[{(k + 1) % N}]")
    # Transitive prerequisites can be read too: the account as created.
    assert dag.result(f"test_create[{k}]")["account"] == mine["account"]
    with open(path(mine["account"])) as f:
        assert int(f.read()) == mine["balance"] == 150
    os.remove(path(mine["account"]))
    note(f"delete[{k}]", producers=[mine["worker"], theirs["worker"]])
"""


def test_create_read_update_delete_with_links_on_different_workers(
    dagtester: DagTester
) -> None:
    setup(dagtester, test_crud=CRUD)
    result = dagtester.run()
    result.assert_outcomes(passed=16)
    assert list((dagtester.path / "accounts").iterdir()) == []
    notes = read_notes(dagtester)
    assert len(notes) == 16
    if dagtester.mode == "serial":
        assert {n["worker"] for n in notes.values()} == {"serial"}
        return
    for step in ("create", "read", "update", "delete"):
        # One round: four links at once, on four workers.
        assert len({notes[f"{step}[{k}]"]["worker"] for k in range(4)}) == 4, step
    for step in ("read", "update", "delete"):
        for k in range(4):
            seen = notes[f"{step}[{k}]"]
            producers = seen["producers"]
            assert isinstance(producers, list) and len(set(producers)) == 2
            # It read a value published on a worker other than its own.
            assert set(producers) - {seen["worker"]}, seen


# A plain chain, every way of naming a target: bare name, Class::test, a node id,
# the function object, one parametrized instance.
CHAIN = """
from dagio import note, worker


def test_create_user(dag):
    dag.publish("user_id", 42)
    dag.publish("tags", ("a", b"b", 1.5, 2j, None, True, {"k": [1, {2, 3}]}))
    note("create")


@pytest.mark.parametrize("role", ["admin", "guest"])
def test_grant(dag, role):
    dag.publish("role", role)


class TestSession:
    @depends_on("test_create_user")
    def test_login(self, dag):
        assert dag.result("test_create_user")["user_id"] == 42
        dag.publish("token", "t-42")


@depends_on("TestSession::test_login", "test_grant[admin]")
def test_checkout(dag):
    assert dag.result("TestSession::test_login")["token"] == "t-42"
    assert dag.result("test_chain.py::test_create_user")["user_id"] == 42
    assert dag.result(test_create_user)["tags"] == (
        "a", b"b", 1.5, 2j, None, True, {"k": [1, {2, 3}]})
    assert dag.result("test_grant[admin]")["role"] == "admin"
    mapping = dag.result("test_grant[admin]")
    with pytest.raises(TypeError):
        mapping["role"] = "root"  # read-only
    assert dict(mapping) == {"role": "admin"}


@depends_on("test_create_user")
def test_readers_get_their_own_copy(dag):
    tags = dag.result("test_create_user")["tags"]
    tags[6]["k"].append("mutated")
    assert dag.result("test_create_user")["tags"][6]["k"] == [1, {2, 3}]
"""


def test_targets_resolve_like_depends_on_targets(dagtester: DagTester) -> None:
    setup(dagtester, test_chain=CHAIN)
    result = dagtester.run()
    result.assert_outcomes(passed=6)


# -- fan-in: four producers on four workers ----------------------------------------

FAN_IN = """
from dagio import handshake, note, worker


@pytest.mark.parametrize("k", range(4))
def test_produce(dag, k):
    handshake("produce")
    dag.publish("worker", worker())
    dag.publish("part", k * 10)


@depends_on("test_produce")
def test_fan_in(dag):
    seen = [dag.result(f"test_produce[{k}]") for k in range(4)]
    assert sorted(s["part"] for s in seen) == [0, 10, 20, 30]
    workers = {s["worker"] for s in seen}
    note("fan_in", producers=sorted(workers))
    assert len(workers) == (1 if worker() == "serial" else 4)
"""


def test_fan_in_reads_four_producers_of_four_workers(dagtester: DagTester) -> None:
    setup(dagtester, test_fan=FAN_IN)
    result = dagtester.run()
    result.assert_outcomes(passed=5)
    seen = read_notes(dagtester)["fan_in"]
    if dagtester.mode == "xdist":
        producers = seen["producers"]
        assert isinstance(producers, list) and len(producers) == 4
        # Three of the four values at least came from other workers.
        assert len(set(producers) - {seen["worker"]}) >= 3


# -- errors: the test fails with a message; the session goes on --------------------

ERRORS = """
import datetime

from dagio import note


def test_source(dag):
    dag.publish("user_id", 7)
    dag.publish("name", "ann")


def test_unrelated(dag):
    dag.publish("x", 1)


@pytest.mark.parametrize("n", [1, 2])
def test_param(dag, n):
    dag.publish("n", n)


def test_twice(dag):
    dag.publish("k", 1)
    dag.publish("k", 2)


def test_bad_type(dag):
    dag.publish("when", {"start": [datetime.date(2024, 1, 1)]})


def test_bad_key(dag):
    dag.publish(3, "x")


def test_value_too_big(dag):
    dag.publish("blob", b"x" * (1024 * 1024 + 1))


def test_exactly_one_mib(dag):
    dag.publish("blob", b"x" * (1024 * 1024))


@depends_on("test_exactly_one_mib")
def test_reads_one_mib(dag):
    assert len(dag.result("test_exactly_one_mib")["blob"]) == 1024 * 1024
    note("read_one_mib")


def test_test_too_big(dag):
    for k in range(4):
        dag.publish(f"part{k}", b"x" * (1024 * 1024 - 100))
    dag.publish("last", b"x" * 1000)


def test_below_execnet_ints(dag):
    # execnet fails on these while sending: refused here, the worker lives on.
    dag.publish("n", [1, -(2**40)])


def test_self_loop(dag):
    value = []
    value.append(value)
    dag.publish("loop", value)


@depends_on("test_source")
def test_not_a_prerequisite(dag):
    dag.result("test_unrelated")


@depends_on("test_source")
def test_unpublished_key(dag):
    dag.result("test_source")["user"]


@depends_on("test_param")
def test_ambiguous(dag):
    dag.result("test_param")


@depends_on("test_source")
def test_unknown_target(dag):
    dag.result("test_nothing_here")


@run_after("test_source")
def test_ordering_only_is_not_enough(dag):
    dag.result("test_source")


def test_dynamic(request):
    request.getfixturevalue("dag")


@depends_on("test_source", "test_param[2]")
def test_still_reads(dag):
    assert dag.result("test_source")["user_id"] == 7
    assert dag.result("test_param[2]")["n"] == 2
    note("still_reads")
"""

ERROR_LINES = [
    "*PublishError: test_twice publishes 'k' twice; publish each key once per test",
    "*PublishError: test_bad_type publishes 'when': value['start'][0] is a datetime.date, "
    "which cannot be sent to another process; publish str, bytes, int, float, complex, "
    "bool, None, or lists, tuples, dicts and sets of those",
    "*PublishError: test_bad_key publishes 3: a key must be a non-empty str",
    # 1 MiB + 1 bytes: a bytes value counts its length (see results.size_of)
    "*PublishError: test_value_too_big publishes 'blob': 1,048,577 bytes, over the limit of "
    "1 MiB per value; publish an id or a file path instead",
    "*PublishError: test_test_too_big publishes 'last': its values would total 4,194,904 "
    "bytes, over the limit of 4 MiB per test; publish ids or file paths instead",
    "*PublishError: test_below_execnet_ints publishes 'n': value[1] is an int below "
    "-2147483648, which cannot be sent to another process; publish it as a str",
    "*PublishError: test_self_loop publishes 'loop': value[0] contains itself; "
    "publish a tree of values",
    "*ReadError: test_not_a_prerequisite reads the results of test_unrelated, which is not "
    "one of its prerequisites: it may still be running; declare "
    "@depends_on('test_unrelated') on test_not_a_prerequisite (directly or through another "
    "prerequisite)",
    "*UnpublishedKeyError: test_unpublished_key reads 'user' from test_source, which "
    "published only 'user_id', 'name'",
    "*ReadError: test_ambiguous reads dag.result('test_param'), which matches 2 tests "
    "(test_param[1], test_param[2]); pick one instance, e.g. dag.result('test_param[1]')",
    "*ReadError: test_unknown_target reads dag.result('test_nothing_here'): it names no "
    "test of this run; name a test it depends on (a test name, Class::test, a node id or "
    "the function)",
    "*ReadError: test_ordering_only_is_not_enough reads the results of test_source, which "
    "runs before it only by run_after: it may have failed and published nothing, and "
    "run_after runs test_ordering_only_is_not_enough anyway; declare "
    "@depends_on('test_source') on test_ordering_only_is_not_enough to read its results",
    "*ReadError: test_dynamic got the dag fixture from request.getfixturevalue(); request "
    "it as an argument of the test (or of a fixture the test uses)*",
]


def literal(line: str) -> str:
    """An fnmatch pattern matching ``line``'s brackets literally."""
    return "".join("[[]" if c == "[" else "[]]" if c == "]" else c for c in line)


def test_each_misuse_fails_its_test_with_a_message(dagtester: DagTester) -> None:
    setup(dagtester, test_errors=ERRORS)
    result = dagtester.run()
    result.assert_outcomes(passed=7, failed=13)
    assert result.ret == 1
    result.stdout.fnmatch_lines_random([literal(line) for line in ERROR_LINES])
    out = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in out
    notes = read_notes(dagtester)
    assert "still_reads" in notes and "read_one_mib" in notes


# -- a failed prerequisite publishes nothing -----------------------------------------

FAILING = """
def test_fails_after_publishing(dag):
    dag.publish("secret_id", 1)
    assert False, "boom"


def test_fails_in_teardown(dag, broken_teardown):
    dag.publish("secret_id", 2)


@pytest.fixture
def broken_teardown():
    yield
    raise RuntimeError("teardown broke")


@depends_on("test_fails_after_publishing")
def test_after_call_failure(dag):
    dag.result("test_fails_after_publishing")["secret_id"]


@depends_on("test_fails_in_teardown")
def test_after_teardown_failure(dag):
    dag.result("test_fails_in_teardown")["secret_id"]
"""


def test_a_failed_prerequisite_publishes_nothing(dagtester: DagTester) -> None:
    setup(dagtester, test_failing=FAILING)
    # Default policy: dependents are skipped.
    result = dagtester.run("-rs")
    result.assert_outcomes(passed=1, failed=1, errors=1, skipped=2)
    # Policy run: they run, and find nothing published.
    result = dagtester.run("--dag-on-failure=run")
    result.assert_outcomes(passed=1, failed=3, errors=1)
    result.stdout.fnmatch_lines_random([
        "*UnpublishedKeyError: test_after_call_failure reads 'secret_id' from "
        "test_fails_after_publishing, which published nothing (or did not pass)",
        "*UnpublishedKeyError: test_after_teardown_failure reads 'secret_id' from "
        "test_fails_in_teardown, which published nothing (or did not pass)",
    ])


RERUN = """
def test_flaky(dag):
    attempts = os.path.join(os.path.dirname(LOG), "attempts")
    with open(attempts, "a") as f:
        f.write("x")
    with open(attempts) as f:
        attempt = len(f.read())
    dag.publish("attempt", attempt)  # the same key again on the rerun: a new attempt
    assert attempt == 2


@depends_on("test_flaky")
def test_reads_the_final_attempt(dag):
    assert dag.result("test_flaky")["attempt"] == 2
"""


@needs_rerunfailures
def test_only_the_final_attempt_of_a_rerun_test_counts(dagtester: DagTester) -> None:
    setup(dagtester, test_rerun=RERUN)
    result = dagtester.run("-p", "rerunfailures", "--reruns", "1")
    assert result.parseoutcomes() == {"passed": 2, "rerun": 1}


# -- values stay out of reports -------------------------------------------------------

SECRET = "s3cr3t-v4lue"

QUIET = f"""
def test_publisher(dag):
    dag.publish("password", {SECRET!r})
    dag.publish("numbers", [{SECRET!r}, 1])


@depends_on("test_publisher")
def test_reader(dag):
    assert dag.result("test_publisher")["password"] == {SECRET!r}


@depends_on("test_publisher")
def test_failing_reader(dag):
    got = dag.result("test_publisher")
    assert len(got) == 3
"""

REPORT_DUMP = """
def pytest_runtest_logreport(report):
    # What a plugin such as pytest-reportlog would serialise.
    with open("reports.txt", "a") as f:
        f.write(repr(report.__dict__) + "\\n")
"""


def test_published_values_appear_in_no_report(dagtester: DagTester) -> None:
    setup(dagtester, test_quiet=QUIET)
    dagtester.pytester.makeconftest(REPORT_DUMP)
    # --showlocals: the fixture and the mapping show their keys, not their values.
    result = dagtester.run("-v", "-rA", "--showlocals", "--junitxml=out.xml")
    result.assert_outcomes(passed=2, failed=1)
    out = result.stdout.str() + result.stderr.str()
    assert SECRET not in out
    assert SECRET not in (dagtester.path / "reports.txt").read_text()
    assert SECRET not in (dagtester.path / "out.xml").read_text()
    result.stdout.fnmatch_lines_random([
        literal("*got * = <results of test_publisher: keys ['password', 'numbers']>"),
        # -v: the keys each test published, never their values.
        "*published results, keys only (pytest-dagorder)*",
        "*test_quiet.py::test_publisher: password, numbers",
    ])


# -- a missing key points at the reading test's line ---------------------------------

MISSING_KEY = """
from pytest_dagorder import depends_on

def test_source(dag):
    dag.publish("user_id", 1)

@depends_on("test_source")
def test_reader(dag):
    got = dag.result("test_source")
    assert got["user"] == 1  # the line the traceback ends at
"""


def test_a_missing_key_traceback_ends_at_the_reading_test(dagtester: DagTester) -> None:
    # Not "test_missing": an in-process inner run would find the suite's own
    # tests/test_missing.py imported under that name.
    setup(dagtester, test_unpublished_key=MISSING_KEY)
    result = dagtester.run()
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    result.stdout.fnmatch_lines([
        ">       assert got[[]\"user\"] == 1  # the line the traceback ends at",
        "E       *UnpublishedKeyError: test_reader reads 'user' from test_source, which "
        "published only 'user_id'",
        "test_unpublished_key.py:*: UnpublishedKeyError",
    ])
    assert "published.py:" not in out and "dag_fixture.py:" not in out, out
