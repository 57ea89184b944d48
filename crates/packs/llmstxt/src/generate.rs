//! One `llmstxt_generate` run: open the source, gather its files, describe
//! them (with the model where it answers, from the files where it does
//! not), and write the four artifacts.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};
use weir_core::{Completed, Content, FailureCode, Meta, Milestone, Partial, RunError, Warning};
use weir_runtime::{Roots, RunContext};

use crate::args::{Generate, Write};
use crate::formats::{self, Documents};
use crate::gather::{self, File, LeftOut};
use crate::llm::{ChatClient, ChatRequest, LlmError, Message};
use crate::project;
use crate::source::{self, CloneConfig};
use crate::spec::{self, Link, LlmsTxt, Section};

/// The group of the model's streamed tokens.
pub(crate) const TOKENS: &str = "model";
/// Most characters of a file shown to the model.
const EXCERPT_CHARS: usize = 1_200;

/// Where a summary or note came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Origin {
    Model,
    Repository,
}

impl Origin {
    fn name(self) -> &'static str {
        match self {
            Origin::Model => "model",
            Origin::Repository => "repository",
        }
    }
}

/// A file's index, its link, and where its note came from.
type Linked = (usize, Link, Origin);

/// What the model did in this run.
#[derive(Default)]
struct ModelUse {
    calls: u64,
    answered: u64,
    tokens: u64,
    first_token_ms: Vec<u64>,
    /// Why the model was not used at all, or stopped being used.
    unused: Option<String>,
    failures: Vec<String>,
}

/// The files of the run, by the URL their link got.
struct ByUrl<'a>(BTreeMap<String, &'a File>);

impl Documents for ByUrl<'_> {
    fn text(&self, url: &str) -> Option<(&str, bool)> {
        self.0
            .get(url)
            .map(|file| (file.text.as_str(), file.truncated))
    }
}

/// A model's answer as one clean line: no markup that would break the
/// file, no quotes around it, at most `max` characters; `None` when
/// nothing is left.
fn clean(answer: &str, max: usize) -> Option<String> {
    let line = answer.split_whitespace().collect::<Vec<_>>().join(" ");
    // Markup at the start would make a heading, quote or list item of
    // the line; quotes around it are the model's, not the text's.
    let line = line
        .trim_start_matches(|c: char| "#>-*`\"' ".contains(c))
        .trim_end_matches(|c: char| "`\"' ".contains(c));
    if line.is_empty() {
        return None;
    }
    Some(project::first_sentences(line, max))
}

fn excerpt(text: &str) -> String {
    text.chars().take(EXCERPT_CHARS).collect()
}

/// Asks one small question and streams the answer's tokens as partials,
/// after a `label: ` and before a line end, so the stream reads as one
/// answer per line. A broken answer is an error, never a short one.
async fn ask(
    ctx: &RunContext,
    client: &ChatClient,
    label: &str,
    request: ChatRequest,
    usage: &mut ModelUse,
) -> Result<Result<String, LlmError>, RunError> {
    let say = |text: String| Partial {
        content: vec![Content::text(text)],
        items: Vec::new(),
        group: Some(TOKENS.into()),
    };
    usage.calls += 1;
    let mut stream = match client.start(&request).await {
        Ok(stream) => stream,
        Err(error) => return Ok(Err(error)),
    };
    if let Some(after) = stream.first_token_after() {
        usage.first_token_ms.push(after.as_millis() as u64);
    }
    ctx.emit(say(format!("{label}: "))).await?;
    let mut answer = String::new();
    let ended = loop {
        match stream.next().await {
            Ok(Some(token)) => {
                usage.tokens += 1;
                answer.push_str(&token);
                ctx.emit(say(token)).await?;
            }
            Ok(None) => break Ok(answer),
            Err(error) => break Err(error),
        }
    };
    ctx.emit(say("\n".into())).await?;
    if ended.is_ok() {
        usage.answered += 1;
    }
    Ok(ended)
}

