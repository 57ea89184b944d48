//! The Lua scripts that make each write one atomic step on the server, so
//! writers on several nodes never interleave inside an append.

use std::sync::LazyLock;

use redis::Script;

/// Appends events if the run's log is still where the writer saw it: a
/// compare-and-set on the summary's `events` count. The writer checked the
/// events against that tail (`LogTail::advance`, the rules every store
/// shares); if another writer got there first the script changes nothing
/// and answers `moved`, and the writer checks again against the new tail.
/// So of two concurrent terminal events exactly one is stored.
///
/// The writer sends the events already encoded, a few stream entries per
/// batch (`codec::entries`), so the script does no work per event: one
/// `XADD` per entry. Then it announces them on the run's channel, but only
/// when some node listens there (`bell.rs`): the entries' lines after the
/// writer's name and the run.
///
/// KEYS: run hash, events stream, runs index, open index, finished index.
/// ARGV: expected events (`""`: the run must not exist, and is created),
/// new events count, new state, updated ts, finished ts (`""` if open),
/// the run's channel, the writer's name, tool, arguments, node, created
/// ts, run id, then (entry id, lines) per entry.
pub(crate) static APPEND: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local current = redis.call('HGET', KEYS[1], 'events')
if ARGV[1] == '' then
  if current then return 'moved' end
  redis.call('HSET', KEYS[1], 'tool', ARGV[8], 'arguments', ARGV[9], 'node', ARGV[10], 'created_ts', ARGV[11])
  redis.call('ZADD', KEYS[3], ARGV[11], ARGV[12])
  redis.call('ZADD', KEYS[4], ARGV[11], ARGV[12])
elseif current ~= ARGV[1] then
  return 'moved'
end
for i = 13, #ARGV, 2 do
  redis.call('XADD', KEYS[2], ARGV[i], 'e', ARGV[i + 1])
end
redis.call('HSET', KEYS[1], 'events', ARGV[2], 'state', ARGV[3], 'updated_ts', ARGV[4])
if ARGV[5] ~= '' then
  redis.call('HSET', KEYS[1], 'finished_ts', ARGV[5])
  redis.call('ZREM', KEYS[4], ARGV[12])
  redis.call('ZADD', KEYS[5], ARGV[5], ARGV[12])
end
if redis.call('PUBSUB', 'NUMSUB', ARGV[6])[2] == 0 then return 'ok' end
local parts = {ARGV[7], '\n', ARGV[12], '\n'}
for i = 14, #ARGV, 2 do
  parts[#parts + 1] = ARGV[i]
end
redis.call('PUBLISH', ARGV[6], table.concat(parts))
return 'ok'
"#,
    )
});

/// Registers a pending run, once.
///
/// KEYS: run hash, runs index, open index. ARGV: run id, tool, arguments,
/// node, ts, owner (`""`: none), parent run (`""`: none), client (`""`:
/// none), then the resume record only when the run has one (it is opaque
/// text, so no value of it can stand for "none").
pub(crate) static CREATE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
if redis.call('EXISTS', KEYS[1]) == 1 then return 'exists' end
redis.call('HSET', KEYS[1], 'tool', ARGV[2], 'arguments', ARGV[3], 'node', ARGV[4],
  'created_ts', ARGV[5], 'updated_ts', ARGV[5], 'events', '0', 'state', 'pending')
if ARGV[6] ~= '' then redis.call('HSET', KEYS[1], 'owner', ARGV[6]) end
if ARGV[7] ~= '' then redis.call('HSET', KEYS[1], 'parent', ARGV[7]) end
if ARGV[8] ~= '' then redis.call('HSET', KEYS[1], 'client', ARGV[8]) end
if #ARGV >= 9 then redis.call('HSET', KEYS[1], 'resume_record', ARGV[9]) end
redis.call('ZADD', KEYS[2], ARGV[5], ARGV[1])
redis.call('ZADD', KEYS[3], ARGV[5], ARGV[1])
return 'ok'
"#,
    )
});

/// Stores an artifact once.
///
/// KEYS: run hash, artifacts hash, artifact data. ARGV: name, description,
/// bytes.
pub(crate) static PUT_ARTIFACT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
if redis.call('EXISTS', KEYS[1]) == 0 then return 'unknown' end
if redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[2]) == 0 then return 'exists' end
redis.call('SET', KEYS[3], ARGV[3])
return 'ok'
"#,
    )
});

/// Deletes the runs that ended before a time, with their events and
/// artifacts; answers how many.
///
/// KEYS: finished index, runs index. ARGV: key prefix, cutoff ts.
pub(crate) static DELETE_FINISHED: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[2])
local p = ARGV[1]
for _, id in ipairs(ids) do
  for _, name in ipairs(redis.call('HKEYS', p .. 'art:' .. id)) do
    redis.call('DEL', p .. 'artdata:' .. id .. ':' .. name)
  end
  redis.call('DEL', p .. 'run:' .. id, p .. 'events:' .. id, p .. 'art:' .. id)
  redis.call('ZREM', KEYS[1], id)
  redis.call('ZREM', KEYS[2], id)
end
return #ids
"#,
    )
});

/// Takes or renews a node's lease: set if free or already ours, with a
/// time to live; answers 0 when another holder has it.
///
/// KEYS: the node's lease. ARGV: holder token, ttl ms.
pub(crate) static LEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"#,
    )
});

/// Gives a lease back if it is still ours.
///
/// KEYS: the node's lease. ARGV: holder token.
pub(crate) static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
"#,
    )
});

/// Makes a node the executor of an offered run, if nobody has started it:
/// answers 1, else 0 (started, ended, or deleted meanwhile).
///
/// KEYS: run hash. ARGV: node.
pub(crate) static CLAIM: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
if redis.call('HGET', KEYS[1], 'state') ~= 'pending' then return 0 end
redis.call('HSET', KEYS[1], 'node', ARGV[1])
return 1
"#,
    )
});
