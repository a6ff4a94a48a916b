//! `strata produce TOPIC`: each line of stdin becomes one record (kcat's producer mode,
//! `kafka-console-producer.sh`). Lines are cut out of large read buffers and keys and
//! values are slices of them, so a record costs no copy of its bytes. The tool exits 0
//! only once every record is acknowledged; with `--transactional-id` all of stdin is
//! one transaction, committed at end of input and aborted if anything fails or SIGINT /
//! SIGTERM stops the input.

use crate::args::{ClientArgs, Format, ProduceArgs};
use crate::signals::Shutdown;
use anyhow::{bail, Context, Result};
use bytes::{Buf, Bytes, BytesMut};
use serde_json::json;
use std::collections::VecDeque;
use strata_client::producer::{DeliveryFuture, Producer, ProducerConfig, ProducerRecord};
use tokio::io::{AsyncRead, AsyncReadExt};

/// Deliveries awaited at most at once: beyond it the tool waits for the oldest, so the
/// futures of a long input do not pile up (the producer's `buffer.memory` bounds the
/// bytes).
const MAX_PENDING: usize = 10_000;

/// Bytes read from stdin at a time.
const READ_CHUNK: usize = 64 * 1024;

/// The producer settings: `-X` entries first, then the tool's own flags, which are
/// more specific.
pub fn config(client: &ClientArgs, args: &ProduceArgs) -> strata_client::Result<ProducerConfig> {
    let mut config = ProducerConfig::new(&client.connection.bootstrap_server);
    config.client.client_id = "strata-cli".to_string();
    for (key, value) in &client.connection.settings {
        config.set(key, value)?;
    }
    if let Some(acks) = &args.acks {
        config.set("acks", acks)?;
    }
    if let Some(compression) = &args.compression {
        config.set("compression.type", compression)?;
    }
    if let Some(id) = &args.transactional_id {
        config.set("transactional.id", id)?;
    }
    config.validated()
}

/// What was sent and how it ended.
#[derive(Debug, Default)]
struct Outcome {
    records: u64,
    bytes: u64,
    /// Deliveries that failed, and the first error among them.
    failed: u64,
    first_error: Option<String>,
    /// Why the input was not read to its end (the producer refused a record, stdin
    /// failed) or the transaction not committed.
    stopped: Option<String>,
}

impl Outcome {
    fn failed(&mut self, e: impl std::fmt::Display) {
        self.failed += 1;
        self.first_error.get_or_insert_with(|| e.to_string());
    }
}

/// Produces stdin and reports.
pub async fn run(config: ProducerConfig, client: &ClientArgs, args: ProduceArgs) -> Result<()> {
    let transactional = config.transactional_id.is_some();
    let producer = Producer::new(config).await.context("starting the producer")?;
    if transactional {
        producer.init_transactions().await.context("initializing transactions")?;
        producer.begin_transaction()?;
    }
    let mut outcome = Outcome::default();
    let mut shutdown = Shutdown::new()?;
    let input = tokio::io::stdin();
    if let Err(e) = send_lines(&producer, &args, input, &mut shutdown, &mut outcome).await {
        outcome.stopped = Some(format!("stopped after {} records: {e:#}", outcome.records));
    }
    let ok = |o: &Outcome| o.failed == 0 && o.stopped.is_none();
    let mut committed = false;
    if transactional {
        if ok(&outcome) {
            match producer.commit_transaction().await {
                Ok(()) => committed = true,
                Err(e) => outcome.stopped = Some(format!("committing: {e}")),
            }
        }
        if !committed {
            if let Err(e) = producer.abort_transaction().await {
                eprintln!("strata: aborting the transaction failed: {e}");
            }
        }
    }
    producer.close().await?;
    let verb = if transactional && !committed { "aborted" } else { "produced" };
    let failed = if outcome.failed > 0 { format!(", {} failed", outcome.failed) } else { String::new() };
    eprintln!("{verb} {} records ({} bytes) to {}{failed}", outcome.records, outcome.bytes, args.topic);
    if client.format == Format::Json {
        let doc = json!({
            "topic": args.topic, "records": outcome.records, "bytes": outcome.bytes,
            "failed": outcome.failed, "committed": committed,
        });
        println!("{doc}");
    }
    if ok(&outcome) {
        return Ok(());
    }
    let why = match (outcome.stopped, outcome.first_error) {
        (Some(stopped), _) => stopped,
        (None, first) => {
            format!("{} of {} records failed: {}", outcome.failed, outcome.records, first.unwrap_or_default())
        }
    };
    if transactional {
        bail!("the transaction was aborted: {why}");
    }
    bail!("{why}")
}

