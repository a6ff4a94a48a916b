//! CRC-32C (Castagnoli), the checksum of record batches v2 and of the producer-state
//! snapshot files.
//!
//! One place computes it so the implementation can change without touching callers:
//! it is a sixth of the broker's produce CPU. `crc-fast` measured 1.2x (16 KiB) to
//! 1.35x (128 KiB) the `crc32c` crate's three-way `crc32` instruction loop on the
//! development machine (AMD EPYC, no VPCLMULQDQ), and its folding-only kernel another
//! 1.3x there (see [`Kernel`]).

use crc_fast::{CrcAlgorithm, CrcParams, Digest};
use std::sync::OnceLock;
use std::time::Instant;

/// Below this length the fused kernel is used whatever the CPU: the folding one has a
/// fixed cost that dominates small inputs (200 bytes: 4.9 against 2.7 GB/s here).
const FOLDING_MIN_LEN: usize = 512;

/// Which of `crc-fast`'s two CRC-32C kernels this CPU runs faster.
///
/// `crc-fast` computes CRC-32C with a kernel that mixes the `crc32` instruction with
/// PCLMULQDQ folding; given CRC-32C as custom parameters, it folds with PCLMULQDQ
/// alone. Which is faster depends on the CPU's `crc32` throughput: on the development
/// machine (AMD EPYC, one `crc32` per 3 cycles) folding alone measured 9.6-9.9 GB/s
/// against 7.1-7.6 for 16-128 KiB; on CPUs with a `crc32` per cycle the fused kernel
/// wins. Both give the same checksum, so the choice is made once by timing them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kernel {
    Fused,
    Folding,
}

/// CRC-32C as custom parameters, which `crc-fast` computes by folding alone.
fn folding_params() -> CrcParams {
    static PARAMS: OnceLock<CrcParams> = OnceLock::new();
    *PARAMS.get_or_init(|| {
        CrcParams::new("CRC-32/ISCSI", 32, 0x1EDC_6F41, 0xFFFF_FFFF, true, 0xFFFF_FFFF, 0xE306_9283)
    })
}

fn kernel() -> Kernel {
    static KERNEL: OnceLock<Kernel> = OnceLock::new();
    *KERNEL.get_or_init(calibrate)
}

/// Times both kernels on 16 KiB, back to back, in 9 rounds, and keeps the folding one
/// only if it is clearly faster (by 10 %) in most rounds: a round disturbed by
/// preemption or another process slows both of its timings alike, and noise cannot
/// move the choice away from the crate's default. About 150 microseconds, once.
fn calibrate() -> Kernel {
    const ROUNDS: usize = 9;
    let data: Vec<u8> = (0..16_384u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    let time = |kernel: Kernel| {
        let start = Instant::now();
        for _ in 0..4 {
            std::hint::black_box(with_kernel(kernel, std::hint::black_box(&data)));
        }
        start.elapsed()
    };
    // Warm up: the crate's CPU feature detection and the parameters' folding keys are
    // computed on first use.
    time(Kernel::Fused);
    time(Kernel::Folding);
    let folding_wins = (0..ROUNDS)
        .filter(|_| {
            let fused = time(Kernel::Fused);
            let folding = time(Kernel::Folding);
            folding.as_nanos() * 10 < fused.as_nanos() * 9
        })
        .count();
    if folding_wins > ROUNDS / 2 {
        Kernel::Folding
    } else {
        Kernel::Fused
    }
}

fn with_kernel(kernel: Kernel, data: &[u8]) -> u32 {
    match kernel {
        Kernel::Folding if data.len() >= FOLDING_MIN_LEN => {
            crc_fast::checksum_with_params(folding_params(), data) as u32
        }
        _ => crc_fast::checksum(CrcAlgorithm::Crc32Iscsi, data) as u32,
    }
}

/// The CRC-32C of `data`.
pub fn crc32c(data: &[u8]) -> u32 {
    if data.len() < FOLDING_MIN_LEN {
        return with_kernel(Kernel::Fused, data);
    }
    with_kernel(kernel(), data)
}

/// The CRC-32C of `a` followed by `b`, from the CRC of each and the length of `b`
/// (a batch header's CRC joined to its records', which were checksummed earlier).
///
/// `crc(a ++ b) = crc(a) * x^(8 len(b)) + crc(b)` over GF(2) modulo the polynomial
/// (the pre- and post-inversion cancel out): the power of x is built from a table of
/// `x^(2^k)`, so this costs about 2 log2(len b) small carry-less products, a fraction
/// of a microsecond. `crc-fast`'s own combine took 32 microseconds for 128 KiB here.
pub fn crc32c_combine(crc_a: u32, crc_b: u32, len_b: usize) -> u32 {
    mul_mod_p(x_pow_8n(len_b as u64), crc_a) ^ crc_b
}

/// The reflected CRC-32C polynomial.
const POLY: u32 = 0x82F6_3B78;

/// `a * b` modulo the polynomial, both in the reflected bit order (bit 31 is x^0).
fn mul_mod_p(a: u32, mut b: u32) -> u32 {
    let mut product = 0;
    let mut bit = 1u32 << 31;
    while bit != 0 {
        if a & bit != 0 {
            product ^= b;
        }
        bit >>= 1;
        b = if b & 1 != 0 { (b >> 1) ^ POLY } else { b >> 1 };
    }
    product
}

/// `x^(2^k)` modulo the polynomial for k in 0..64.
fn x_pow_2k() -> &'static [u32; 64] {
    static TABLE: OnceLock<[u32; 64]> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table = [0u32; 64];
        let mut p = 1u32 << 30; // x^1
        for t in table.iter_mut() {
            *t = p;
            p = mul_mod_p(p, p);
        }
        table
    })
}

