//! Opening the run stores: the data directory's SQLite file and a Redis
//! that nodes share. `weir serve`, `weir plan run` and `weir runs` open
//! them through these functions alone, so they read the same store the
//! same way.

use std::path::{Path, PathBuf};

use anyhow::Context;
use weir_store_sqlite::{SqliteLog, SqliteOptions};

/// The database file inside a data directory.
pub(crate) const DB_FILE: &str = "weir.db";

/// The database file of `data_dir`.
pub(crate) fn db_path(data_dir: &Path) -> PathBuf {
    data_dir.join(DB_FILE)
}

/// The data directory's store, created when it does not exist yet.
pub(crate) fn sqlite(data_dir: &Path) -> anyhow::Result<SqliteLog> {
    SqliteLog::open(db_path(data_dir), SqliteOptions::default())
        .with_context(|| format!("opening the event log in {}", data_dir.display()))
}

/// A Redis store (`weir serve --redis`).
#[cfg(feature = "redis")]
pub(crate) type Redis = weir_store_redis::RedisLog;
/// A Redis store: none in a build without the `redis` feature.
#[cfg(not(feature = "redis"))]
pub(crate) enum Redis {}

/// The Redis store at `url` (`redis://HOST:PORT/DB`), checked to answer
/// and to hold weir's keys with the types weir keeps there.
#[cfg(feature = "redis")]
pub(crate) async fn redis(url: &str) -> anyhow::Result<Redis> {
    use weir_store_redis::RedisOptions;
    let log = Redis::open(url, RedisOptions::default())?;
    log.ping().await?;
    Ok(log)
}

#[cfg(not(feature = "redis"))]
pub(crate) async fn redis(_url: &str) -> anyhow::Result<Redis> {
    anyhow::bail!(
        "this weir was built without its `redis` feature; build it with the feature to use --redis"
    )
}

/// `redis` as the event log it is.
#[cfg(feature = "redis")]
pub(crate) fn redis_log(redis: &Redis) -> std::sync::Arc<dyn weir_runtime::EventLog> {
    std::sync::Arc::new(redis.clone())
}

#[cfg(not(feature = "redis"))]
pub(crate) fn redis_log(redis: &Redis) -> std::sync::Arc<dyn weir_runtime::EventLog> {
    match *redis {}
}

/// Asks the node executing `run_id` to cancel it, through the store's
/// cancel channel.
#[cfg(feature = "redis")]
pub(crate) async fn request_cancel(
    redis: &Redis,
    run_id: &weir_core::RunId,
    reason: &str,
) -> anyhow::Result<()> {
    Ok(redis.request_cancel(run_id, reason).await?)
}

#[cfg(not(feature = "redis"))]
pub(crate) async fn request_cancel(
    redis: &Redis,
    _run_id: &weir_core::RunId,
    _reason: &str,
) -> anyhow::Result<()> {
    match *redis {}
}
