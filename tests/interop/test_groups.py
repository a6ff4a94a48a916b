"""Consumer groups, end to end with real clients (librdkafka, kafka-python, aiokafka, kafkajs).

Proves:
- three member processes of one group share a 6-partition topic; when one is SIGKILLed its
  partitions move to the others once its session times out; nothing is skipped and a record is
  read again only if it came after the last offset the killed member committed (at-least-once,
  exactly that bound);
- a static member (group.instance.id) that restarts within its session timeout gets its
  partitions back without a rebalance: the other members see no revoke or assignment, and
  DescribeGroups shows the same members with the same assignment;
- committed offsets (and their metadata) survive a broker kill -9 and restart, and a member of
  the group resumes exactly there;
- ListGroups, DescribeGroups, DeleteGroups, OffsetCommit from an admin and OffsetDelete through
  librdkafka's AdminClient and kafka-python's KafkaAdminClient, including the refusals: a group
  with members cannot be deleted (NON_EMPTY_GROUP) nor have its offsets altered
  (UNKNOWN_MEMBER_ID), and offsets of a topic the group subscribes to cannot be deleted
  (GROUP_SUBSCRIBED_TO_TOPIC).

Consumers run as separate processes (apps/group_consumer.py, js/groups_consumer.mjs), print every
record they process and commit after processing; groups_util.check_group_reads checks the reads.
"""

from __future__ import annotations

import time

import pytest

import util
import wire
from groups_util import (CONSUMER_LIBS, PacedProducer, check_group_reads, describe_group, last_assignment,
                         read_everything, stable_assignment, start_consumer, terminate_all, unique)
from util import wait_until

PARTITIONS = 6
GROUP_BROKER = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "5",
    "group.min.session.timeout.ms": "2000",
}


def _stop_all(apps):
    for a in apps:
        a.stop_quietly()


# --------------------------------------------------------------------------------------------
# A member is SIGKILLed
# --------------------------------------------------------------------------------------------


def _uncommitted_reads(app) -> set[int]:
    """Partitions on which `app` printed a record after its last commit request."""
    out: set[int] = set()
    for e in app.snapshot():
        if e["ev"] == "rec":
            out.add(e["p"])
        elif e["ev"] == "committing":
            out -= {int(p) for p in e["offsets"]}
        elif e["ev"] == "assign":
            out = set()
    return out


