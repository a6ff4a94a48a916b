//! Quorum tests without sockets: an in-memory [`RaftTransport`] routes RPCs between
//! in-process [`MetadataQuorum`]s and can cut a node off. They prove election,
//! replication, redirection, leader isolation and healing, loss and recovery of the
//! quorum across restarts, and snapshot loading and installation.

use super::*;
use crate::config::BrokerConfig;
use crate::metadata::{MetadataImage, MetadataRecord, TopicId};
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use strata_protocol::codec::Uuid;
use tokio::time::{timeout, Instant};

/// The generous bound of every wait: elections take a few hundred ms here, but the test
/// machine is small and busy.
const DEADLINE: Duration = Duration::from_secs(10);

/// The shared "network": who is up, who is cut off, and what was sent.
#[derive(Default)]
struct Net {
    servers: Mutex<HashMap<u64, RaftRpcServer>>,
    isolated: Mutex<HashSet<u64>>,
    /// Every call, delivered or not.
    attempted: Mutex<u64>,
    /// RPCs delivered, by target and kind.
    delivered: Mutex<HashMap<(u64, RpcKind), u64>>,
}

impl Net {
    fn isolate(&self, id: i32, cut: bool) {
        let mut isolated = self.isolated.lock().expect("net");
        if cut {
            isolated.insert(id as u64);
        } else {
            isolated.remove(&(id as u64));
        }
    }

    fn delivered(&self, target: i32, kind: RpcKind) -> u64 {
        self.delivered.lock().expect("net").get(&(target as u64, kind)).copied().unwrap_or(0)
    }

    fn attempted(&self) -> u64 {
        *self.attempted.lock().expect("net")
    }
}

/// One node's view of the [`Net`].
struct MemTransport {
    from: u64,
    net: Arc<Net>,
}

impl RaftTransport for MemTransport {
    fn call(
        &self,
        target: u64,
        addr: &str,
        kind: RpcKind,
        payload: Bytes,
        timeout: Duration,
    ) -> Pin<Box<dyn Future<Output = Result<Bytes, TransportError>> + Send + '_>> {
        let addr = addr.to_string();
        Box::pin(async move {
            *self.net.attempted.lock().expect("net") += 1;
            let dropped = {
                let isolated = self.net.isolated.lock().expect("net");
                isolated.contains(&self.from) || isolated.contains(&target)
            };
            if dropped {
                // A partition loses packets: the caller hears nothing until its timeout.
                tokio::time::sleep(timeout).await;
                return Err(TransportError::Timeout { target, timeout_ms: timeout.as_millis() as u64 });
            }
            let server = self.net.servers.lock().expect("net").get(&target).cloned();
            let Some(server) = server else {
                return Err(TransportError::Unreachable {
                    target,
                    addr,
                    reason: "connection refused".into(),
                });
            };
            *self.net.delivered.lock().expect("net").entry((target, kind)).or_default() += 1;
            server
                .serve(kind as i8, payload)
                .await
                .map_err(|e| TransportError::Refused { target, message: e.to_string() })
        })
    }
}

fn fast_config(snapshot_entries: u64) -> ClusterConfig {
    let mut config = BrokerConfig::default().cluster;
    config.single_node = false;
    config.quorum_election_timeout_ms = 200;
    config.quorum_fetch_timeout_ms = 200;
    config.quorum_request_timeout_ms = 1000;
    config.metadata_snapshot_entries = snapshot_entries;
    config
}

fn producer_ids(next: i64) -> MetadataBatch {
    MetadataBatch(vec![MetadataRecord::ProducerIds { node_id: 1, broker_epoch: 1, next_producer_id: next }])
}

struct Member {
    quorum: MetadataQuorum,
    cache: Arc<MetadataCache>,
}

/// Voters `1..=n`, each with its own directory, on one [`Net`].
struct Cluster {
    net: Arc<Net>,
    config: ClusterConfig,
    voters: BTreeMap<i32, String>,
    dirs: BTreeMap<i32, tempfile::TempDir>,
    members: BTreeMap<i32, Member>,
}

