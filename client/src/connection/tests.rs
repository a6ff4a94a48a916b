//! The connection against a scripted peer on loopback: the bad answers a broker could
//! give (a wrong correlation id, a truncated or oversized frame, silence) are typed
//! errors on the call and close the connection, never a panic or a hang.

use super::*;
use strata_protocol::header::encode_response;
use strata_protocol::messages::api_versions::ApiVersion;
use strata_protocol::messages::metadata::{MetadataRequest, MetadataResponse};
use strata_protocol::{decode_request, Request};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

/// How the scripted peer answers one request after ApiVersions.
#[derive(Clone, Copy)]
enum Answer {
    Normal,
    WrongCorrelation,
    Truncated,
    Oversized,
    Silent,
}

fn versions() -> ResponseBody {
    ResponseBody::ApiVersions(ApiVersionsResponse {
        api_keys: vec![
            ApiVersion { api_key: ApiKey::ApiVersions as i16, min_version: 0, max_version: 3 },
            ApiVersion { api_key: ApiKey::Metadata as i16, min_version: 0, max_version: 12 },
        ],
        ..Default::default()
    })
}

async fn read_request(stream: &mut TcpStream) -> Option<Request> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).await.ok()?;
    let mut body = vec![0u8; i32::from_be_bytes(len) as usize];
    stream.read_exact(&mut body).await.ok()?;
    decode_request(Bytes::from(body)).ok()
}

async fn write_response(stream: &mut TcpStream, correlation_id: i32, version: i16, body: &ResponseBody) {
    for chunk in encode_response(correlation_id, version, body) {
        let bytes = chunk.load().expect("in memory");
        stream.write_all(&bytes).await.expect("write");
    }
}

/// A peer answering ApiVersions, then every Metadata request as `answer` says (the
/// v0-only peer refuses ApiVersions v3 first, as an old broker does).
async fn peer(answer: Answer, v0_only: bool) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else { return };
            tokio::spawn(async move {
                while let Some(req) = read_request(&mut stream).await {
                    let (id, version) = (req.header.correlation_id, req.header.api_version);
                    if req.api == ApiKey::ApiVersions {
                        if v0_only && version > 0 {
                            let refusal = ResponseBody::ApiVersions(ApiVersionsResponse {
                                error_code: ErrorCode::UnsupportedVersion.code(),
                                api_keys: vec![ApiVersion { api_key: 18, min_version: 0, max_version: 0 }],
                                ..Default::default()
                            });
                            write_response(&mut stream, id, 0, &refusal).await;
                        } else {
                            let mut body = versions();
                            if let (true, ResponseBody::ApiVersions(r)) = (v0_only, &mut body) {
                                r.api_keys[0].max_version = 0;
                            }
                            write_response(&mut stream, id, version, &body).await;
                        }
                        continue;
                    }
                    let body =
                        ResponseBody::Metadata(MetadataResponse { controller_id: id, ..Default::default() });
                    match answer {
                        Answer::Normal => write_response(&mut stream, id, version, &body).await,
                        Answer::WrongCorrelation => {
                            write_response(&mut stream, id + 100, version, &body).await
                        }
                        Answer::Truncated => {
                            stream.write_all(&[0, 0, 0, 50, 0, 0]).await.expect("write");
                            return;
                        }
                        Answer::Oversized => {
                            stream.write_all(&i32::MAX.to_be_bytes()).await.expect("write");
                        }
                        Answer::Silent => {}
                    }
                }
            });
        }
    });
    addr
}

fn config() -> ClientConfig {
    ClientConfig {
        request_timeout: Duration::from_millis(500),
        max_response_bytes: 1 << 20,
        ..ClientConfig::new("unused:0")
    }
}

fn metadata() -> RequestBody {
    RequestBody::Metadata(MetadataRequest::default())
}

