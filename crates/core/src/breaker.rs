//! A circuit breaker: stop calling something that keeps failing, and try it
//! again, once, after a cooldown.
//!
//! Closed, it admits every call and counts consecutive failures; the
//! `failure_threshold`th in a row opens it. Open, it refuses calls until
//! `cooldown_ms` have passed; then the next call is admitted as the one
//! probe (half-open). The probe's success closes it; its failure opens it
//! for another cooldown. While a probe is out, other calls are refused —
//! unless the probe has not reported within a cooldown (its caller went
//! away), when the next call becomes the probe instead, so a lost probe
//! never keeps the breaker half-open for good.
//!
//! Pure state: time comes in as milliseconds on any monotonic clock, the
//! same one for every call. Used per coding-agent CLI by the critique pack,
//! and meant for any pack that calls an outside service.

use serde::{Deserialize, Serialize};

/// When a breaker opens and how long it stays open.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BreakerConfig {
    /// Consecutive failures that open the breaker (at least 1).
    pub failure_threshold: u32,
    /// How long it stays open before one probe is let through, in ms.
    pub cooldown_ms: u64,
}

impl Default for BreakerConfig {
    /// Three failures in a row open it for a minute.
    fn default() -> BreakerConfig {
        BreakerConfig {
            failure_threshold: 3,
            cooldown_ms: 60_000,
        }
    }
}

/// What the breaker says to a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Closed: go ahead.
    Allowed,
    /// Half-open: go ahead as the one probe; report how it went.
    Probe,
    /// Open (or a probe is out): do not call; the breaker may admit a
    /// probe in `retry_in_ms`.
    Refused {
        /// Milliseconds until a call may be admitted again.
        retry_in_ms: u64,
    },
}

impl Admission {
    /// Whether the call may go ahead (as a normal call or the probe).
    pub fn is_admitted(self) -> bool {
        !matches!(self, Admission::Refused { .. })
    }
}

/// The three states, by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BreakerState {
    /// Calls go ahead.
    Closed,
    /// Calls are refused until the cooldown ends.
    Open,
    /// The cooldown has ended: the next call (or the one out) is the probe.
    HalfOpen,
}

/// A breaker as a watcher sees it, e.g. in a status tool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BreakerSnapshot {
    /// Its state now.
    pub state: BreakerState,
    /// Failures in a row so far (reset by a success).
    pub consecutive_failures: u32,
    /// While open: milliseconds until a probe may go.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_in_ms: Option<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Inner {
    Closed,
    /// Refusing until `until_ms`.
    Open {
        until_ms: u64,
    },
    /// A probe went out at `since_ms`; `None`: none has yet.
    HalfOpen {
        probe_since_ms: Option<u64>,
    },
}

/// One breaker, for one thing that may fail (a CLI, an endpoint).
///
/// ```
/// use weir_core::{Admission, BreakerConfig, BreakerState, CircuitBreaker};
/// let mut breaker = CircuitBreaker::new(BreakerConfig { failure_threshold: 2, cooldown_ms: 1_000 });
/// assert_eq!(breaker.admit(0), Admission::Allowed);
/// breaker.failed(10);
/// breaker.failed(20); // the second in a row: open
/// assert_eq!(breaker.admit(500), Admission::Refused { retry_in_ms: 520 });
/// assert_eq!(breaker.snapshot(500).state, BreakerState::Open);
/// assert_eq!(breaker.admit(1_020), Admission::Probe); // cooldown over: one probe
/// assert_eq!(breaker.admit(1_030), Admission::Refused { retry_in_ms: 990 }); // the probe is out
/// breaker.succeeded(1_100);
/// assert_eq!(breaker.admit(1_200), Admission::Allowed);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CircuitBreaker {
    config: BreakerConfig,
    inner: Inner,
    failures: u32,
}

impl CircuitBreaker {
    /// A closed breaker; a threshold of 0 counts as 1.
    pub fn new(config: BreakerConfig) -> CircuitBreaker {
        CircuitBreaker {
            config: BreakerConfig {
                failure_threshold: config.failure_threshold.max(1),
                ..config
            },
            inner: Inner::Closed,
            failures: 0,
        }
    }

    /// Its configuration.
    pub fn config(&self) -> BreakerConfig {
        self.config
    }

    /// Asks to make a call at `now_ms`. An admitted call must be followed
    /// by [`succeeded`](CircuitBreaker::succeeded) or
    /// [`failed`](CircuitBreaker::failed); a refused one by neither.
    pub fn admit(&mut self, now_ms: u64) -> Admission {
        let cooldown = self.config.cooldown_ms;
        match self.inner {
            Inner::Closed => Admission::Allowed,
            Inner::Open { until_ms } if now_ms < until_ms => Admission::Refused {
                retry_in_ms: until_ms - now_ms,
            },
            Inner::HalfOpen {
                probe_since_ms: Some(since),
            } if now_ms < since.saturating_add(cooldown) => Admission::Refused {
                retry_in_ms: since.saturating_add(cooldown) - now_ms,
            },
            // The cooldown is over, or the last probe never reported.
            Inner::Open { .. } | Inner::HalfOpen { .. } => {
                self.inner = Inner::HalfOpen {
                    probe_since_ms: Some(now_ms),
                };
                Admission::Probe
            }
        }
    }

    /// An admitted call succeeded: the breaker closes and forgets the
    /// failures.
    pub fn succeeded(&mut self, _now_ms: u64) {
        self.inner = Inner::Closed;
        self.failures = 0;
    }

