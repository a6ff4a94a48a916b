"""Replication on a 3-node cluster of real strata processes (see cluster.py), driven by real
clients. Proves:

- a cluster forms from three configurations on empty directories with no format step, agrees on
  one cluster id, and serves RF 3 topics to librdkafka, kafka-python and kafkajs with acks=all;
- SIGKILL of a partition leader during continuous idempotent acks=all produce (RF 3,
  min.insync.replicas=2) loses and duplicates no acknowledged record and keeps per-partition
  order (history checker, drained); the killed broker restarts, truncates what it must, catches
  up and is back in every ISR;
- a killed follower leaves the ISR: acks=all with min.insync.replicas=2 on RF 2 is refused with
  NOT_ENOUGH_REPLICAS while acks=1 still works; after its restart the ISR is whole again;
- a leader cut off from the other brokers (fault proxies on the inter-broker and controller
  listeners) acknowledges no acks=all write it could not replicate, and after healing nothing
  acknowledged is lost (the old leader truncates its unreplicated tail);
- the controller quorum that lost its majority makes progress again once the voters restart;
- SIGTERM is a controlled shutdown: leadership moves away before the broker exits, so a producer
  sees no error; preferred leader election (ElectLeaders) moves it back; the whole cluster
  stopped at once exits cleanly without the last broker waiting out its wait for a controller;
- DeleteRecords answers only once every live replica has moved its log start offset: the leader
  killed right after the answer leaves a new leader that starts at the deleted offset too;
- a broker that was down while a topic was deleted and created again under the same name does not
  take the old topic's log for the new one's (`partition.metadata` holds the topic id);
- DescribeQuorum through any broker names the quorum's leader and every voter's progress, and
  follows a new leader after the old one is killed; Metadata's controller id is a live broker, so
  an admin client never waits on the dead controller;
- with `broker.rack` set, new partitions (CreateTopics and CreatePartitions) get replicas on as
  many racks as they can, as Kafka's rack-aware assignment places them, and losing the broker of
  the lone rack leaves every partition a live replica;
- followers fetch through incremental fetch sessions (KIP-227): every leader holds a session per
  follower with all the partitions it follows there, and replication goes on through a follower's
  and a leader's SIGKILL (the lost sessions are replaced).
"""

from __future__ import annotations

import threading
import time
import urllib.request

import pytest
from confluent_kafka import KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

import history
import util
from broker import free_port
from groups_util import PacedProducer
from txn_util import read_topic
from util import wait_until

PARTS = 3


def create(bootstrap: str, topic: str, partitions: int = PARTS, rf: int = 3, config: dict | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    fs = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=rf,
                                       config=config or {})], operation_timeout=30)
    for f in fs.values():
        f.result(30)


def assert_drained(bootstrap: str, topic: str, sends: list[history.Send], what: str,
                   partitions: int = PARTS) -> history.Report:
    polls = [history.Poll("reader", r.partition, r.offset, r.value)
             for r in read_topic(bootstrap, topic, partitions, read_committed=False, timeout=60)]
    report = history.check(sends, polls, drained=True)
    report.assert_ok(what)
    return report