fn summary_request(name: &str, files: &[File]) -> ChatRequest {
    let mut material = String::new();
    for file in files.iter().take(3) {
        material.push_str(&format!("--- {} ---\n{}\n", file.path, excerpt(&file.text)));
    }
    ChatRequest {
        messages: vec![
            Message::system(
                "You describe software projects in one plain sentence, without markdown.",
            ),
            Message::user(format!(
                "Project: {name}\n\n{material}\nIn one sentence: what is {name}, and what is it for?"
            )),
        ],
        max_tokens: 80,
        temperature: 0.0,
    }
}

fn note_request(name: &str, file: &File) -> ChatRequest {
    ChatRequest {
        messages: vec![
            Message::system(
                "You describe files of a software project in one short plain phrase, without markdown.",
            ),
            Message::user(format!(
                "Project: {name}\nFile: {}\n\n{}\n\nIn one short phrase: what does a reader find in {}?",
                file.path,
                excerpt(&file.text),
                file.path
            )),
        ],
        max_tokens: 48,
        temperature: 0.0,
    }
}

/// Runs one generation.
pub(crate) async fn run(
    client: Option<&ChatClient>,
    roots: &Roots,
    clone: &CloneConfig,
    ctx: &RunContext,
    call: Generate,
) -> Result<Completed, RunError> {
    let (checkout, targets, gathered) = open_and_gather(&call, roots, clone).await?;
    let files = &gathered.files;
    let name = call
        .name
        .clone()
        .unwrap_or_else(|| project::name(files, &checkout.dir_name));
    let mut usage = ModelUse::default();
    let client = match (client, call.use_model) {
        (None, _) => {
            usage.unused =
                Some("no model is configured (weir serve --llm-endpoint URL --llm-model M)".into());
            None
        }
        (Some(_), false) => {
            usage.unused = Some("use_model is false".into());
            None
        }
        (Some(client), true) => Some(client),
    };
    let mut sections = sections(files, call.base_url.as_deref());
    let total = 3 + sections.len() as u64;
    announce(ctx, &call, &checkout, client, &gathered, total).await?;
    let summary = summarize(ctx, client, &name, files, &mut usage).await?;
    let max_links = call.max_model_links;
    describe(
        ctx,
        client,
        max_links,
        &name,
        files,
        &mut sections,
        &mut usage,
    )
    .await?;

    let mode = mode(&usage, summary.1, &sections);
    let info = info(files.len(), mode, &usage);
    let doc = LlmsTxt {
        title: name.clone(),
        summary: Some(summary.0.clone()),
        info,
        sections: sections
            .iter()
            .map(|(section, links)| Section {
                name: (*section).into(),
                links: links.iter().map(|(_, link, _)| link.clone()).collect(),
            })
            .collect(),
    }
    .normalized();
    let llms_txt = doc.render();
    let checked = spec::validate(&llms_txt);
    if !checked.valid {
        return Err(RunError::new(
            FailureCode::Internal,
            format!(
                "the generated llms.txt does not validate: {:?}",
                checked.errors
            ),
        ));
    }
    let documents = by_url(&sections, &doc, files);
    let full = formats::full(&doc, &documents);
    let ctx_text = formats::ctx(&doc, &documents);
    let structured_sections = structured_sections(&sections, &doc, files);
    let model = model_json(client, &usage);
    let llms_json = json!({
        "project": {"name": doc.title, "summary": doc.summary, "summary_from": summary.1.name()},
        "mode": mode,
        "source": call.source,
        "sections": structured_sections,
        "model": model,
    });

    let written = match &targets {
        Some(dir) => {
            write_files(
                dir,
                call.write == Write::Overwrite,
                [
                    ("llms.txt", llms_txt.as_bytes()),
                    ("llms-full.txt", full.as_bytes()),
                    ("llms-ctx.txt", ctx_text.as_bytes()),
                ],
            )
            .await?
        }
        None => Vec::new(),
    };
    let artifacts = store_artifacts(ctx, &llms_txt, full, ctx_text, &llms_json).await?;
    ctx.milestone(
        Milestone::new("written")
            .message("llms.txt, llms-full.txt, llms-ctx.txt, llms.json")
            .done(total),
    )
    .await?;

    let how = how(mode, &usage);
    let wrote = if written.is_empty() {
        String::new()
    } else {
        format!(" Wrote {}.", written.join(", "))
    };
    let text = format!(
        "{llms_txt}\n---\nllms.txt for {name} ({how}); {} files linked.{}{wrote} Artifacts: {} (read them with runs_artifact or as resources).",
        files.len(),
        left_out_text(&gathered.left_out_files, gathered.left_out),
        artifacts
            .iter()
            .map(|a| format!(
                "{} ({} bytes)",
                a["name"].as_str().unwrap_or_default(),
                a["bytes"]
            ))
            .collect::<Vec<_>>()
            .join(", "),
    );
    Ok(Completed {
        content: vec![Content::text(text)],
        structured: Some(json!({
            "name": doc.title,
            "summary": doc.summary,
            "mode": mode,
            "llms_txt": llms_txt,
            "warnings": checked.warnings.iter().map(|w| w.message.clone()).collect::<Vec<_>>(),
            "files": files.len(),
            "left_out": gathered.left_out,
            "left_out_files": gathered.left_out_files.iter().map(|left| json!({"path": left.path, "why": left.why})).collect::<Vec<_>>(),
            "written": written,
            "sections": structured_sections,
            "artifacts": artifacts,
            "model": model,
        })),
    })
}

