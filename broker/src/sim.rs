//! The seeded pseudo-random source every random-operation and fuzz test of the broker
//! shares, so that a failure names a seed and that seed replays it exactly.
//!
//! `STRATA_SIM_SEEDS` replaces a test's seeds: one seed (`17`) or a range (`1..200`,
//! end excluded), to replay a failure or to run longer than CI does.

use std::ops::Range;

/// A small deterministic generator (xorshift64*, seeded through splitmix64 so that
/// neighbouring seeds give unrelated sequences). Not for anything but tests.
pub(crate) struct SimRng(u64);

impl SimRng {
    /// The generator for `seed`; equal seeds give equal sequences.
    pub(crate) fn new(seed: u64) -> SimRng {
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        // xorshift must not start at zero.
        SimRng((z ^ (z >> 31)) | 1)
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n` (`n` > 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "below(0)");
        self.next_u64() % n
    }
}

/// The seeds a test runs: `default`, or what `STRATA_SIM_SEEDS` says.
pub(crate) fn seeds(default: Range<u64>) -> Range<u64> {
    let Ok(spec) = std::env::var("STRATA_SIM_SEEDS") else { return default };
    let parse =
        |s: &str| s.trim().parse::<u64>().unwrap_or_else(|_| panic!("STRATA_SIM_SEEDS={spec}: not a seed"));
    match spec.split_once("..") {
        Some((a, b)) => parse(a)..parse(b),
        None => {
            let one = parse(&spec);
            one..one + 1
        }
    }
}

/// Names the seed when the test panics while it is alive: `let _seed = SeedGuard(seed);`
/// at the top of a seed's run makes any assertion below it say how to replay it.
pub(crate) struct SeedGuard(pub(crate) u64);

impl Drop for SeedGuard {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("failed at seed {0}: STRATA_SIM_SEEDS={0} replays it", self.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_seeds_replay_and_neighbours_differ() {
        let run = |seed| {
            let mut r = SimRng::new(seed);
            (0..8).map(|_| r.next_u64()).collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
        assert_ne!(run(0), vec![0; 8]);
    }

    #[test]
    fn below_stays_in_range_and_covers_it() {
        let mut r = SimRng::new(1);
        let mut seen = [false; 5];
        for _ in 0..1000 {
            let v = r.below(5);
            assert!(v < 5);
            seen[v as usize] = true;
        }
        assert!(seen.iter().all(|s| *s));
    }
}
