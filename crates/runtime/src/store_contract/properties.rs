//! Property tests of the run invariants under random scripts, cancels,
//! timeouts, panics and subscribers that reconnect and lag, on one store.

use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{TestCaseResult, TestRunner, contextualize_config};
use serde_json::json;
use weir_core::{EventKind, RunState};

use super::StoreFactory;
use super::support::*;
use crate::{RunOptions, Scheduler, SchedulerConfig};

/// Proptest cases per property: 1,000 unless `PROPTEST_CASES` says otherwise.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1000)
}

/// Checks `property` on values of `strategy` as `proptest!` would: the
/// `PROPTEST_*` variables apply, and failures are kept beside
/// `source_file` (under `proptest-regressions/`) and replayed first.
fn check<S: Strategy>(
    name: &'static str,
    source_file: &'static str,
    strategy: S,
    property: impl Fn(S::Value) -> TestCaseResult,
) {
    let mut runner = TestRunner::new(contextualize_config(ProptestConfig {
        cases: cases(),
        source_file: Some(source_file),
        test_name: Some(name),
        ..ProptestConfig::default()
    }));
    if let Err(error) = runner.run(&strategy, property) {
        panic!("{error}\n{runner}");
    }
}

/// A scheduled run of a scripted tool keeps the log's invariants whatever
/// it does (returns, fails, panics, hangs into its timeout, is cancelled,
/// emits from tasks that outlive it), and every subscriber, live or late,
/// reconnecting or lagging, reads exactly the stored log from where it
/// started. On a store that [keeps virtual time](StoreFactory::keeps_virtual_time),
/// the ending is also the one the script's timing makes certain.
///
/// `source_file` is the calling test's `file!()`: where proptest keeps the
/// seeds of failures.
pub fn runs_keep_their_invariants(stores: &impl StoreFactory, source_file: &'static str) {
    check("runs_keep_their_invariants", source_file, case(), |case| {
        play(case, stores)
    });
}

/// At the store level: random batches appended while a subscriber from a
/// random seq k follows; it gets exactly the events from k on.
///
/// `source_file` is as for [`runs_keep_their_invariants`].
pub fn subscribe_from_any_k_yields_exactly_k_onwards(
    stores: &impl StoreFactory,
    source_file: &'static str,
) {
    let batches = prop::collection::vec(prop::collection::vec(any::<u8>(), 1..20), 0..10);
    check(
        "subscribe_from_any_k_yields_exactly_k_onwards",
        source_file,
        (batches, 0u64..120),
        |(batches, from)| {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let (log, _guard) = stores.make(2);
                let run = run_id("k");
                let mut next = 0;
                let mut all = Vec::new();
                let mut first = vec![started("t")];
                for batch in batches {
                    first.extend(batch.into_iter().map(|s| body_event(s, next)));
                    let appended = events(&run, next, std::mem::take(&mut first));
                    next += appended.len() as u64;
                    all.extend(appended.iter().cloned());
                    log.append(appended.into()).await.unwrap();
                }
                if !first.is_empty() {
                    let appended = events(&run, next, first);
                    next += appended.len() as u64;
                    all.extend(appended.iter().cloned());
                    log.append(appended.into()).await.unwrap();
                }
                let end = events(
                    &run,
                    next,
                    vec![EventKind::Canceled(weir_core::Canceled {
                        reason: "end".into(),
                    })],
                );
                let live = {
                    let log = log.clone();
                    let run = run.clone();
                    tokio::spawn(
                        async move { follow(&log, &run, from, None, Duration::ZERO).await },
                    )
                };
                all.extend(end.iter().cloned());
                log.append(end.into()).await.unwrap();
                let got = live.await.unwrap();
                prop_assert_eq!(&got[..], &all[(from as usize).min(all.len())..]);
                Ok(())
            })
        },
    );
}

#[derive(Clone, Debug)]
struct Watcher {
    start_after_ms: u64,
    from: u64,
    reconnect_every: Option<usize>,
    pause_ms: u64,
}

#[derive(Clone, Debug)]
struct Case {
    steps: Vec<Step>,
    end: End,
    timeout_ms: u64,
    cancel_at_ms: Option<u64>,
    watchers: Vec<Watcher>,
    live_capacity: usize,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => any::<u8>().prop_map(Step::Emit),
        3 => (0u64..20).prop_map(Step::Sleep),
        1 => (1u64..6, 0u64..40).prop_map(|(count, delay_ms)| Step::Spawn { count, delay_ms }),
        1 => Just(Step::Flush),
        1 => Just(Step::Artifact),
    ]
}

