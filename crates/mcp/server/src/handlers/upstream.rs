//! The upstream servers' resources and prompts, passed through
//! ([`PassThrough`]): listed beside the catalog's, read and rendered by the
//! upstream that serves them.
//!
//! A caller sees only the upstreams it may use (`upstream:NAME` among its
//! tools, which a tokens file's `packs=upstream:NAME` grants), as it sees
//! only their tools. Prompts are named as the upstreams' tools are
//! (`NAME__prompt`, or as the upstream names them under `weir wrap`).
//! Resource URIs are kept as the upstream wrote them, scheme and all: a URI
//! names a thing (`file:///…`, `https://…`) and a client may act on its
//! scheme, so rewriting it would break more than it would disambiguate. A
//! read is answered by the first upstream (by name) that can read the URI.

use futures_util::future::join_all;
use serde_json::{Value, json};
use weir_mcp_wire::jsonrpc::{RpcError, code};
use weir_runtime::Principal;

use crate::catalog::PassThrough;
use crate::state::ServerState;

/// Between an upstream's name and its prompt's, as between it and its
/// tool's.
const SEPARATOR: &str = "__";

/// Most pages of one upstream's list read for one list of weir's.
const PAGES: usize = 16;

/// The pass-through and the upstreams `caller` may see, by name.
fn visible<'a>(
    state: &'a ServerState,
    caller: &Principal,
) -> Option<(&'a PassThrough, Vec<String>)> {
    let through = state.config.upstreams.as_ref()?;
    let names = through
        .source
        .names()
        .into_iter()
        .filter(|name| caller.may_call(&weir_runtime::upstream_grant(name)))
        .collect();
    Some((through, names))
}

/// Every entry of `key` in `method`'s pages from each upstream `caller`
/// sees, prompts renamed as served. An upstream that does not answer is
/// left out of the list (and logged), so one broken upstream does not hide
/// the rest; one without the method (no resources, say) has none.
pub(crate) async fn list(
    state: &ServerState,
    caller: &Principal,
    method: &str,
    key: &str,
) -> Vec<Value> {
    let Some((through, names)) = visible(state, caller) else {
        return Vec::new();
    };
    let lists = join_all(
        names
            .iter()
            .map(|name| list_one(through, name, method, key)),
    )
    .await;
    let mut all = Vec::new();
    for (name, listed) in names.iter().zip(lists) {
        match listed {
            Ok(items) if key == "prompts" => {
                all.extend(
                    items
                        .into_iter()
                        .map(|prompt| served_prompt(through, name, prompt)),
                );
            }
            Ok(items) => all.extend(items),
            Err(error) if error.code == code::METHOD_NOT_FOUND => {}
            Err(error) => {
                tracing::warn!(upstream = %name, %method, "left out of the list: {}", error.message);
            }
        }
    }
    all
}

async fn list_one(
    through: &PassThrough,
    name: &str,
    method: &str,
    key: &str,
) -> Result<Vec<Value>, RpcError> {
    let mut items = Vec::new();
    let mut params = json!({});
    for _ in 0..PAGES {
        let page = through.source.request(name, method, params).await?;
        if let Some(listed) = page.get(key).and_then(Value::as_array) {
            items.extend(listed.iter().cloned());
        }
        match page.get("nextCursor").and_then(Value::as_str) {
            Some(cursor) => params = json!({ "cursor": cursor }),
            None => break,
        }
    }
    Ok(items)
}

/// `prompt` of upstream `name` as weir serves it.
fn served_prompt(through: &PassThrough, name: &str, mut prompt: Value) -> Value {
    if through.prefixed
        && let Some(own) = prompt.get("name").and_then(Value::as_str)
    {
        prompt["name"] = format!("{name}{SEPARATOR}{own}").into();
    }
    prompt
}

/// The upstream serving prompt `served` and its name there, among those
/// `caller` sees; `None` when no upstream's prompt is named so.
fn route_prompt(state: &ServerState, caller: &Principal, served: &str) -> Option<(String, String)> {
    let (through, names) = visible(state, caller)?;
    if !through.prefixed {
        // One upstream (`weir wrap`): its names are weir's.
        return names
            .into_iter()
            .next()
            .map(|name| (name, served.to_owned()));
    }
    // The longest name that prefixes it: `a__b__p` is `a__b`'s `p` when
    // both `a` and `a__b` are upstreams.
    names
        .into_iter()
        .filter_map(|name| {
            let own = served.strip_prefix(&name)?.strip_prefix(SEPARATOR)?;
            Some((name.clone(), own.to_owned()))
        })
        .max_by_key(|(name, _)| name.len())
}

/// `prompts/get` of an upstream's prompt: `None` when `served` names none.
pub(crate) async fn get_prompt(
    state: &ServerState,
    caller: &Principal,
    served: &str,
    params: &Value,
) -> Option<Result<Value, RpcError>> {
    let (upstream, own) = route_prompt(state, caller, served)?;
    let through = state.config.upstreams.as_ref()?;
    let mut params = params.clone();
    params["name"] = own.into();
    Some(
        through
            .source
            .request(&upstream, "prompts/get", params)
            .await,
    )
}

/// `resources/read` of `uri` by the upstreams `caller` sees: the first
/// answer; `None` when there is no upstream to ask. With one upstream, its
/// refusal is the answer (it knows best why); with several, a URI none of
/// them reads is one that does not exist.
pub(crate) async fn read(
    state: &ServerState,
    caller: &Principal,
    params: &Value,
) -> Option<Result<Value, RpcError>> {
    let (through, names) = visible(state, caller)?;
    let mut refused = None;
    for name in &names {
        match through
            .source
            .request(name, "resources/read", params.clone())
            .await
        {
            Ok(result) => return Some(Ok(result)),
            Err(error) => refused = Some(error),
        }
    }
    if names.len() == 1 {
        refused.map(Err)
    } else {
        None
    }
}

/// `completion/complete` for an upstream's prompt or resource template:
/// `None` when the reference is none of theirs.
pub(crate) async fn complete(
    state: &ServerState,
    caller: &Principal,
    params: &Value,
) -> Option<Result<Value, RpcError>> {
    let reference = params.get("ref")?;
    if reference.get("type").and_then(Value::as_str) == Some("ref/prompt") {
        let served = reference.get("name").and_then(Value::as_str)?;
        let (upstream, own) = route_prompt(state, caller, served)?;
        let mut params = params.clone();
        params["ref"]["name"] = own.into();
        let through = state.config.upstreams.as_ref()?;
        return Some(
            through
                .source
                .request(&upstream, "completion/complete", params)
                .await,
        );
    }
    // A resource template: the first upstream that completes it.
    let (through, names) = visible(state, caller)?;
    for name in &names {
        if let Ok(result) = through
            .source
            .request(name, "completion/complete", params.clone())
            .await
        {
            return Some(Ok(result));
        }
    }
    None
}
