//! How `strata consume` prints a record: a template in the manner of kcat's `-f`
//! (`text` is the template `%s\n`, the value on its own line), or one JSON object per
//! line. The template is parsed once; printing writes the record's bytes straight to the
//! output, with no allocation per record.

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use std::borrow::Cow;
use std::io::{self, Write};
use strata_client::consumer::ConsumerRecord;
use strata_client::Header;

/// The `--format` of `strata consume`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordFormat {
    /// A parsed template (`text` is `%s\n`).
    Template(Template),
    /// One JSON object per line: topic, partition, offset, timestamp, key, value, headers.
    Json,
}

impl RecordFormat {
    /// `text`, `json`, or a template (anything else); a template with an unknown `%`
    /// token is refused, so a typo does not silently print garbage.
    pub fn parse(s: &str) -> Result<RecordFormat, String> {
        match s {
            "text" => Template::parse("%s\\n").map(RecordFormat::Template),
            "json" => Ok(RecordFormat::Json),
            _ => Template::parse(s).map(RecordFormat::Template),
        }
    }

    /// Writes one record.
    pub fn write(&self, out: &mut impl Write, record: &ConsumerRecord) -> io::Result<()> {
        match self {
            RecordFormat::Template(t) => t.write(out, record),
            RecordFormat::Json => {
                serde_json::to_writer(&mut *out, &JsonRecord(record)).map_err(io::Error::other)?;
                out.write_all(b"\n")
            }
        }
    }
}

/// One piece of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Literal(Vec<u8>),
    Topic,
    Partition,
    Offset,
    Key,
    Value,
    KeyLength,
    ValueLength,
    Timestamp,
    Headers,
}

/// A kcat-style output template, parsed into pieces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template(Vec<Piece>);

impl Template {
    /// Parses `%t %p %o %k %s %K %S %T %h %%` and the escapes `\n \t \r \\` (other
    /// backslashes are kept as written).
    pub fn parse(s: &str) -> Result<Template, String> {
        let mut pieces = Vec::new();
        let mut literal = Vec::new();
        let mut chars = s.chars();
        while let Some(c) = chars.next() {
            match c {
                '%' => {
                    let piece = match chars.next() {
                        Some('t') => Piece::Topic,
                        Some('p') => Piece::Partition,
                        Some('o') => Piece::Offset,
                        Some('k') => Piece::Key,
                        Some('s') => Piece::Value,
                        Some('K') => Piece::KeyLength,
                        Some('S') => Piece::ValueLength,
                        Some('T') => Piece::Timestamp,
                        Some('h') => Piece::Headers,
                        Some('%') => {
                            literal.push(b'%');
                            continue;
                        }
                        Some(other) => return Err(format!("unknown format token %{other} in {s:?}")),
                        None => return Err(format!("format {s:?} ends with a lone %")),
                    };
                    if !literal.is_empty() {
                        pieces.push(Piece::Literal(std::mem::take(&mut literal)));
                    }
                    pieces.push(piece);
                }
                '\\' => match chars.next() {
                    Some('n') => literal.push(b'\n'),
                    Some('t') => literal.push(b'\t'),
                    Some('r') => literal.push(b'\r'),
                    Some('\\') => literal.push(b'\\'),
                    Some(other) => {
                        literal.push(b'\\');
                        let mut buf = [0; 4];
                        literal.extend_from_slice(other.encode_utf8(&mut buf).as_bytes());
                    }
                    None => literal.push(b'\\'),
                },
                _ => {
                    let mut buf = [0; 4];
                    literal.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
            }
        }
        if !literal.is_empty() {
            pieces.push(Piece::Literal(literal));
        }
        Ok(Template(pieces))
    }

    /// Writes `record` through the template; a null key or value prints as nothing
    /// and its length as -1, as kcat does.
    pub fn write(&self, out: &mut impl Write, record: &ConsumerRecord) -> io::Result<()> {
        let len = |b: &Option<bytes::Bytes>| b.as_ref().map_or(-1, |b| b.len() as i64);
        for piece in &self.0 {
            match piece {
                Piece::Literal(bytes) => out.write_all(bytes)?,
                Piece::Topic => out.write_all(record.topic.as_bytes())?,
                Piece::Partition => write!(out, "{}", record.partition)?,
                Piece::Offset => write!(out, "{}", record.offset)?,
                Piece::Key => out.write_all(record.key.as_deref().unwrap_or_default())?,
                Piece::Value => out.write_all(record.value.as_deref().unwrap_or_default())?,
                Piece::KeyLength => write!(out, "{}", len(&record.key))?,
                Piece::ValueLength => write!(out, "{}", len(&record.value))?,
                Piece::Timestamp => write!(out, "{}", record.timestamp)?,
                Piece::Headers => {
                    for (i, h) in record.headers.iter().enumerate() {
                        if i > 0 {
                            out.write_all(b",")?;
                        }
                        out.write_all(h.key.as_bytes())?;
                        out.write_all(b"=")?;
                        out.write_all(h.value.as_deref().unwrap_or_default())?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// Bytes as a JSON string: as they are when UTF-8 (no copy), else with invalid
/// sequences replaced by U+FFFD.
fn text(bytes: &Option<bytes::Bytes>) -> Option<Cow<'_, str>> {
    bytes.as_deref().map(String::from_utf8_lossy)
}

/// A record serialized in place, borrowing its bytes.
struct JsonRecord<'a>(&'a ConsumerRecord);

impl Serialize for JsonRecord<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let r = self.0;
        let mut map = serializer.serialize_map(Some(7))?;
        map.serialize_entry("topic", &*r.topic)?;
        map.serialize_entry("partition", &r.partition)?;
        map.serialize_entry("offset", &r.offset)?;
        map.serialize_entry("timestamp", &r.timestamp)?;
        map.serialize_entry("key", &text(&r.key))?;
        map.serialize_entry("value", &text(&r.value))?;
        map.serialize_entry("headers", &JsonHeaders(&r.headers))?;
        map.end()
    }
}

/// Headers as a list of `{"key": ..., "value": ...}` (a list: keys may repeat).
struct JsonHeaders<'a>(&'a [Header]);

impl Serialize for JsonHeaders<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
        for h in self.0 {
            seq.serialize_element(&JsonHeader(h))?;
        }
        seq.end()
    }
}

