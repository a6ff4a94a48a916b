//! The client's producer beside librdkafka (confluent-kafka for Python): what our
//! producer writes (compressed, keyed, with headers, in committed and aborted
//! transactions) a confluent-kafka consumer reads back exactly, and keyed records land
//! on the same partitions as confluent-kafka's with `partitioner=murmur2_random`.
//! Skipped, with the reason printed, when the Python environment is missing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use strata_client::producer::partitioner::partition_for_key;
use strata_client::producer::{Producer, ProducerConfig, ProducerRecord};
use strata_client::{Client, ClientConfig};
use strata_tests::{create_topic, BrokerProcess};

const SCRIPT: &str = r#"
import json, sys, time
from confluent_kafka import Consumer, Producer
mode, bootstrap, topic = sys.argv[1], sys.argv[2], sys.argv[3]
if mode == "consume":
    want = int(sys.argv[4])
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "interop-" + topic,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "isolation.level": "read_committed"})
    c.subscribe([topic])
    out, deadline = [], time.time() + 60
    while len(out) < want and time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            raise SystemExit("consume error: %s" % m.error())
        out.append({"p": m.partition(), "o": m.offset(),
                    "k": m.key().decode() if m.key() is not None else None,
                    "v": m.value().decode(),
                    "h": [[k, v.decode() if v is not None else None] for k, v in (m.headers() or [])]})
    c.close()
    print(json.dumps(out))
else:
    p = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random"})
    placed = {}
    def done(err, msg):
        if err is not None:
            raise SystemExit("produce error: %s" % err)
        placed[msg.key().decode()] = msg.partition()
    for k in sys.argv[4:]:
        p.produce(topic, key=k, value=k, on_delivery=done)
    p.flush(30)
    print(json.dumps(placed))
"#;

/// The venv's Python; it must be able to import confluent_kafka.
fn python() -> PathBuf {
    strata_tests::python_with("confluent_kafka").expect("python with confluent_kafka")
}

