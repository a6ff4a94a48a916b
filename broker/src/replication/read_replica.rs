//! Fetch from the closest replica (KIP-392): which replica a consumer should read a
//! partition from, as the leader's `replica.selector.class` decides it. The leader
//! answers a consumer's fetch (v11+) with `preferred_read_replica` instead of data when
//! that is a follower, and the consumer fetches from it until it errs or its metadata
//! ages out; a consumer in the leader's rack, or in no rack, keeps reading from the
//! leader. Reading from a nearby follower saves cross-rack (cross-zone) traffic, which
//! cloud providers charge for.
//!
//! Only followers in the ISR that already hold the fetch offset are offered (Kafka's
//! rule: a lagging follower would keep the consumer behind indefinitely).

use crate::config::ConfigError;

/// Kafka's class name of the default selector: always the leader.
pub const LEADER_SELECTOR: &str = "org.apache.kafka.common.replica.LeaderSelector";
/// Kafka's class name of the rack-aware selector.
pub const RACK_AWARE_SELECTOR: &str = "org.apache.kafka.common.replica.RackAwareReplicaSelector";

/// `replica.selector.class`: Kafka's two selectors, by their class names (Strata has no
/// plug-ins, so any other name is refused at startup rather than silently ignored).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ReplicaSelector {
    /// Consumers read from the leader (Kafka's default, the key unset).
    #[default]
    Leader,
    /// A consumer reads from a replica in its `client.rack`, the leader if it is there.
    RackAware,
}

impl ReplicaSelector {
    /// Parses the key's value; empty means unset.
    pub fn parse(value: Option<&str>) -> Result<ReplicaSelector, ConfigError> {
        match value.map(str::trim).unwrap_or_default() {
            "" | LEADER_SELECTOR => Ok(ReplicaSelector::Leader),
            RACK_AWARE_SELECTOR => Ok(ReplicaSelector::RackAware),
            other => Err(ConfigError::InvalidValue {
                key: "replica.selector.class".into(),
                value: other.into(),
                reason: format!("Strata provides {LEADER_SELECTOR} and {RACK_AWARE_SELECTOR}"),
            }),
        }
    }
}

/// A replica a consumer could read from, as the leader sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaView<'a> {
    /// Node id.
    pub id: i32,
    /// Its `broker.rack`.
    pub rack: Option<&'a str>,
    /// Its log end offset (the leader's own, or the follower's last fetch offset).
    pub log_end_offset: i64,
    /// When it was last caught up with the leader (now, for the leader).
    pub last_caught_up_ms: i64,
}

/// The follower the consumer in `client_rack` should read from, or `None` for the
/// leader. `followers` are the eligible ones only (in the ISR, holding the fetch offset,
/// reachable on the consumer's listener). Among several in the consumer's rack, the most
/// caught up wins: the highest log end offset, then the most recently caught up, then the
/// lowest id (so the answer is stable).
pub fn select(
    selector: ReplicaSelector,
    client_rack: &str,
    leader: ReplicaView<'_>,
    followers: &[ReplicaView<'_>],
) -> Option<i32> {
    if selector == ReplicaSelector::Leader || client_rack.is_empty() || leader.rack == Some(client_rack) {
        return None;
    }
    followers
        .iter()
        .filter(|f| f.id != leader.id && f.rack == Some(client_rack))
        .max_by(|a, b| {
            a.log_end_offset
                .cmp(&b.log_end_offset)
                .then(a.last_caught_up_ms.cmp(&b.last_caught_up_ms))
                .then(b.id.cmp(&a.id))
        })
        .map(|f| f.id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(id: i32, rack: Option<&str>, leo: i64, caught_up: i64) -> ReplicaView<'_> {
        ReplicaView { id, rack, log_end_offset: leo, last_caught_up_ms: caught_up }
    }

    #[test]
    fn kafkas_class_names_parse_and_anything_else_is_refused() {
        assert_eq!(ReplicaSelector::parse(None).unwrap(), ReplicaSelector::Leader);
        assert_eq!(ReplicaSelector::parse(Some(" ")).unwrap(), ReplicaSelector::Leader);
        assert_eq!(ReplicaSelector::parse(Some(LEADER_SELECTOR)).unwrap(), ReplicaSelector::Leader);
        assert_eq!(ReplicaSelector::parse(Some(RACK_AWARE_SELECTOR)).unwrap(), ReplicaSelector::RackAware);
        let e = ReplicaSelector::parse(Some("com.example.MySelector")).unwrap_err().to_string();
        assert!(e.contains("replica.selector.class") && e.contains("com.example.MySelector"), "{e}");
    }

    #[test]
    fn the_leader_selector_and_a_consumer_without_a_rack_read_from_the_leader() {
        let leader = view(1, Some("a"), 100, 0);
        let followers = [view(2, Some("b"), 100, 0)];
        assert_eq!(select(ReplicaSelector::Leader, "b", leader, &followers), None);
        assert_eq!(select(ReplicaSelector::RackAware, "", leader, &followers), None);
        assert_eq!(select(ReplicaSelector::RackAware, "b", leader, &followers), Some(2));
    }

    #[test]
    fn the_leader_wins_in_its_own_rack_and_when_no_follower_is_in_the_consumers() {
        let leader = view(1, Some("a"), 100, 0);
        let followers = [view(2, Some("a"), 100, 0), view(3, Some("b"), 100, 0)];
        assert_eq!(select(ReplicaSelector::RackAware, "a", leader, &followers), None);
        assert_eq!(select(ReplicaSelector::RackAware, "c", leader, &followers), None);
        let rackless = [view(2, None, 100, 0)];
        assert_eq!(select(ReplicaSelector::RackAware, "c", view(1, None, 100, 0), &rackless), None);
    }

    #[test]
    fn among_followers_in_the_rack_the_most_caught_up_is_chosen() {
        let leader = view(1, Some("a"), 100, 50);
        let followers = [
            view(2, Some("b"), 90, 50),
            view(3, Some("b"), 100, 40),
            view(4, Some("b"), 100, 45),
            view(5, Some("c"), 100, 50),
        ];
        assert_eq!(select(ReplicaSelector::RackAware, "b", leader, &followers), Some(4));
        let tied = [view(6, Some("b"), 100, 45), view(4, Some("b"), 100, 45)];
        assert_eq!(select(ReplicaSelector::RackAware, "b", leader, &tied), Some(4), "lowest id on a tie");
    }
}