struct JsonHeader<'a>(&'a Header);

impl Serialize for JsonHeader<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("key", &self.0.key)?;
        map.serialize_entry("value", &text(&self.0.value))?;
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn record(key: Option<&'static [u8]>, value: Option<&'static [u8]>) -> ConsumerRecord {
        ConsumerRecord {
            topic: "orders".into(),
            partition: 2,
            offset: 41,
            timestamp: 1_700_000_000_000,
            timestamp_type: Default::default(),
            key: key.map(Bytes::from_static),
            value: value.map(Bytes::from_static),
            headers: vec![
                Header { key: "a".into(), value: Some(Bytes::from_static(b"1")) },
                Header { key: "b".into(), value: None },
            ],
            leader_epoch: Some(0),
        }
    }

    fn print(format: &str, r: &ConsumerRecord) -> Vec<u8> {
        let mut out = Vec::new();
        RecordFormat::parse(format).unwrap().write(&mut out, r).unwrap();
        out
    }

    #[test]
    fn text_is_the_value_on_its_own_line() {
        assert_eq!(print("text", &record(Some(b"k"), Some(b"v\xff"))), b"v\xff\n");
        assert_eq!(print("text", &record(Some(b"k"), None)), b"\n");
    }

    #[test]
    fn templates_print_every_token_and_escape() {
        let r = record(Some(b"key"), Some(b"value"));
        assert_eq!(
            print("%t/%p@%o %k=%s (%K,%S) %T [%h] 100%%\\t\\\\\\n", &r),
            b"orders/2@41 key=value (3,5) 1700000000000 [a=1,b=] 100%\t\\\n".to_vec()
        );
        let null = record(None, None);
        assert_eq!(print("%k|%s|%K|%S", &null), b"||-1|-1");
        // A backslash before anything else is kept; so is text without tokens.
        assert_eq!(print("\\x%s", &r), b"\\xvalue");
        assert_eq!(print("just text", &r), b"just text");
    }

    #[test]
    fn bad_templates_are_refused() {
        for bad in ["%q", "value %", "%s %z"] {
            assert!(RecordFormat::parse(bad).is_err(), "{bad:?} should be refused");
        }
    }

    #[test]
    fn json_is_one_object_per_line() {
        let out = print("json", &record(Some(b"k"), Some(b"v")));
        assert_eq!(out.last(), Some(&b'\n'));
        let doc: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            doc,
            serde_json::json!({
                "topic": "orders", "partition": 2, "offset": 41, "timestamp": 1_700_000_000_000i64,
                "key": "k", "value": "v",
                "headers": [{"key": "a", "value": "1"}, {"key": "b", "value": null}],
            })
        );
        let null: serde_json::Value = serde_json::from_slice(&print("json", &record(None, None))).unwrap();
        assert_eq!((&null["key"], &null["value"]), (&serde_json::Value::Null, &serde_json::Value::Null));
    }
}
