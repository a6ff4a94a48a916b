//! ListOffsets v0 (what sarama-based tools such as Burrow still send): latest and earliest
//! come back as the one offset in `old_style_offsets`, and none when `max_num_offsets` is 0.

use strata_client::producer::{Producer, ProducerConfig, ProducerRecord};
use strata_tests::{BrokerProcess, Decoder, RawConn};

const LIST_OFFSETS: i16 = 2;

fn request(topic: &str, timestamp: i64, max_num_offsets: i32) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&(-1i32).to_be_bytes()); // replica_id
    b.extend_from_slice(&1i32.to_be_bytes()); // topics
    b.extend_from_slice(&(topic.len() as i16).to_be_bytes());
    b.extend_from_slice(topic.as_bytes());
    b.extend_from_slice(&1i32.to_be_bytes()); // partitions
    b.extend_from_slice(&0i32.to_be_bytes());
    b.extend_from_slice(&timestamp.to_be_bytes());
    b.extend_from_slice(&max_num_offsets.to_be_bytes());
    b
}

/// (error code, old-style offsets) of the one partition answered.
fn answer(body: &[u8], topic: &str) -> (i16, Vec<i64>) {
    let mut d = Decoder::new(body);
    assert_eq!(d.i32().unwrap(), 1, "one topic");
    let len = d.i16().unwrap() as usize;
    let rest = d.rest();
    assert_eq!(&rest[..len], topic.as_bytes());
    let mut d = Decoder::new(&rest[len..]);
    assert_eq!(d.i32().unwrap(), 1, "one partition");
    assert_eq!(d.i32().unwrap(), 0, "partition 0");
    let error = d.i16().unwrap();
    let n = d.i32().unwrap();
    let offsets = (0..n).map(|_| d.i64().unwrap()).collect();
    (error, offsets)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_offsets_v0_answers_one_old_style_offset() {
    let broker = BrokerProcess::start(&[]).expect("broker");
    let producer = Producer::new(ProducerConfig::new(&broker.addr().to_string())).await.expect("producer");
    for i in 0..7 {
        producer
            .send(ProducerRecord::new("v0").value(format!("v{i}")))
            .await
            .expect("send")
            .await
            .expect("acked");
    }
    producer.close().await.expect("close");
    let mut c = tokio::task::block_in_place(|| RawConn::connect(broker.addr())).expect("connect");
    for (timestamp, max, want) in [(-1, 1, vec![7]), (-2, 1, vec![0]), (-1, 0, vec![])] {
        let body =
            tokio::task::block_in_place(|| c.request(LIST_OFFSETS, 0, false, &request("v0", timestamp, max)))
                .expect("ListOffsets v0 is served");
        assert_eq!(answer(&body, "v0"), (0, want), "timestamp {timestamp}, max_num_offsets {max}");
    }
}
