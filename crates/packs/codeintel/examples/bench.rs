//! The figures of bench/codeintel: index a tree, then page through every
//! use of a name, as the tools do.
//!
//! `bench index ROOT INDEX_DIR`: indexes ROOT (a fresh index when
//! INDEX_DIR is empty), prints the report and the peak RSS as JSON.
//! `bench refs ROOT INDEX_DIR NAME`: pages through `find_references NAME`
//! and prints the first chunk's time, each page's, the total, and the
//! largest message; with `WEIR_BENCH_LINES=FILE`, writes each item's
//! `file:line` there.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Instant;

use serde_json::{Value, json};
use weir_core::EventKind;
use weir_pack_codeintel::{
    CodeIntelConfig, CodeIntelPack, IndexOptions, index_file, index_repository,
};
use weir_runtime::{EventLog, MemoryLog, Pack, RunOptions, Scheduler, SchedulerConfig};

/// Peak resident memory of this process, in KiB.
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: bench index ROOT INDEX_DIR | bench refs ROOT INDEX_DIR NAME | bench compound ROOT INDEX_DIR NAME PATH";
    let (Some(what), Some(root), Some(dir)) = (args.get(1), args.get(2), args.get(3)) else {
        panic!("{usage}")
    };
    let root = std::fs::canonicalize(root).unwrap();
    std::fs::create_dir_all(dir).unwrap();
    match what.as_str() {
        "index" => {
            let db = index_file(dir.as_ref(), &root);
            let started = Instant::now();
            let report = index_repository(
                &root,
                &db,
                &IndexOptions::default(),
                &AtomicUsize::new(0),
                &mut |_| {},
            )
            .unwrap();
            let seconds = started.elapsed().as_secs_f64();
            println!(
                "{}",
                json!({"seconds": seconds, "peak_rss_mib": peak_rss_kib() / 1024, "index_mib": std::fs::metadata(&db).map(|m| m.len() >> 20).unwrap_or(0), "report": report})
            );
        }
        "refs" => {
            let name = args.get(4).expect(usage);
            let pack = CodeIntelPack::new(CodeIntelConfig::new(
                dir,
                weir_runtime::Roots::new([&root]).unwrap(),
            ));
            let log: Arc<dyn EventLog> = Arc::new(MemoryLog::new());
            let scheduler = Scheduler::start(log.clone(), pack.tools(), SchedulerConfig::default())
                .await
                .unwrap();
            let started = Instant::now();
            let mut cursor = Value::Null;
            let mut pages = Vec::new();
            let mut items = 0u64;
            let mut largest = 0usize;
            let mut lines = Vec::new();
            loop {
                let mut arguments = json!({"repo": root, "symbol": name});
                if !cursor.is_null() {
                    arguments["cursor"] = cursor.clone();
                }
                let page_started = Instant::now();
                let run = scheduler
                    .submit("find_references", arguments, RunOptions::default())
                    .await
                    .unwrap();
                let run_id = run.run_id().clone();
                run.finished().await.unwrap();
                let page_ms = page_started.elapsed().as_secs_f64() * 1000.0;
                let mut summary = Value::Null;
                let mut page_bytes = 0;
                for event in log.read(&run_id, 0, 1_000_000).await.unwrap() {
                    let bytes = serde_json::to_string(&event.kind).unwrap().len();
                    largest = largest.max(bytes);
                    match event.kind {
                        EventKind::Partial(partial) => {
                            items += partial.items.len() as u64;
                            for item in &partial.items {
                                let at = &item["location"];
                                lines.push(format!(
                                    "{}:{}",
                                    at["fileId"].as_str().unwrap_or_default(),
                                    at["startLine"]
                                ));
                            }
                            page_bytes += bytes;
                        }
                        EventKind::Completed(completed) => summary = completed.structured.unwrap(),
                        EventKind::Failed(failed) => panic!("{}", failed.error),
                        _ => {}
                    }
                }
                pages.push(json!({"ms": page_ms, "first_chunk_ms": summary["firstChunkMs"], "returned": summary["returned"], "streamed_bytes": page_bytes}));
                cursor = summary["nextCursor"].clone();
                if cursor.is_null() {
                    // `file:line` of every item, to compare with grep's hits.
                    if let Ok(path) = std::env::var("WEIR_BENCH_LINES") {
                        std::fs::write(path, lines.join("\n") + "\n").unwrap();
                    }
                    println!(
                        "{}",
                        json!({"symbol": name, "total": summary["total"], "items": items, "by_kind": summary["byKind"], "files": summary["fileCount"], "pages": pages, "total_ms": started.elapsed().as_secs_f64() * 1000.0, "largest_message_bytes": largest})
                    );
                    break;
                }
            }
        }
        "compound" => {
            // explore PATH, understand NAME, prepare_change NAME: each once,
            // on an existing index, timed to its first chunk and its end.
            let (name, path) = (args.get(4).expect(usage), args.get(5).expect(usage));
            let pack = CodeIntelPack::new(CodeIntelConfig::new(
                dir,
                weir_runtime::Roots::new([&root]).unwrap(),
            ));
            let log: Arc<dyn EventLog> = Arc::new(MemoryLog::new());
            let scheduler = Scheduler::start(log.clone(), pack.tools(), SchedulerConfig::default())
                .await
                .unwrap();
            let mut timings = serde_json::Map::new();
            for (tool, arguments) in [
                ("explore", json!({"repo": root, "path": path})),
                ("understand", json!({"repo": root, "symbol": name})),
                ("prepare_change", json!({"repo": root, "symbol": name})),
            ] {
                let started = Instant::now();
                let run = scheduler
                    .submit(tool, arguments, RunOptions::default())
                    .await
                    .unwrap();
                let run_id = run.run_id().clone();
                run.finished().await.unwrap();
                let ms = started.elapsed().as_secs_f64() * 1000.0;
                let mut largest = 0usize;
                let mut items = 0usize;
                let mut summary = Value::Null;
                for event in log.read(&run_id, 0, 1_000_000).await.unwrap() {
                    largest = largest.max(serde_json::to_string(&event.kind).unwrap().len());
                    match event.kind {
                        EventKind::Partial(partial) => items += partial.items.len(),
                        EventKind::Completed(completed) => summary = completed.structured.unwrap(),
                        EventKind::Failed(failed) => panic!("{tool}: {}", failed.error),
                        _ => {}
                    }
                }
                timings.insert(
                    tool.into(),
                    json!({"ms": ms, "first_chunk_ms": summary["firstChunkMs"], "items": items, "largest_message_bytes": largest,
                           "summary_bytes": summary.to_string().len(),
                           "callers": summary["transitiveImpact"]["totalCallers"], "risk": summary["riskAssessment"]["level"]}),
                );
            }
            println!("{}", Value::Object(timings));
        }
        _ => panic!("{usage}"),
    }
}
