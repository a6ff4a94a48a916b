//! The admin client, shaped like Kafka's Java `Admin`: topics, configs, groups and their
//! offsets, partition offsets and record deletion, the cluster, producers and
//! transactions.
//!
//! Each request goes where Kafka sends it: topic creation and deletion to the controller
//! (any broker forwards on brokers with KIP-590), group requests to the group's
//! coordinator, ListOffsets / DeleteRecords / DescribeProducers to the partitions'
//! leaders grouped per broker, ListGroups and ListTransactions to every broker. Results
//! for several items come back per item, so one bad topic does not hide the others'
//! outcome; items that failed with a retriable error are sent again, with backoff,
//! until `request.timeout.ms` has passed since the call began.
//!
//! ```no_run
//! # async fn demo() -> Result<(), strata_client::Error> {
//! use strata_client::admin::NewTopic;
//! use strata_client::{Client, ClientConfig};
//! let client = Client::connect(ClientConfig::new("127.0.0.1:9092")).await?;
//! let admin = client.admin();
//! for (name, result) in admin.create_topics(&[NewTopic::new("orders", 6)], false).await {
//!     println!("{name}: {result:?}");
//! }
//! # Ok(()) }
//! ```

mod cluster;
mod configs;
mod groups;
mod offsets;
mod reassignments;
mod topics;

pub use cluster::{
    ClusterDescription, ElectionType, ProducerState, TransactionDescription, TransactionListing,
};
pub use configs::{AlterConfigOp, ConfigEntry, ConfigOpType, ConfigResource, ConfigSource, ResourceType};
pub use groups::{GroupDescription, GroupListing, MemberDescription};
pub use offsets::{ListedOffset, OffsetSpec};
pub use reassignments::PartitionReassignment;
pub use topics::{NewPartitions, NewTopic, TopicDescription};

use crate::client::{Client, CoordinatorKind};
use crate::connection::Connection;
use crate::error::{Error, Result};
use std::collections::{BTreeMap, HashSet};
use std::future::Future;
use std::time::{Duration, Instant};
use strata_protocol::{ApiKey, ErrorCode, RequestBody, ResponseBody};

/// The administrative operations, on a shared [`Client`]: cheap to clone, and it shares
/// the client's connections and cluster view with any producer or consumer on it.
///
/// ```no_run
/// # async fn demo() -> Result<(), strata_client::Error> {
/// let client = strata_client::Client::connect(strata_client::ClientConfig::new("127.0.0.1:9092")).await?;
/// let admin = strata_client::admin::Admin::new(client);
/// println!("{:?}", admin.list_topics(false).await?);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Admin {
    client: Client,
}

impl Client {
    /// The admin operations on this client's connections.
    pub fn admin(&self) -> Admin {
        Admin::new(self.clone())
    }
}

/// How long a timed request (CreateTopics, DeleteRecords, ...) lets the broker wait,
/// as Kafka's `timeout_ms` field: the client's request timeout.
fn timeout_ms(client: &Client) -> i32 {
    client.config().request_timeout.as_millis().min(i32::MAX as u128) as i32
}

/// The per-item outcome of one round: done, or worth sending again.
fn worth_retrying<T>(result: &Result<T>, final_codes: &[ErrorCode]) -> bool {
    match result {
        Err(e) => e.is_retriable() && !e.code().is_some_and(|c| final_codes.contains(&c)),
        Ok(_) => false,
    }
}

impl Admin {
    /// Admin operations on `client`.
    pub fn new(client: Client) -> Admin {
        Admin { client }
    }

    /// The client underneath.
    pub fn client(&self) -> &Client {
        &self.client
    }

    fn deadline(&self) -> Instant {
        Instant::now() + self.client.config().request_timeout
    }

    fn backoff(&self, attempt: u32) -> Duration {
        self.client.config().backoff(attempt)
    }