@pytest.mark.timeout(180)
def test_a_cluster_forms_without_a_format_step_and_serves_rf3_to_every_client(cluster_factory, tmp_path):
    c = cluster_factory()
    md = c.metadata()
    assert sorted(md.brokers) == [0, 1, 2]
    ids = {c.metadata(via=i).cluster_id for i in range(3)}
    assert len(ids) == 1 and None not in ids, f"nodes disagree on the cluster id: {ids}"
    for i in range(3):
        props = (c.nodes[i].data_dir / "meta.properties").read_text()
        assert f"cluster.id={md.cluster_id}" in props, props

    for lib in ("confluent", "kafka-python", "kafkajs"):
        topic = util.unique_topic(f"rf3-{lib}")
        create(c.bootstrap, topic, partitions=1)
        p = c.partition(topic, 0)
        assert sorted(p.replicas) == [0, 1, 2] and sorted(p.isrs) == [0, 1, 2], (p.replicas, p.isrs)
        recs = util.make_records(300, lib)
        if lib == "confluent":
            util.confluent_produce(c.bootstrap, topic, recs, acks="all")
            got = util.confluent_read(c.bootstrap, topic, 0, len(recs))
        elif lib == "kafka-python":
            util.kafka_python_produce(c.bootstrap, topic, recs)
            got = util.kafka_python_read(c.bootstrap, topic, 0, len(recs))
        else:
            util.kafkajs_produce(c.bootstrap, topic, recs, tmp_path, acks=-1)
            got = util.kafkajs_read(c.bootstrap, topic, 0, len(recs), tmp_path)
        util.assert_records(recs, got, check_headers=lib != "kafka-python")
        # Every replica has them: each broker's view of the high watermark (what a follower
        # learns from its fetches) reaches the end.
        for node in range(3):
            low, high = util.watermarks(c.nodes[node].bootstrap, topic, 0)
            assert high == len(recs), f"node {node} sees high watermark {high}"


@pytest.mark.timeout(240)
@pytest.mark.parametrize("victim", ["leader", "controller"])
def test_leader_sigkill_under_idempotent_acks_all_loses_nothing(cluster_factory, victim):
    c = cluster_factory()
    topic = util.unique_topic("kill-leader")
    create(c.bootstrap, topic, config={"min.insync.replicas": "2"})
    prod = PacedProducer(c.bootstrap, topic, PARTS, rate=400, tag="k")
    try:
        prod.wait_acked(1000, 60)
        if victim == "leader":
            dead = c.partition(topic, 0).leader
        else:
            dead = c.active_controller()
        c.kill(dead)
        new_leader = c.wait_leader(topic, 0, not_in={dead})
        prod.wait_acked(len(prod.acks) + 1000, 60)
        c.start_node(dead)
        for p in range(PARTS):
            c.wait_isr(topic, p, {0, 1, 2})
        prod.wait_acked(len(prod.acks) + 500, 60)
        sends = prod.stop(60)
    finally:
        prod.close()
    assert_drained(c.bootstrap, topic, sends, f"after SIGKILL of node {dead} ({victim})")
    assert len(sends) >= 2500 and new_leader != dead


@pytest.mark.timeout(180)
def test_a_killed_follower_leaves_the_isr_and_min_isr_refuses_acks_all(cluster_factory):
    c = cluster_factory()
    topic = util.unique_topic("min-isr")
    create(c.bootstrap, topic, partitions=1, rf=2, config={"min.insync.replicas": "2"})
    p = c.partition(topic, 0)
    leader, follower = p.leader, next(r for r in p.replicas if r != p.leader)
    recs = util.make_records(50, "before")
    util.confluent_produce(c.bootstrap, topic, recs, acks="all")
    c.kill(follower)
    c.wait_isr(topic, 0, {leader})

    def send(acks: str) -> KafkaError | None:
        errors: list = []
        prod = Producer({"bootstrap.servers": c.live_bootstrap(), "acks": acks, "retries": 0,
                         "message.timeout.ms": 10_000, "log_level": 0})
        prod.produce(topic, b"v", partition=0, on_delivery=lambda err, _m: errors.append(err))
        prod.flush(15)
        assert errors, "no delivery report"
        return errors[0]

    err = send("all")
    assert err is not None and err.code() == KafkaError.NOT_ENOUGH_REPLICAS, f"acks=all got {err}"
    assert send("1") is None, "acks=1 must still succeed with one in-sync replica"
    c.start_node(follower)
    c.wait_isr(topic, 0, {leader, follower})
    assert send("all") is None, "acks=all works again once the ISR is whole"
    low, high = util.watermarks(c.bootstrap, topic, 0)
    assert high == len(recs) + 2


