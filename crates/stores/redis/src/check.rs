//! Whether weir's keys hold what weir keeps there. Anyone who can write to
//! the Redis can put a string where weir keeps a sorted set; Redis then
//! answers every command on that key with a bare `WRONGTYPE`. This module
//! turns that into an error naming the key and what belongs there: at
//! start ([`RedisLog::ping`](crate::RedisLog::ping) checks the shared
//! keys), and whenever a write meets `WRONGTYPE`. It also reports a run
//! record that cannot be read, once per key, for the listings that skip it.

use weir_runtime::LogError;

use crate::Core;
use crate::codec::failed;

/// What weir keeps under a key, and so the Redis type it must have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `runs`: every run.
    RunIndex,
    /// `open`: the runs without a terminal event.
    OpenIndex,
    /// `finished`: the ended runs, for retention.
    FinishedIndex,
    /// `queue`: the runs busy nodes offer.
    Queue,
    /// `run:<id>`: a run's summary.
    Run,
    /// `events:<id>`: a run's events.
    Events,
    /// `art:<id>`: a run's artifact descriptions.
    Artifacts,
    /// `artdata:<id>:<name>`: an artifact's bytes.
    ArtifactData,
    /// `node:<name>`: a node's lease.
    Lease,
}

impl Kind {
    /// The type `TYPE` answers for it.
    fn redis_type(self) -> &'static str {
        match self {
            Kind::RunIndex | Kind::OpenIndex | Kind::FinishedIndex => "zset",
            Kind::Queue | Kind::Events => "stream",
            Kind::Run | Kind::Artifacts => "hash",
            Kind::ArtifactData | Kind::Lease => "string",
        }
    }

    fn what(self) -> &'static str {
        match self {
            Kind::RunIndex => "its index of every run (a sorted set)",
            Kind::OpenIndex => "its index of open runs (a sorted set)",
            Kind::FinishedIndex => "its index of ended runs (a sorted set)",
            Kind::Queue => "the queue of offered runs (a stream)",
            Kind::Run => "a run's summary (a hash)",
            Kind::Events => "a run's events (a stream)",
            Kind::Artifacts => "a run's artifacts (a hash)",
            Kind::ArtifactData => "an artifact's bytes (a string)",
            Kind::Lease => "a node's lease (a string)",
        }
    }
}

/// Whether `error` is Redis's answer to a command on a key of another
/// type (also from inside a script).
pub(crate) fn is_wrong_type(error: &redis::RedisError) -> bool {
    error.code() == Some("WRONGTYPE") || error.to_string().contains("WRONGTYPE")
}

/// A pipelined answer as text: `None` when absent, an error (`WRONGTYPE`)
/// or not text, so that one hostile key spoils only its own answer.
pub(crate) fn optional_text(value: redis::Value) -> Option<String> {
    redis::from_redis_value::<Option<String>>(value)
        .ok()
        .flatten()
}

impl Core {
    /// Fails naming the first of `keys` that exists with a type other than
    /// its kind's (a missing key is fine: weir creates it).
    pub(crate) async fn check_types(
        &self,
        doing: &'static str,
        keys: &[(String, Kind)],
    ) -> Result<(), LogError> {
        let mut pipe = redis::pipe();
        for (key, _) in keys {
            pipe.cmd("TYPE").arg(key);
        }
        let types: Vec<String> = pipe
            .query_async(&mut self.conn())
            .await
            .map_err(failed(doing))?;
        for ((key, kind), found) in keys.iter().zip(types) {
            if found != "none" && found != kind.redis_type() {
                return Err(LogError::Storage {
                    doing,
                    message: format!(
                        "the Redis key {key:?} holds a {found}, where weir keeps {}; \
                         weir cannot use this Redis until it is fixed: remove the key if \
                         nothing else uses it (redis-cli DEL {key}), or give weir a database \
                         of its own (--redis redis://HOST:PORT/DB)",
                        kind.what()
                    ),
                });
            }
        }
        Ok(())
    }

    /// The error of a command on `keys` that failed with `error`: when
    /// Redis said `WRONGTYPE`, one naming the key (see
    /// [`Core::check_types`]); otherwise `error` as [`failed`] maps it.
    pub(crate) async fn explained(
        &self,
        doing: &'static str,
        error: redis::RedisError,
        keys: &[(String, Kind)],
    ) -> LogError {
        if !is_wrong_type(&error) {
            return failed(doing)(error);
        }
        match self.check_types(doing, keys).await {
            Err(named) => named,
            // Changed back meanwhile: the original answer is all there is.
            Ok(()) => failed(doing)(error),
        }
    }

    /// Reports a record a listing skips (`problem`), once per key for the
    /// life of this store handle: the run index is listed often (the
    /// dashboard every 250 ms), and one warning says it.
    pub(crate) fn report_skipped(&self, key: &str, problem: &str) {
        let first = self
            .reported
            .lock()
            .expect("reported keys lock")
            .insert(key.to_owned());
        if first {
            tracing::warn!(
                "redis: the run record {key:?} cannot be read ({problem}); listings skip it. \
                 Remove it if it is not weir's (redis-cli DEL {key})"
            );
        }
    }
}
