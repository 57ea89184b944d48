//! The checks every store passes alike, one function each; a store's test
//! binary runs them all through [`store_contract_tests!`](crate::store_contract_tests).
//! Each builds the runtime it needs, so the test that calls it is a plain
//! `#[test]`.

use std::future::Future;
use std::time::Duration;

use serde_json::json;
use weir_core::{
    Canceled, Completed, EventKind, InputEnded, InputKind, InputOutcome, InputRequired, RunState,
    Started, Violation,
};

use super::StoreFactory;
use super::support::*;
use crate::LogError;
use crate::log::{NewRun, RunFilter, RunSummary};

fn done() -> EventKind {
    EventKind::Completed(Completed::default())
}

/// Runs a check as `#[tokio::test]` would: on a current-thread runtime.
fn on_one_thread(check: impl Future<Output = ()>) {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
        .block_on(check);
}

/// Runs a check on two worker threads, so a producer and its subscriber
/// really run at the same time.
fn on_two_threads(check: impl Future<Output = ()>) {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
        .block_on(check);
}

/// An append that would break the log (no `started`, a seq gap, a second
/// `started`, anything after the terminal event) is refused with its
/// violation, all or nothing; the summary follows the appends taken.
pub fn appends_that_break_the_log_are_refused_and_change_nothing(stores: &impl StoreFactory) {
    on_one_thread(async {
        let (log, _guard) = stores.make(16);
        let run = run_id("r");
        let not_started = log
            .append(events(&run, 0, vec![body_event(0, 0)]).into())
            .await;
        assert!(
            matches!(not_started, Err(LogError::NotStarted(_))),
            "{not_started:?}"
        );

        log.append(events(&run, 0, vec![started("t"), body_event(1, 1)]).into())
            .await
            .unwrap();
        let gap = log
            .append(events(&run, 3, vec![body_event(1, 3)]).into())
            .await;
        assert!(
            matches!(
                gap,
                Err(LogError::Invalid {
                    violation: Violation::SeqGap {
                        expected: 2,
                        got: 3
                    },
                    ..
                })
            ),
            "{gap:?}"
        );
        let restart = log.append(events(&run, 2, vec![started("t")]).into()).await;
        assert!(matches!(
            restart,
            Err(LogError::Invalid {
                violation: Violation::BadStart { .. },
                ..
            })
        ));
        // All or nothing: a valid event followed by an invalid one writes neither.
        let mut mixed = events(&run, 2, vec![body_event(2, 2)]);
        mixed.extend(events(&run, 9, vec![body_event(2, 9)]));
        assert!(log.append(mixed.into()).await.is_err());
        assert_eq!(read_all(&*log, &run).await.len(), 2);

        log.append(events(&run, 2, vec![done()]).into())
            .await
            .unwrap();
        let after = log
            .append(events(&run, 3, vec![body_event(0, 3)]).into())
            .await;
        assert!(matches!(
            after,
            Err(LogError::Invalid {
                violation: Violation::AfterTerminal { .. },
                ..
            })
        ));
        let summary = log.get_run(&run).await.unwrap().unwrap();
        assert_eq!((summary.state, summary.events), (RunState::Completed, 3));
        assert!(summary.finished_ts.is_some());
    });
}