    /// Runs `round` over the items still pending until each has a final result: items
    /// that failed retriably go into the next round (after a backoff, and a metadata
    /// refresh if the error says the view is stale) until the deadline.
    /// Codes in `final_codes` end an item at once even where they are retriable in
    /// general (UNKNOWN_TOPIC_OR_PARTITION for deleting a topic that is not there).
    async fn per_item<K, T, F, Fut>(
        &self,
        items: Vec<K>,
        final_codes: &[ErrorCode],
        mut round: F,
    ) -> Vec<(K, Result<T>)>
    where
        K: Clone + PartialEq,
        F: FnMut(Vec<K>) -> Fut,
        Fut: Future<Output = Vec<(K, Result<T>)>>,
    {
        let deadline = self.deadline();
        let mut done: Vec<(K, Result<T>)> = Vec::with_capacity(items.len());
        let mut pending = items;
        let mut attempt = 0;
        while !pending.is_empty() {
            let results = round(pending.clone()).await;
            let mut retry = Vec::new();
            let mut refresh = false;
            let last_round = Instant::now() >= deadline;
            for (key, result) in results {
                if !last_round && worth_retrying(&result, final_codes) {
                    refresh |= result.as_ref().err().is_some_and(Error::refreshes_metadata);
                    tracing::debug!(error = ?result.as_ref().err(), "admin item will be retried");
                    retry.push(key);
                } else {
                    done.push((key, result));
                }
            }
            // An item the round did not answer at all fails rather than vanishing.
            for key in pending {
                if !retry.contains(&key) && !done.iter().any(|(k, _)| *k == key) {
                    done.push((key, Err(Error::protocol("?", "the broker did not answer for an item"))));
                }
            }
            pending = retry;
            if !pending.is_empty() {
                if refresh {
                    let _ = self.client.refresh_metadata(&[]).await;
                }
                tokio::time::sleep(self.backoff(attempt)).await;
                attempt += 1;
            }
        }
        done
    }