#[tokio::test]
async fn pipelined_requests_get_their_own_answers_in_order() {
    let addr = peer(Answer::Normal, false).await;
    let conn = Connection::connect(&addr, &config(), 8).await.expect("connect");
    assert_eq!(conn.version(ApiKey::Metadata).expect("version"), 12);
    assert!(matches!(conn.version(ApiKey::Produce), Err(Error::UnsupportedVersion { .. })));
    let mut receivers = Vec::new();
    for _ in 0..5 {
        receivers.push(conn.submit(12, &metadata()).await.expect("submit"));
    }
    let mut ids = Vec::new();
    for rx in receivers {
        let ResponseBody::Metadata(r) = conn.await_reply(rx).await.expect("reply").body else {
            panic!("api")
        };
        ids.push(r.controller_id);
    }
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(ids, sorted, "answers in request order, each its own");
    assert_eq!(ids.len(), 5);
}

#[tokio::test]
async fn a_broker_that_only_speaks_api_versions_v0_is_understood() {
    let addr = peer(Answer::Normal, true).await;
    let conn = Connection::connect(&addr, &config(), 1).await.expect("connect");
    assert_eq!(conn.version(ApiKey::ApiVersions).expect("version"), 0);
}

#[tokio::test]
async fn a_wrong_correlation_id_is_a_protocol_error_and_closes_the_connection() {
    let addr = peer(Answer::WrongCorrelation, false).await;
    let conn = Connection::connect(&addr, &config(), 4).await.expect("connect");
    let err = conn.call(metadata()).await.expect_err("mismatch");
    assert!(matches!(err, Error::Protocol { .. }), "{err}");
    assert!(err.is_retriable());
    assert!(conn.is_closed());
    assert!(conn.call(metadata()).await.is_err(), "a closed connection refuses requests");
}

#[tokio::test]
async fn a_truncated_response_fails_the_call() {
    let addr = peer(Answer::Truncated, false).await;
    let conn = Connection::connect(&addr, &config(), 4).await.expect("connect");
    let err = conn.call(metadata()).await.expect_err("truncated");
    assert!(matches!(err, Error::Connection { .. }), "{err}");
}

#[tokio::test]
async fn an_oversized_response_is_refused_before_it_is_buffered() {
    let addr = peer(Answer::Oversized, false).await;
    let conn = Connection::connect(&addr, &config(), 4).await.expect("connect");
    let err = conn.call(metadata()).await.expect_err("oversized");
    assert!(matches!(err, Error::Protocol { .. }), "{err}");
}

#[tokio::test]
async fn silence_times_out_and_the_pool_connects_again() {
    let addr = peer(Answer::Silent, false).await;
    let pool = pool::Pool::new(config(), 4);
    let conn = pool.get(&addr).await.expect("connect");
    let err = conn.call(metadata()).await.expect_err("silent");
    assert!(matches!(err, Error::Timeout(_)), "{err}");
    assert!(conn.is_closed(), "a timed-out request closes its connection");
    let again = pool.get(&addr).await.expect("reconnect");
    assert!(!again.is_closed());
}

#[test]
fn advance_skips_written_bytes_across_chunks() {
    let chunks = vec![Bytes::from_static(b"abc"), Bytes::new(), Bytes::from_static(b"defg")];
    assert_eq!(advance(&chunks, 0, 0, 2), (0, 2));
    assert_eq!(advance(&chunks, 0, 0, 3), (2, 0), "the empty chunk is skipped");
    assert_eq!(advance(&chunks, 2, 2, 2), (3, 0));
}

/// The controller ids (request numbers) of the answers handed to `submit_with`'s functions.
type Seen = Arc<Mutex<Vec<Result<i32>>>>;
type OnReply = Box<dyn FnOnce(Result<Response>) + Send>;

/// Collects what `submit_with` hands its functions, in call order.
fn collector() -> (Seen, impl Fn() -> OnReply) {
    let seen: Seen = Arc::default();
    let make = {
        let seen = seen.clone();
        move || {
            let seen = seen.clone();
            Box::new(move |r: Result<Response>| {
                let id = r.map(|r| match r.body {
                    ResponseBody::Metadata(m) => m.controller_id,
                    _ => -1,
                });
                lock(&seen).push(id);
            }) as OnReply
        }
    };
    (seen, make)
}