/// A run that waits for its caller's answer is `input_required` in its
/// summary and in a listing by state, and working again when the wait ends;
/// a wait that begins twice, or ends without beginning, is refused.
pub fn waits_for_input_are_kept_in_the_summary(stores: &impl StoreFactory) {
    on_one_thread(async {
        let (log, _guard) = stores.make(16);
        let run = run_id("asks");
        let asked = || {
            EventKind::InputRequired(InputRequired {
                input: InputKind::Sampling,
                message: None,
                timeout_ms: 60_000,
            })
        };
        let answered = || {
            EventKind::InputEnded(InputEnded {
                outcome: InputOutcome::Answered,
            })
        };
        log.append(events(&run, 0, vec![started("t"), asked()]).into())
            .await
            .unwrap();
        let state = |summary: Option<RunSummary>| summary.map(|run| run.state);
        assert_eq!(
            state(log.get_run(&run).await.unwrap()),
            Some(RunState::InputRequired)
        );
        let waiting = RunFilter {
            states: vec![RunState::InputRequired],
            ..RunFilter::default()
        };
        let listed = log.list_runs(&waiting).await.unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].run_id, run);
        let twice = log.append(events(&run, 2, vec![asked()]).into()).await;
        assert!(
            matches!(
                twice,
                Err(LogError::Invalid {
                    violation: Violation::InputOutOfTurn { .. },
                    ..
                })
            ),
            "{twice:?}"
        );
        log.append(events(&run, 2, vec![answered()]).into())
            .await
            .unwrap();
        assert_eq!(
            state(log.get_run(&run).await.unwrap()),
            Some(RunState::Working)
        );
        let unasked = log.append(events(&run, 3, vec![answered()]).into()).await;
        assert!(unasked.is_err(), "{unasked:?}");
        log.append(events(&run, 3, vec![asked(), done()]).into())
            .await
            .unwrap();
        let summary = log.get_run(&run).await.unwrap().unwrap();
        assert_eq!((summary.state, summary.events), (RunState::Completed, 5));
    });
}

/// Reads return exactly the asked-for page, whatever the batches appended;
/// reading an unknown run is an error.
pub fn reads_page_through_a_log(stores: &impl StoreFactory) {
    on_one_thread(async {
        let (log, _guard) = stores.make(16);
        let run = run_id("p");
        let mut kinds = vec![started("t")];
        kinds.extend((1..100).map(|i| body_event(i as u8, i)));
        // Appended in uneven batches, read in other uneven pages.
        let all = events(&run, 0, kinds);
        for chunk in all.chunks(7) {
            log.append(chunk.to_vec().into()).await.unwrap();
        }
        for (from, limit) in [(0, 5), (3, 11), (50, 1000), (99, 1), (100, 10), (200, 1)] {
            let page = log.read(&run, from, limit).await.unwrap();
            let expected: Vec<_> = all
                .iter()
                .skip(from as usize)
                .take(limit)
                .cloned()
                .collect();
            assert_eq!(page, expected, "from {from} limit {limit}");
        }
        let unknown = log.read(&run_id("nope"), 0, 10).await;
        assert!(matches!(unknown, Err(LogError::UnknownRun(_))));
    });
}

/// A read or a subscription from a seq past the end of a log — up to the
/// largest seq there is — finds nothing: positions never wrap (a store that
/// turns 2^63 into a negative bound would return the whole log).
pub fn reads_past_the_end_find_nothing(stores: &impl StoreFactory) {
    on_one_thread(async {
        let (log, _guard) = stores.make(16);
        let run = run_id("far");
        log.append(events(&run, 0, vec![started("t"), body_event(1, 1), done()]).into())
            .await
            .unwrap();
        for from in [3, 1 << 32, (1 << 63) - 1, 1 << 63, u64::MAX - 1, u64::MAX] {
            let page = log.read(&run, from, 10).await.unwrap();
            assert!(page.is_empty(), "read from {from}: {page:?}");
            let mut subscription = log.subscribe_from(&run, from);
            let next = tokio::time::timeout(Duration::from_secs(5), subscription.next())
                .await
                .unwrap_or_else(|_| panic!("a subscription from {from} of a finished run hangs"));
            assert!(next.is_none(), "subscription from {from}: {next:?}");
        }
    });
}