/// Sends one record per line of `input` and waits for every delivery, counting into
/// `outcome`. An error of `send` (the producer takes no more records) or of reading,
/// or a signal, stops the input there.
async fn send_lines(
    producer: &Producer,
    args: &ProduceArgs,
    mut input: impl AsyncRead + Unpin,
    shutdown: &mut Shutdown,
    outcome: &mut Outcome,
) -> Result<()> {
    let separator = args.key_separator.as_deref().map(str::as_bytes);
    let mut pending: VecDeque<DeliveryFuture> = VecDeque::new();
    let mut lines = Lines::default();
    let mut result = Ok(());
    let mut eof = false;
    'input: while !eof {
        lines.buf.reserve(READ_CHUNK);
        let read = tokio::select! {
            read = input.read_buf(&mut lines.buf) => read,
            _ = shutdown.recv() => {
                result = Err(anyhow::anyhow!("interrupted by a signal"));
                break;
            }
        };
        match read {
            Ok(n) => eof = n == 0,
            Err(e) => {
                result = Err(anyhow::Error::new(e).context("reading stdin"));
                break;
            }
        }
        while let Some(line) = lines.next(eof) {
            let (key, value) = split_key(line, separator);
            let bytes = key.as_ref().map_or(0, Bytes::len) + value.len();
            let mut record = ProducerRecord::new(args.topic.as_str()).value(value);
            record.key = key;
            record.partition = args.partition;
            match producer.send(record).await {
                Ok(delivery) => pending.push_back(delivery),
                Err(e) => {
                    result = Err(anyhow::Error::new(e));
                    break 'input;
                }
            }
            outcome.records += 1;
            outcome.bytes += bytes as u64;
            if pending.len() >= MAX_PENDING {
                if let Some(oldest) = pending.pop_front() {
                    if let Err(e) = oldest.await {
                        outcome.failed(e);
                    }
                }
            }
        }
    }
    for delivery in pending {
        if let Err(e) = delivery.await {
            outcome.failed(e);
        }
    }
    result
}

/// Cuts lines out of the bytes read so far; each line shares the read buffer.
#[derive(Debug, Default)]
struct Lines {
    buf: BytesMut,
    /// How far `buf` is known to hold no newline.
    scanned: usize,
}

impl Lines {
    /// The next whole line without its `\n`; at end of input also the last line if it
    /// has no newline (an empty remainder is no line).
    fn next(&mut self, eof: bool) -> Option<Bytes> {
        match self.buf[self.scanned..].iter().position(|&b| b == b'\n') {
            Some(i) => {
                let mut line = self.buf.split_to(self.scanned + i + 1);
                line.truncate(line.len() - 1);
                self.scanned = 0;
                Some(line.freeze())
            }
            None if eof && !self.buf.is_empty() => {
                self.scanned = 0;
                Some(self.buf.split().freeze())
            }
            None => {
                self.scanned = self.buf.len();
                None
            }
        }
    }
}

/// Splits `line` at the first `separator` into key and value (kcat's `-K`): a line
/// without it is all value, with a null key.
fn split_key(mut line: Bytes, separator: Option<&[u8]>) -> (Option<Bytes>, Bytes) {
    let Some(sep) = separator else { return (None, line) };
    match line.windows(sep.len()).position(|w| w == sep) {
        Some(i) => {
            let key = line.split_to(i);
            line.advance(sep.len());
            (Some(key), line)
        }
        None => (None, line),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(chunks: &[&[u8]]) -> Vec<Bytes> {
        let mut l = Lines::default();
        let mut out = Vec::new();
        for (i, chunk) in chunks.iter().enumerate() {
            l.buf.extend_from_slice(chunk);
            while let Some(line) = l.next(i + 1 == chunks.len()) {
                out.push(line);
            }
        }
        out
    }

    #[test]
    fn lines_are_cut_across_reads_and_keep_empty_ones() {
        assert_eq!(lines(&[b"a\nb", b"c\n\nd", b""]), vec!["a", "bc", "", "d"]);
        assert_eq!(lines(&[b"one\n", b""]), vec!["one"]);
        assert_eq!(lines(&[b""]), Vec::<Bytes>::new());
        assert_eq!(lines(&[b"x\r\n", b""]), vec!["x\r"], "only the newline is the delimiter");
    }

    #[test]
    fn keys_are_split_at_the_first_separator() {
        let split = |line: &'static str, sep: Option<&str>| {
            let (k, v) = split_key(Bytes::from_static(line.as_bytes()), sep.map(str::as_bytes));
            (k.map(|k| String::from_utf8(k.to_vec()).unwrap()), String::from_utf8(v.to_vec()).unwrap())
        };
        assert_eq!(split("k:v:w", Some(":")), (Some("k".into()), "v:w".into()));
        assert_eq!(split(":v", Some(":")), (Some("".into()), "v".into()));
        assert_eq!(split("k::=v", Some("::=")), (Some("k".into()), "v".into()));
        assert_eq!(split("no separator", Some(":")), (None, "no separator".into()));
        assert_eq!(split("k:v", None), (None, "k:v".into()));
    }
}
