//! The session's own stream (2025-11-25): a `GET` kept open beside the
//! requests, on which a server sends what it says unasked, such as
//! `notifications/tools/list_changed` after a tool was added outside any
//! request. Read for what the connection notes ([`Inner::note`]); what the
//! server asks there is answered as on a request's stream. Opened again
//! when it ends, with a growing wait; given up when the server keeps none
//! (`405`), the session is over (`404`), or it cannot be opened ten times
//! in a row.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use reqwest::header::ACCEPT;

use super::{Inner, content_type};
use crate::connection::exchange::{Parsed, parse};
use crate::error::ClientError;
use crate::retry::backoff;
use crate::sse;

/// Consecutive streams that could not be opened, or ended at once, before
/// this client stops listening.
const ATTEMPTS: u32 = 10;
/// The wait before opening it again, doubling up to…
const FIRST_WAIT: Duration = Duration::from_millis(100);
/// …this.
const LONGEST_WAIT: Duration = Duration::from_secs(5);
/// A stream open this long ended as a server ends an idle one, not as a
/// failure: the waits start over.
const STAYED_OPEN: Duration = Duration::from_secs(10);

pub(super) async fn listen(inner: Arc<Inner>) {
    let mut attempt = 0u32;
    loop {
        let opened = Instant::now();
        let request = inner
            .http
            .get(&inner.url)
            .header(ACCEPT, "text/event-stream");
        match inner.send(request, None).await {
            Ok(response) if content_type(&response).starts_with("text/event-stream") => {
                read(&inner, response).await;
            }
            // Not a stream, or refused: the server keeps none for this
            // client (or the session is over, and with it this connection).
            Ok(_)
            | Err(ClientError::Http {
                status: 400..=499, ..
            }) => return,
            Err(_) => {}
        }
        attempt = if opened.elapsed() >= STAYED_OPEN {
            1
        } else {
            attempt + 1
        };
        if attempt > ATTEMPTS {
            return;
        }
        tokio::time::sleep(backoff(attempt, FIRST_WAIT, LONGEST_WAIT)).await;
    }
}

/// Reads the stream until it ends, or an event is past the bound of a
/// message (the stream is dropped: opened again, it starts after it).
async fn read(inner: &Arc<Inner>, response: reqwest::Response) {
    let mut body = response.bytes_stream();
    let mut parser = sse::parser();
    while let Some(Ok(chunk)) = body.next().await {
        let Ok(events) = parser.push(&chunk) else {
            return;
        };
        for event in events {
            match parse(event.data.as_bytes()) {
                Some(Parsed::Request { id, method }) => inner.answer(id, method),
                Some(Parsed::Message(message)) => inner.note(&message),
                None => {}
            }
        }
    }
}