/// Runs are listed newest first, filtered by state, tool and node, and
/// limited; a pending run keeps its arguments and a run id is taken once.
pub fn runs_are_listed_newest_first_and_filtered(stores: &impl StoreFactory) {
    on_one_thread(async {
        let (log, _guard) = stores.make(16);
        for (i, (name, tool, node)) in [("a", "x", "n1"), ("b", "y", "n1"), ("c", "x", "n2")]
            .into_iter()
            .enumerate()
        {
            log.create_run(NewRun {
                run_id: run_id(name),
                tool: tool.into(),
                arguments: json!({ "i": i }),
                node: node.into(),
                ts: 100 + i as u64,
                owner: None,
                client: None,
                parent: None,
                resume_record: None,
            })
            .await
            .unwrap();
        }
        let again = log
            .create_run(NewRun {
                run_id: run_id("a"),
                tool: "x".into(),
                arguments: json!({}),
                node: "n1".into(),
                ts: 1,
                owner: None,
                client: None,
                parent: None,
                resume_record: None,
            })
            .await;
        assert!(matches!(again, Err(LogError::RunExists(_))));
        log.append(events(&run_id("b"), 0, vec![started("y")]).into())
            .await
            .unwrap();

        let ids = |runs: Vec<RunSummary>| {
            runs.into_iter()
                .map(|r| r.run_id.to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            ids(log.list_runs(&RunFilter::default()).await.unwrap()),
            ["c", "b", "a"]
        );
        let pending = RunFilter {
            states: vec![RunState::Pending],
            ..RunFilter::default()
        };
        assert_eq!(ids(log.list_runs(&pending).await.unwrap()), ["c", "a"]);
        let tool_x_on_n1 = RunFilter {
            tool: Some("x".into()),
            node: Some("n1".into()),
            ..RunFilter::default()
        };
        assert_eq!(ids(log.list_runs(&tool_x_on_n1).await.unwrap()), ["a"]);
        let limited = RunFilter {
            limit: Some(1),
            ..RunFilter::default()
        };
        assert_eq!(ids(log.list_runs(&limited).await.unwrap()), ["c"]);
        let a = log.get_run(&run_id("a")).await.unwrap().unwrap();
        assert_eq!(
            (a.state, a.events, a.arguments),
            (RunState::Pending, 0, json!({ "i": 0 }))
        );
    });
}

/// Artifacts are stored once, hashed (SHA-256), read back by any byte range
/// (clamped), and only under valid names.
pub fn artifacts_are_write_once_hashed_and_read_by_range(stores: &impl StoreFactory) {
    on_one_thread(async {
        let (log, _guard) = stores.make(16);
        let run = run_id("art");
        log.append(events(&run, 0, vec![started("t")]).into())
            .await
            .unwrap();
        let data: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
        let artifact = log
            .put_artifact(&run, "out.bin", "application/octet-stream", data.clone())
            .await
            .unwrap();
        assert_eq!(artifact.bytes, 10_000);
        assert_eq!(artifact.uri, "weir://runs/art/artifacts/out.bin");
        // sha256 of that byte pattern, computed independently.
        assert_eq!(artifact.sha256.len(), 64);
        assert_eq!(log.artifact(&run, "out.bin").await.unwrap(), artifact);
        for range in [0..10, 5000..5100, 9990..20_000, 20_000..30_000, 7..7] {
            let got = log
                .read_artifact(&run, "out.bin", range.clone())
                .await
                .unwrap();
            let start = (range.start as usize).min(data.len());
            let end = (range.end as usize).min(data.len()).max(start);
            assert_eq!(got, &data[start..end], "{range:?}");
        }
        let twice = log
            .put_artifact(&run, "out.bin", "text/plain", vec![1])
            .await;
        assert!(matches!(twice, Err(LogError::ArtifactExists { .. })));
        for bad in ["", "../x", "a/b", ".hidden", &"x".repeat(129)] {
            let refused = log.put_artifact(&run, bad, "text/plain", vec![]).await;
            assert!(
                matches!(refused, Err(LogError::InvalidArtifactName(_))),
                "{bad:?}"
            );
        }
        assert!(matches!(
            log.artifact(&run, "nope").await,
            Err(LogError::UnknownArtifact { .. })
        ));
        assert!(matches!(
            log.artifact(&run_id("nope"), "x").await,
            Err(LogError::UnknownRun(_))
        ));
        let empty = log
            .put_artifact(&run, "empty", "text/plain", vec![])
            .await
            .unwrap();
        assert_eq!(
            empty.sha256,
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    });
}

/// A run's summary reports the arguments it was registered with, before and
/// after it starts, and a run started without being registered reports its
/// `started` event's; a store may keep them once, but reports them alike.
pub fn summaries_keep_the_arguments_a_run_was_given(stores: &impl StoreFactory) {
    on_one_thread(async {
        let (log, _guard) = stores.make(16);
        let started_with = |arguments| {
            EventKind::Started(Started {
                tool: "t".into(),
                arguments,
                node: "test".into(),
            })
        };
        let cases = [
            ("scheduled", Some(json!({"n": 1})), json!({"n": 1})),
            ("unregistered", None, json!({"n": 2})),
            (
                "started_otherwise",
                Some(json!({"n": 3})),
                json!({"other": true}),
            ),
        ];
        for (name, registered, at_start) in &cases {
            if let Some(arguments) = registered {
                log.create_run(NewRun {
                    run_id: run_id(name),
                    tool: "t".into(),
                    arguments: arguments.clone(),
                    node: "test".into(),
                    ts: 1,
                    owner: None,
                    client: None,
                    parent: None,
                    resume_record: None,
                })
                .await
                .unwrap();
                let pending = log.get_run(&run_id(name)).await.unwrap().unwrap();
                assert_eq!(&pending.arguments, arguments, "{name} pending");
            }
            log.append(events(&run_id(name), 0, vec![started_with(at_start.clone())]).into())
                .await
                .unwrap();
        }
        let listed = log.list_runs(&RunFilter::default()).await.unwrap();
        for (name, registered, at_start) in &cases {
            let expected = registered.as_ref().unwrap_or(at_start);
            let summary = log.get_run(&run_id(name)).await.unwrap().unwrap();
            assert_eq!(&summary.arguments, expected, "{name}");
            let in_list = listed.iter().find(|run| run.run_id == run_id(name));
            assert_eq!(in_list, Some(&summary), "{name} listed");
        }
    });
}

/// A run keeps the owner and the client it was registered with through
/// its whole life (pending, started, ended), in `get_run` and `list_runs`
/// alike; a run created by its `started` event has neither; listing by
/// owner finds that owner's runs only, never a run without one.
pub fn runs_keep_their_owner_and_are_listed_by_it(stores: &impl StoreFactory) {
    on_one_thread(async {
        let (log, _guard) = stores.make(16);
        for (i, (name, owner)) in [("alice1", "alice"), ("bob1", "bob"), ("alice2", "alice")]
            .into_iter()
            .enumerate()
        {
            log.create_run(NewRun {
                run_id: run_id(name),
                tool: "t".into(),
                arguments: json!({}),
                node: "test".into(),
                ts: 10 + i as u64,
                owner: Some(owner.into()),
                client: Some(format!("host-{name}/1.0")),
                parent: None,
                resume_record: None,
            })
            .await
            .unwrap();
        }
        log.append(events(&run_id("bob1"), 0, vec![started("t"), done()]).into())
            .await
            .unwrap();
        log.append(events(&run_id("alice2"), 0, vec![started("t")]).into())
            .await
            .unwrap();
        log.append(events(&run_id("nobody"), 0, vec![started("t")]).into())
            .await
            .unwrap();
        let owner = |name: &'static str| {
            let log = log.clone();
            async move { log.get_run(&run_id(name)).await.unwrap().unwrap().owner }
        };
        assert_eq!(owner("alice1").await.as_deref(), Some("alice"), "pending");
        assert_eq!(owner("alice2").await.as_deref(), Some("alice"), "started");
        assert_eq!(owner("bob1").await.as_deref(), Some("bob"), "ended");
        assert_eq!(owner("nobody").await, None, "created by its started event");
        let client = |name: &'static str| {
            let log = log.clone();
            async move { log.get_run(&run_id(name)).await.unwrap().unwrap().client }
        };
        assert_eq!(client("alice1").await.as_deref(), Some("host-alice1/1.0"));
        assert_eq!(client("alice2").await.as_deref(), Some("host-alice2/1.0"));
        assert_eq!(client("bob1").await.as_deref(), Some("host-bob1/1.0"));
        assert_eq!(client("nobody").await, None);
        let clients: Vec<(String, Option<String>)> = log
            .list_runs(&RunFilter::default())
            .await
            .unwrap()
            .into_iter()
            .map(|run| (run.run_id.to_string(), run.client))
            .collect();
        assert!(
            clients.contains(&("bob1".to_owned(), Some("host-bob1/1.0".to_owned()))),
            "{clients:?}"
        );
        let listed = |owner: Option<&str>| {
            let log = log.clone();
            let filter = RunFilter {
                owner: owner.map(str::to_owned),
                ..RunFilter::default()
            };
            async move {
                log.list_runs(&filter)
                    .await
                    .unwrap()
                    .into_iter()
                    .map(|run| (run.run_id.to_string(), run.owner))
                    .collect::<Vec<_>>()
            }
        };
        let some = |name: &str| Some(name.to_owned());
        assert_eq!(
            listed(Some("alice")).await,
            [
                ("alice2".to_owned(), some("alice")),
                ("alice1".to_owned(), some("alice"))
            ]
        );
        assert_eq!(
            listed(Some("bob")).await,
            [("bob1".to_owned(), some("bob"))]
        );
        assert_eq!(listed(Some("carol")).await, []);
        assert_eq!(listed(None).await.len(), 4);
    });
}

