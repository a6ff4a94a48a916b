//! Kafka wire protocol for Strata.
//!
//! Sans-io: this crate turns bytes into typed messages and back and knows nothing of
//! sockets, files or async runtimes, so it can be tested and fuzzed on its own. Every
//! decoder bounds its allocations by the bytes actually present.
//!
//! - [`frame`]: the 4-byte length framing, with the size checked before allocation;
//! - [`header`]: request/response headers and whole-frame encode/decode;
//! - [`messages`]: one module per API, each message declared once with `message!`;
//! - [`records`]: RecordBatch v2 view, builder and compression codecs;
//! - [`error`]: Kafka error codes.
//! - [`fetch_session`]: the fetcher's side of incremental fetch sessions (KIP-227).

mod apis;
pub mod codec;
pub mod error;
pub mod fetch_session;
pub mod frame;
pub mod header;
pub mod messages;
pub mod records;

pub use error::ErrorCode;
pub use header::{decode_request, encode_response, Request, RequestError, RequestHeader};
pub use messages::{ApiKey, RequestBody, ResponseBody};
