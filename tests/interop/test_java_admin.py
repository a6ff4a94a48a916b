"""Java: Apache Kafka's Admin client (kafka-clients at the newest served 4.x, tests/java's
Admins.java) against the real binary: every Admin call whose APIs Strata serves - topics
(create with validateOnly and configs, list, describe by id, createPartitions, delete), configs
(describe, incremental SET/APPEND/SUBTRACT/DELETE, a broker resource), deleteRecords and
listOffsets (earliest, latest, max timestamp, by timestamp), consumer groups (listGroups,
describe, remove a static member, alter/delete/list offsets, describeClassicGroups, delete),
describeCluster, describeFeatures, describeMetadataQuorum, electLeaders, partition
reassignments (move, list, cancel with none in progress), describeProducers, list/describe
transactions, abortTransaction, fenceProducers and describeLogDirs/describeReplicaLogDirs - each
checked against what the broker then reports.

The calls whose APIs Strata does not serve (ACLs, alterReplicaLogDirs, client quotas, SCRAM credentials,
delegation tokens, updateFeatures, unregisterBroker, share and streams groups) must each fail
at once with UnsupportedVersionException, never hang (docs/compatibility.md lists them)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from broker import new_broker
import java_util

pytestmark = pytest.mark.timeout(600)  # the first test may also build the Java scenarios

ADMIN = ["topics_and_partitions", "configs", "delete_records_and_list_offsets", "consumer_groups",
         "describe_cluster_features_quorum", "elect_leaders", "reassignments", "producers_and_transactions",
         "fence_producers", "log_dirs", "unsupported_calls"]
UNSUPPORTED = ["alterClientQuotas", "alterReplicaLogDirs", "alterUserScramCredentials", "createAcls",
               "createDelegationToken", "deleteAcls", "describeAcls", "describeClientQuotas",
               "describeDelegationToken", "describeShareGroups",
               "describeStreamsGroups", "describeUserScramCredentials", "unregisterBroker", "updateFeatures"]


@pytest.fixture(scope="module")
def admin_results(tmp_path_factory, strata_starts, java_clients):
    if strata_starts is not None:
        pytest.fail(f"could not start a default single-node broker: {strata_starts}", pytrace=False)
    b = new_broker(tmp_path_factory.mktemp("java-admin-broker"), {"group.initial.rebalance.delay.ms": "0"})
    b.start()
    try:
        results = java_clients.run(java_util.NEWEST, "admin", b.bootstrap, *ADMIN)
        results["broker"] = b
        yield results
    finally:
        if b.alive():
            b.stop()
        else:
            b.kill()


@pytest.mark.parametrize("name", [n for n in ADMIN if n != "unsupported_calls"])
def test_admin(admin_results, name):
    java_util.assert_ok(admin_results[name])


@pytest.mark.kafka_xfail("Apache Kafka serves these APIs (or answers them with its own errors, e.g. "
                         "SecurityDisabledException without an authorizer)")
def test_admin_calls_strata_does_not_serve_fail_fast_with_unsupported_version(admin_results):
    res = admin_results["unsupported_calls"]
    java_util.assert_ok(res)
    assert sorted(k for k in res if k[0].islower() and k not in ("name", "ok", "ms", "stderr")) == UNSUPPORTED


@pytest.mark.kafka_xfail("Apache Kafka reports its supported and finalized features (metadata.version, "
                         "transaction.version, group.version, ...) in ApiVersions v3+")
def test_describe_features_reports_no_features(admin_results):
    """Strata's ApiVersions carries no features, so describeFeatures answers with none (and a
    4.x Java producer does not use KIP-890 part 2's transaction.version 2)."""
    res = admin_results["describe_cluster_features_quorum"]
    java_util.assert_ok(res)
    assert res["finalized"] == [] and res["supported"] == [], res


def test_describe_log_dirs_matches_the_disk(admin_results):
    """describeLogDirs names the broker's data dir (absolute), sizes each partition by its
    segment files, and reports the volume's total and usable bytes (statvfs)."""
    res = admin_results["log_dirs"]
    java_util.assert_ok(res)
    data = Path(admin_results["broker"].data_dir).resolve()
    assert Path(res["dir"]) == data, res
    for p in (0, 1):
        segments = sum(f.stat().st_size for f in (data / f"{res['topic']}-{p}").glob("*.log"))
        assert res[f"size_{p}"] == segments, (p, res, segments)
    assert res["size_0"] > 0 and res["size_1"] == 0, res
    st = os.statvfs(data)
    assert res["total_bytes"] == st.f_blocks * st.f_frsize, res
    assert 0 < res["usable_bytes"] <= res["total_bytes"], res