/// A child run keeps the parent it was registered with through its whole
/// life, in `get_run` and `list_runs` alike, and so does a parent's summary
/// its `None`; a run created by its `started` event has none.
pub fn runs_keep_their_parent(stores: &impl StoreFactory) {
    on_one_thread(async {
        let (log, _guard) = stores.make(16);
        for (name, parent) in [("plan", None), ("step", Some(run_id("plan")))] {
            log.create_run(NewRun {
                run_id: run_id(name),
                tool: "t".into(),
                arguments: json!({}),
                node: "test".into(),
                ts: 1,
                owner: Some("alice".into()),
                client: None,
                parent,
                resume_record: None,
            })
            .await
            .unwrap();
        }
        let parent = |name: &'static str| {
            let log = log.clone();
            async move { log.get_run(&run_id(name)).await.unwrap().unwrap().parent }
        };
        assert_eq!(parent("step").await, Some(run_id("plan")), "pending");
        log.append(events(&run_id("step"), 0, vec![started("t")]).into())
            .await
            .unwrap();
        assert_eq!(parent("step").await, Some(run_id("plan")), "started");
        log.append(events(&run_id("step"), 1, vec![done()]).into())
            .await
            .unwrap();
        assert_eq!(parent("step").await, Some(run_id("plan")), "ended");
        assert_eq!(parent("plan").await, None);
        log.append(events(&run_id("loose"), 0, vec![started("t")]).into())
            .await
            .unwrap();
        assert_eq!(parent("loose").await, None, "created by its started event");
        let listed: Vec<_> = log
            .list_runs(&RunFilter::default())
            .await
            .unwrap()
            .into_iter()
            .map(|run| (run.run_id.to_string(), run.parent.map(|p| p.to_string())))
            .collect();
        assert!(
            listed.contains(&("step".to_owned(), Some("plan".to_owned()))),
            "{listed:?}"
        );
        assert!(listed.contains(&("plan".to_owned(), None)), "{listed:?}");
    });
}

