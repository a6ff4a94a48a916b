//! Compression codecs of record batches, with decompression bounded by a caller maximum.
//!
//! Formats follow what real clients put on the wire:
//! - gzip: one or more gzip members (RFC 1952).
//! - snappy: the Java client writes xerial framing (`\x82SNAPPY\0` header, then
//!   length-prefixed raw snappy blocks); other clients may send one raw snappy block.
//!   Both are read; [`SnappyFormat`] picks what is written.
//! - lz4: the LZ4 *frame* format with independent blocks and no content size, which the
//!   Java client's LZ4 stream requires.
//! - zstd: one or more zstd frames.

use std::io::{Read, Write};

use bytes::Bytes;

use super::error::RecordsError;

/// Codec in bits 0..=2 of a batch's attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Compression {
    /// Records are stored as they are.
    #[default]
    None = 0,
    /// gzip (deflate).
    Gzip = 1,
    /// Snappy, raw or xerial-framed.
    Snappy = 2,
    /// LZ4 frame format.
    Lz4 = 3,
    /// Zstandard; added with produce v7 (KIP-110).
    Zstd = 4,
}

impl Compression {
    /// Decodes the codec from batch attributes, rejecting the undefined values 5..=7.
    pub fn from_attributes(attributes: i16) -> Result<Self, RecordsError> {
        match (attributes & 0x07) as u8 {
            0 => Ok(Self::None),
            1 => Ok(Self::Gzip),
            2 => Ok(Self::Snappy),
            3 => Ok(Self::Lz4),
            4 => Ok(Self::Zstd),
            other => Err(RecordsError::UnknownCompression(other)),
        }
    }

    /// The codec id as stored in attribute bits 0..=2.
    pub fn id(self) -> i16 {
        self as i16
    }
}

/// Which snappy framing [`compress`] writes. Both are always accepted when reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SnappyFormat {
    /// xerial snappy-java stream framing, as written by the Java producer (the most
    /// widely readable choice).
    #[default]
    Xerial,
    /// A single raw snappy block, as some non-Java clients write.
    Raw,
}

/// Magic that opens a xerial snappy-java stream.
const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
/// Magic, version (i32) and compatible version (i32).
const XERIAL_HEADER_LEN: usize = 16;
/// Uncompressed block size the Java client uses for xerial framing.
const XERIAL_BLOCK_SIZE: usize = 32 * 1024;

/// KIP-390's levels for `compression.gzip.level` (Kafka's ranges, inclusive): -1 is the
/// codec's default (6). The broker's topic configs and the client's producer config both
/// check against these, so the two accept the same values.
pub const GZIP_LEVELS: &[(i32, i32)] = &[(-1, -1), (1, 9)];
/// KIP-390's levels for `compression.lz4.level`; accepted, though lz4 has one level here.
pub const LZ4_LEVELS: &[(i32, i32)] = &[(1, 17)];
/// KIP-390's levels for `compression.zstd.level`.
pub const ZSTD_LEVELS: &[(i32, i32)] = &[(-131_072, 22)];

/// Whether `level` lies in one of `ranges` (one of the `*_LEVELS` tables).
pub fn level_allowed(ranges: &[(i32, i32)], level: i64) -> bool {
    ranges.iter().any(|&(lo, hi)| (i64::from(lo)..=i64::from(hi)).contains(&level))
}

/// `ranges` as an error message names them: "-1 or 1..9".
pub fn describe_levels(ranges: &[(i32, i32)]) -> String {
    let allowed: Vec<String> = ranges
        .iter()
        .map(|&(lo, hi)| if lo == hi { lo.to_string() } else { format!("{lo}..{hi}") })
        .collect();
    allowed.join(" or ")
}

/// Compresses `data` with `codec`. `Compression::None` returns a copy.
pub fn compress(
    codec: Compression,
    data: &[u8],
    snappy_format: SnappyFormat,
) -> Result<Vec<u8>, RecordsError> {
    compress_at(codec, data, snappy_format, None)
}

/// [`compress`] at a codec level (KIP-390's `compression.gzip.level` 1-9 and
/// `compression.zstd.level` -131072..22); `None` is the codec's default (gzip 6, zstd 3).
/// lz4 and snappy have a single level here (`lz4_flex` has no high-compression mode), so
/// `level` does not change them.
pub fn compress_at(
    codec: Compression,
    data: &[u8],
    snappy_format: SnappyFormat,
    level: Option<i32>,
) -> Result<Vec<u8>, RecordsError> {
    let io_err = |source| RecordsError::Compression { codec, source };
    match codec {
        Compression::None => Ok(data.to_vec()),
        Compression::Gzip => {
            let level = match level {
                Some(l @ 0..=9) => flate2::Compression::new(l as u32),
                _ => flate2::Compression::default(),
            };
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), level);
            enc.write_all(data).map_err(io_err)?;
            enc.finish().map_err(io_err)
        }
        Compression::Snappy => match snappy_format {
            SnappyFormat::Raw => snap::raw::Encoder::new().compress_vec(data).map_err(|e| io_err(e.into())),
            SnappyFormat::Xerial => compress_xerial(data).map_err(io_err),
        },
        Compression::Lz4 => {
            let info = lz4_flex::frame::FrameInfo::new()
                .block_mode(lz4_flex::frame::BlockMode::Independent)
                .block_size(lz4_flex::frame::BlockSize::Max64KB);
            let mut enc = lz4_flex::frame::FrameEncoder::with_frame_info(info, Vec::new());
            enc.write_all(data).map_err(io_err)?;
            enc.finish().map_err(|e| io_err(e.into()))
        }
        Compression::Zstd => {
            zstd::bulk::compress(data, level.unwrap_or(zstd::DEFAULT_COMPRESSION_LEVEL)).map_err(io_err)
        }
    }
}