@pytest.mark.timeout(120)
@pytest.mark.parametrize("lib", CONSUMER_LIBS)
def test_killed_member_partitions_move_without_loss(broker_factory, tmp_path, lib):
    session_ms = 6000
    b = broker_factory(GROUP_BROKER)
    topic, group = unique("grp-kill"), unique("g")
    util.create_topic(b.bootstrap, topic, PARTITIONS)
    prod = PacedProducer(b.bootstrap, topic, PARTITIONS, rate=150)
    apps = []
    try:
        kw = dict(bootstrap=b.bootstrap, topic=topic, group=group, session_timeout_ms=session_ms)
        # The victim commits once a second, the others after every batch: when it dies it has
        # read records it has not committed, which its successors must read again.
        apps = [start_consumer(lib, f"{lib}-{i}", tmp_path, commit_every_ms=1000 if i == 1 else 0, **kw)
                for i in range(3)]
        assignment = wait_until(lambda: stable_assignment(apps, PARTITIONS), 45,
                                "3 members sharing 6 partitions, each consuming")
        assert all(len(ps) == 2 for ps in assignment.values()), assignment
        victim, survivors = apps[1], [apps[0], apps[2]]
        moved = last_assignment(victim)
        victim.wait_for(lambda evs: sum(e["ev"] == "commit" for e in evs) >= 2
                        and _uncommitted_reads(victim) == set(moved), 20,
                        "commits, then uncommitted reads on both partitions")
        t_kill = victim.kill()

        def moved_to_survivors():
            firsts = {}
            for p in moved:
                rs = [e for a in survivors for e in a.snapshot("rec") if e["p"] == p and e["t"] > t_kill]
                if not rs:
                    return None
                firsts[p] = min(rs, key=lambda e: e["t"])
            return firsts

        firsts = wait_until(moved_to_survivors, session_ms / 1000 + 20,
                            f"partitions {moved} of the killed member read by the others")
        took = {p: round(e["t"] - t_kill, 2) for p, e in firsts.items()}
        # The move cannot start before the session expires; it must happen soon after.
        assert max(took.values()) <= session_ms / 1000 + 8, f"partitions moved only after {took} s"
        final = wait_until(lambda: stable_assignment(survivors, PARTITIONS), 20, "the 2 survivors owning all 6")
        assert sorted(len(ps) for ps in final.values()) == [3, 3], final

        sends = prod.stop()
        ends = prod.end_offsets()
        wait_until(lambda: read_everything(survivors, ends), 30, "survivors to read every record")
        terminate_all(survivors)
        check_group_reads(apps, sends, PARTITIONS)

        # Exactly the at-least-once bound: the new owner of each of the victim's partitions starts
        # at the victim's last committed offset (or at the one it was committing when killed, if
        # that request got through), so it reads again exactly what the victim read after it.
        done, intent, read_max = {}, {}, {}
        for e in sorted((e for a in apps for e in a.snapshot() if e["t"] < t_kill), key=lambda e: e["t"]):
            if e["ev"] == "commit":
                done.update({int(p): o for p, o in e["offsets"].items()})
        for e in victim.snapshot():
            if e["ev"] == "committing":
                intent = {int(p): o for p, o in e["offsets"].items()}
            elif e["ev"] in ("commit", "commit_err"):
                intent = {}
            elif e["ev"] == "rec":
                read_max[e["p"]] = max(read_max.get(e["p"], -1), e["o"])
        for p in moved:
            allowed = {done.get(p, 0), intent.get(p, done.get(p, 0))}
            assert firsts[p]["o"] in allowed, \
                f"partition {p}: new owner started at {firsts[p]['o']}, committed offset was {sorted(allowed)}; " \
                f"victim's commits: {[e for e in victim.snapshot() if e['ev'].startswith('commit')][-4:]}"
            assert firsts[p]["o"] <= read_max[p], \
                f"partition {p}: the victim read up to {read_max[p]} uncommitted, yet nothing was read again"
    finally:
        prod.close()
        _stop_all(apps)


# --------------------------------------------------------------------------------------------
# Static membership
# --------------------------------------------------------------------------------------------