/// A run keeps the resume record it was registered with, byte for byte
/// (the store never reads it), through its whole life; a run registered
/// without one, or created by its `started` event, has none; an unknown run
/// is an error, not a run without a record.
pub fn runs_keep_their_resume_record(stores: &impl StoreFactory) {
    on_one_thread(async {
        let (log, _guard) = stores.make(16);
        let record = "{\"session\":\"s-1\",\"note\":\"é \\n ✓\"}\nsecond line";
        for (name, resume_record) in [
            ("kept", Some(record.to_owned())),
            ("empty", Some(String::new())),
            ("none", None),
        ] {
            log.create_run(NewRun {
                run_id: run_id(name),
                tool: "t".into(),
                arguments: json!({}),
                node: "test".into(),
                ts: 1,
                owner: None,
                client: None,
                parent: None,
                resume_record,
            })
            .await
            .unwrap();
        }
        let read = |name: &'static str| {
            let log = log.clone();
            async move { log.resume_record(&run_id(name)).await.unwrap() }
        };
        assert_eq!(read("kept").await.as_deref(), Some(record), "pending");
        log.append(events(&run_id("kept"), 0, vec![started("t")]).into())
            .await
            .unwrap();
        assert_eq!(read("kept").await.as_deref(), Some(record), "started");
        log.append(events(&run_id("kept"), 1, vec![done()]).into())
            .await
            .unwrap();
        assert_eq!(read("kept").await.as_deref(), Some(record), "ended");
        assert_eq!(read("empty").await.as_deref(), Some(""));
        assert_eq!(read("none").await, None);
        log.append(events(&run_id("loose"), 0, vec![started("t")]).into())
            .await
            .unwrap();
        assert_eq!(read("loose").await, None, "created by its started event");
        assert!(matches!(
            log.resume_record(&run_id("unknown")).await,
            Err(LogError::UnknownRun(_))
        ));
    });
}

