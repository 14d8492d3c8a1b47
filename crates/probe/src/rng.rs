//! A small seeded random number generator (SplitMix64), so that every chain can be rebuilt from its seed.
//!
//! Pointer-chase chains need a few million uniform draws and nothing cryptographic; a dependency would add nothing.
//! SplitMix64 passes BigCrush, has a 64-bit state and is what many generators use for seeding.

/// SplitMix64: deterministic for a given seed.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator whose sequence is fixed by `seed`.
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.state)
    }

    /// A uniform value in `0..bound` (Lemire's multiply-shift; the bias is below 2^-32 for the bounds used here).
    pub fn below(&mut self, bound: u64) -> u64 {
        debug_assert!(bound > 0);
        ((u128::from(self.next_u64()) * u128::from(bound)) >> 64) as u64
    }

    /// Shuffles `values` uniformly (Fisher–Yates).
    pub fn shuffle<T>(&mut self, values: &mut [T]) {
        for i in (1..values.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            values.swap(i, j);
        }
    }
}

/// The SplitMix64 finaliser: a good 64-bit hash of `value`.
pub fn mix(value: u64) -> u64 {
    let mut z = value;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shuffles_are_permutations_and_depend_on_the_seed() {
        let mut a: Vec<u32> = (0..1000).collect();
        let mut b = a.clone();
        SplitMix64::new(1).shuffle(&mut a);
        SplitMix64::new(2).shuffle(&mut b);
        assert_ne!(a, b);
        a.sort_unstable();
        assert_eq!(a, (0..1000).collect::<Vec<_>>());
    }

    #[test]
    fn below_stays_below() {
        let mut rng = SplitMix64::new(7);
        let mut seen = [0usize; 5];
        for _ in 0..10_000 {
            seen[rng.below(5) as usize] += 1;
        }
        assert!(seen.iter().all(|&count| count > 1500), "{seen:?}");
    }
}