fn compress_xerial(data: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(XERIAL_HEADER_LEN + data.len() / 2 + 16);
    out.extend_from_slice(&XERIAL_MAGIC);
    out.extend_from_slice(&1i32.to_be_bytes());
    out.extend_from_slice(&1i32.to_be_bytes());
    let mut encoder = snap::raw::Encoder::new();
    for chunk in data.chunks(XERIAL_BLOCK_SIZE) {
        let block = encoder.compress_vec(chunk)?;
        let len = i32::try_from(block.len()).map_err(std::io::Error::other)?;
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(&block);
    }
    Ok(out)
}

/// Decompresses `data`, failing with [`RecordsError::DecompressedTooLarge`] rather than
/// producing more than `max_bytes`. Memory use is bounded by `max_bytes` plus codec
/// buffers, whatever the input claims.
pub fn decompress(codec: Compression, data: &[u8], max_bytes: usize) -> Result<Bytes, RecordsError> {
    let io_err = |source| RecordsError::Decompression { codec, source };
    let out = match codec {
        Compression::None => {
            if data.len() > max_bytes {
                return Err(RecordsError::DecompressedTooLarge { codec, limit: max_bytes });
            }
            data.to_vec()
        }
        Compression::Gzip => read_bounded(codec, flate2::read::MultiGzDecoder::new(data), max_bytes)?,
        Compression::Snappy => decompress_snappy(data, max_bytes)?,
        Compression::Lz4 => read_bounded(codec, lz4_flex::frame::FrameDecoder::new(data), max_bytes)?,
        Compression::Zstd => {
            let decoder = zstd::stream::read::Decoder::with_buffer(data).map_err(io_err)?;
            read_bounded(codec, decoder, max_bytes)?
        }
    };
    Ok(Bytes::from(out))
}

/// Reads a decoder to its end, never buffering more than `max_bytes + 1` bytes.
fn read_bounded<R: Read>(codec: Compression, reader: R, max_bytes: usize) -> Result<Vec<u8>, RecordsError> {
    let mut out = Vec::new();
    let limit = (max_bytes as u64).saturating_add(1);
    reader
        .take(limit)
        .read_to_end(&mut out)
        .map_err(|source| RecordsError::Decompression { codec, source })?;
    if out.len() > max_bytes {
        return Err(RecordsError::DecompressedTooLarge { codec, limit: max_bytes });
    }
    Ok(out)
}

fn decompress_snappy(data: &[u8], max_bytes: usize) -> Result<Vec<u8>, RecordsError> {
    if data.len() >= XERIAL_HEADER_LEN && data[..XERIAL_MAGIC.len()] == XERIAL_MAGIC {
        let mut out = Vec::new();
        let mut rest = &data[XERIAL_HEADER_LEN..];
        while !rest.is_empty() {
            let (len_bytes, tail) = rest
                .split_at_checked(4)
                .ok_or(RecordsError::Truncated { needed: 4, available: rest.len() })?;
            let mut len_arr = [0u8; 4];
            len_arr.copy_from_slice(len_bytes);
            let block_len = i32::from_be_bytes(len_arr);
            let block_len = usize::try_from(block_len).map_err(|_| RecordsError::InvalidLength {
                field: "xerial snappy block",
                length: i64::from(block_len),
            })?;
            let (block, tail) = tail
                .split_at_checked(block_len)
                .ok_or(RecordsError::Truncated { needed: block_len, available: tail.len() })?;
            append_raw_snappy(block, &mut out, max_bytes)?;
            rest = tail;
        }
        Ok(out)
    } else {
        let mut out = Vec::new();
        append_raw_snappy(data, &mut out, max_bytes)?;
        Ok(out)
    }
}

/// Decompresses one raw snappy block onto `out`, checking the size the block declares
/// against what is left of the budget before allocating.
fn append_raw_snappy(block: &[u8], out: &mut Vec<u8>, max_bytes: usize) -> Result<(), RecordsError> {
    let codec = Compression::Snappy;
    let io_err = |e: snap::Error| RecordsError::Decompression { codec, source: e.into() };
    let len = snap::raw::decompress_len(block).map_err(io_err)?;
    if out.len().saturating_add(len) > max_bytes {
        return Err(RecordsError::DecompressedTooLarge { codec, limit: max_bytes });
    }
    let start = out.len();
    out.resize(start + len, 0);
    let written = snap::raw::Decoder::new().decompress(block, &mut out[start..]).map_err(io_err)?;
    out.truncate(start + written);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kip390_level_ranges_accept_kafkas_values_only() {
        assert!(
            level_allowed(GZIP_LEVELS, -1) && level_allowed(GZIP_LEVELS, 1) && level_allowed(GZIP_LEVELS, 9)
        );
        assert!(
            !level_allowed(GZIP_LEVELS, 0)
                && !level_allowed(GZIP_LEVELS, 10)
                && !level_allowed(GZIP_LEVELS, -2)
        );
        assert!(level_allowed(LZ4_LEVELS, 17) && !level_allowed(LZ4_LEVELS, 0));
        assert!(level_allowed(ZSTD_LEVELS, -131_072) && level_allowed(ZSTD_LEVELS, 22));
        assert!(!level_allowed(ZSTD_LEVELS, 23) && !level_allowed(ZSTD_LEVELS, i64::from(i32::MIN) - 1));
        assert_eq!(describe_levels(GZIP_LEVELS), "-1 or 1..9");
    }
}