@pytest.mark.timeout(240)
def test_an_isolated_leader_acknowledges_nothing_it_cannot_replicate(cluster_factory):
    c = cluster_factory(proxies=True)
    topic = util.unique_topic("isolated")
    create(c.bootstrap, topic, partitions=1, config={"min.insync.replicas": "2"})
    old = c.partition(topic, 0).leader
    others = [i for i in range(3) if i != old]
    sends: list[history.Send] = []
    lock = threading.Lock()
    stop = threading.Event()

    def produce(bootstrap: str, tag: str):
        # Not idempotent and no retries: each value is sent once, so whatever the log holds
        # twice or loses is the broker's doing.
        p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "retries": 0, "linger.ms": 5,
                      "message.timeout.ms": 8000, "request.timeout.ms": 6000, "log_level": 0})
        n = 0

        def cb(value):
            def done(err, msg):
                with lock:
                    if err is None:
                        sends.append(history.Send(value, msg.partition(), msg.offset(), producer=tag))
                    else:
                        sends.append(history.Send(value, status=history.INFO, producer=tag))
            return done

        while not stop.is_set():
            value = f"{tag}-{n}"
            try:
                p.produce(topic, value.encode(), partition=0, on_delivery=cb(value))
            except BufferError:
                pass
            n += 1
            p.poll(0.005)
        p.flush(30)

    # One producer knows only the old leader (it keeps writing there after the cut), one the rest.
    threads = [threading.Thread(target=produce, args=(c.nodes[old].bootstrap, "to-old"), daemon=True),
               threading.Thread(target=produce, args=(",".join(c.nodes[i].bootstrap for i in others), "to-new"),
                                daemon=True)]
    for t in threads:
        t.start()
    wait_until(lambda: sum(1 for s in sends if s.status == history.OK) > 300, 30, "acknowledged writes")
    c.isolate(old)
    new = wait_until(lambda: (lambda p: (p.leader,) if p.leader in others else None)(c.partition(topic, 0, via=others[0])),
                     60, "a new leader among the others")[0]
    time.sleep(3)  # both producers keep writing through the split
    c.heal(old)
    c.wait_isr(topic, 0, {0, 1, 2}, via=others[0])
    stop.set()
    for t in threads:
        t.join(60)
    with lock:
        history_sends = list(sends)
    assert_drained(c.bootstrap, topic, history_sends, f"after isolating leader {old}, new leader {new}",
                   partitions=1)
    assert any(s.producer == "to-new" and s.status == history.OK for s in history_sends)


@pytest.mark.timeout(180)
def test_the_quorum_makes_progress_again_after_losing_its_majority(cluster_factory):
    c = cluster_factory()
    topic = util.unique_topic("quorum")
    create(c.bootstrap, topic, partitions=1)
    c.kill(1)
    c.kill(2)
    admin = AdminClient({"bootstrap.servers": c.nodes[0].bootstrap, "log_level": 0})
    fs = admin.create_topics([NewTopic(util.unique_topic("no-quorum"), 1, 1)], operation_timeout=3,
                             request_timeout=5)
    with pytest.raises(Exception):
        for f in fs.values():
            f.result(10)
    c.nodes[1].spawn()
    c.nodes[2].spawn()
    for i in (1, 2):
        c.nodes[i].wait_ready(60)
    again = util.unique_topic("quorum-again")
    wait_until(lambda: create(c.bootstrap, again, partitions=1) or True, 60, "CreateTopics after the quorum is back",
               interval=0.5)
    recs = util.make_records(20, "q")
    util.confluent_produce(c.bootstrap, again, recs, acks="all")
    util.assert_records(recs, util.confluent_read(c.bootstrap, again, 0, len(recs)))


