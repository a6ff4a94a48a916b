//! The client crate's core against the real broker: bootstrap, version negotiation,
//! metadata, leaders and coordinators, and a connection made again after the broker
//! restarted under it.

use strata_client::{Client, ClientConfig, CoordinatorKind};
use strata_protocol::ApiKey;
use strata_tests::{create_topic, BrokerProcess};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_finds_brokers_leaders_and_coordinators_and_survives_a_restart() {
    let mut broker = BrokerProcess::start(&[]).expect("broker");
    // A dead bootstrap entry first: the client moves on to the next.
    let bootstrap = format!("127.0.0.1:1,{}", broker.addr());
    let client = Client::connect(ClientConfig::new(&bootstrap)).await.expect("connect");
    assert_eq!(client.cluster().brokers.len(), 1);

    create_topic(&client, "client-core", 3).await;
    let cluster = client.refresh_metadata(&["client-core".to_string()]).await.expect("metadata");
    let topic = cluster.topic("client-core").expect("described");
    assert_eq!(topic.partitions.len(), 3);
    assert!(!topic.id.is_zero(), "Metadata v10+ carries the topic id");
    let (leader, conn) = client.leader("client-core", 2).await.expect("leader");
    assert_eq!(leader, 0);
    assert!(conn.version(ApiKey::Produce).expect("produce version") >= 9);

    let (coordinator, _) = client.coordinator(CoordinatorKind::Group, "g1").await.expect("group coordinator");
    assert_eq!(coordinator, 0);
    let (coordinator, _) =
        client.coordinator(CoordinatorKind::Transaction, "t1").await.expect("transaction coordinator");
    assert_eq!(coordinator, 0);

    broker.kill().expect("kill");
    broker.restart().expect("restart");
    // The old connection died with the process; the next call connects again.
    let cluster = client.refresh_metadata(&["client-core".to_string()]).await.expect("after restart");
    assert_eq!(cluster.topic("client-core").map(|t| t.partitions.len()), Some(3));
}