@pytest.mark.timeout(120)
@pytest.mark.parametrize("lib", ["confluent", "kafka-python", "aiokafka"])
def test_static_member_restart_without_rebalance(broker_factory, tmp_path, lib):
    session_ms = 10_000
    b = broker_factory(GROUP_BROKER)
    topic, group = unique("grp-static"), unique("g")
    util.create_topic(b.bootstrap, topic, PARTITIONS)
    prod = PacedProducer(b.bootstrap, topic, PARTITIONS, rate=100)
    apps = []
    try:
        kw = dict(bootstrap=b.bootstrap, topic=topic, group=group, session_timeout_ms=session_ms)
        # The first member to join leads; restart the last one so the leader is not involved.
        apps.append(start_consumer(lib, "s0", tmp_path, instance_id="inst-0", **kw))
        apps[0].wait_for(lambda evs: any(e["ev"] == "assign" and e["parts"] for e in evs), 30, "first assignment")
        apps += [start_consumer(lib, f"s{i}", tmp_path, instance_id=f"inst-{i}", **kw) for i in (1, 2)]
        before = wait_until(lambda: stable_assignment(apps, PARTITIONS), 45, "3 static members consuming")
        desc_before = wait_until(lambda: (d := describe_group(b.bootstrap, group))["state"] == "STABLE"
                                 and len(d["members"]) == 3 and d, 20, "DescribeGroups: Stable, 3 members")
        by_inst_before = {m["instance"]: (mid, m["parts"]) for mid, m in desc_before["members"].items()}
        assert sorted(by_inst_before) == ["inst-0", "inst-1", "inst-2"], desc_before
        others = apps[:2]
        marks = {a.name: len([e for e in a.snapshot() if e["ev"] in ("assign", "revoke")]) for a in others}

        old = apps[2]
        old.wait_for(lambda evs: sum(e["ev"] == "commit" for e in evs) >= 2, 20, "commits")
        t_kill = old.kill()
        new = start_consumer(lib, "s2-restarted", tmp_path, instance_id="inst-2", **kw)
        apps.append(new)
        new.wait_for(lambda evs: any(e["ev"] == "rec" for e in evs), 20, "the restarted member consuming")
        back = last_assignment(new)
        assert back == before["s2"], f"restarted static member got {back}, held {before['s2']} before"
        assert time.monotonic() - t_kill < session_ms / 1000, "restart took longer than the session timeout"

        def others_disturbed():
            for a in others:
                evs = [e for e in a.snapshot() if e["ev"] in ("assign", "revoke")]
                if len(evs) != marks[a.name]:
                    raise AssertionError(f"{a.name} saw a rebalance after the static restart: {evs[marks[a.name]:]}")
            return time.monotonic() > t_kill + session_ms / 1000 + 3

        # Watch past the moment the old session would have expired: still no rebalance.
        wait_until(others_disturbed, session_ms / 1000 + 15, "the old session's expiry to pass")
        desc = describe_group(b.bootstrap, group)
        by_inst = {m["instance"]: (mid, m["parts"]) for mid, m in desc["members"].items()}
        assert desc["state"] == "STABLE" and len(desc["members"]) == 3, desc
        for inst in ("inst-0", "inst-1"):
            assert by_inst[inst] == by_inst_before[inst], (inst, by_inst_before[inst], by_inst[inst])
        assert by_inst["inst-2"][1] == by_inst_before["inst-2"][1], desc
        assert by_inst["inst-2"][0] != by_inst_before["inst-2"][0], \
            "the restarted static member should have a new member id (the old one is fenced)"

        sends = prod.stop()
        ends = prod.end_offsets()
        live = [a for a in apps if a.alive()]
        wait_until(lambda: read_everything(live, ends), 30, "every record read")
        terminate_all(live)
        result = check_group_reads(apps, sends, PARTITIONS)
        for p, handovers in result["redelivered"].items():
            assert all(frm == "s2" and to == "s2-restarted" for frm, to, *_ in handovers), (p, handovers)
    finally:
        prod.close()
        _stop_all(apps)


# --------------------------------------------------------------------------------------------
# Committed offsets survive a broker crash
# --------------------------------------------------------------------------------------------


def _commit_confluent(bootstrap: str, group: str, topic: str, offsets: dict[int, tuple[int, str]]) -> None:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False, "log_level": 3})
    try:
        tps = [TopicPartition(topic, p, o, m) for p, (o, m) in offsets.items()]
        c.assign(tps)
        c.commit(offsets=tps, asynchronous=False)
    finally:
        c.close()


def _commit_kafka_python(bootstrap: str, group: str, topic: str, offsets: dict[int, tuple[int, str]]) -> None:
    from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        c.assign([TopicPartition(topic, p) for p in offsets])
        c.commit({TopicPartition(topic, p): OffsetAndMetadata(o, m, -1) for p, (o, m) in offsets.items()})
    finally:
        c.close()


def _offsets_confluent(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    """Committed offsets through librdkafka's AdminClient (OffsetFetch). Offsets only: the
    Python binding reads the metadata as a NUL-terminated C string although librdkafka's buffer
    has a length and no terminator, so metadata that another client wrote comes back with
    garbage after it (librdkafka issue #4649); metadata is checked through kafka-python."""
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka.admin import AdminClient

    a = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    res = a.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=10)[group]
    out = {}
    for tp in res.result(timeout=20).topic_partitions:
        assert tp.error is None, (group, tp.partition, tp.error)
        if tp.topic == topic and tp.offset >= 0:
            out[tp.partition] = tp.offset
    return out


def _offsets_only(expected: dict[int, tuple[int, str]]) -> dict[int, int]:
    return {p: o for p, (o, _) in expected.items()}


def _kp_admin(bootstrap: str):
    from kafka.admin import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)