@pytest.mark.timeout(240)
def test_sigterm_moves_leadership_away_first_and_preferred_election_brings_it_back(cluster_factory):
    c = cluster_factory(overrides={"auto.leader.rebalance.enable": "false"})
    topic = util.unique_topic("controlled")
    create(c.bootstrap, topic, config={"min.insync.replicas": "2"})
    leader = c.partition(topic, 0).leader
    prod = PacedProducer(c.bootstrap, topic, PARTS, rate=300, tag="t")
    try:
        prod.wait_acked(500, 60)
        c.stop(leader)  # SIGTERM: asserts a clean exit
        assert c.partition(topic, 0).leader != leader, "leadership moved before the broker exited"
        prod.wait_acked(len(prod.acks) + 500, 60)
        c.start_node(leader)
        for p in range(PARTS):
            c.wait_isr(topic, p, {0, 1, 2})
        from confluent_kafka import ElectionType, TopicPartition

        admin = AdminClient({"bootstrap.servers": c.bootstrap, "log_level": 0})
        done = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, p) for p in range(PARTS)])
        results = done.result(30)
        assert all(e is None or e.code() == KafkaError.ELECTION_NOT_NEEDED for e in results.values()), results
        wait_until(lambda: all(c.partition(topic, p).leader == c.partition(topic, p).replicas[0] for p in range(PARTS)),
                   30, "every partition led by its preferred replica")
        sends = prod.stop(60)
    finally:
        prod.close()
    assert not prod.errors, f"a controlled shutdown must not surface errors: {prod.errors[:5]}"
    assert_drained(c.bootstrap, topic, sends, "after a controlled shutdown and preferred election")
    # The whole cluster stopped at once: the last broker's quorum is gone, so it cannot be let go
    # by a controller; with nothing another replica could lead it exits without waiting out its
    # controlled-shutdown wait (10 s here).
    started = time.monotonic()
    problems = c.stop_all()
    took = time.monotonic() - started
    assert not problems, problems
    assert took < 8, f"stopping every node at once took {took:.1f} s"


@pytest.mark.timeout(180)
def test_delete_records_waits_for_every_replica_so_a_new_leader_starts_there_too(cluster_factory):
    c = cluster_factory()
    topic = util.unique_topic("delrec-rf3")
    create(c.bootstrap, topic, partitions=1, rf=3)
    recs = util.make_records(100, "d")
    util.confluent_produce(c.bootstrap, topic, recs, acks="all")
    c.wait_isr(topic, 0, {0, 1, 2})
    leader = c.partition(topic, 0).leader
    admin = AdminClient({"bootstrap.servers": c.bootstrap, "log_level": 0})
    res = admin.delete_records([TopicPartition(topic, 0, 60)], operation_timeout=30, request_timeout=40)
    assert list(res.values())[0].result(timeout=45).low_watermark == 60
    # At once, before any follower could fetch again: the answer already covered them.
    c.kill(leader)
    new_leader = c.wait_leader(topic, 0, not_in={leader})
    assert new_leader != leader
    low, high = util.watermarks(c.live_bootstrap(), topic, 0)
    assert (low, high) == (60, 100), "the deleted records must not come back with a new leader"


