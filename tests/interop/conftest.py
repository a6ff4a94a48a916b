"""Fixtures for the Strata interop suite.

- `broker`: a fresh `strata` process (own port, own tmp data dir), stopped with SIGTERM at the end
  of the test, which also checks that it exits cleanly.
- `module_broker`: one broker shared by all tests of a module.
- `go_clients`: the Go client programs of tests/interop/go, built once per session (go_util.py).
- `java_clients`: the Java (kafka-clients) scenarios of tests/java, built once per session
  (java_util.py).
- `broker_factory(overrides)`: the same with extra `--override key=value` settings (names use
  dots: pass a dict, e.g. broker_factory({"log.retention.check.interval.ms": "500"})).

When a test fails, every broker it started has its stderr log attached to the report.

`STRATA_TARGET=kafka` starts Apache Kafka (scripts/kafka.sh, resolved once from Maven Central)
in every one of these fixtures instead of `strata` (broker.new_broker, kafka_broker.py). Markers
for that run (pytest.ini):

- `strata_only("why")`: the test checks something only Strata has (its metrics, its CLI, its own
  config keys, its process); skipped on Kafka with the reason.
- `kafka_xfail("why")`: a known difference between Strata and Apache Kafka that the test pins
  on Strata's side (docs/compatibility.md lists each); an expected failure on Kafka, strict, so
  a test that starts passing there is reported.
- `kafka_smoke`: the few fast tests that scripts/test.sh runs on Kafka in CI.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from broker import ON_KAFKA, TARGET, Broker, new_broker  # noqa: E402
from cluster import Cluster  # noqa: E402
import go_util  # noqa: E402
import java_util  # noqa: E402


def pytest_collection_modifyitems(config, items):
    if not ON_KAFKA:
        return
    for item in items:
        m = item.get_closest_marker("strata_only")
        if m is not None:
            why = m.args[0] if m.args else m.kwargs.get("reason", "")
            item.add_marker(pytest.mark.skip(reason=f"strata only: {why}"))
        m = item.get_closest_marker("kafka_xfail")
        if m is not None:
            why = m.args[0] if m.args else m.kwargs.get("reason", "")
            item.add_marker(pytest.mark.xfail(reason=f"differs on Apache Kafka: {why}", strict=True))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, f"rep_{rep.when}", rep)
    if rep.failed:
        brokers = list(getattr(item, "_strata_brokers", []))
        brokers += [v for v in getattr(item, "funcargs", {}).values() if isinstance(v, Broker) and v not in brokers]
        for i, b in enumerate(brokers):
            rep.sections.append((f"{b.process_name} log #{i} ({b.workdir})", b.log_tail(400)))
        for c in getattr(item, "_strata_clusters", []):
            for name, tail in c.log_tails(200):
                rep.sections.append((f"cluster {name} log", tail))


@pytest.fixture(scope="session")
def strata_starts(tmp_path_factory) -> str | None:
    """Starts (and stops) one default broker per session, so that when the binary cannot start
    or never becomes ready every test fails at once with that reason, instead of each one
    waiting out its own start-up deadline."""
    try:
        if ON_KAFKA:
            from kafka_broker import ensure_installed

            ensure_installed()
        b = new_broker(tmp_path_factory.mktemp("session-check"))
    except Exception as e:  # noqa: BLE001 - reported on every test below
        return f"{type(e).__name__}: {e}"
    try:
        b.start()
        b.stop()
    except Exception as e:  # noqa: BLE001 - reported on every test below
        b.kill()
        return f"{type(e).__name__}: {e}\n{b.log_tail(60)}"
    return None


@pytest.fixture(scope="session")
def go_clients(tmp_path_factory) -> dict[str, Path]:
    """name -> binary of each Go client program (sarama_client, franz_client, kafkago_client),
    built offline from the module in tests/interop/go once per session."""
    return go_util.build(tmp_path_factory.mktemp("go"))


@pytest.fixture(scope="session")
def java_clients(tmp_path_factory) -> "java_util.JavaClients":
    """The Java client scenarios of tests/java, compiled once per session against each
    kafka-clients version's classpath (resolved offline)."""
    return java_util.JavaClients(tmp_path_factory.mktemp("java")).build()


@pytest.fixture
def broker_factory(request, tmp_path, strata_starts):
    if strata_starts is not None:
        pytest.fail(f"{TARGET} could not start a default single-node broker: {strata_starts}", pytrace=False)
    started: list[Broker] = []
    request.node._strata_brokers = started

    def make(overrides: dict[str, str] | None = None, start: bool = True) -> Broker:
        b = new_broker(tmp_path / f"broker{len(started)}", overrides)
        started.append(b)
        if start:
            b.start()
        return b

    yield make

    errors = []
    for b in started:
        if b.alive():
            try:
                b.stop()
            except AssertionError as e:
                errors.append(str(e))
        else:
            b.kill()
    call_rep = getattr(request.node, "rep_call", None)
    if errors and call_rep is not None and call_rep.passed:
        pytest.fail("clean shutdown failed: " + "; ".join(errors))


@pytest.fixture
def broker(broker_factory) -> Broker:
    return broker_factory()


@pytest.fixture(scope="module")
def module_broker(tmp_path_factory, strata_starts) -> Broker:
    """One broker shared by a module's tests (for suites that build big topics once and read
    them several ways). Stopped with SIGTERM after the module; a failing stop fails the last
    test's teardown."""
    if strata_starts is not None:
        pytest.fail(f"{TARGET} could not start a default single-node broker: {strata_starts}", pytrace=False)
    b = new_broker(tmp_path_factory.mktemp("module-broker"))
    b.start()
    yield b
    if b.alive():
        b.stop()
    else:
        b.kill()


@pytest.fixture
def cluster_factory(request, tmp_path, strata_starts):
    """`cluster_factory(size=3, overrides=None, proxies=False)`: a cluster of real strata processes
    (see cluster.py), started; every node is stopped with SIGTERM at the end of the test, which
    also checks that each exits cleanly, and then the replica audit reads every node's logs: the
    in-sync replicas agree below the high watermark and no log holds a producer batch twice."""
    if strata_starts is not None:
        pytest.fail(f"{TARGET} could not start a default single-node broker: {strata_starts}", pytrace=False)
    made: list[Cluster] = []
    request.node._strata_clusters = made

    def make(size: int = 3, overrides: dict[str, str] | None = None, proxies: bool = False,
             start: bool = True) -> Cluster:
        c = Cluster(tmp_path / f"cluster{len(made)}", size, overrides, proxies)
        made.append(c)
        if start:
            c.start()
        return c

    yield make

    call_rep = getattr(request.node, "rep_call", None)
    passed = call_rep is not None and call_rep.passed
    in_sync = [c.in_sync_replicas() if passed else None for c in made]
    errors = []
    for c in made:
        errors += c.stop_all()
    if errors and passed:
        pytest.fail("clean shutdown failed: " + "; ".join(errors))
    # Every cluster test ends with the replica audit of what the nodes wrote (replica_audit.py).
    problems = [f"{c.workdir.name}: {p}" for c, isr in zip(made, in_sync) if passed for p in c.audit(isr)]
    if problems:
        pytest.fail("replica audit failed:\n" + "\n".join(problems[:20]), pytrace=False)