def _meta(m: str | None) -> str:
    # confluent-kafka-python 2.16 sends TopicPartition metadata with its C string's NUL
    # terminator ("abc" goes out as the 4 bytes "abc\0"; seen on the wire), so what it committed
    # comes back with a trailing NUL.
    return (m or "").removesuffix("\x00")


def _offsets_kafka_python(admin, groups: list[str], topic: str) -> dict[str, dict[int, tuple[int, str]]]:
    res = admin.list_group_offsets({g: None for g in groups})
    return {g: {tp.partition: (om.offset, _meta(om.metadata)) for tp, om in res[g].items()
                if tp.topic == topic and om.offset >= 0} for g in groups}


@pytest.mark.kafka_smoke
@pytest.mark.timeout(120)
def test_committed_offsets_survive_broker_kill(broker_factory, tmp_path):
    from confluent_kafka import Consumer

    b = broker_factory(GROUP_BROKER)
    topic, base = unique("grp-durable"), unique("g")
    parts = 4
    util.create_topic(b.bootstrap, topic, parts)
    util.confluent_produce(b.bootstrap, topic, [util.Rec(None, f"r{i}".encode(), partition=i % parts)
                                                for i in range(400)])
    # Twelve groups (over the 5 __consumer_offsets partitions), each committed twice through one
    # of two clients: the second commit, with its metadata, is what must survive.
    expected = {}
    for i in range(12):
        g = f"{base}-{i}"
        commit = _commit_confluent if i % 2 == 0 else _commit_kafka_python
        commit(b.bootstrap, g, topic, {p: ((i + p) % 30, "first") for p in range(parts)})
        expected[g] = {p: (10 + (i * 3 + p * 7) % 80, f"meta-{i}-{p}") for p in range(parts)}
        commit(b.bootstrap, g, topic, expected[g])
    # And a group whose member consumed through subscribe (a real generation), committing as it
    # went, then left.
    sub = f"{base}-sub"
    app = start_consumer("confluent", "sub", tmp_path, bootstrap=b.bootstrap, topic=topic, group=sub,
                         session_timeout_ms=6000)
    try:
        app.wait_for(lambda evs: sum(1 for e in evs if e["ev"] == "commit") and
                     {p: o for e in evs if e["ev"] == "commit" for p, o in e["offsets"].items()}
                     == {str(p): 100 for p in range(parts)}, 30, "all 400 records read and committed")
        app.terminate()
    finally:
        app.stop_quietly()
    expected[sub] = {p: (100, "") for p in range(parts)}

    admin = _kp_admin(b.bootstrap)
    try:
        assert _offsets_kafka_python(admin, list(expected), topic) == expected
    finally:
        admin.close()

    b.kill()
    b.start()

    admin = _kp_admin(b.bootstrap)
    try:
        assert _offsets_kafka_python(admin, list(expected), topic) == expected, "kafka-python after restart"
        listed = {g["group_id"] for g in admin.list_groups()}
        assert set(expected) <= listed, f"groups missing from ListGroups after restart: {set(expected) - listed}"
    finally:
        admin.close()
    for g in (f"{base}-0", f"{base}-1", sub):
        assert _offsets_confluent(b.bootstrap, g, topic) == _offsets_only(expected[g]), f"librdkafka, {g}"

    # A member of a restored group resumes exactly at the committed offsets.
    g = f"{base}-3"
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": g, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "log_level": 3})
    try:
        c.subscribe([topic])
        first = {}
        deadline = time.monotonic() + 30
        while len(first) < parts:
            assert time.monotonic() < deadline, f"resumed consumer read only {first}"
            for m in c.consume(100, timeout=0.5):
                assert m.error() is None, m.error()
                first.setdefault(m.partition(), m.offset())
        assert first == {p: o for p, (o, _) in expected[g].items()}, "resumed somewhere else than committed"
    finally:
        c.close()


# --------------------------------------------------------------------------------------------
# Admin: list, describe, delete groups, alter and delete offsets
# --------------------------------------------------------------------------------------------


def _cf_admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})