    /// Sends one request with retries of retriable failures (a lost connection, a
    /// retriable code `check` finds) until the deadline. `conn` picks the broker anew
    /// for each attempt.
    async fn call_retrying<T, C, CF>(
        &self,
        mut conn: C,
        body: RequestBody,
        mut check: impl FnMut(ResponseBody) -> Result<T>,
    ) -> Result<T>
    where
        C: FnMut() -> CF,
        CF: Future<Output = Result<Connection>>,
    {
        let deadline = self.deadline();
        let mut attempt = 0;
        loop {
            let result = match conn().await {
                Ok(c) => c.call(body.clone()).await.and_then(&mut check),
                Err(e) => Err(e),
            };
            match result {
                Err(e) if e.is_retriable() && Instant::now() < deadline => {
                    if e.refreshes_metadata() {
                        let _ = self.client.refresh_metadata(&[]).await;
                    }
                    tokio::time::sleep(self.backoff(attempt)).await;
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    /// Sends a request to the coordinator of `key`, finding it again (and retrying)
    /// when `check` reports that it moved or is loading.
    async fn call_coordinator<T>(
        &self,
        kind: CoordinatorKind,
        key: &str,
        body: RequestBody,
        mut check: impl FnMut(ResponseBody) -> Result<T>,
    ) -> Result<T> {
        let deadline = self.deadline();
        let mut attempt = 0;
        loop {
            let result = match self.client.coordinator(kind, key).await {
                Ok((_, conn)) => conn.call(body.clone()).await.and_then(&mut check),
                Err(e) => Err(e),
            };
            match result {
                Err(e) if e.is_retriable() && Instant::now() < deadline => {
                    self.client.on_coordinator_error(kind, key, &e);
                    tokio::time::sleep(self.backoff(attempt)).await;
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    /// Sends a request built by `body` to every broker of the cluster at once and
    /// collects each broker's answer (ListGroups, ListTransactions).
    async fn call_every_broker<T: Send + 'static>(
        &self,
        body: RequestBody,
        check: fn(ResponseBody) -> Result<T>,
    ) -> Result<Vec<(i32, Result<T>)>> {
        let cluster = self.client.refresh_metadata(&[]).await?;
        let mut tasks = tokio::task::JoinSet::new();
        for &id in cluster.brokers.keys() {
            let admin = self.clone();
            let body = body.clone();
            tasks.spawn(async move {
                let client = admin.client.clone();
                let result = admin.call_retrying(|| client.broker(id), body, check).await;
                (id, result)
            });
        }
        let mut results = Vec::new();
        while let Some(joined) = tasks.join_next().await {
            results.push(joined.map_err(|e| Error::state(format!("a broker request task failed: {e}")))?);
        }
        results.sort_by_key(|(id, _)| *id);
        Ok(results)
    }

    /// Groups partitions by their leader's node id, refreshing each topic's metadata
    /// once. Partitions without a known leader come back with their error.
    async fn by_leader<K: Clone>(
        &self,
        items: Vec<K>,
        topic_partition: impl Fn(&K) -> (&str, i32),
    ) -> (BTreeMap<i32, Vec<K>>, Vec<(K, Error)>) {
        let topics: HashSet<String> = items.iter().map(|k| topic_partition(k).0.to_string()).collect();
        let mut failed = Vec::new();
        let mut clusters = std::collections::HashMap::new();
        for t in topics {
            let view = self.client.cluster_with(&t).await;
            clusters.insert(t, view);
        }
        let mut groups: BTreeMap<i32, Vec<K>> = BTreeMap::new();
        for item in items {
            let (topic, partition) = topic_partition(&item);
            let leader = match &clusters[topic] {
                Err(e) => Err(e.clone()),
                Ok(cluster) => match cluster.topic(topic) {
                    Some(t) if t.error.is_some() => Err(Error::kafka(t.error.expect("checked"))),
                    Some(t) => match t.partition(partition) {
                        None => Err(Error::kafka(ErrorCode::UnknownTopicOrPartition)),
                        Some(p) if p.leader < 0 => Err(Error::kafka(ErrorCode::LeaderNotAvailable)),
                        Some(p) => Ok(p.leader),
                    },
                    None => Err(Error::kafka(ErrorCode::UnknownTopicOrPartition)),
                },
            };
            match leader {
                Ok(id) => groups.entry(id).or_default().push(item),
                Err(e) => failed.push((item, e)),
            }
        }
        (groups, failed)
    }

    /// One round of a request about several groups (or transactional ids) to their
    /// coordinators: the keys grouped by coordinator, one request per coordinator sent at
    /// once, each answer split back per key by `split`, with the coordinator's node id.
    /// A key whose coordinator moved is forgotten, so the next round looks it up again.
    async fn coordinator_round<T: Send + 'static>(
        &self,
        kind: CoordinatorKind,
        keys: Vec<String>,
        build: fn(&[String]) -> RequestBody,
        split: Split<String, T>,
    ) -> PerItem<String, (i32, T)> {
        let mut results: PerItem<String, (i32, T)> = Vec::new();
        let mut groups: BTreeMap<i32, (Connection, Vec<String>)> = BTreeMap::new();
        for key in keys {
            match self.client.coordinator(kind, &key).await {
                Ok((id, conn)) => groups.entry(id).or_insert_with(|| (conn, Vec::new())).1.push(key),
                Err(e) => results.push((key, Err(e))),
            }
        }
        let mut tasks = tokio::task::JoinSet::new();
        for (id, (conn, keys)) in groups {
            tasks.spawn(async move {
                match conn.call(build(&keys)).await.and_then(|r| split(r, &keys)) {
                    Ok(r) => r.into_iter().map(|(k, r)| (k, r.map(|t| (id, t)))).collect::<Vec<_>>(),
                    Err(e) => keys.into_iter().map(|k| (k, Err(e.clone()))).collect(),
                }
            });
        }
        while let Some(joined) = tasks.join_next().await {
            match joined {
                Ok(r) => results.extend(r),
                Err(e) => tracing::warn!(error = %e, "a coordinator request task failed"),
            }
        }
        for (key, result) in &results {
            if let Err(e) = result {
                self.client.on_coordinator_error(kind, key, e);
            }
        }
        results
    }

    /// One round of a per-partition request to the leaders: `items` grouped per leader,
    /// one request per broker sent at once, each answer split back per item by `split`;
    /// a broker's failure is every one of its items' failure.
    async fn leader_round<K, T>(
        &self,
        items: Vec<K>,
        topic_partition: fn(&K) -> (&str, i32),
        build: impl Fn(&[K]) -> RequestBody,
        split: Split<K, T>,
    ) -> Vec<(K, Result<T>)>
    where
        K: Clone + Send + 'static,
        T: Send + 'static,
    {
        let (groups, failed) = self.by_leader(items, topic_partition).await;
        let mut results: Vec<(K, Result<T>)> = failed.into_iter().map(|(k, e)| (k, Err(e))).collect();
        let mut tasks = tokio::task::JoinSet::new();
        for (leader, group) in groups {
            let client = self.client.clone();
            let body = build(&group);
            tasks.spawn(async move {
                let answer = match client.broker(leader).await {
                    Ok(conn) => conn.call(body).await.and_then(|r| split(r, &group)),
                    Err(e) => Err(e),
                };
                if answer.as_ref().is_err_and(|e| e.code().is_none()) {
                    client.reset_broker(leader);
                }
                match answer {
                    Ok(r) => r,
                    Err(e) => group.into_iter().map(|k| (k, Err(e.clone()))).collect(),
                }
            });
        }
        while let Some(joined) = tasks.join_next().await {
            match joined {
                Ok(r) => results.extend(r),
                Err(e) => tracing::warn!(error = %e, "a leader request task failed"),
            }
        }
        // A leader that moved: describe those topics again, so the next round (if the
        // error is retried) groups by the new leaders.
        let mut stale: Vec<String> = results
            .iter()
            .filter(|(_, r)| r.as_ref().err().is_some_and(Error::refreshes_metadata))
            .map(|(k, _)| topic_partition(k).0.to_string())
            .collect();
        stale.sort();
        stale.dedup();
        if !stale.is_empty() {
            if let Err(e) = self.client.refresh_metadata(&stale).await {
                tracing::debug!(error = %e, "metadata refresh after a leader error failed");
            }
        }
        results
    }
}

/// Splits a broker's answer back into per-item results for the items it was asked.
type Split<K, T> = fn(ResponseBody, &[K]) -> Result<PerItem<K, T>>;

/// One result per item.
type PerItem<K, T> = Vec<(K, Result<T>)>;

/// The error a response carries in `code` and `message`, if any.
fn check_code(code: i16, message: Option<&str>) -> Result<()> {
    match Error::from_code(code, message) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// The response of the wrong API, which a correct broker never sends.
fn wrong_api(api: ApiKey) -> Error {
    Error::protocol("?", format!("{} answered with another API", api.name()))
}

#[cfg(test)]
mod tests {
    use super::topics::in_order;
    use super::*;

    #[test]
    fn retriable_errors_are_retried_unless_final_for_the_operation() {
        let not_leader: Result<()> = Err(Error::kafka(ErrorCode::NotLeaderOrFollower));
        let unknown: Result<()> = Err(Error::kafka(ErrorCode::UnknownTopicOrPartition));
        let exists: Result<()> = Err(Error::kafka(ErrorCode::TopicAlreadyExists));
        let lost: Result<()> = Err(Error::connection("h:1", "reset"));
        assert!(worth_retrying(&not_leader, &[]));
        assert!(worth_retrying(&unknown, &[]));
        assert!(!worth_retrying(&unknown, &[ErrorCode::UnknownTopicOrPartition]), "final here");
        assert!(!worth_retrying(&exists, &[]));
        assert!(worth_retrying(&lost, &[ErrorCode::UnknownTopicOrPartition]), "no code: retried");
        assert!(!worth_retrying(&Ok(()), &[]));
    }

    #[test]
    fn results_come_back_in_the_order_asked() {
        let results: Vec<(&str, Result<i32>)> = vec![("c", Ok(3)), ("a", Ok(1)), ("b", Err(Error::Closed))];
        let ordered = in_order(vec!["a", "b", "c"], results);
        let keys: Vec<&str> = ordered.iter().map(|(k, _)| *k).collect();
        assert_eq!(keys, ["a", "b", "c"]);
        assert!(ordered[1].1.is_err());
        let extra = in_order(vec!["a"], vec![("z", Ok(0)), ("a", Ok(1))]);
        assert_eq!(
            extra.iter().map(|(k, _)| *k).collect::<Vec<_>>(),
            ["a", "z"],
            "unasked answers kept last"
        );
    }
}
