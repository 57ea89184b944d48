//! The client of one endpoint: the request, its retries before the first
//! token, and the endpoint's circuit breaker.

use std::sync::{Arc, Mutex};

use serde_json::json;
use tokio::time::Instant;
use weir_core::{Admission, BreakerSnapshot, CircuitBreaker};

use super::stream::{Bounds, ChatStream, Report, error_chain};
use super::{ChatConfig, ChatRequest, ERROR_BODY_BYTES, LlmError};

/// A client of one OpenAI-compatible endpoint. Cheap to share (`Arc`); its
/// breaker counts every call made through it.
pub struct ChatClient {
    http: reqwest::Client,
    url: reqwest::Url,
    config: ChatConfig,
    breaker: Arc<Mutex<CircuitBreaker>>,
    /// The breaker's monotonic clock.
    clock: std::time::Instant,
}

impl ChatClient {
    /// A client for `config.endpoint`; fails on a URL it cannot call.
    pub fn new(config: ChatConfig) -> Result<ChatClient, LlmError> {
        let bad = |reason: String| LlmError::BadEndpoint {
            endpoint: config.endpoint.clone(),
            reason,
        };
        let base = config.endpoint.trim_end_matches('/');
        let full = if base.ends_with("/chat/completions") {
            base.to_owned()
        } else {
            format!("{base}/chat/completions")
        };
        let url = reqwest::Url::parse(&full).map_err(|error| bad(error.to_string()))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(bad(format!(
                "the scheme is {:?}; use http:// or https://",
                url.scheme()
            )));
        }
        let http = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            // Tokens are small writes; Nagle would hold them back.
            .tcp_nodelay(true)
            .build()
            .map_err(|error| bad(error_chain(&error)))?;
        Ok(ChatClient {
            http,
            url,
            breaker: Arc::new(Mutex::new(CircuitBreaker::new(config.breaker))),
            config,
            clock: std::time::Instant::now(),
        })
    }

    /// Its configuration.
    pub fn config(&self) -> &ChatConfig {
        &self.config
    }

    /// The URL requests go to.
    pub fn url(&self) -> &str {
        self.url.as_str()
    }

    /// The breaker's state now.
    pub fn breaker(&self) -> BreakerSnapshot {
        self.breaker
            .lock()
            .expect("breaker lock")
            .snapshot(self.now_ms())
    }

    /// Asks for an answer and returns once its first token is in (or the
    /// answer ended empty). Failures before the first token are retried
    /// ([`ChatConfig::retries`], doubling [`ChatConfig::backoff`]); the
    /// call as a whole counts once for the breaker, and a refused call
    /// fails at once with [`LlmError::BreakerOpen`]. The whole answer,
    /// retries included, is bounded by [`ChatConfig::total_timeout`].
    pub async fn start(&self, request: &ChatRequest) -> Result<ChatStream, LlmError> {
        let admission = self
            .breaker
            .lock()
            .expect("breaker lock")
            .admit(self.now_ms());
        if let Admission::Refused { retry_in_ms } = admission {
            return Err(LlmError::BreakerOpen {
                failures: self.breaker().consecutive_failures,
                retry_in_ms,
            });
        }
        let started = Instant::now();
        let bounds = Bounds {
            deadline: started + self.config.total_timeout,
            total: self.config.total_timeout,
            max_line: self.config.max_line_bytes,
            max_body: self.config.max_body_bytes,
            max_tokens: request.max_tokens,
        };
        let body = json!({
            "model": self.config.model,
            "messages": request.messages,
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "stream": true,
        });
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.attempt(&body, started, bounds).await {
                Ok(mut stream) => {
                    stream.handed_out(attempt, self.report());
                    return Ok(stream);
                }
                Err(error)
                    if error.retryable()
                        && attempt <= self.config.retries
                        // No retry that could not finish in time.
                        && Instant::now() + self.backoff(attempt) < bounds.deadline =>
                {
                    tokio::time::sleep(self.backoff(attempt)).await;
                }
                Err(error) => {
                    self.report().failed();
                    return Err(error);
                }
            }
        }
    }

    /// The wait before the retry after attempt `attempt` (1-based).
    fn backoff(&self, attempt: u32) -> std::time::Duration {
        self.config.backoff * 2u32.saturating_pow(attempt - 1)
    }

    /// One request, read up to its first token.
    async fn attempt(
        &self,
        body: &serde_json::Value,
        started: Instant,
        bounds: Bounds,
    ) -> Result<ChatStream, LlmError> {
        let deadline = (Instant::now() + self.config.first_token_timeout).min(bounds.deadline);
        let timed_out = || {
            if Instant::now() >= bounds.deadline {
                LlmError::TimedOut {
                    limit: bounds.total,
                    tokens: 0,
                }
            } else {
                LlmError::FirstTokenTimeout(self.config.first_token_timeout)
            }
        };
        let mut request = self
            .http
            .post(self.url.clone())
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .json(body);
        if let Some(key) = &self.config.api_key {
            request = request.bearer_auth(key);
        }
        let response = tokio::time::timeout_at(deadline, request.send())
            .await
            .map_err(|_| timed_out())?
            .map_err(|error| LlmError::Unreachable {
                endpoint: self.url.to_string(),
                reason: error_chain(&error),
            })?;
        let status = response.status();
        if !status.is_success() {
            // The body says why: its start, never waited on for long; the
            // rest is never read (dropping the response closes it).
            let start = error_body_start(response, deadline).await;
            return Err(LlmError::Status {
                status: status.as_u16(),
                body: String::from_utf8_lossy(&start).chars().take(300).collect(),
            });
        }
        let mut stream = ChatStream::new(
            response,
            deadline,
            self.config.first_token_timeout,
            self.config.idle_timeout,
            started,
            bounds,
        );
        stream.prime().await?;
        Ok(stream)
    }

    fn report(&self) -> Report {
        Report {
            breaker: self.breaker.clone(),
            clock: self.clock,
        }
    }

    fn now_ms(&self) -> u64 {
        self.clock.elapsed().as_millis() as u64
    }
}

/// The first [`ERROR_BODY_BYTES`] of an error response's body, or what of
/// them arrives before `deadline`.
async fn error_body_start(mut response: reqwest::Response, deadline: Instant) -> Vec<u8> {
    let mut start = Vec::new();
    while start.len() < ERROR_BODY_BYTES {
        match tokio::time::timeout_at(deadline, response.chunk()).await {
            Ok(Ok(Some(piece))) => {
                let room = ERROR_BODY_BYTES - start.len();
                start.extend_from_slice(&piece[..piece.len().min(room)]);
            }
            _ => break,
        }
    }
    start
}