def _kafka_error_code(exc: BaseException) -> int | None:
    err = exc.args[0] if exc.args else None
    return err.code() if hasattr(err, "code") else None


@pytest.mark.kafka_smoke
@pytest.mark.timeout(120)
def test_group_admin_through_both_admin_clients(broker_factory, tmp_path):
    from confluent_kafka import (ConsumerGroupState, ConsumerGroupTopicPartitions, KafkaError, KafkaException,
                                 TopicPartition)
    from kafka import OffsetAndMetadata
    from kafka import TopicPartition as KTP
    import kafka.errors as KErr

    b = broker_factory(GROUP_BROKER)
    topic, other = unique("grp-admin"), unique("grp-other")
    util.create_topic(b.bootstrap, topic, 3)
    util.create_topic(b.bootstrap, other, 2)
    util.confluent_produce(b.bootstrap, topic, [util.Rec(None, b"x", partition=i % 3) for i in range(30)])
    util.confluent_produce(b.bootstrap, other, [util.Rec(None, b"y", partition=i % 2) for i in range(20)])
    base = unique("ga")
    active, empty1, empty2, empty3 = f"{base}-active", f"{base}-e1", f"{base}-e2", f"{base}-e3"
    cf = _cf_admin(b.bootstrap)
    kp = _kp_admin(b.bootstrap)
    app = start_consumer("confluent", "active", tmp_path, bootstrap=b.bootstrap, topic=topic, group=active,
                         session_timeout_ms=10_000)
    try:
        app.wait_for(lambda evs: sum(1 for e in evs if e["ev"] == "rec") >= 30, 30, "the active member reading")
        # Offsets of empty groups committed by the admin clients (OffsetCommit, generation -1).
        r = kp.alter_group_offsets(empty1, {KTP(topic, p): OffsetAndMetadata(p + 1, f"kp{p}", -1) for p in range(3)}
                                   | {KTP(other, 0): OffsetAndMetadata(5, "", -1)})
        assert all(e is KErr.NoError for e in r.values()), r
        for g, off in ((empty2, 4), (empty3, 6)):
            fut = cf.alter_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(g, [TopicPartition(topic, p, off + p) for p in range(3)])])[g]
            res = fut.result(timeout=20)
            assert all(tp.error is None for tp in res.topic_partitions), res
        assert _offsets_kafka_python(kp, [empty1], topic)[empty1] == {p: (p + 1, f"kp{p}") for p in range(3)}
        assert _offsets_confluent(b.bootstrap, empty1, topic) == {p: p + 1 for p in range(3)}
        assert _offsets_kafka_python(kp, [empty2], topic)[empty2] == {p: (4 + p, "") for p in range(3)}

        # ListGroups.
        listing = cf.list_consumer_groups(request_timeout=10).result(timeout=20)
        assert not listing.errors, listing.errors
        states = {g.group_id: g.state for g in listing.valid}
        assert states.get(active) == ConsumerGroupState.STABLE, states
        assert all(states.get(g) == ConsumerGroupState.EMPTY for g in (empty1, empty2, empty3)), states
        kp_listed = {g["group_id"]: g for g in kp.list_groups()}
        assert {active, empty1, empty2, empty3} <= set(kp_listed), kp_listed
        assert kp_listed[active]["protocol_type"] == "consumer"
        stable_only = {g["group_id"] for g in kp.list_groups(states_filter=["Stable"])}
        assert active in stable_only and empty1 not in stable_only, stable_only

        # DescribeGroups.
        d = describe_group(b.bootstrap, active)
        assert d["state"] == "STABLE" and d["assignor"] == "range", d
        ((member_id, member),) = d["members"].items()
        assert member["parts"] == [0, 1, 2], d
        d = describe_group(b.bootstrap, empty1)
        assert d["state"] == "EMPTY" and not d["members"], d
        kd = kp.describe_groups([active, empty1, f"{base}-nope"])
        assert kd[active]["group_state"] == "Stable" and kd[active]["protocol_data"] == "range", kd[active]
        assert kd[active]["protocol_type"] == "consumer" and kd[active]["error"] is None, kd[active]
        (km,) = kd[active]["members"]
        assert km["member_id"] == member_id and km["member_metadata"]["topics"] == [topic], km
        assert km["member_assignment"]["assigned_partitions"] == [{"topic": topic, "partitions": [0, 1, 2]}], km
        assert kd[empty1]["group_state"] == "Empty" and kd[empty1]["members"] == [], kd[empty1]
        # An unknown group is described as Dead: without an error up to DescribeGroups v5, and
        # with GROUP_ID_NOT_FOUND from v6 (KIP-1043, Kafka 4.0), the version kafka-python takes
        # when the broker serves it (Apache Kafka 4.4 does; Strata serves up to v5).
        with wire.Conn(b.port) as conn:
            describe_groups_max = wire.api_versions(conn).apis[15][1]
        nope = kd[f"{base}-nope"]
        assert nope["group_state"] == "Dead", kd
        if describe_groups_max >= 6:
            assert "GroupIdNotFoundError" in str(nope["error"]), nope
        else:
            assert nope["error"] is None, nope

        # Offsets of a group with members cannot be altered from outside (UNKNOWN_MEMBER_ID).
        r = kp.alter_group_offsets(active, {KTP(topic, 0): OffsetAndMetadata(0, "", -1)})
        assert r[KTP(topic, 0)] is KErr.UnknownMemberIdError, r
        res = cf.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(active, [TopicPartition(topic, 0, 0)])])[active].result(timeout=20)
        (tp,) = res.topic_partitions
        assert tp.error is not None and tp.error.code() == KafkaError.UNKNOWN_MEMBER_ID, tp.error

        # OffsetDelete.
        r = kp.delete_group_offsets(empty1, [KTP(topic, 0), KTP(other, 0)])
        assert all(e is KErr.NoError for e in r.values()), r
        assert _offsets_kafka_python(kp, [empty1], topic)[empty1] == {1: (2, "kp1"), 2: (3, "kp2")}
        assert _offsets_confluent(b.bootstrap, empty1, other) == {}
        r = kp.delete_group_offsets(active, [KTP(topic, 1)])
        assert r[KTP(topic, 1)] is KErr.GroupSubscribedToTopicError, r
        with pytest.raises(KErr.GroupIdNotFoundError):
            kp.delete_group_offsets(f"{base}-nope", [KTP(topic, 0)])

        # DeleteGroups: refused while the group has a member.
        with pytest.raises(KafkaException) as ei:
            cf.delete_consumer_groups([active], request_timeout=10)[active].result(timeout=20)
        assert _kafka_error_code(ei.value) == 68 or "NON_EMPTY_GROUP" in str(ei.value), ei.value
        assert kp.delete_groups([active]) == {active: "NonEmptyGroupError"}
        assert kp.delete_groups([f"{base}-nope"]) == {f"{base}-nope": "GroupIdNotFoundError"}
        cf.delete_consumer_groups([empty2], request_timeout=10)[empty2].result(timeout=20)
        assert kp.delete_groups([empty3]) == {empty3: "OK"}
        gone = {g["group_id"] for g in kp.list_groups()}
        assert empty2 not in gone and empty3 not in gone and active in gone, gone
        assert _offsets_confluent(b.bootstrap, empty2, topic) == {}, "offsets of a deleted group"

        # Once its member leaves, the group is empty and can be altered, trimmed and deleted.
        committed = {p: o for e in app.snapshot("commit") for p, o in e["offsets"].items()}
        app.terminate()
        d = wait_until(lambda: (d := describe_group(b.bootstrap, active))["state"] == "EMPTY" and d, 15,
                       "the active group to be empty after LeaveGroup")
        assert not d["members"], d
        assert _offsets_confluent(b.bootstrap, active, topic) == {int(p): o for p, o in committed.items()}
        r = kp.delete_group_offsets(active, [KTP(topic, 1)])
        assert r[KTP(topic, 1)] is KErr.NoError, r
        assert kp.delete_groups([active]) == {active: "OK"}
        assert active not in {g["group_id"] for g in kp.list_groups()}
    finally:
        app.stop_quietly()
        kp.close()