    /// An admitted call failed at `now_ms`: one more in a row; at the
    /// threshold (or when it was the probe) the breaker opens for a
    /// cooldown from now.
    pub fn failed(&mut self, now_ms: u64) {
        self.failures = self.failures.saturating_add(1);
        let opens = match self.inner {
            Inner::Closed => self.failures >= self.config.failure_threshold,
            // The probe failed, or a call admitted before the breaker
            // opened reports late: either way, open (again) from now.
            Inner::HalfOpen { .. } | Inner::Open { .. } => true,
        };
        if opens {
            self.inner = Inner::Open {
                until_ms: now_ms.saturating_add(self.config.cooldown_ms),
            };
        }
    }

    /// Its state at `now_ms`, without changing it: an open breaker whose
    /// cooldown is over reads as half-open.
    pub fn snapshot(&self, now_ms: u64) -> BreakerSnapshot {
        let (state, retry_in_ms) = match self.inner {
            Inner::Closed => (BreakerState::Closed, None),
            Inner::Open { until_ms } if now_ms < until_ms => {
                (BreakerState::Open, Some(until_ms - now_ms))
            }
            Inner::Open { .. } | Inner::HalfOpen { .. } => (BreakerState::HalfOpen, None),
        };
        BreakerSnapshot {
            state,
            consecutive_failures: self.failures,
            retry_in_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[derive(Clone, Copy, Debug)]
    enum Step {
        /// Time passes, then a call asks; if admitted it reports.
        Call { after_ms: u64, ok: bool },
        /// Time passes, then a call asks and never reports (its caller left).
        Lost { after_ms: u64 },
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            4 => (0u64..400, any::<bool>()).prop_map(|(after_ms, ok)| Step::Call { after_ms, ok }),
            1 => (0u64..400).prop_map(|after_ms| Step::Lost { after_ms }),
        ]
    }

    #[test]
    fn a_lost_probe_is_replaced_after_a_cooldown() {
        let mut breaker = CircuitBreaker::new(BreakerConfig {
            failure_threshold: 1,
            cooldown_ms: 100,
        });
        breaker.failed(0);
        assert_eq!(breaker.admit(100), Admission::Probe); // never reports
        assert_eq!(breaker.admit(150), Admission::Refused { retry_in_ms: 50 });
        assert_eq!(breaker.snapshot(150).state, BreakerState::HalfOpen);
        assert_eq!(breaker.admit(200), Admission::Probe);
        breaker.failed(210);
        assert_eq!(
            breaker.snapshot(250),
            BreakerSnapshot {
                state: BreakerState::Open,
                consecutive_failures: 2,
                retry_in_ms: Some(60)
            }
        );
    }

    #[test]
    fn a_success_resets_the_count() {
        let mut breaker = CircuitBreaker::new(BreakerConfig {
            failure_threshold: 3,
            cooldown_ms: 100,
        });
        for now in [0, 1] {
            breaker.failed(now);
        }
        breaker.succeeded(2);
        for now in [3, 4] {
            breaker.failed(now);
        }
        assert_eq!(breaker.admit(5), Admission::Allowed);
        breaker.failed(5);
        assert!(!breaker.admit(6).is_admitted());
    }

    proptest! {
        /// Whatever happens: closed admits everything; it opens exactly at
        /// the threshold's failure in a row; open refuses until the
        /// cooldown is over; at most one probe is out per cooldown; a
        /// success closes it.
        #[test]
        fn the_breaker_keeps_its_rules(
            threshold in 1u32..5,
            cooldown_ms in 1u64..500,
            steps in proptest::collection::vec(step(), 0..80),
        ) {
            let mut breaker = CircuitBreaker::new(BreakerConfig { failure_threshold: threshold, cooldown_ms });
            let mut now = 0u64;
            // The model: failures in a row, when it opened last, when the last probe went.
            let mut in_a_row = 0u32;
            let mut open_until: Option<u64> = None;
            let mut probe_at: Option<u64> = None;
            for step in steps {
                let (after_ms, outcome) = match step {
                    Step::Call { after_ms, ok } => (after_ms, Some(ok)),
                    Step::Lost { after_ms } => (after_ms, None),
                };
                now += after_ms;
                let before = breaker.snapshot(now);
                let admission = breaker.admit(now);
                match open_until {
                    None => prop_assert_eq!(admission, Admission::Allowed),
                    Some(until) if now < until => {
                        prop_assert_eq!(before.state, BreakerState::Open);
                        prop_assert_eq!(admission, Admission::Refused { retry_in_ms: until - now });
                    }
                    Some(_) => match probe_at {
                        Some(at) if now < at + cooldown_ms => {
                            prop_assert_eq!(admission, Admission::Refused { retry_in_ms: at + cooldown_ms - now })
                        }
                        _ => {
                            prop_assert_eq!(before.state, BreakerState::HalfOpen);
                            prop_assert_eq!(admission, Admission::Probe);
                            probe_at = Some(now);
                        }
                    },
                }
                if !admission.is_admitted() {
                    continue;
                }
                match outcome {
                    Some(true) => {
                        breaker.succeeded(now);
                        in_a_row = 0;
                        open_until = None;
                        probe_at = None;
                    }
                    Some(false) => {
                        breaker.failed(now);
                        in_a_row += 1;
                        if open_until.is_some() || in_a_row >= threshold {
                            open_until = Some(now + cooldown_ms);
                            probe_at = None;
                        }
                    }
                    None => {}
                }
                prop_assert_eq!(breaker.snapshot(now).consecutive_failures, in_a_row);
                prop_assert_eq!(
                    breaker.snapshot(now).state == BreakerState::Closed,
                    open_until.is_none()
                );
            }
        }
    }
}
