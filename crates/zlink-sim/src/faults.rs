//! The faults of a seed: drawn from the seed alone before the run, applied by the driver at
//! their virtual times, and all healed by the end of the workload.
//!
//! - a network partition between two hosts (both ways or one way), healed later, or a drop of
//!   every connection between them (both ends fail at once, as after an RST);
//! - a host crash (its root dropped without a shutdown, as `kill -9`) and its restart;
//! - a Store stall (every operation of one host waits), healed later;
//! - Store errors (every operation of one host fails `Unavailable`), healed later;
//! - a lost Store reply (the next write of one host applies and answers `TimedOut`);
//! - a Store rollback: the Store goes back to a checkpoint taken a little earlier, losing
//!   every acknowledged write since (an asynchronous-replica failover).
//!
//! Besides the faults, a seed draws object moves ([`draw_moves`], from a stream of its own so
//! a seed's faults stay what they were): at a virtual time the owner of one live counter moves
//! it to a named host (`ZLinkHost::relocate_object`), the old owner then following the
//! messages that still reach it (Message Follow). Half of them are drawn just after a repaired
//! partition or a restart, to that host: a caller may not have reconnected to (or discovered)
//! the new owner yet, so the new owner can only answer it back through the old one.

use std::time::Duration;

use zlink_store_conformance::{Fault, LocationOp};

use crate::rng::Rng;

/// One fault action at a virtual time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Action {
    Partition {
        a: usize,
        b: usize,
        one_way: bool,
    },
    Repair {
        a: usize,
        b: usize,
    },
    /// Every connection between `a` and `b` fails now, at both ends.
    DropConnections {
        a: usize,
        b: usize,
    },
    Crash(usize),
    Restart(usize),
    StallStore {
        host: usize,
        ms: u64,
    },
    FailStore(usize),
    HealStore(usize),
    LoseNextWriteReply(usize),
    Checkpoint,
    RollBack,
    /// The owner of one live counter (the `pick`-th of those not on `to`, when applied) moves
    /// it to host `to`.
    Move {
        to: usize,
        pick: u64,
    },
}

/// A fault schedule: actions by virtual time (milliseconds), in order.
pub(crate) type Schedule = Vec<(u64, Action)>;

/// Draws the fault schedule of `seed` for `hosts` hosts within `window` (all healed by its
/// end). Host 0 never crashes (it runs the final probe).
pub(crate) fn draw(seed: u64, hosts: usize, window: Duration, count: usize) -> Schedule {
    let mut rng = Rng::new(seed, 0xfa17);
    let end = u64::try_from(window.as_millis()).unwrap_or(u64::MAX);
    let start = 2_000.min(end);
    let mut out = Vec::new();
    let mut rollback_used = false;
    for _ in 0..count {
        let at = rng.between(start, end.saturating_sub(1_000).max(start));
        let heal = (at + rng.between(200, 6_000)).min(end);
        let host = rng.below(hosts as u64) as usize;
        match rng.below(6) {
            0 => {
                let a = host;
                let b = (a + 1 + rng.below(hosts as u64 - 1) as usize) % hosts;
                if rng.chance(25) {
                    out.push((at, Action::DropConnections { a, b }));
                    continue;
                }
                let one_way = rng.chance(30);
                out.push((at, Action::Partition { a, b, one_way }));
                out.push((heal, Action::Repair { a, b }));
            }
            1 if hosts > 1 => {
                let h = 1 + rng.below(hosts as u64 - 1) as usize;
                out.push((at, Action::Crash(h)));
                out.push((heal, Action::Restart(h)));
            }
            2 => {
                out.push((
                    at,
                    Action::StallStore {
                        host,
                        ms: rng.between(100, 3_000),
                    },
                ));
                out.push((heal, Action::HealStore(host)));
            }
            3 => {
                out.push((at, Action::FailStore(host)));
                out.push((heal, Action::HealStore(host)));
            }
            4 => out.push((at, Action::LoseNextWriteReply(host))),
            _ if !rollback_used => {
                rollback_used = true;
                out.push((at, Action::Checkpoint));
                out.push((at + rng.between(50, 1_500).min(end - at), Action::RollBack));
            }
            _ => out.push((at, Action::LoseNextWriteReply(host))),
        }
    }
    out.sort_by_key(|(at, _)| *at);
    out
}