impl Cluster {
    async fn start(n: i32, config: ClusterConfig) -> Cluster {
        let voters = (1..=n).map(|id| (id, format!("controller-{id}:9093"))).collect();
        let dirs = (1..=n).map(|id| (id, tempfile::tempdir().expect("tempdir"))).collect();
        let mut cluster = Cluster { net: Arc::default(), config, voters, dirs, members: BTreeMap::new() };
        for id in 1..=n {
            cluster.start_node(id).await;
        }
        cluster
    }

    async fn start_node(&mut self, id: i32) {
        let cache = Arc::new(MetadataCache::new());
        let transport = Arc::new(MemTransport { from: id as u64, net: self.net.clone() });
        let dir = self.dirs[&id].path().join("__cluster_metadata-0");
        let quorum =
            MetadataQuorum::start(id, self.voters.clone(), &dir, &self.config, cache.clone(), transport)
                .await
                .expect("start");
        self.net.servers.lock().expect("net").insert(id as u64, quorum.rpc_server());
        self.members.insert(id, Member { quorum, cache });
    }

    async fn stop_node(&mut self, id: i32) {
        self.net.servers.lock().expect("net").remove(&(id as u64));
        let member = self.members.remove(&id).expect("running");
        member.quorum.shutdown().await;
    }

    fn quorum(&self, id: i32) -> &MetadataQuorum {
        &self.members[&id].quorum
    }

    /// Waits until every node in `among` knows the same leader, itself one of `among`,
    /// and that leader knows it leads.
    async fn leader_among(&self, among: &[i32]) -> i32 {
        let found = eventually(|| {
            let leader = self.quorum(among[0]).leader()?;
            let agreed = among.iter().all(|id| self.quorum(*id).leader() == Some(leader));
            (agreed && among.contains(&leader) && self.quorum(leader).is_leader()).then_some(leader)
        })
        .await;
        found.unwrap_or_else(|| panic!("no leader agreed among {among:?}"))
    }

    async fn all_applied(&self, ids: &[i32], index: u64, next_producer_id: i64) {
        for id in ids {
            let image = self.members[id].cache.wait_for(DEADLINE, |i| i.applied_index >= index).await;
            assert!(image.applied_index >= index, "node {id} applied only {}", image.applied_index);
            assert_eq!(image.next_producer_id, next_producer_id, "node {id}");
        }
    }
}

