//! A Metadata request that auto-creates `__consumer_offsets` or `__transaction_state`
//! (what lag checkers such as Burrow send before any group exists) creates them as their
//! coordinators do: `offsets.topic.num.partitions` / `transaction.state.log.num.partitions`
//! partitions, compacted, internal; never as an ordinary topic with `num.partitions`.

use std::collections::BTreeMap;
use strata_client::{Client, ClientConfig, OffsetAndMetadata, TopicPartition};
use strata_tests::BrokerProcess;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_created_coordinator_topics_get_their_coordinators_settings() {
    let broker = BrokerProcess::start(&[
        "num.partitions=1",
        "offsets.topic.num.partitions=6",
        "transaction.state.log.num.partitions=5",
    ])
    .expect("broker");
    let client = Client::connect(ClientConfig::new(&broker.addr().to_string())).await.expect("client");
    for (topic, partitions) in [("__consumer_offsets", 6), ("__transaction_state", 5)] {
        let cluster = client.refresh_metadata_creating(&[topic.to_string()]).await.expect("metadata");
        let info = cluster.topic(topic).unwrap_or_else(|| panic!("{topic} created"));
        assert!(info.error.is_none(), "{topic}: {:?}", info.error);
        assert!(info.internal, "{topic} is internal");
        assert_eq!(info.partitions.len(), partitions, "{topic} has its coordinator's partition count");
    }
    // And the group coordinator works on the topic so created.
    client.refresh_metadata_creating(&["plain".to_string()]).await.expect("plain topic");
    let tp = TopicPartition::new("plain", 0);
    let admin = client.admin();
    let offsets = BTreeMap::from([(tp.clone(), OffsetAndMetadata::new(3))]);
    for (_, r) in admin.alter_group_offsets("g-internal", &offsets).await.expect("commit") {
        r.expect("committed");
    }
    let read = admin.list_group_offsets("g-internal", None).await.expect("offset fetch");
    assert_eq!(read.get(&tp).map(|o| o.offset), Some(3));
}
