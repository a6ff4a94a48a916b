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