@pytest.mark.timeout(240)
def test_a_topic_made_again_while_a_replica_was_down_does_not_inherit_its_old_log(cluster_factory):
    c = cluster_factory()
    topic = util.unique_topic("remade")
    create(c.bootstrap, topic, partitions=1, rf=3)
    util.confluent_produce(c.bootstrap, topic, util.make_records(40, "OLDVALUE"), acks="all")
    c.wait_isr(topic, 0, {0, 1, 2})
    # Not the active controller: the admin requests below should not wait for a new one.
    controller = c.active_controller()
    down = next(i for i in (2, 1, 0) if i != controller)
    up = [i for i in range(3) if i != down]
    c.kill(down)
    admin = AdminClient({"bootstrap.servers": c.live_bootstrap(), "log_level": 0})
    for f in admin.delete_topics([topic], operation_timeout=30).values():
        f.result(30)
    wait_until(lambda: topic not in c.metadata(via=up[0]).topics, 30, "the topic is gone")
    # Fenced, so no client tries to reach it (it stays registered and assignable).
    wait_until(lambda: down not in c.metadata(via=up[0]).brokers, 60, f"node {down} fenced")
    # The same name again, on the same three brokers (the one down is registered).
    # (kafka-python: confluent-kafka 2.16 refuses an explicit assignment client-side.)
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewTopic as KafkaPythonNewTopic

    kp = KafkaAdminClient(bootstrap_servers=c.live_bootstrap().split(","), request_timeout_ms=30_000)
    try:
        kp.create_topics([KafkaPythonNewTopic(topic, -1, -1, replica_assignments={0: [*up, down]})])
    finally:
        kp.close()
    new = util.make_records(10, "NEWVALUE")
    util.confluent_produce(c.live_bootstrap(), topic, new, acks="all")
    c.start_node(down)
    c.wait_isr(topic, 0, {0, 1, 2})
    stored = b"".join(seg.read_bytes() for seg in c.nodes[down].segment_files(topic, 0))
    assert b"OLDVALUE" not in stored, f"node {down} kept the deleted topic's records as the new topic's"
    assert stored.count(b"NEWVALUE-v-") == len(new), f"node {down} holds the new topic's records"
    assert "topic_id:" in (c.nodes[down].partition_dir(topic, 0) / "partition.metadata").read_text()


@pytest.mark.timeout(180)
def test_describe_quorum_through_any_broker_follows_the_leader_and_metadata_names_a_live_broker(
        cluster_factory):
    c = cluster_factory()
    leader = c.active_controller()
    for via in range(3):
        q = c.quorum(via)
        assert (q.error_code, q.leader_id) == (0, leader), f"via node {via}: {q}"
        assert set(q.voters) == {0, 1, 2} and q.high_watermark > 0, q
        assert q.voters[leader] >= q.high_watermark, q
    epoch = c.quorum(0).leader_epoch
    c.kill(leader)
    live = [i for i in range(3) if i != leader]

    def new_leader():
        q = c.quorum(live[0])
        return q if q.error_code == 0 and q.leader_id in live else None

    q = wait_until(new_leader, 60, "a new quorum leader", interval=0.1)
    assert q.leader_epoch > epoch, q
    # Once the dead node is fenced, Metadata never names it as the controller (Kafka answers a
    # random live broker; admin requests sent there are forwarded to the active controller).
    def only_live():
        ids = {c.metadata(via=live[0]).controller_id for _ in range(12)}
        return ids if ids <= set(live) else None

    wait_until(only_live, 60, "controller ids of live brokers only", interval=0.2)
    topic = util.unique_topic("after-controller")
    admin = AdminClient({"bootstrap.servers": c.live_bootstrap(), "log_level": 0})
    started = time.monotonic()
    for f in admin.create_topics([NewTopic(topic, 1, 2)], operation_timeout=20).values():
        f.result(30)
    assert time.monotonic() - started < 15, "CreateTopics through a live broker went promptly"
    c.start_node(leader)
    wait_until(lambda: set(c.quorum(leader).voters) == {0, 1, 2} and c.quorum(leader).error_code == 0,
               60, "the restarted voter answers through its own listener", interval=0.2)