/// `x^(8 n)` modulo the polynomial: the shift of a CRC past `n` bytes.
fn x_pow_8n(mut n: u64) -> u32 {
    let table = x_pow_2k();
    let mut p = 1u32 << 31; // x^0
    let mut k = 3; // 8 n = n * 2^3
    while n != 0 && k < 64 {
        if n & 1 != 0 {
            p = mul_mod_p(table[k], p);
        }
        n >>= 1;
        k += 1;
    }
    p
}

/// A CRC-32C computed over data that arrives in pieces (recovery streams a batch from
/// disk in chunks).
#[derive(Clone)]
pub struct Crc32c(Digest);

impl Default for Crc32c {
    fn default() -> Self {
        Crc32c::with_kernel(kernel())
    }
}

impl std::fmt::Debug for Crc32c {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Crc32c").finish_non_exhaustive()
    }
}

impl Crc32c {
    fn with_kernel(kernel: Kernel) -> Crc32c {
        match kernel {
            Kernel::Fused => Crc32c(Digest::new(CrcAlgorithm::Crc32Iscsi)),
            Kernel::Folding => Crc32c(Digest::new_with_params(folding_params())),
        }
    }

    /// Feeds the next piece.
    pub fn update(&mut self, data: &[u8]) {
        self.0.update(data);
    }

    /// The CRC-32C of everything fed so far.
    pub fn finish(&self) -> u32 {
        self.0.finalize() as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LENGTHS: &[usize] =
        &[0, 1, 7, 8, 15, 63, 64, 255, 256, 511, 512, 513, 1000, 1023, 4096, 16_383, 16_384, 70_000];

    fn data() -> Vec<u8> {
        (0..70_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect()
    }

    #[test]
    fn matches_the_castagnoli_check_value_and_the_crc32c_crate() {
        // The standard check value of CRC-32C over "123456789".
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        let data = data();
        for &len in LENGTHS {
            assert_eq!(crc32c(&data[..len]), crc32c::crc32c(&data[..len]), "length {len}");
        }
    }

    #[test]
    fn both_kernels_agree_with_the_crc32c_crate_at_every_length_and_alignment() {
        let data = data();
        for kernel in [Kernel::Fused, Kernel::Folding] {
            for &len in LENGTHS {
                for start in [0, 1, 3] {
                    let piece = &data[start..start + len.min(data.len() - start)];
                    assert_eq!(with_kernel(kernel, piece), crc32c::crc32c(piece), "{kernel:?}, length {len}");
                }
            }
        }
    }

    #[test]
    fn combined_crcs_equal_the_crc_of_the_whole() {
        let data = data();
        for split in [0, 1, 40, 512, 16_384, 69_999, 70_000] {
            let (a, b) = data.split_at(split);
            assert_eq!(crc32c_combine(crc32c(a), crc32c(b), b.len()), crc32c(&data), "split at {split}");
        }
    }

    #[test]
    fn pieces_give_the_same_crc_as_the_whole_with_either_kernel() {
        let data = data();
        for kernel in [Kernel::Fused, Kernel::Folding] {
            for piece_len in [1, 777, 4096] {
                let mut c = Crc32c::with_kernel(kernel);
                for piece in data.chunks(piece_len) {
                    c.update(piece);
                }
                assert_eq!(c.finish(), crc32c::crc32c(&data), "{kernel:?}, pieces of {piece_len}");
            }
        }
    }
}