/// Polls `check` (every 10 ms, up to [`DEADLINE`]) until it yields a value.
async fn eventually<T>(mut check: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + DEADLINE;
    loop {
        if let Some(found) = check() {
            return Some(found);
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn applied(image: &MetadataImage, index: u64) -> bool {
    image.applied_index >= index
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_node_quorum_leads_at_once_and_keeps_its_image_across_restarts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let net = Arc::new(Net::default());
    let config = BrokerConfig::default().cluster;
    assert!(config.single_node && config.quorum_election_timeout_ms >= 1000);
    let voters = BTreeMap::from([(0, String::new())]);
    let start = |cache: Arc<MetadataCache>| {
        let transport = Arc::new(MemTransport { from: 0, net: net.clone() });
        MetadataQuorum::start(0, voters.clone(), dir.path(), &config, cache, transport)
    };

    let cache = Arc::new(MetadataCache::new());
    let quorum = start(cache.clone()).await.expect("start");
    let mut leader = quorum.watch_leader();
    timeout(Duration::from_millis(500), leader.wait_for(|l| *l == Some(0)))
        .await
        .expect("leader at once")
        .expect("watch");
    assert!(quorum.is_leader());
    let cluster_id = MetadataBatch(vec![MetadataRecord::ClusterId { cluster_id: "c-1".into() }]);
    let (first, _) = quorum.write(cluster_id).await.expect("write");
    let topic = MetadataRecord::Topic { name: "t".into(), topic_id: TopicId(Uuid([7; 16])) };
    let (second, _) = quorum.write(MetadataBatch(vec![topic])).await.expect("write");
    assert!(second > first, "{second} > {first}");
    let image = cache.current();
    assert!(
        applied(&image, second) && image.cluster_id.as_deref() == Some("c-1") && image.topic("t").is_some()
    );
    let status = quorum.status();
    assert_eq!(
        (status.role, status.leader, status.committed_index),
        (QuorumRole::Leader, Some(0), Some(second))
    );
    assert_eq!(status.voters.len(), 1);
    // A second instance on the same directory is refused while the first runs.
    let again = start(Arc::new(MetadataCache::new())).await;
    assert!(
        matches!(again, Err(QuorumError::Storage { source: StoreError::Locked { .. }, .. })),
        "{again:?}"
    );
    quorum.shutdown().await;

    let cache = Arc::new(MetadataCache::new());
    let quorum = start(cache.clone()).await.expect("restart");
    let image = cache.wait_for(DEADLINE, |i| applied(i, second)).await;
    assert_eq!(image.cluster_id.as_deref(), Some("c-1"), "the log was replayed");
    assert!(image.topic("t").is_some());
    let mut leader = quorum.watch_leader();
    timeout(Duration::from_millis(500), leader.wait_for(|l| *l == Some(0)))
        .await
        .expect("leader at once")
        .expect("watch");
    let (third, _) = quorum.write(producer_ids(10)).await.expect("write after restart");
    assert!(third > second);
    quorum.shutdown().await;
    assert_eq!(net.attempted(), 0, "a quorum of one never calls the transport");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_voters_elect_replicate_and_redirect() {
    let mut cluster = Cluster::start(3, fast_config(1000)).await;
    let leader = cluster.leader_among(&[1, 2, 3]).await;
    let (index, _) = cluster.quorum(leader).write(producer_ids(100)).await.expect("write");
    cluster.all_applied(&[1, 2, 3], index, 100).await;
    let follower = (1..=3).find(|id| *id != leader).expect("a follower");
    match cluster.quorum(follower).write(producer_ids(200)).await {
        Err(QuorumError::NotLeader { leader: known }) => assert_eq!(known, Some(leader)),
        other => panic!("a follower's write gave {other:?}"),
    }
    let matched = eventually(|| {
        let status = cluster.quorum(leader).status();
        status.voters.iter().all(|v| v.matched_index >= Some(index)).then_some(status)
    })
    .await
    .expect("every voter matched");
    assert_eq!(matched.voters.iter().map(|v| v.node_id).collect::<Vec<_>>(), vec![1, 2, 3]);
    assert!(matched.term >= 1 && matched.committed_index >= Some(index));
    // A bad payload is an error, never a panic.
    let rpc = cluster.quorum(follower);
    assert!(matches!(
        rpc.serve_rpc(0, Bytes::from_static(b"{not json")).await,
        Err(ServeError::Decode { .. })
    ));
    assert!(matches!(rpc.serve_rpc(9, Bytes::new()).await, Err(ServeError::UnknownKind(9))));
    for id in 1..=3 {
        cluster.stop_node(id).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_isolated_leader_is_replaced_and_follows_after_healing() {
    let mut cluster = Cluster::start(3, fast_config(1000)).await;
    let old = cluster.leader_among(&[1, 2, 3]).await;
    let (index, _) = cluster.quorum(old).write(producer_ids(1)).await.expect("write");
    cluster.all_applied(&[1, 2, 3], index, 1).await;

    cluster.net.isolate(old, true);
    let rest: Vec<i32> = (1..=3).filter(|id| *id != old).collect();
    let (minority, new) =
        tokio::join!(cluster.quorum(old).write(producer_ids(666)), cluster.leader_among(&rest));
    assert!(
        matches!(minority, Err(QuorumError::Timeout { .. } | QuorumError::NotLeader { .. })),
        "{minority:?}"
    );
    assert_ne!(new, old);
    let (index, _) = cluster.quorum(new).write(producer_ids(2)).await.expect("majority write");
    cluster.all_applied(&rest, index, 2).await;

    cluster.net.isolate(old, false);
    let leader = cluster.leader_among(&[1, 2, 3]).await;
    assert_ne!(leader, old, "the old leader's log is behind, so it cannot win");
    // The minority's uncommitted entry is replaced: the old leader converges on 2, not 666.
    let (index, _) = cluster.quorum(leader).write(producer_ids(3)).await.expect("write after healing");
    cluster.all_applied(&[1, 2, 3], index, 3).await;
    for id in 1..=3 {
        cluster.stop_node(id).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_quorum_recovers_when_its_voters_restart() {
    let mut cluster = Cluster::start(3, fast_config(1000)).await;
    let leader = cluster.leader_among(&[1, 2, 3]).await;
    let (index, _) = cluster.quorum(leader).write(producer_ids(1)).await.expect("write");
    cluster.all_applied(&[1, 2, 3], index, 1).await;

    let stopped: Vec<i32> = (1..=3).filter(|id| *id != leader).collect();
    for id in &stopped {
        cluster.stop_node(*id).await;
    }
    let lost = cluster.quorum(leader).write(producer_ids(999)).await;
    assert!(matches!(lost, Err(QuorumError::Timeout { .. } | QuorumError::NotLeader { .. })), "{lost:?}");

    for id in &stopped {
        cluster.start_node(*id).await;
    }
    let leader = cluster.leader_among(&[1, 2, 3]).await;
    // The timed-out write's outcome is unknown: if its leader kept leading, it is in the
    // log and commits now. Producer-id blocks only grow, so 1000 wins either way.
    let (index, _) =
        cluster.quorum(leader).write(producer_ids(1000)).await.expect("write after the voters restarted");
    cluster.all_applied(&[1, 2, 3], index, 1000).await;

    // A full restart of every voter (the case that stalls other KRaft implementations).
    for id in 1..=3 {
        cluster.stop_node(id).await;
    }
    for id in 1..=3 {
        cluster.start_node(id).await;
    }
    let leader = cluster.leader_among(&[1, 2, 3]).await;
    let (index, _) =
        cluster.quorum(leader).write(producer_ids(1001)).await.expect("write after a full restart");
    cluster.all_applied(&[1, 2, 3], index, 1001).await;
    for id in 1..=3 {
        cluster.stop_node(id).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarts_load_the_snapshot_and_a_lagging_voter_gets_it_installed() {
    let mut cluster = Cluster::start(3, fast_config(10)).await;
    let leader = cluster.leader_among(&[1, 2, 3]).await;
    let mut followers = (1..=3).filter(|id| *id != leader);
    let (down, restarted) = (followers.next().expect("follower"), followers.next().expect("follower"));
    cluster.stop_node(down).await;

    let mut last = 0;
    for n in 1..=40 {
        (last, _) = cluster.quorum(leader).write(producer_ids(n)).await.expect("write");
    }
    cluster.all_applied(&[leader, restarted], last, 40).await;
    let purged = eventually(|| {
        let m = cluster.quorum(leader).raft.metrics().borrow().clone();
        m.purged.filter(|p| p.index > 10).map(|p| p.index)
    })
    .await
    .expect("the leader purged its log after a snapshot");

    // Restarted while cut off: everything it shows comes from its own snapshot and log.
    cluster.stop_node(restarted).await;
    cluster.net.isolate(restarted, true);
    cluster.start_node(restarted).await;
    let status = cluster.quorum(restarted).status();
    assert!(status.snapshot_index.is_some_and(|s| s >= 10), "{status:?}");
    let image = cluster.members[&restarted].cache.wait_for(DEADLINE, |i| applied(i, last)).await;
    assert_eq!(image.next_producer_id, 40, "snapshot plus the replayed tail");
    cluster.net.isolate(restarted, false);

    // The voter that was down needs entries the leader no longer has: it gets a snapshot.
    assert_eq!(cluster.net.delivered(down, RpcKind::InstallSnapshot), 0);
    cluster.start_node(down).await;
    cluster.all_applied(&[down], last, 40).await;
    assert!(
        cluster.net.delivered(down, RpcKind::InstallSnapshot) > 0,
        "caught up past purged index {purged} by snapshot"
    );
    let m = cluster.quorum(down).raft.metrics().borrow().clone();
    assert!(m.snapshot.is_some_and(|s| s.index > purged.saturating_sub(10)), "{m:?}");

    let leader = cluster.leader_among(&[1, 2, 3]).await;
    let (index, _) = cluster.quorum(leader).write(producer_ids(41)).await.expect("write");
    cluster.all_applied(&[1, 2, 3], index, 41).await;
    for id in 1..=3 {
        cluster.stop_node(id).await;
    }
}