/// Draws `count` object moves of `seed` for `hosts` hosts within `window`, given the seed's
/// fault schedule `faults`, and merges them into it (by time; a move at the time of a fault
/// comes after it). Half the moves (when `faults` repaired a partition or restarted a host)
/// go to a host just reconnected: within 1.5 s after a `Repair` to one of its two hosts, or
/// after a `Restart` to the restarted host. The others go anywhere at any time. Drawn from a
/// stream of their own: the faults of a seed do not depend on `count`.
pub(crate) fn draw_moves(
    seed: u64,
    hosts: usize,
    window: Duration,
    count: usize,
    faults: Schedule,
) -> Schedule {
    let mut rng = Rng::new(seed, 0x30e5);
    let end = u64::try_from(window.as_millis()).unwrap_or(u64::MAX);
    let start = 2_000.min(end);
    let rejoined: Vec<(u64, usize, usize)> = faults
        .iter()
        .filter_map(|(at, a)| match a {
            Action::Repair { a, b } => Some((*at, *a, *b)),
            Action::Restart(h) => Some((*at, *h, *h)),
            _ => None,
        })
        .collect();
    let mut moves = Vec::new();
    for _ in 0..count {
        let pick = rng.next_u64();
        let (at, to) = if !rejoined.is_empty() && rng.chance(50) {
            let (at, a, b) = rejoined[rng.below(rejoined.len() as u64) as usize];
            let to = if rng.chance(50) { a } else { b };
            (at + rng.between(0, 1_500), to)
        } else {
            (
                rng.between(start, end.saturating_sub(1_000).max(start)),
                rng.below(hosts as u64) as usize,
            )
        };
        moves.push((at.min(end), Action::Move { to, pick }));
    }
    let mut out = faults;
    out.extend(moves);
    // Stable: a move at the time of a fault stays after it.
    out.sort_by_key(|(at, _)| *at);
    out
}

/// What a host's store wrapper does for a fault action (the network and host actions are the
/// driver's).
pub(crate) fn store_fault(
    store: &zlink_store_conformance::FaultyLocationStore<zlink_store_spi::MemoryLocationStore>,
    action: &Action,
) {
    match action {
        Action::StallStore { ms, .. } => {
            store.set_delay(LocationOp::ALL, Some(Duration::from_millis(*ms)));
        }
        Action::FailStore(_) => store.set_fault(LocationOp::ALL, Fault::UNAVAILABLE),
        Action::HealStore(_) => store.heal(),
        Action::LoseNextWriteReply(_) => store.fail_next([LocationOp::Write], 1, Fault::LOSE_REPLY),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{Action, draw, draw_moves};

    #[test]
    fn a_schedule_is_fixed_by_its_seed_and_heals_what_it_breaks() {
        let a = draw(42, 3, Duration::from_secs(20), 6);
        assert_eq!(a, draw(42, 3, Duration::from_secs(20), 6));
        assert_ne!(a, draw(43, 3, Duration::from_secs(20), 6));
        let crashes = a
            .iter()
            .filter(|(_, x)| matches!(x, Action::Crash(_)))
            .count();
        let restarts = a
            .iter()
            .filter(|(_, x)| matches!(x, Action::Restart(_)))
            .count();
        assert_eq!(crashes, restarts);
        assert!(a.iter().all(|(_, x)| !matches!(x, Action::Crash(0))));
        assert!(a.iter().all(|(at, _)| *at <= 20_000));
    }

    #[test]
    fn moves_are_fixed_by_the_seed_keep_the_faults_and_follow_a_rejoin() {
        let window = Duration::from_secs(20);
        for seed in 0..200 {
            let faults = draw(seed, 3, window, 4);
            let all = draw_moves(seed, 3, window, 4, faults.clone());
            assert_eq!(all, draw_moves(seed, 3, window, 4, faults.clone()));
            let kept: Vec<_> = all
                .iter()
                .filter(|(_, a)| !matches!(a, Action::Move { .. }))
                .cloned()
                .collect();
            assert_eq!(kept, faults, "the faults are unchanged, in order");
            assert!(all.windows(2).all(|w| w[0].0 <= w[1].0), "by time");
            let moves: Vec<_> = all
                .iter()
                .filter_map(|(at, a)| match a {
                    Action::Move { to, .. } => Some((*at, *to)),
                    _ => None,
                })
                .collect();
            assert_eq!(moves.len(), 4);
            assert!(moves.iter().all(|(at, to)| *at <= 20_000 && *to < 3));
            assert_eq!(draw_moves(seed, 3, window, 0, faults.clone()), faults);
        }
        // Some move goes to a host within 1.5 s after its partition was repaired or it
        // restarted.
        let after_rejoin = (0..200).any(|seed| {
            let all = draw_moves(seed, 3, window, 4, draw(seed, 3, window, 4));
            all.iter().any(|(at, a)| match a {
                Action::Move { to, .. } => all.iter().any(|(r, f)| {
                    r <= at
                        && at - r <= 1_500
                        && match f {
                            Action::Repair { a, b } => a == to || b == to,
                            Action::Restart(h) => h == to,
                            _ => false,
                        }
                }),
                _ => false,
            })
        });
        assert!(after_rejoin);
    }
}
