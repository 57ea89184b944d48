//! How long to wait before trying again: the one backoff rule behind
//! polling a task, resuming an MCP stream and reconnecting to a run's
//! events, each with its own first and longest wait.

use std::time::Duration;

/// The wait before retry `attempt` (from 1): `first`, doubling each time,
/// at most `longest`.
pub(crate) fn backoff(attempt: u32, first: Duration, longest: Duration) -> Duration {
    let doublings = attempt.saturating_sub(1);
    first
        .saturating_mul(2u32.saturating_pow(doublings))
        .min(longest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_up_to_the_longest_and_never_overflow() {
        let (first, longest) = (Duration::from_millis(100), Duration::from_millis(3200));
        let waits: Vec<u64> = (1..=8)
            .map(|n| backoff(n, first, longest).as_millis() as u64)
            .collect();
        assert_eq!(waits, [100, 200, 400, 800, 1600, 3200, 3200, 3200]);
        assert_eq!(backoff(u32::MAX, first, longest), longest);
        assert_eq!(backoff(0, first, longest), first);
    }
}