def node_metrics(port: int) -> dict[str, float]:
    """The samples of a node's /metrics: `name{labels}` -> value."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        lines = r.read().decode().splitlines()
    return {ln.rsplit(" ", 1)[0]: float(ln.rsplit(" ", 1)[1]) for ln in lines if ln and not ln.startswith("#")}


@pytest.mark.timeout(240)
@pytest.mark.strata_only("reads the followers' fetch sessions and log end offsets from Strata's metrics listener")
def test_followers_fetch_through_sessions_and_replace_them_after_a_kill(cluster_factory):
    parts = 12
    c = cluster_factory(start=False)
    ports = [free_port() for _ in c.nodes]
    for n, port in zip(c.nodes, ports):
        n.overrides["metrics.listener"] = f"http://127.0.0.1:{port}"
    c.start()
    topic = util.unique_topic("follower-sessions")
    create(c.bootstrap, topic, partitions=parts)
    for p in range(parts):
        c.wait_isr(topic, p, {0, 1, 2})
    sent = [0] * parts

    def produce(rounds: int):
        pr = Producer({"bootstrap.servers": c.live_bootstrap(), "acks": "all", "log_level": 0})
        for i in range(rounds * parts):
            # A few partitions get most records: the others stay out of incremental fetches.
            p = i % 3 if i % 4 else i % parts
            pr.produce(topic, value=f"v{i}".encode(), partition=p)
            sent[p] += 1
        assert pr.flush(30) == 0

    def replicated(nodes) -> bool:
        for i in nodes:
            m = node_metrics(ports[i])
            for p in range(parts):
                if m.get(f'kafka_log_log_logendoffset{{topic="{topic}",partition="{p}"}}') != sent[p]:
                    return False
        return True

    def sessions_hold_every_followed_partition(at_least: bool = False) -> bool:
        # Each node leads some of the partitions; its two followers each keep one session with
        # every partition they follow there (the internal topics are not created here).
        total = sum(node_metrics(port).get("kafka_server_fetchsessioncache_numincrementalfetchpartitionscached", 0)
                    for port in ports)
        return total >= 2 * parts if at_least else total == 2 * parts

    produce(10)
    wait_until(lambda: replicated(range(3)), 30, "every replica has every record")
    wait_until(sessions_hold_every_followed_partition, 30, "each follower's partitions in a session")

    # A follower killed and restarted opens new sessions; a leader killed and restarted has
    # lost the sessions its followers hold, which they replace.
    for victim in (2, 0):
        c.kill(victim)
        produce(5)
        wait_until(lambda: replicated([i for i in range(3) if i != victim]), 30, "the live replicas replicate")
        c.start_node(victim)
        for p in range(parts):
            c.wait_isr(topic, p, {0, 1, 2})
        produce(5)
        wait_until(lambda: replicated(range(3)), 60, f"node {victim} caught up after its restart")
        # The killed node's own sessions may linger in a leader's cache until evicted.
        wait_until(lambda: sessions_hold_every_followed_partition(at_least=True), 30, "sessions again")


def test_replicas_are_spread_over_racks_when_brokers_name_them(cluster_factory):
    c = cluster_factory(start=False)
    racks = {0: "a", 1: "a", 2: "b"}
    for i, rack in racks.items():
        c.nodes[i].overrides["broker.rack"] = rack
    c.start()
    topic = util.unique_topic("racks")
    create(c.bootstrap, topic, partitions=12, rf=2)
    admin = AdminClient({"bootstrap.servers": c.bootstrap, "log_level": 0})
    admin.create_partitions([NewPartitions(topic, 18)])[topic].result(30)
    leaders = {}
    for p in range(18):
        replicas = c.partition(topic, p).replicas
        assert len(set(replicas)) == 2 and {racks[r] for r in replicas} == {"a", "b"}, (p, replicas)
        leaders[replicas[0]] = leaders.get(replicas[0], 0) + 1
    assert sorted(leaders) == [0, 1, 2], f"preferred leaders spread over every broker: {leaders}"
    # Rack b's only broker down: every partition still has its rack-a replica, and serves.
    c.kill(2)
    recs = util.make_records(50, "confluent")
    for p in (0, 17):
        for r in recs:
            r.partition = p
        util.confluent_produce(c.bootstrap, topic, recs, acks="all")
        util.assert_records(recs, util.confluent_read(c.bootstrap, topic, p, len(recs)))