async fn run_python(python: &Path, args: Vec<String>) -> String {
    let python = python.to_path_buf();
    let output = tokio::task::spawn_blocking(move || {
        Command::new(python).arg("-c").arg(SCRIPT).args(args).output().expect("run python")
    })
    .await
    .expect("python task");
    assert!(output.status.success(), "python failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).expect("utf8")
}

fn config(broker: &BrokerProcess, settings: &[(&str, &str)]) -> ProducerConfig {
    let mut c = ProducerConfig::new(&broker.addr().to_string());
    for (k, v) in settings {
        c.set(k, v).expect("setting");
    }
    c
}

/// A tiny JSON reader for the script's output: a list of flat objects or one object.
/// (The tests crate has no JSON dependency; the shapes here are fixed.)
mod json {
    #[derive(Debug, Clone, PartialEq)]
    pub enum Value {
        Null,
        Num(i64),
        Str(String),
        List(Vec<Value>),
        Obj(Vec<(String, Value)>),
    }

    impl Value {
        pub fn get(&self, key: &str) -> &Value {
            match self {
                Value::Obj(fields) => {
                    fields.iter().find(|(k, _)| k == key).map(|(_, v)| v).unwrap_or(&Value::Null)
                }
                _ => &Value::Null,
            }
        }
        pub fn num(&self) -> i64 {
            match self {
                Value::Num(n) => *n,
                v => panic!("not a number: {v:?}"),
            }
        }
        pub fn str(&self) -> Option<&str> {
            match self {
                Value::Str(s) => Some(s),
                _ => None,
            }
        }
        pub fn list(&self) -> &[Value] {
            match self {
                Value::List(l) => l,
                v => panic!("not a list: {v:?}"),
            }
        }
    }

    pub fn parse(s: &str) -> Value {
        let mut chars: Vec<char> = s.trim().chars().collect();
        chars.reverse();
        let v = value(&mut chars);
        assert!(chars.iter().all(|c| c.is_whitespace()), "trailing input");
        v
    }

    fn skip(s: &mut Vec<char>) {
        while s.last().is_some_and(|c| c.is_whitespace()) {
            s.pop();
        }
    }

    fn value(s: &mut Vec<char>) -> Value {
        skip(s);
        match s.last().copied() {
            Some('[') => {
                s.pop();
                let mut items = Vec::new();
                loop {
                    skip(s);
                    if s.last() == Some(&']') {
                        s.pop();
                        return Value::List(items);
                    }
                    items.push(value(s));
                    skip(s);
                    if s.last() == Some(&',') {
                        s.pop();
                    }
                }
            }
            Some('{') => {
                s.pop();
                let mut fields = Vec::new();
                loop {
                    skip(s);
                    if s.last() == Some(&'}') {
                        s.pop();
                        return Value::Obj(fields);
                    }
                    let Value::Str(k) = value(s) else { panic!("object key") };
                    skip(s);
                    assert_eq!(s.pop(), Some(':'));
                    fields.push((k, value(s)));
                    skip(s);
                    if s.last() == Some(&',') {
                        s.pop();
                    }
                }
            }
            Some('"') => {
                s.pop();
                let mut out = String::new();
                loop {
                    match s.pop().expect("unterminated string") {
                        '"' => return Value::Str(out),
                        '\\' => match s.pop().expect("escape") {
                            'n' => out.push('\n'),
                            't' => out.push('\t'),
                            'u' => {
                                let hex: String = (0..4).map(|_| s.pop().expect("hex")).collect();
                                out.push(
                                    char::from_u32(u32::from_str_radix(&hex, 16).expect("hex"))
                                        .expect("char"),
                                );
                            }
                            c => out.push(c),
                        },
                        c => out.push(c),
                    }
                }
            }
            Some('n') => {
                for _ in 0..4 {
                    s.pop();
                }
                Value::Null
            }
            _ => {
                let mut n = String::new();
                while s.last().is_some_and(|c| c.is_ascii_digit() || *c == '-') {
                    n.push(s.pop().expect("digit"));
                }
                Value::Num(n.parse().expect("number"))
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn librdkafka_reads_what_our_producer_writes_and_partitions_keys_alike() {
    let python = python();
    let broker = BrokerProcess::start(&[]).expect("broker");
    let bootstrap = broker.addr().to_string();
    let client = Client::connect(ClientConfig::new(&bootstrap)).await.expect("connect");
    create_topic(&client, "interop", 6).await;
    create_topic(&client, "interop-keys", 6).await;

    // Plain keyed records, lz4, with headers.
    let plain = Producer::new(config(&broker, &[("compression.type", "lz4")])).await.expect("producer");
    let mut ours: BTreeMap<String, i32> = BTreeMap::new();
    let mut expected: BTreeMap<String, (i32, String)> = BTreeMap::new();
    for i in 0..300 {
        let key = format!("k{}", i % 50);
        let value = format!("plain-{i}");
        let record = ProducerRecord::new("interop")
            .key(key.clone())
            .value(value.clone())
            .header("n", Some(i.to_string()));
        let m = plain.send(record).await.expect("send").await.expect("ack");
        ours.insert(key.clone(), m.partition);
        expected.insert(value, (m.partition, key));
    }
    plain.close().await.expect("close");

    // An aborted transaction first, then a committed one (snappy, xerial framing).
    let txn = Producer::new(config(
        &broker,
        &[("transactional.id", "interop-txn"), ("compression.type", "snappy")],
    ))
    .await
    .expect("txn producer");
    txn.init_transactions().await.expect("init");
    txn.begin_transaction().expect("begin");
    for i in 0..50 {
        txn.send(ProducerRecord::new("interop").key(format!("k{i}")).value(format!("aborted-{i}")))
            .await
            .expect("send");
    }
    txn.flush().await.expect("flush");
    txn.abort_transaction().await.expect("abort");
    txn.begin_transaction().expect("begin");
    let mut futures = Vec::new();
    for i in 0..100 {
        let (key, value) = (format!("k{i}"), format!("committed-{i}"));
        let record = ProducerRecord::new("interop").key(key.clone()).value(value.clone());
        futures.push((value, key, txn.send(record).await.expect("send")));
    }
    txn.commit_transaction().await.expect("commit");
    for (value, key, f) in futures {
        let m = f.await.expect("ack");
        expected.insert(value, (m.partition, key));
    }

    let out = run_python(
        &python,
        vec!["consume".into(), bootstrap.clone(), "interop".into(), expected.len().to_string()],
    )
    .await;
    let records = json::parse(&out);
    let records = records.list();
    assert_eq!(records.len(), expected.len(), "librdkafka read every committed record and nothing else");
    let mut last_offset: BTreeMap<i64, i64> = BTreeMap::new();
    for r in records {
        let value = r.get("v").str().expect("value").to_string();
        let (partition, key) = expected.get(&value).unwrap_or_else(|| panic!("unexpected record {value}"));
        assert_eq!(r.get("p").num(), i64::from(*partition), "{value}");
        let k = r.get("k").str().expect("key");
        assert_eq!(k, key, "{value}");
        if value.starts_with("plain-") {
            let h = r.get("h").list();
            assert_eq!(h.len(), 1);
            assert_eq!(h[0].list()[0].str(), Some("n"));
        }
        assert_eq!(i64::from(partition_for_key(k.as_bytes(), 6)), r.get("p").num(), "murmur2 of {k}");
        let o = r.get("o").num();
        let prev = last_offset.insert(r.get("p").num(), o);
        assert!(prev.is_none_or(|p| p < o), "offsets increase per partition");
    }

    // librdkafka's murmur2_random places the same keys where we do.
    let keys: Vec<String> = (0..200).map(|i| format!("key-{i}")).collect();
    let mut args = vec!["produce".to_string(), bootstrap.clone(), "interop-keys".to_string()];
    args.extend(keys.iter().cloned());
    let placed = json::parse(&run_python(&python, args).await);
    let ours_keys = Producer::new(config(&broker, &[])).await.expect("producer");
    for key in &keys {
        let theirs = placed.get(key).num();
        assert_eq!(i64::from(partition_for_key(key.as_bytes(), 6)), theirs, "{key}");
        let m = ours_keys
            .send(ProducerRecord::new("interop-keys").key(key.clone()).value("x"))
            .await
            .expect("send")
            .await
            .expect("ack");
        assert_eq!(i64::from(m.partition), theirs, "{key}: our producer and librdkafka agree");
    }
    for (key, p) in &ours {
        assert_eq!(*p, partition_for_key(key.as_bytes(), 6));
    }
}
