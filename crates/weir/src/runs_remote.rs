//! `weir runs tail ID --url URL`: follow a run on a weir server over its
//! plain SSE endpoint, `GET /runs/{id}/events`, reconnecting without losing
//! or repeating an event.

use std::io::Write;

use weir_client::follow_run;
use weir_core::{RunId, RunState};

use crate::exit::Outcome;
use crate::output;

pub(crate) async fn tail(
    url: &str,
    token: Option<String>,
    id: &RunId,
    from: u64,
    json: bool,
) -> anyhow::Result<Outcome> {
    let mut events = follow_run(url, token, id.as_str(), from);
    let mut out = std::io::stdout().lock();
    while let Some(event) = events.next().await {
        let event = match event {
            Ok(event) => event,
            Err(error) => {
                eprintln!("weir: {error}");
                return Ok(Outcome::Unreachable);
            }
        };
        if json {
            writeln!(out, "{}", serde_json::to_string(&event)?)?;
        } else {
            writeln!(out, "{}", output::event_line(&event))?;
        }
        out.flush()?;
        // Applied to a working run, only a terminal event changes the state.
        if let Some(state) = RunState::Working
            .apply(&event.kind)
            .ok()
            .filter(|state| state.is_terminal())
        {
            return Ok(Outcome::from(state));
        }
    }
    // Started past the end: the server said how the run ended.
    if let Some(state) = events.ended() {
        return Ok(Outcome::from(state));
    }
    eprintln!(
        "weir: the stream of run {id} ended before the run did; run the command again to go on"
    );
    Ok(Outcome::Unreachable)
}