/// Retention deletes the runs finished before its cutoff, with their
/// artifacts, and leaves runs still open.
pub fn retention_deletes_finished_runs_and_their_artifacts_only(stores: &impl StoreFactory) {
    on_one_thread(async {
        let (log, _guard) = stores.make(16);
        let (old, open) = (run_id("old"), run_id("open"));
        log.append(events(&old, 0, vec![started("t"), done()]).into())
            .await
            .unwrap();
        log.put_artifact(&old, "a", "text/plain", vec![1, 2])
            .await
            .unwrap();
        log.append(events(&open, 0, vec![started("t")]).into())
            .await
            .unwrap();
        // `events` stamps ts 1000 + seq: `old` finished at 1001.
        assert_eq!(log.delete_finished_before(1001).await.unwrap(), 0);
        assert_eq!(log.delete_finished_before(1002).await.unwrap(), 1);
        assert!(log.get_run(&old).await.unwrap().is_none());
        assert!(matches!(
            log.artifact(&old, "a").await,
            Err(LogError::UnknownRun(_))
        ));
        assert!(log.get_run(&open).await.unwrap().is_some());
    });
}

/// A subscriber far slower than the producer, on a live channel of one batch:
/// it lags, re-reads the store, and still gets every event once, in order.
pub fn a_lagging_subscriber_catches_up_from_the_store(stores: &impl StoreFactory) {
    on_two_threads(async {
        let (log, _guard) = stores.make(1);
        let run = run_id("lag");
        log.append(events(&run, 0, vec![started("t")]).into())
            .await
            .unwrap();
        let reader = {
            let (log, run) = (log.clone(), run.clone());
            tokio::spawn(
                async move { follow(&log, &run, 0, None, Duration::from_micros(200)).await },
            )
        };
        let mut next = 1;
        for round in 0..200u64 {
            let batch = events(
                &run,
                next,
                (0..5).map(|i| body_event(i as u8, round)).collect(),
            );
            next += 5;
            log.append(batch.into()).await.unwrap();
        }
        log.append(
            events(
                &run,
                next,
                vec![EventKind::Canceled(Canceled {
                    reason: "end".into(),
                })],
            )
            .into(),
        )
        .await
        .unwrap();
        let got = reader.await.unwrap();
        assert_eq!(got, read_all(&*log, &run).await);
        assert_eq!(got.len(), 1002);
    });
}

