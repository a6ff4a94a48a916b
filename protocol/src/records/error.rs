//! Errors from parsing, decoding, building and (de)compressing record batches.

use super::compression::Compression;

/// Why a record batch or a record inside it could not be read or written.
///
/// Variants are distinct so callers can map them precisely: a torn tail during log
/// recovery ([`RecordsError::Truncated`]) is expected and handled by truncation, while a
/// CRC mismatch on produce maps to Kafka's `CORRUPT_MESSAGE` and a malformed record to
/// `INVALID_RECORD`.
#[derive(Debug, thiserror::Error)]
pub enum RecordsError {
    /// Fewer bytes are present than the structure being read declares or requires.
    #[error("truncated input: need {needed} bytes, {available} available")]
    Truncated {
        /// Bytes the structure needs.
        needed: usize,
        /// Bytes actually present.
        available: usize,
    },
    /// The magic byte is not 2; older message formats are not supported.
    #[error("unsupported record batch magic {0}, only magic 2 is supported")]
    InvalidMagic(i8),
    /// The batchLength field is smaller than a batch header or negative.
    #[error("invalid batch length {0}")]
    InvalidBatchLength(i32),
    /// The stored CRC-32C does not match the bytes from `attributes` to the end.
    #[error("CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch {
        /// CRC stored in the batch header.
        stored: u32,
        /// CRC computed over the batch bytes.
        computed: u32,
    },
    /// Compression codec bits hold a value Kafka does not define (5..=7).
    #[error("unknown compression codec {0}")]
    UnknownCompression(u8),
    /// The compressed payload could not be decompressed.
    #[error("{codec:?} decompression failed")]
    Decompression {
        /// Codec that failed.
        codec: Compression,
        /// Underlying decoder error.
        #[source]
        source: std::io::Error,
    },
    /// Decompressed data would exceed the caller-given maximum (zip-bomb guard).
    #[error("{codec:?} payload decompresses to more than the limit of {limit} bytes")]
    DecompressedTooLarge {
        /// Codec of the payload.
        codec: Compression,
        /// The maximum the caller allowed.
        limit: usize,
    },
    /// Compressing a payload failed.
    #[error("{codec:?} compression failed")]
    Compression {
        /// Codec that failed.
        codec: Compression,
        /// Underlying encoder error.
        #[source]
        source: std::io::Error,
    },
    /// A varint ran past 5 (varint) or 10 (varlong) bytes or past the end of input.
    #[error("malformed varint")]
    InvalidVarint,
    /// A length field is negative (other than -1 for null) or exceeds the bytes present.
    #[error("invalid {field} length {length}")]
    InvalidLength {
        /// Which field carried the length.
        field: &'static str,
        /// The declared length.
        length: i64,
    },
    /// A record's declared size does not match the bytes its fields occupy.
    #[error("record size mismatch: declared {declared}, fields use {actual}")]
    RecordSizeMismatch {
        /// Size from the record's length varint.
        declared: usize,
        /// Bytes its fields actually used.
        actual: usize,
    },
    /// The batch's recordsCount is negative.
    #[error("invalid records count {0}")]
    InvalidRecordCount(i32),
    /// Bytes remain after the declared number of records were read.
    #[error("{0} bytes remain after the declared records")]
    TrailingBytes(usize),
    /// A control record's key or value is malformed.
    #[error("invalid control record: {0}")]
    InvalidControlRecord(&'static str),
    /// A batch being built has no records; Kafka never writes empty batches from producers.
    #[error("record batch has no records")]
    EmptyBatch,
    /// A batch being built would not fit the format (more than i32::MAX bytes, records
    /// or offset deltas).
    #[error("record batch too large for the v2 format")]
    BatchTooLarge,
}