fn case() -> impl Strategy<Value = Case> {
    let end = prop_oneof![
        Just(End::Return),
        Just(End::Fail),
        Just(End::Panic),
        Just(End::Hang)
    ];
    let watcher = (0u64..60, 0u64..12, prop::option::of(1usize..6), 0u64..4).prop_map(
        |(start_after_ms, from, reconnect_every, pause_ms)| Watcher {
            start_after_ms,
            from,
            reconnect_every,
            pause_ms,
        },
    );
    (
        prop::collection::vec(step(), 0..40),
        end,
        1u64..150,
        prop::option::of(0u64..150),
        prop::collection::vec(watcher, 0..4),
        1usize..4,
    )
        .prop_map(
            |(steps, end, timeout_ms, cancel_at_ms, watchers, live_capacity)| Case {
                steps,
                end,
                timeout_ms,
                cancel_at_ms,
                watchers,
                live_capacity,
            },
        )
}

/// How the run must end when the script's timing leaves no doubt, given the
/// script's own duration (virtual time), the timeout and the cancel.
fn certain_ending(case: &Case) -> Option<&'static str> {
    let duration: u64 = case
        .steps
        .iter()
        .map(|step| if let Step::Sleep(ms) = step { *ms } else { 0 })
        .sum();
    let natural = match case.end {
        End::Return => Some("completed"),
        End::Fail => Some("failed:tool_error"),
        End::Panic => Some("failed:panicked"),
        End::Hang => None,
    };
    let cancel = case.cancel_at_ms.unwrap_or(u64::MAX);
    let timeout = case.timeout_ms;
    let natural_at = if natural.is_some() {
        duration
    } else {
        u64::MAX
    };
    // Each contender must win by a clear margin to be certain.
    let margin = 2;
    if natural_at.saturating_add(margin) < timeout && natural_at.saturating_add(margin) < cancel {
        natural
    } else if timeout.saturating_add(margin) < cancel && timeout.saturating_add(margin) < natural_at
    {
        Some("failed:timeout")
    } else if cancel.saturating_add(margin) < timeout && cancel.saturating_add(margin) < natural_at
    {
        Some("canceled")
    } else {
        None
    }
}

fn play(case: Case, stores: &impl StoreFactory) -> Result<(), TestCaseError> {
    quiet_scripted_panics();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    runtime.block_on(async move {
        let (log, _guard) = stores.make(case.live_capacity);
        let tool = Arc::new(Scripted {
            name: "scripted".into(),
            steps: case.steps.clone(),
            end: case.end,
        });
        let scheduler = Scheduler::start(
            log.clone(),
            vec![tool],
            SchedulerConfig {
                retention: None,
                ..SchedulerConfig::default()
            },
        )
        .await
        .unwrap();
        let handle = scheduler
            .submit(
                "scripted",
                json!({}),
                RunOptions {
                    timeout: Some(Duration::from_millis(case.timeout_ms)),
                    ..RunOptions::default()
                },
            )
            .await
            .unwrap();
        let run = handle.run_id().clone();
        if let Some(at) = case.cancel_at_ms {
            let (scheduler, run) = (scheduler.clone(), run.clone());
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(at)).await;
                scheduler.cancel(&run, "test cancel");
            });
        }
        let watchers: Vec<_> = case
            .watchers
            .iter()
            .cloned()
            .map(|watcher| {
                let (log, run) = (log.clone(), run.clone());
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(watcher.start_after_ms)).await;
                    let got = follow(
                        &log,
                        &run,
                        watcher.from,
                        watcher.reconnect_every,
                        Duration::from_millis(watcher.pause_ms),
                    )
                    .await;
                    (watcher.from, got)
                })
            })
            .collect();

        let terminal = handle
            .finished()
            .await
            .expect("a terminal event was written");
        let full = read_all(&*log, &run).await;
        let state = check_log(&full);
        prop_assert_eq!(full.last().unwrap(), &terminal);
        let summary = log.get_run(&run).await.unwrap().unwrap();
        prop_assert_eq!(summary.state, state);
        prop_assert_eq!(summary.events, full.len() as u64);
        if stores.keeps_virtual_time() {
            if let Some(expected) = certain_ending(&case) {
                prop_assert_eq!(ending(&terminal), expected, "{:?}", case);
            }
        } else {
            prop_assert!(matches!(
                state,
                RunState::Completed | RunState::Failed | RunState::Canceled
            ));
        }

        // Live watchers, with disconnects, lag and resumes, saw log[from..].
        for watcher in watchers {
            let (from, got) = watcher.await.unwrap();
            let expected = &full[(from as usize).min(full.len())..];
            prop_assert_eq!(&got[..], expected, "watcher from {}", from);
        }
        // Replays from every position after the fact.
        for from in 0..=full.len() + 1 {
            let got = follow(&log, &run, from as u64, None, Duration::ZERO).await;
            prop_assert_eq!(&got[..], &full[from.min(full.len())..]);
        }
        // Nothing the tool left behind can extend the log after its end.
        tokio::time::sleep(Duration::from_millis(100)).await;
        prop_assert_eq!(read_all(&*log, &run).await, full);
        // Every channel was released with its last subscriber.
        prop_assert_eq!(log.live().followed_runs(), 0);
        Ok(())
    })
}