/// Opens the source, checks where `write` would put the files, and
/// gathers the files to describe: refused before any work when the
/// targets are taken, failed when there is nothing to describe.
async fn open_and_gather(
    call: &Generate,
    roots: &Roots,
    clone: &CloneConfig,
) -> Result<
    (
        source::Checkout,
        Option<std::path::PathBuf>,
        gather::Gathered,
    ),
    RunError,
> {
    let tool_error = |message: String| RunError::new(FailureCode::ToolError, message);
    let checkout = source::open(&call.source, roots, clone)
        .await
        .map_err(|error| match error {
            source::SourceError::Roots(error) => RunError::from(error),
            source::SourceError::NotAllowed { .. } => {
                RunError::new(FailureCode::InvalidArguments, error.to_string())
            }
            error => tool_error(error.to_string()),
        })?;
    // Refused before any work: where the files would go, and what is there.
    let targets = write_targets(call, &checkout)?;
    let root = checkout.root.clone();
    let limits = call.limits;
    let gathered = tokio::task::spawn_blocking(move || gather::gather(&root, limits))
        .await
        .map_err(|error| RunError::new(FailureCode::Internal, format!("gathering files: {error}")))?
        .map_err(|error| tool_error(error.to_string()))?;
    if gathered.files.is_empty() {
        return Err(tool_error(format!(
            "{} has no README, docs, manifests or examples to describe (walked {} entries)",
            call.source, gathered.walked
        )));
    }
    Ok((checkout, targets, gathered))
}

