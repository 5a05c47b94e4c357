//! Where the runtime's randomness, wall clock and hash-map order come from: one seam a
//! deterministic simulation replaces.
//!
//! Outside a simulation (on every thread that did not enter one) every function here is the
//! ordinary source: [`uuid_v4`] and [`random_u128`] draw
//! from the operating system (`uuid`'s v4 generator), [`system_time`] is
//! [`SystemTime::now`], and [`HashState`] keys each map with a fresh [`RandomState`], exactly
//! as `std::collections::HashMap::new` does.
//!
//! Inside a simulation ([`Simulation::enter`] on the calling thread, which is where turmoil
//! runs every simulated host) the same calls draw from a generator
//! seeded by the run's seed, read the simulation's wall clock, and hash with fixed keys, so
//! a seed replays byte for byte: the same ids, the same generations, the same iteration
//! order of every map.
//!
//! The runtime crates use [`HashMap`] and [`HashSet`] from here instead of the standard
//! library's, and never call `Uuid::new_v4` or `SystemTime::now` themselves.

use std::collections::hash_map::{DefaultHasher, RandomState};
use std::hash::BuildHasher;
use std::time::SystemTime;

/// A hash map keyed by [`HashState`] (build it with `HashMap::default()`).
pub type HashMap<K, V> = std::collections::HashMap<K, V, HashState>;

/// A hash set keyed by [`HashState`] (build it with `HashSet::default()`).
pub type HashSet<T> = std::collections::HashSet<T, HashState>;

/// The hasher builder of [`HashMap`] and [`HashSet`]: a fresh [`RandomState`] (random SipHash
/// keys, as the standard library's maps have), or fixed keys inside a simulation.
#[derive(Debug, Clone)]
pub struct HashState(Option<RandomState>);

impl Default for HashState {
    fn default() -> Self {
        if simulated() {
            HashState(None)
        } else {
            HashState(Some(RandomState::new()))
        }
    }
}

impl BuildHasher for HashState {
    type Hasher = DefaultHasher;

    fn build_hasher(&self) -> DefaultHasher {
        match &self.0 {
            Some(random) => random.build_hasher(),
            None => DefaultHasher::new(),
        }
    }
}

/// A random version-4 UUID.
pub fn uuid_v4() -> uuid::Uuid {
    match seeded_u128() {
        Some(bits) => uuid::Builder::from_random_bytes(bits.to_be_bytes()).into_uuid(),
        None => uuid::Uuid::new_v4(),
    }
}

/// 128 random bits (those of a version-4 UUID outside a simulation: 122 of them random).
///
/// For ids and jitter that only have to be unique and hard to guess inside the runtime.
pub fn random_u128() -> u128 {
    seeded_u128().unwrap_or_else(|| uuid::Uuid::new_v4().as_u128())
}

/// The host's wall clock.
pub fn system_time() -> SystemTime {
    simulated_time().unwrap_or_else(SystemTime::now)
}

pub use simulation::{Simulation, SimulationGuard};

use simulation::{seeded_u128, simulated, simulated_time};

mod simulation {
    use std::cell::RefCell;
    use std::fmt;
    use std::time::SystemTime;

    /// The simulation state of one thread.
    struct Seeded {
        /// SplitMix64's state.
        state: u64,
        wall_clock: Box<dyn Fn() -> SystemTime>,
    }

    thread_local! {
        static SEEDED: RefCell<Option<Seeded>> = const { RefCell::new(None) };
    }

    /// Entering a deterministic simulation on the calling thread.
    #[derive(Debug, Clone, Copy)]
    #[non_exhaustive]
    pub struct Simulation;

    impl Simulation {
        /// From now until the guard drops, this thread's randomness comes from `seed`, its
        /// wall clock is `wall_clock`, and maps built on it hash with fixed keys.
        ///
        /// Only for a simulation that runs every simulated host on this one thread: ids
        /// drawn from one seed repeat in every process that enters it, so a real host must
        /// never run under it.
        pub fn enter(seed: u64, wall_clock: impl Fn() -> SystemTime + 'static) -> SimulationGuard {
            SEEDED.with(|s| {
                *s.borrow_mut() = Some(Seeded {
                    state: seed,
                    wall_clock: Box::new(wall_clock),
                });
            });
            SimulationGuard {
                _not_send: std::marker::PhantomData,
            }
        }
    }

    /// Leaves the simulation when dropped (on the thread that entered it).
    pub struct SimulationGuard {
        _not_send: std::marker::PhantomData<*const ()>,
    }

    impl fmt::Debug for SimulationGuard {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("SimulationGuard")
        }
    }

    impl Drop for SimulationGuard {
        fn drop(&mut self) {
            SEEDED.with(|s| *s.borrow_mut() = None);
        }
    }

    pub(super) fn simulated() -> bool {
        SEEDED.with(|s| s.borrow().is_some())
    }

    /// SplitMix64 (Steele, Lea, Flood 2014): a tiny generator whose whole state is one word.
    fn next(state: &mut u64) -> u64 {
        *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub(super) fn seeded_u128() -> Option<u128> {
        SEEDED.with(|s| {
            s.borrow_mut().as_mut().map(|seeded| {
                let hi = next(&mut seeded.state);
                let lo = next(&mut seeded.state);
                (u128::from(hi) << 64) | u128::from(lo)
            })
        })
    }

    pub(super) fn simulated_time() -> Option<SystemTime> {
        SEEDED.with(|s| s.borrow().as_ref().map(|seeded| (seeded.wall_clock)()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outside_a_simulation_ids_differ_and_maps_are_randomly_keyed() {
        assert_ne!(uuid_v4(), uuid_v4());
        assert_eq!(uuid_v4().get_version_num(), 4);
        let a = HashState::default().hash_one(7u64);
        let b = HashState::default().hash_one(7u64);
        assert_ne!(a, b, "two maps share no keys");
    }

    #[test]
    fn inside_a_simulation_a_seed_repeats_its_ids_clock_and_map_order() {
        use std::time::{Duration, UNIX_EPOCH};
        let at = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let draw = || {
            let _guard = Simulation::enter(42, move || at);
            let ids = (uuid_v4(), random_u128());
            let map: HashMap<u32, ()> = (0..64).map(|i| (i, ())).collect();
            (ids, map.keys().copied().collect::<Vec<_>>(), system_time())
        };
        let (first, second) = (draw(), draw());
        assert_eq!(first, second);
        assert_eq!(first.0.0.get_version_num(), 4);
        assert_eq!(first.2, at);
        assert_ne!(
            uuid_v4(),
            first.0.0,
            "the guard dropped: OS randomness again"
        );
    }
}