/// A subscription to a run that does not exist yields one `UnknownRun`
/// error, then ends.
pub fn subscribing_to_an_unknown_run_is_an_error(stores: &impl StoreFactory) {
    on_one_thread(async {
        let (log, _guard) = stores.make(4);
        let mut subscription = log.subscribe_from(&run_id("ghost"), 0);
        assert!(matches!(
            subscription.next().await,
            Some(Err(LogError::UnknownRun(_)))
        ));
        assert!(subscription.next().await.is_none());
    });
}

/// `start_run` registers a run (owner, client, parent, resume record) and
/// appends its first events at once; it is refused, changing nothing, for a
/// run that exists (pending or started) and for events that do not start it.
pub fn a_run_is_started_with_its_first_events(stores: &impl StoreFactory) {
    on_one_thread(async {
        let (log, _guard) = stores.make(16);
        let new_run = |name: &str| NewRun {
            run_id: run_id(name),
            tool: "t".into(),
            arguments: json!({ "x": 1 }),
            node: "test".into(),
            ts: 5,
            owner: Some("alice".into()),
            client: Some("probe/1".into()),
            parent: Some(run_id("parent")),
            resume_record: Some("record".into()),
        };
        let first_events = |name: &str| {
            let started = EventKind::Started(Started {
                tool: "t".into(),
                arguments: json!({ "x": 1 }),
                node: "test".into(),
            });
            events(
                &run_id(name),
                0,
                vec![started, body_event(0, 1), body_event(1, 2)],
            )
        };
        log.start_run(new_run("a"), first_events("a").into())
            .await
            .unwrap();
        let summary = log.get_run(&run_id("a")).await.unwrap().unwrap();
        assert_eq!(
            (summary.state, summary.events, &summary.arguments),
            (RunState::Working, 3, &json!({ "x": 1 }))
        );
        assert_eq!(
            (summary.owner.as_deref(), summary.client.as_deref()),
            (Some("alice"), Some("probe/1"))
        );
        assert_eq!(summary.parent, Some(run_id("parent")));
        assert_eq!(
            log.resume_record(&run_id("a")).await.unwrap().as_deref(),
            Some("record")
        );
        assert_eq!(read_all(&*log, &run_id("a")).await, first_events("a"));
        let mut following = log.subscribe_from(&run_id("a"), 0);
        for expected in first_events("a") {
            let live = following.next().await.expect("live event").unwrap();
            assert_eq!(live.to_event(), expected);
        }

        // Taken: started or pending, the run is refused and unchanged.
        let again = log.start_run(new_run("a"), first_events("a").into()).await;
        assert!(matches!(again, Err(LogError::RunExists(_))), "{again:?}");
        assert_eq!(log.get_run(&run_id("a")).await.unwrap().unwrap().events, 3);
        log.create_run(new_run("pending")).await.unwrap();
        let taken = log
            .start_run(new_run("pending"), first_events("pending").into())
            .await;
        assert!(matches!(taken, Err(LogError::RunExists(_))), "{taken:?}");
        let pending = log.get_run(&run_id("pending")).await.unwrap().unwrap();
        assert_eq!((pending.state, pending.events), (RunState::Pending, 0));

        // Events that do not start the run: nothing is registered.
        let not_started = events(&run_id("b"), 0, vec![body_event(0, 1)]);
        let late = events(&run_id("c"), 1, vec![started("t")]);
        let elsewhere = first_events("d");
        for (name, events) in [("b", not_started), ("c", late), ("e", elsewhere)] {
            let refused = log.start_run(new_run(name), events.into()).await;
            assert!(
                matches!(refused, Err(LogError::NotStarted(_))),
                "{name}: {refused:?}"
            );
            assert!(
                log.get_run(&run_id(name)).await.unwrap().is_none(),
                "{name}"
            );
        }
        assert!(log.get_run(&run_id("d")).await.unwrap().is_none());
    });
}