/// The sections of the file, in a fixed order with Optional last (as the
/// spec has it), a link per file.
fn sections(files: &[File], base_url: Option<&str>) -> Vec<(&'static str, Vec<Linked>)> {
    let mut sections: Vec<(&'static str, Vec<Linked>)> = Vec::new();
    for (index, file) in files.iter().enumerate() {
        let section = project::section_of(file);
        let link = Link {
            title: project::title(file),
            url: match base_url {
                Some(base) => format!("{base}{}", file.path),
                None => file.path.clone(),
            },
            note: project::note(file),
        };
        match sections.iter_mut().find(|(name, _)| *name == section) {
            Some((_, links)) => links.push((index, link, Origin::Repository)),
            None => sections.push((section, vec![(index, link, Origin::Repository)])),
        }
    }
    sections.sort_by_key(|(name, _)| *name == spec::OPTIONAL);
    sections
}

/// The run's `meta` and its first milestone: what was gathered.
async fn announce(
    ctx: &RunContext,
    call: &Generate,
    checkout: &source::Checkout,
    client: Option<&ChatClient>,
    gathered: &gather::Gathered,
    total: u64,
) -> Result<(), RunError> {
    ctx.emit(Meta {
        total: None,
        backends: vec![if client.is_some() { "model".into() } else { "repository".into() }],
        info: json!({
            "source": call.source,
            "cloned": checkout.cloned,
            "model": client.map(|client| json!({"endpoint": client.url(), "model": client.config().model})),
        }),
        ..Meta::default()
    })
    .await
    ?;
    ctx.milestone(
        Milestone::new("gathered")
            .message(format!(
                "{} files of {} entries ({} left out by the limits{})",
                gathered.files.len(),
                gathered.walked,
                gathered.left_out,
                if gathered.walk_capped {
                    "; the walk stopped early: a vast tree"
                } else {
                    ""
                }
            ))
            .progress(1, total),
    )
    .await?;
    Ok(())
}

// Turns a failed call into a warning; stops using the model once its
// breaker refuses, or once it broke one of the client's bounds (a
// server that streamed too long or too much is not asked again).
async fn failed(
    ctx: &RunContext,
    usage: &mut ModelUse,
    what: &str,
    error: LlmError,
) -> Result<(), RunError> {
    let partial = error.tokens_before() > 0;
    let message = format!(
        "the model gave no {what}{}: {error}; the repository's own text is used instead",
        if partial {
            " (its answer broke off)"
        } else {
            ""
        }
    );
    if matches!(error, LlmError::BreakerOpen { .. }) || error.is_bound() {
        usage.unused.get_or_insert_with(|| error.to_string());
    }
    usage.failures.push(message.clone());
    ctx.emit(Warning { message }).await.map_err(RunError::from)
}

/// The project's summary, the model's when it gives one, and the
/// milestone that says it.
async fn summarize(
    ctx: &RunContext,
    client: Option<&ChatClient>,
    name: &str,
    files: &[File],
    usage: &mut ModelUse,
) -> Result<(String, Origin), RunError> {
    let mut summary = (project::summary(files, name), Origin::Repository);
    if let Some(client) = client {
        match ask(ctx, client, "summary", summary_request(name, files), usage).await? {
            Ok(answer) => match clean(&answer, 300) {
                Some(text) => summary = (text, Origin::Model),
                None => usage.failures.push("the model's summary was empty".into()),
            },
            Err(error) => failed(ctx, usage, "summary", error).await?,
        }
    }
    ctx.milestone(
        Milestone::new("summarized")
            .message(summary.0.clone())
            .done(2),
    )
    .await?;
    Ok(summary)
}

/// Asks the model for the links' notes, up to `max_links` of them and
/// while it is still used, with a milestone per section.
async fn describe(
    ctx: &RunContext,
    client: Option<&ChatClient>,
    max_links: usize,
    name: &str,
    files: &[File],
    sections: &mut [(&'static str, Vec<Linked>)],
    usage: &mut ModelUse,
) -> Result<(), RunError> {
    let count = sections.len();
    let mut described = 0;
    for (k, (section, links)) in sections.iter_mut().enumerate() {
        for (index, link, origin) in links.iter_mut() {
            let wanted = client.filter(|_| described < max_links && usage.unused.is_none());
            let Some(client) = wanted else { continue };
            described += 1;
            let file = &files[*index];
            match ask(ctx, client, &file.path, note_request(name, file), usage).await? {
                Ok(answer) => {
                    if let Some(note) = clean(&answer, 160) {
                        link.note = Some(note);
                        *origin = Origin::Model;
                    }
                }
                Err(error) => failed(ctx, usage, &format!("note for {}", file.path), error).await?,
            }
        }
        ctx.milestone(
            Milestone::new("section")
                .message(format!(
                    "section {}/{count}: {section} ({} links)",
                    k + 1,
                    links.len()
                ))
                .done(3 + k as u64),
        )
        .await?;
    }
    Ok(())
}

/// How the text was made: `fallback` (the model answered nothing),
/// `model` (it wrote the summary and every note) or `mixed`.
fn mode(
    usage: &ModelUse,
    summary: Origin,
    sections: &[(&'static str, Vec<Linked>)],
) -> &'static str {
    let from_model = usage.answered > 0;
    let all_model = summary == Origin::Model
        && sections
            .iter()
            .all(|(_, links)| links.iter().all(|(_, _, origin)| *origin == Origin::Model));
    match (from_model, all_model) {
        (false, _) => "fallback",
        (true, true) => "model",
        (true, false) => "mixed",
    }
}

/// The sections as `structuredContent` and `llms.json` give them.
fn structured_sections(
    sections: &[(&'static str, Vec<Linked>)],
    doc: &LlmsTxt,
    files: &[File],
) -> Vec<Value> {
    sections
        .iter()
        .zip(&doc.sections)
        .map(|((_, links), section)| {
            json!({
                "title": section.name,
                "links": links.iter().zip(&section.links).map(|((index, _, origin), link)| json!({
                    "title": link.title,
                    "url": link.url,
                    "note": link.note,
                    "note_from": origin.name(),
                    "path": files[*index].path,
                    "bytes": files[*index].bytes,
                    "truncated": files[*index].truncated,
                })).collect::<Vec<_>>(),
            })
        })
        .collect()
}

/// What the model did, as `structuredContent` and `llms.json` give it.
fn model_json(client: Option<&ChatClient>, usage: &ModelUse) -> Value {
    json!({
        "endpoint": client.map(ChatClient::url),
        "model": client.map(|client| client.config().model.clone()),
        "calls": usage.calls,
        "answered": usage.answered,
        "tokens": usage.tokens,
        "first_token_ms": usage.first_token_ms,
        "unused": usage.unused,
        "failures": usage.failures,
    })
}

/// Stores the four files as the run's artifacts; returns each as the
/// result lists it.
async fn store_artifacts(
    ctx: &RunContext,
    llms_txt: &str,
    full: String,
    ctx_text: String,
    llms_json: &Value,
) -> Result<Vec<Value>, RunError> {
    let mut artifacts = Vec::new();
    for (artifact, mime, data) in [
        (
            "llms.txt",
            "text/markdown",
            llms_txt.to_owned().into_bytes(),
        ),
        ("llms-full.txt", "text/markdown", full.into_bytes()),
        ("llms-ctx.txt", "application/xml", ctx_text.into_bytes()),
        (
            "llms.json",
            "application/json",
            serde_json::to_vec_pretty(llms_json).expect("JSON values serialize"),
        ),
    ] {
        let stored = ctx.artifact(artifact, mime, data).await?;
        artifacts.push(json!({"name": stored.name, "uri": stored.uri, "mime": stored.mime, "bytes": stored.bytes}));
    }
    Ok(artifacts)
}

/// The file's info lines: what it was generated from, and, made without the
/// model, why.
fn info(files: usize, mode: &str, usage: &ModelUse) -> Vec<String> {
    let mut info = vec![format!(
        "Generated by weir's llmstxt_generate from {files} of the repository's files."
    )];
    if mode == "fallback" {
        let why = usage
            .unused
            .clone()
            .unwrap_or_else(|| "the model did not answer".into());
        info.push(format!(
            "<!-- Generated via fallback path (no model): {why}. -->"
        ));
    }
    info
}

/// The files by their links as normalized, to find each file's text by
/// its URL.
fn by_url<'a>(
    sections: &[(&'static str, Vec<Linked>)],
    doc: &LlmsTxt,
    files: &'a [File],
) -> ByUrl<'a> {
    let mut by_url = BTreeMap::new();
    for ((_, links), section) in sections.iter().zip(&doc.sections) {
        for ((index, _, _), link) in links.iter().zip(&section.links) {
            by_url.insert(link.url.clone(), &files[*index]);
        }
    }
    ByUrl(by_url)
}

/// How the result's text says the file was made.
fn how(mode: &str, usage: &ModelUse) -> String {
    match mode {
        "fallback" => format!(
            "fallback, from the repository alone: {}",
            usage
                .unused
                .as_deref()
                .unwrap_or("the model did not answer")
        ),
        "mixed" => format!(
            "with the model, and the repository's own text where it did not answer ({} failures)",
            usage.failures.len()
        ),
        _ => "with the model".into(),
    }
}

/// The files left out, by reason, a few named each, as sentences.
fn left_out_text(left_out: &[LeftOut], count: usize) -> String {
    if count == 0 {
        return String::new();
    }
    let mut by_why: Vec<(String, Vec<&str>)> = Vec::new();
    for left in left_out {
        // "near-duplicate of X" groups under its X.
        match by_why.iter_mut().find(|(why, _)| *why == left.why) {
            Some((_, paths)) => paths.push(&left.path),
            None => by_why.push((left.why.clone(), vec![&left.path])),
        }
    }
    let groups: Vec<String> = by_why
        .iter()
        .map(|(why, paths)| {
            let shown = paths.iter().take(4).copied().collect::<Vec<_>>().join(", ");
            let more = match paths.len() {
                0..=4 => String::new(),
                n => format!(" and {} more", n - 4),
            };
            format!("{why}: {shown}{more}")
        })
        .collect();
    let unnamed = count - left_out.len();
    format!(
        " Left out {count}: {}{}.",
        groups.join("; "),
        if unnamed > 0 {
            format!("; {unnamed} more not named")
        } else {
            String::new()
        }
    )
}

/// The files `write` puts in the source directory.
const WRITTEN: [&str; 3] = ["llms.txt", "llms-full.txt", "llms-ctx.txt"];

/// Where `write` puts the files (the source directory, inside the roots
/// as `source::open` resolved it), after checking that none is there
/// unless `overwrite`; `None` without `write`.
fn write_targets(
    call: &Generate,
    checkout: &source::Checkout,
) -> Result<Option<std::path::PathBuf>, RunError> {
    if call.write == Write::No {
        return Ok(None);
    }
    if checkout.cloned {
        return Err(RunError::new(
            FailureCode::InvalidArguments,
            "write puts the files into the source directory: give a directory inside the server's roots, not a git URL",
        ));
    }
    if call.write == Write::New
        && let Some(present) = WRITTEN
            .iter()
            .find(|name| checkout.root.join(name).symlink_metadata().is_ok())
    {
        return Err(RunError::new(
            FailureCode::InvalidArguments,
            format!(
                "{} already exists: write never replaces a file",
                checkout.root.join(present).display()
            ),
        )
        .with_remediation("send overwrite: true to replace it, or move it away"));
    }
    Ok(Some(checkout.root.clone()))
}

/// Writes `files` into `dir`: each to a new temporary file there, then
/// renamed into place — over an existing file only when `overwrite` (a
/// symlink in its place is replaced, never followed). Returns the paths.
async fn write_files(
    dir: &std::path::Path,
    overwrite: bool,
    files: [(&str, &[u8]); 3],
) -> Result<Vec<String>, RunError> {
    let dir = dir.to_owned();
    let files: Vec<(String, Vec<u8>)> = files
        .into_iter()
        .map(|(name, data)| (name.to_owned(), data.to_vec()))
        .collect();
    tokio::task::spawn_blocking(move || {
        let mut written = Vec::new();
        for (name, data) in files {
            let path = dir.join(&name);
            let failed = |error: std::io::Error| {
                RunError::new(
                    FailureCode::ToolError,
                    format!("cannot write {}: {error}", path.display()),
                )
            };
            let mut temp = tempfile::Builder::new()
                .prefix(&format!(".{name}."))
                .tempfile_in(&dir)
                .map_err(failed)?;
            std::io::Write::write_all(&mut temp, &data).map_err(failed)?;
            let placed = if overwrite {
                temp.persist(&path).map(drop)
            } else {
                // Fails when a file appeared since the check.
                temp.persist_noclobber(&path).map(drop)
            };
            placed.map_err(|error| {
                if error.error.kind() == std::io::ErrorKind::AlreadyExists {
                    RunError::new(
                        FailureCode::InvalidArguments,
                        format!(
                            "{} already exists: write never replaces a file",
                            path.display()
                        ),
                    )
                    .with_remediation("send overwrite: true to replace it, or move it away")
                } else {
                    failed(error.error)
                }
            })?;
            written.push(path.display().to_string());
        }
        Ok(written)
    })
    .await
    .map_err(|error| RunError::new(FailureCode::Internal, format!("writing the files: {error}")))?
}

/// How long a generation may take at most: the scheduler's backstop.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(30 * 60);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_cleaned_to_one_safe_line() {
        assert_eq!(
            clean("  \"# A tool\nfor things.\" ", 100).as_deref(),
            Some("A tool for things.")
        );
        assert_eq!(clean("> - `x`", 100).as_deref(), Some("x"));
        assert_eq!(clean(" \n ", 100), None);
        assert!(
            clean(&"long words ".repeat(50), 60)
                .unwrap()
                .chars()
                .count()
                <= 61
        );
    }
}
