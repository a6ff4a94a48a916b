//! The broker's one clock: wall time in milliseconds since the Unix epoch, as Kafka
//! stamps records and measures timeouts. Pure state machines never read it; their shells
//! pass `now_ms` in, so tests drive time themselves.

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