async fn wait_for(seen: &Mutex<Vec<Result<i32>>>, n: usize) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while lock(seen).len() < n {
        assert!(tokio::time::Instant::now() < deadline, "only {} of {n} answers", lock(seen).len());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn answers_reach_the_functions_of_submit_with_in_request_order() {
    let addr = peer(Answer::Normal, false).await;
    let conn = Connection::connect(&addr, &config(), 1).await.expect("connect");
    let (seen, make) = collector();
    // More than the in-flight limit of 1: the producer keeps its own limit.
    for _ in 0..20 {
        conn.submit_with(12, &metadata(), make()).expect("queued");
    }
    wait_for(&seen, 20).await;
    let ids: Vec<i32> = lock(&seen).iter().map(|r| *r.as_ref().expect("answer")).collect();
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(ids, sorted, "each its own answer, in order");
}

#[tokio::test]
async fn silence_fails_the_functions_of_submit_with_at_the_request_timeout() {
    let addr = peer(Answer::Silent, false).await;
    let conn = Connection::connect(&addr, &config(), 4).await.expect("connect");
    let (seen, make) = collector();
    conn.submit_with(12, &metadata(), make()).expect("queued");
    conn.submit_with(12, &metadata(), make()).expect("queued");
    wait_for(&seen, 2).await;
    for r in lock(&seen).iter() {
        assert!(matches!(r, Err(Error::Timeout(_))), "{r:?}");
    }
    assert!(conn.is_closed(), "the timeout closes the connection");
    assert!(conn.submit_with(12, &metadata(), make()).is_err(), "a closed connection refuses at once");
}

#[tokio::test]
async fn a_closed_connection_fails_what_awaits_an_answer_on_the_reader_task() {
    let addr = peer(Answer::Silent, false).await;
    let conn = Connection::connect(&addr, &config(), 4).await.expect("connect");
    let (seen, make) = collector();
    conn.submit_with(12, &metadata(), make()).expect("queued");
    conn.close();
    wait_for(&seen, 1).await;
    assert!(matches!(lock(&seen)[0], Err(Error::Closed)), "{:?}", lock(&seen)[0]);
}

/// A request far larger than the socket buffer, against a peer that reads slowly: the
/// caller writes what the socket takes and the writer task the rest, and requests
/// queued behind it follow in order.
#[tokio::test]
async fn a_request_the_socket_cannot_take_at_once_is_finished_by_the_writer() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.expect("accept");
        let mut n = 0;
        loop {
            let mut len = [0u8; 4];
            if stream.read_exact(&mut len).await.is_err() {
                return;
            }
            let mut body = vec![0u8; i32::from_be_bytes(len) as usize];
            if n > 0 {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            stream.read_exact(&mut body).await.expect("body");
            let req = decode_request(Bytes::from(body)).expect("request");
            let (id, version) = (req.header.correlation_id, req.header.api_version);
            let answer = if req.api == ApiKey::ApiVersions {
                versions()
            } else {
                ResponseBody::Metadata(MetadataResponse { controller_id: id, ..Default::default() })
            };
            write_response(&mut stream, id, version, &answer).await;
            n += 1;
        }
    });
    let conn = Connection::connect(&addr, &config(), 4).await.expect("connect");
    let big = RequestBody::Metadata(MetadataRequest {
        topics: Some(
            (0..40_000)
                .map(|i| strata_protocol::messages::metadata::MetadataRequestTopic {
                    name: Some(format!("topic-with-a-long-name-{i:08}")),
                    ..Default::default()
                })
                .collect(),
        ),
        ..Default::default()
    });
    let (seen, make) = collector();
    conn.submit_with(12, &big, make()).expect("queued");
    conn.submit_with(12, &metadata(), make()).expect("queued");
    let rx = conn.submit(12, &metadata()).await.expect("queued");
    let last = conn.await_reply(rx).await.expect("third answer");
    wait_for(&seen, 2).await;
    let ids: Vec<i32> = lock(&seen).iter().map(|r| *r.as_ref().expect("answer")).collect();
    let ResponseBody::Metadata(m) = last.body else { panic!("api") };
    assert!(ids[0] < ids[1] && ids[1] < m.controller_id, "{ids:?} then {}", m.controller_id);
}
