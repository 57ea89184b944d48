// The runs dashboard: plain JS, no framework, no build step. Two views by
// URL hash: the runs list (#/) and one run (#/run/ID). Data comes from the
// server's /api routes and GET /runs/{id}/events, read with fetch (not
// EventSource, which cannot send the Authorization header).
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  const TOKEN_KEY = "weir.token";
  const PAGE = 50;
  const ACTIVE = new Set(["pending", "working", "input_required"]);
  // What tests (and curious people) can read: counts, not internals.
  const stats = (window.__weir = { received: 0, duplicates: 0, resumedFrom: null, liveRuns: 0 });

  let token = sessionStorage.getItem(TOKEN_KEY);
  let view = null; // the current view's stop function

  // ---- HTTP ----------------------------------------------------------
  class Unauthorized extends Error {}
  function headers(extra) {
    const h = Object.assign({}, extra);
    if (token) h.Authorization = "Bearer " + token;
    return h;
  }
  async function api(path, options) {
    const response = await fetch(path, Object.assign({}, options, { headers: headers(options && options.headers) }));
    if (response.status === 401) throw new Unauthorized();
    const body = await response.json().catch(() => ({}));
    if (!response.ok) throw new Error((body.error && body.error.message) || response.statusText);
    return body;
  }

  // Server-sent events over fetch. Calls onEvent({event, id, data}) per
  // event; reconnects after a drop with Last-Event-ID = the last id seen
  // (lastId() asks the caller, which may have learned more since), until
  // stop() or onEvent returns "stop".
  function sse(url, { lastId, onEvent, onState }) {
    const control = new AbortController();
    let stopped = false;
    (async () => {
      let delay = 250;
      while (!stopped) {
        try {
          const h = headers({ Accept: "text/event-stream" });
          const last = lastId ? lastId() : null;
          if (last !== null && last !== undefined) h["Last-Event-ID"] = String(last);
          const response = await fetch(url, { headers: h, signal: control.signal });
          if (response.status === 401) { stopped = true; onState && onState("unauthorized"); return; }
          if (!response.ok || !response.body) throw new Error(response.statusText);
          onState && onState("open");
          delay = 250;
          const reader = response.body.getReader();
          const decoder = new TextDecoder();
          let buffer = "", event = "message", id = null, data = [];
          for (;;) {
            const { value, done } = await reader.read();
            if (done) break;
            buffer += decoder.decode(value, { stream: true });
            // Lines are cut by position and the rest kept once per chunk:
            // a chunk of many events is read in linear time.
            let at = 0, nl;
            while ((nl = buffer.indexOf("\n", at)) >= 0) {
              let line = buffer.slice(at, nl);
              at = nl + 1;
              if (line.endsWith("\r")) line = line.slice(0, -1);
              if (line === "") {
                if (data.length) {
                  if (onEvent({ event, id, data: data.join("\n") }) === "stop") { stopped = true; control.abort(); return; }
                }
                event = "message"; id = null; data = [];
              } else if (line.startsWith(":")) {
                // a comment
              } else {
                const colon = line.indexOf(":");
                const field = colon < 0 ? line : line.slice(0, colon);
                let v = colon < 0 ? "" : line.slice(colon + 1);
                if (v.startsWith(" ")) v = v.slice(1);
                if (field === "event") event = v;
                else if (field === "id") id = v;
                else if (field === "data") data.push(v);
              }
            }
            buffer = buffer.slice(at);
          }
        } catch (e) {
          if (stopped) return;
        }
        if (stopped) return;
        onState && onState("closed");
        await new Promise((r) => setTimeout(r, delay));
        delay = Math.min(delay * 2, 5000);
      }
    })();
    return () => { stopped = true; control.abort(); };
  }

  // ---- formatting ----------------------------------------------------
  const pad = (n) => String(n).padStart(2, "0");
  function clock(ts) {
    const d = new Date(ts);
    return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  }
  function when(ts) {
    const d = new Date(ts);
    const today = new Date().toDateString() === d.toDateString();
    return (today ? "" : `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} `) + clock(ts);
  }
  function span(ms) {
    if (ms < 1000) return ms + " ms";
    const s = Math.floor(ms / 1000);
    if (s < 60) return (ms / 1000).toFixed(1) + " s";
    if (s < 3600) return `${Math.floor(s / 60)}m ${pad(s % 60)}s`;
    return `${Math.floor(s / 3600)}h ${pad(Math.floor(s / 60) % 60)}m`;
  }
  function duration(run) {
    return span((run.finished_ts || (ACTIVE.has(run.state) ? Date.now() : run.updated_ts)) - run.created_ts);
  }
  // How far a run is, of 100; null while it goes without a total
  // (execute_code counts the lines written, with no end to count to).
  function percent(run) {
    if (run.state === "completed") return 100;
    const p = run.progress;
    if (p && p.total) return Math.max(0, Math.min(100, (100 * p.progress) / p.total));
    return ACTIVE.has(run.state) ? null : 100;
  }
  // A bar (`.progress` around its fill): the share done, or, with no
  // total, a stripe that moves to say the run is going.
  function drawBar(bar, run) {
    const share = percent(run);
    bar.classList.toggle("done", run.state === "completed");
    bar.classList.toggle("indeterminate", share === null);
    bar.firstChild.style.width = share === null ? "" : share + "%";
  }
  // What a run without a total has done so far: `1,234`, else "".
  function count(run) {
    const p = run.progress;
    return p && !p.total && ACTIVE.has(run.state) ? Number(p.progress).toLocaleString() : "";
  }
  // Who asked for a run: its owner (the credential) and its client (what
  // the MCP client called itself).
  function who(run) {
    return [run.owner, run.client].filter(Boolean).join(" · ") || "—";
  }
  // `code: message`, the code said once (logs written before the server
  // stopped repeating it begin their message with it).
  function failure(error) {
    const message = error.message || "";
    return message.startsWith(error.code + ":") ? message : `${error.code}: ${message}`;
  }
  // A run's arguments: JSON, but text of several lines (a program, a
  // prompt, a plan) apart, as it reads, under the name it has in the JSON.
  function showArguments(box, args) {
    const texts = [];
    const strip = (value, path) => {
      if (typeof value === "string" && value.includes("\n")) {
        texts.push([path, value]);
        return `‹${value.split("\n").length} lines, below›`;
      }
      if (Array.isArray(value)) return value.map((v, i) => strip(v, `${path}[${i}]`));
      if (value && typeof value === "object") {
        return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, strip(v, path ? `${path}.${k}` : k)]));
      }
      return value;
    };
    const rest = strip(args, "");
    const nodes = [el("pre", "json", JSON.stringify(rest, null, 2))];
    for (const [path, text] of texts) nodes.push(el("div", "arg-name", path), el("pre", "text", text));
    box.replaceChildren(...nodes);
  }
  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function mount(template) {
    const main = $("main");
    main.replaceChildren($(template).content.cloneNode(true));
    return main;
  }

  // ---- token ---------------------------------------------------------
  function askToken(message) {
    if (view) view();
    view = null;
    mount("t-token");
    if (message) $("token-error").textContent = message;
    $("token-form").addEventListener("submit", (e) => {
      e.preventDefault();
      token = $("token").value.trim();
      sessionStorage.setItem(TOKEN_KEY, token);
      route();
    });
    $("token").focus();
  }
  function failed(error) {
    if (error instanceof Unauthorized) askToken(token ? "That token was refused." : "");
    else $("main").prepend(el("p", "card error", String(error.message || error)));
  }
  $("logout").addEventListener("click", () => { sessionStorage.removeItem(TOKEN_KEY); token = null; askToken(); });

  // ---- the runs list -------------------------------------------------
  function listView() {
    mount("t-list");
    const body = $("runs");
    const rows = new Map(); // run id -> {tr, run}
    const cursors = [""]; // cursor of each page seen, for "newer"
    let page = 0, next = null, stopLive = null, alive = true;
    const saved = JSON.parse(sessionStorage.getItem("weir.filters") || "{}");
    $("f-state").value = saved.state || "";

    function filters() {
      return { state: $("f-state").value, tool: $("f-tool").value };
    }
    function matches(run) {
      const f = filters();
      return (!f.state || f.state.split(",").includes(run.state)) && (!f.tool || f.tool === run.tool);
    }
    function fill(tr, run) {
      const cells = tr.children;
      const state = cells[0].firstChild;
      state.className = "state " + run.state;
      state.textContent = run.state;
      cells[1].textContent = run.tool;
      cells[3].textContent = when(run.created_ts);
      cells[4].textContent = duration(run);
      const bar = cells[5].firstChild;
      drawBar(bar, run);
      bar.title = run.progress ? `${run.progress.progress}${run.progress.total ? " / " + run.progress.total : ""}${run.progress.message ? " — " + run.progress.message : ""}` : "";
      cells[5].lastChild.textContent = count(run);
      cells[6].textContent = who(run);
    }
    function row(run) {
      const tr = el("tr");
      tr.dataset.run = run.run_id;
      const td0 = el("td");
      td0.append(el("span", "state"));
      const link = el("a", "", run.run_id.slice(0, 8) + "…" + run.run_id.slice(-4));
      link.href = "#/run/" + encodeURIComponent(run.run_id);
      const td2 = el("td");
      td2.append(link);
      const td5 = el("td");
      const bar = el("div", "progress");
      bar.append(el("div"));
      td5.append(bar, el("span", "count muted"));
      tr.append(td0, el("td"), td2, el("td"), el("td"), td5, el("td"));
      fill(tr, run);
      return tr;
    }
    // A run a run on this page started (a plan's step) sits under it,
    // indented, its siblings oldest first; others keep the list's order.
    function depthOf(run) {
      let depth = 0;
      for (let up = run.parent; up && rows.has(up) && depth < 16; up = rows.get(up).run.parent) depth++;
      return depth;
    }
    function nest(tr, run) {
      const depth = depthOf(run);
      tr.classList.toggle("child", depth > 0);
      tr.children[1].style.paddingLeft = depth ? 6 + 18 * depth + "px" : "";
      if (depth) tr.dataset.parent = run.parent;
      else delete tr.dataset.parent;
    }
    // The page's runs, each after its parent (when that is on the page).
    function nested(runs) {
      const here = new Set(runs.map((run) => run.run_id));
      const children = new Map();
      const roots = [];
      for (const run of runs) {
        if (run.parent && here.has(run.parent)) {
          if (!children.has(run.parent)) children.set(run.parent, []);
          children.get(run.parent).push(run);
        } else roots.push(run);
      }
      const out = [];
      const walk = (run) => {
        out.push(run);
        for (const child of (children.get(run.run_id) || []).reverse()) walk(child);
      };
      roots.forEach(walk);
      return out;
    }
    // Whether a run not shown belongs on the first page: it is not older
    // than every run there, or the page has room.
    function withinFirstPage(run) {
      if (rows.size < PAGE) return true;
      let oldest = Infinity;
      for (const known of rows.values()) oldest = Math.min(oldest, known.run.created_ts);
      return run.created_ts >= oldest;
    }
    // The rows in the list's order (newest first), steps under their runs.
    function reorder() {
      const runs = [...rows.values()].map((known) => known.run);
      runs.sort((a, b) => b.created_ts - a.created_ts || (a.run_id < b.run_id ? 1 : a.run_id > b.run_id ? -1 : 0));
      const order = nested(runs);
      body.replaceChildren(...order.map((run) => rows.get(run.run_id).tr));
      for (const run of order) nest(rows.get(run.run_id).tr, run);
    }
    async function load() {
      const f = filters();
      sessionStorage.setItem("weir.filters", JSON.stringify(f));
      const q = new URLSearchParams({ limit: PAGE });
      if (f.state) q.set("state", f.state);
      if (f.tool) q.set("tool", f.tool);
      if (cursors[page]) q.set("cursor", cursors[page]);
      const answer = await api("/api/runs?" + q);
      if (!alive) return;
      rows.clear();
      const trs = nested(answer.runs).map((run) => {
        const tr = row(run);
        rows.set(run.run_id, { tr, run });
        return tr;
      });
      for (const tr of trs) nest(tr, rows.get(tr.dataset.run).run);
      body.replaceChildren(...trs);
      next = answer.next_cursor;
      $("older").disabled = !next;
      $("newer").disabled = page === 0;
      $("page-no").textContent = "page " + (page + 1);
      $("empty").hidden = answer.runs.length > 0;
    }
    function onRun(run) {
      stats.liveRuns++;
      const known = rows.get(run.run_id);
      if (known) {
        known.run = run;
        if (matches(run)) fill(known.tr, run);
        else { known.tr.remove(); rows.delete(run.run_id); }
        return;
      }
      // A run not on this page: a step of a run on it goes under that
      // run; else a run that belongs on the first page goes there, in its
      // place (they may come in any order: a plan after its first step).
      if (!matches(run)) return;
      const step = run.parent && rows.has(run.parent);
      if (!step && (page !== 0 || !withinFirstPage(run))) return;
      rows.set(run.run_id, { tr: row(run), run });
      reorder();
      $("empty").hidden = true;
      while (body.children.length > PAGE) {
        const last = body.lastChild;
        rows.delete(last.dataset.run);
        last.remove();
        $("older").disabled = false;
        // The page now ends earlier: the next page starts after its last row.
        const end = rows.get(body.lastChild.dataset.run).run;
        next = end.created_ts + "." + end.run_id;
      }
    }
    // Watch first, then read: a run created in between is not missed.
    stopLive = sse("/api/runs/live", {
      onEvent(e) {
        if (e.event === "run") onRun(JSON.parse(e.data));
        else if (e.event === "reload") load().catch(failed);
      },
      onState(s) {
        $("conn").classList.toggle("on", s === "open");
        if (s === "unauthorized") askToken(token ? "That token was refused." : "");
        // Back after a drop: what changed meanwhile is in the list.
        if (s === "open" && rows.size) load().catch(failed);
      },
    });
    api("/api/tools").then((answer) => {
      for (const name of answer.tools.sort()) $("f-tool").append(el("option", "", name));
      $("f-tool").value = saved.tool || "";
      return load();
    }).catch(failed);
    $("f-state").addEventListener("change", () => { page = 0; cursors.length = 1; load().catch(failed); });
    $("f-tool").addEventListener("change", () => { page = 0; cursors.length = 1; load().catch(failed); });
    $("older").addEventListener("click", () => { if (next) { cursors[++page] = next; load().catch(failed); } });
    $("newer").addEventListener("click", () => { if (page > 0) { page--; load().catch(failed); } });
    const ticker = setInterval(() => {
      for (const { tr, run } of rows.values()) if (ACTIVE.has(run.state)) tr.children[4].textContent = duration(run);
    }, 1000);
    return () => { alive = false; stopLive && stopLive(); clearInterval(ticker); };
  }

  // ---- one run -------------------------------------------------------
  const ROW_H = 18;
  const MAX_SPACE = 8000000; // px: under every browser's element height cap
  const CACHE = 20000; // event rows kept in memory
  const HISTORY = 2000; // events read before going live (timeline, artifacts)

  function text(e) {
    const json = (v) => { const s = JSON.stringify(v); return s.length > 400 ? s.slice(0, 400) + "…" : s; };
    const blocks = (content) => (content || []).map((c) => (c.type === "text" ? c.text : `[${c.type}]`)).join(" ");
    switch (e.type) {
      case "started": return `${e.tool} ${json(e.arguments)}`;
      case "meta": return json(Object.fromEntries(Object.entries(e).filter(([k]) => !["run_id", "seq", "ts", "type"].includes(k))));
      case "progress": return `${e.progress}${e.total ? " / " + e.total : ""}${e.phase ? " [" + e.phase + "]" : ""}${e.message ? " " + e.message : ""}${e.eta_ms ? " ETA " + span(e.eta_ms) : ""}`;
      case "log": return `${e.level}${e.stream && e.stream !== "none" ? "/" + e.stream : ""}: ${e.text}`;
      case "partial": return (e.group ? `(${e.group}) ` : "") + (e.content && e.content.length ? blocks(e.content) : json(e.items));
      case "artifact": return `${e.name} (${e.mime}, ${e.bytes} bytes)`;
      case "warning": return e.message;
      case "input_required": return `asks: ${e.message || e.input && e.input.kind || ""}`;
      case "input_ended": return `answer: ${e.outcome}`;
      case "completed": return blocks(e.content) || json(e.structured || {});
      case "failed": return failure(e.error);
      case "canceled": return e.reason;
      default: return json(e);
    }
  }

  function mermaidOf(value, found) {
    if (typeof value === "string") {
      if (/^\s*(graph|flowchart)\s+(TD|TB|LR|BT|RL)\b/.test(value)) found.push(value);
    } else if (value && typeof value === "object") {
      for (const v of Object.values(value)) mermaidOf(v, found);
    }
    return found;
  }

  function runView(runId) {
    mount("t-run");
    let alive = true, stop = null, run = null;
    const cache = new Map(); // seq -> event
    let total = 0; // events known to exist: seqs 0..total-1
    let last = -1; // highest seq received, in order
    let follow = true, dirty = false, fetching = false;
    const buckets = new Map(); // second -> events that second
    const phases = []; // {name, ts}
    const artifacts = new Map();
    // The runs this one started (a plan's steps), read again when one
    // starts, when it ends, and every 2 s while it goes.
    const steps = { due: true, busy: false, at: 0, any: false };
    const key = "weir.run." + runId;
    const spot = JSON.parse(sessionStorage.getItem(key) || "null");
    if (spot) follow = spot.follow;
    $("follow").checked = follow;

    const log = $("log"), win = $("log-window"), space = $("log-space");
    const visible = () => Math.ceil(log.clientHeight / ROW_H) + 1;
    function spaceHeight() { return Math.max(log.clientHeight, Math.min(total * ROW_H, MAX_SPACE)); }
    // The first row shown, from the scroll position (scaled when the log is
    // taller than the space).
    function firstRow() {
      const room = space.offsetHeight - log.clientHeight;
      const frac = room > 0 ? log.scrollTop / room : 0;
      return Math.max(0, Math.round(frac * Math.max(0, total - visible() + 1)));
    }
    function scrollTo(seq) {
      const room = space.offsetHeight - log.clientHeight;
      const rows = Math.max(1, total - visible() + 1);
      log.scrollTop = (seq / rows) * room;
    }
    function draw() {
      dirty = false;
      space.style.height = spaceHeight() + "px";
      if (follow) log.scrollTop = log.scrollHeight;
      const first = firstRow();
      const n = Math.min(visible(), total - first);
      // The window covers the view and no more: it must not lengthen the
      // scrolled area it sits in.
      win.style.height = log.clientHeight + "px";
      win.style.transform = `translateY(${log.scrollTop}px)`;
      const nodes = [];
      let missing = -1;
      for (let seq = first; seq < first + n; seq++) {
        const e = cache.get(seq);
        const r = el("div", "row " + (e ? "ev-" + e.type : "missing"));
        r.dataset.seq = seq;
        r.append(el("span", "seq", String(seq)));
        if (e) {
          r.append(el("span", "ty", e.type), document.createTextNode(clock(e.ts) + "  " + text(e)));
        } else {
          r.append(el("span", "ty", "…"));
          if (missing < 0) missing = seq;
        }
        nodes.push(r);
      }
      win.replaceChildren(...nodes);
      sessionStorage.setItem(key, JSON.stringify({ follow, first }));
      if (missing >= 0) fetchPage(missing);
    }
    function redraw() {
      if (!dirty) { dirty = true; requestAnimationFrame(() => alive && draw()); }
    }
    // Older rows, when the view shows rows not in memory.
    async function fetchPage(from) {
      if (fetching) return;
      fetching = true;
      try {
        const page = await api(`/api/runs/${encodeURIComponent(runId)}/events?from=${from}&limit=${Math.max(200, visible() * 2)}`);
        for (const e of page.events) cache.set(e.seq, e);
        trim();
      } catch (e) { failed(e); }
      fetching = false;
      if (alive) redraw();
    }
    // Memory stays bounded: drop the rows farthest from the view.
    function trim() {
      if (cache.size <= CACHE) return;
      const at = firstRow();
      const seqs = [...cache.keys()].sort((a, b) => Math.abs(b - at) - Math.abs(a - at));
      for (const seq of seqs.slice(0, cache.size - CACHE * 0.8)) cache.delete(seq);
    }
    log.addEventListener("scroll", () => {
      const atEnd = log.scrollTop + log.clientHeight >= log.scrollHeight - 2;
      if (follow !== atEnd) { follow = atEnd; $("follow").checked = follow; }
      redraw();
    });
    $("follow").addEventListener("change", (e) => { follow = e.target.checked; redraw(); });

    // What the events say about the run, kept as they arrive.
    function learn(e) {
      const second = Math.floor(e.ts / 1000);
      buckets.set(second, (buckets.get(second) || 0) + 1);
      if (e.type === "progress") {
        if (e.phase && (!phases.length || phases[phases.length - 1].name !== e.phase)) phases.push({ name: e.phase, ts: e.ts });
        run.progress = e;
      } else if (e.type === "artifact") {
        artifacts.set(e.name, e);
      } else if (e.type === "meta" && e.info && e.info.child) {
        steps.due = true; // a step started
      } else if (e.type === "completed" || e.type === "failed" || e.type === "canceled") {
        run.state = e.type;
        run.finished_ts = e.ts;
        steps.due = true;
        result(e);
      } else if (e.type === "input_required") run.state = "input_required";
      else if (e.type === "input_ended" || e.type === "started") run.state = "working";
    }
    // One event in log order; anything at or below the last seq is a
    // duplicate (a replay after a reconnect) and is dropped.
    function take(e) {
      if (e.seq <= last) { stats.duplicates++; return; }
      last = e.seq;
      stats.received++;
      cache.set(e.seq, e);
      if (cache.size > CACHE) trim();
      total = Math.max(total, e.seq + 1);
      learn(e);
    }
    function result(e) {
      $("result-box").hidden = false;
      let shown;
      if (e.type === "completed") {
        const t = (e.content || []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
        shown = [t, e.structured ? JSON.stringify(e.structured, null, 2) : ""].filter(Boolean).join("\n\n");
        const graphs = $("graphs");
        graphs.replaceChildren();
        for (const m of mermaidOf(e.structured, [])) {
          const svg = window.weirGraph.render(m);
          if (svg) { const d = el("div"); d.innerHTML = svg; graphs.append(d); }
        }
      } else if (e.type === "failed") {
        shown = `failed: ${failure(e.error)}${e.error.remediation ? "\n" + e.error.remediation : ""}`;
      } else shown = "canceled: " + e.reason;
      $("result").textContent = shown || "(empty result)";
    }
    async function download(a) {
      const response = await fetch(`/api/runs/${encodeURIComponent(runId)}/artifacts/${encodeURIComponent(a.name)}`, { headers: headers() });
      if (!response.ok) return;
      const url = URL.createObjectURL(await response.blob());
      const link = el("a");
      link.href = url;
      link.download = a.name;
      link.click();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
    }
    function paint() {
      if (!run) return;
      const stepsStale = steps.any && ACTIVE.has(run.state) && Date.now() - steps.at > 2000;
      if ((steps.due || stepsStale) && !steps.busy) loadSteps();
      const state = $("r-state");
      state.className = "state " + run.state;
      state.textContent = run.state;
      $("r-duration").textContent = duration(run);
      $("r-events").textContent = total.toLocaleString();
      $("cancel").disabled = !ACTIVE.has(run.state);
      drawBar($("r-bar").parentElement, run);
      const p = run.progress;
      $("r-progress").textContent = p ? `${p.progress}${p.total ? " / " + p.total : ""}${p.phase ? " · " + p.phase : ""}${p.message ? " · " + p.message : ""}${p.eta_ms && ACTIVE.has(run.state) ? " · ETA " + span(p.eta_ms) : ""}` : "";
      // events/s over the last 60 s, from the events' own time stamps.
      const now = Math.floor((ACTIVE.has(run.state) ? Date.now() : run.finished_ts || Date.now()) / 1000);
      const counts = [];
      for (let s = now - 59; s <= now; s++) counts.push(buckets.get(s) || 0);
      for (const s of buckets.keys()) if (s < now - 120) buckets.delete(s);
      const peak = Math.max(1, ...counts);
      $("spark").firstElementChild.setAttribute("points", counts.map((c, i) => `${(i * 160) / 59},${27 - (c / peak) * 25}`).join(" "));
      $("r-rate").textContent = counts[counts.length - 2] || counts[counts.length - 1] || 0;
      if (phases.length) {
        const tl = $("timeline");
        tl.hidden = false;
        const end = run.finished_ts || Date.now();
        const start = run.created_ts;
        const colors = ["#2f6fed", "#1e9e5a", "#c98a0b", "#6d5bd0", "#d64545", "#138a9e"];
        tl.replaceChildren(...phases.map((ph, i) => {
          const until = i + 1 < phases.length ? phases[i + 1].ts : end;
          const d = el("div", "", ph.name);
          d.style.flex = Math.max(1, until - (i ? ph.ts : start)) + " 1 0";
          d.style.background = colors[i % colors.length];
          d.title = `${ph.name}: ${span(until - ph.ts)}`;
          return d;
        }));
      }
      if (artifacts.size !== $("artifacts").children.length) {
        $("artifacts-box").hidden = false;
        $("artifacts").replaceChildren(...[...artifacts.values()].map((a) => {
          const li = el("li");
          const link = el("a", "", a.name);
          link.href = "#";
          link.addEventListener("click", (ev) => { ev.preventDefault(); download(a).catch(failed); });
          li.append(link, el("span", "muted", ` ${a.mime}, ${a.bytes.toLocaleString()} bytes, sha256 ${a.sha256.slice(0, 12)}…`));
          return li;
        }));
      }
    }
    async function loadSteps() {
      steps.due = false;
      steps.busy = true;
      steps.at = Date.now();
      try {
        const answer = await api(`/api/runs?parent=${encodeURIComponent(runId)}&limit=200`);
        if (!alive) return;
        const children = answer.runs.slice().reverse(); // oldest first
        steps.any = children.length > 0;
        $("steps-box").hidden = !steps.any;
        $("steps").replaceChildren(...children.map((child) => {
          const tr = el("tr");
          tr.dataset.run = child.run_id;
          const state = el("span", "state " + child.state, child.state);
          const link = el("a", "", child.run_id.slice(0, 8) + "…" + child.run_id.slice(-4));
          link.href = "#/run/" + encodeURIComponent(child.run_id);
          const cells = [el("td"), el("td", "", child.tool), el("td"), el("td", "", duration(child))];
          cells[0].append(state);
          cells[2].append(link);
          tr.append(...cells);
          return tr;
        }));
      } catch (e) { failed(e); }
      steps.busy = false;
    }
    $("cancel").addEventListener("click", async () => {
      $("cancel").disabled = true;
      try {
        await api(`/api/runs/${encodeURIComponent(runId)}/cancel`, { method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" });
      } catch (e) { failed(e); $("r-progress").textContent = String(e.message || e); }
    });

    (async () => {
      const detail = await api("/api/runs/" + encodeURIComponent(runId));
      if (!alive) return;
      run = detail.run;
      // A link may name the run by the start of its id: the page goes on
      // with the whole id, and shows it in its address.
      if (run.run_id !== runId) {
        runId = run.run_id;
        history.replaceState(null, "", "#/run/" + encodeURIComponent(runId));
      }
      $("r-tool").textContent = run.tool;
      $("r-id").textContent = run.run_id;
      $("r-owner").textContent = who(run);
      $("r-started").textContent = when(run.created_ts);
      showArguments($("r-args"), detail.arguments);
      total = run.events;
      redraw();
      // The latest events first (for the timeline, artifacts and result),
      // then live from where they end: a reload resumes, never replays.
      const from = Math.max(0, total - HISTORY);
      let seq = from;
      while (seq < total && alive) {
        const page = await api(`/api/runs/${encodeURIComponent(runId)}/events?from=${seq}&limit=1000`);
        if (!page.events.length) break;
        if (last < 0) last = page.events[0].seq - 1;
        for (const e of page.events) take(e);
        seq = page.next_seq;
      }
      if (last >= 0) stats.resumedFrom = last;
      if (spot && !spot.follow) { draw(); scrollTo(spot.first); }
      redraw();
      if (!alive) return;
      stop = sse(`/runs/${encodeURIComponent(runId)}/events`, {
        lastId: () => (last >= 0 ? last : null),
        onEvent(m) {
          if (m.event === "heartbeat") return;
          const e = JSON.parse(m.data);
          if (m.event === "end") { run.state = e.state; return "stop"; }
          if (e.seq === undefined) return; // a read failure: reconnect resumes
          take(e);
          redraw();
          if (["done", "error"].includes(m.event)) { paint(); return "stop"; }
        },
        onState(s) {
          $("conn").classList.toggle("on", s === "open");
          if (s === "unauthorized") askToken("That token was refused.");
        },
      });
    })().catch(failed);
    const painter = setInterval(paint, 250);
    return () => { alive = false; stop && stop(); clearInterval(painter); };
  }

  // ---- routing -------------------------------------------------------
  function route() {
    if (view) view();
    $("logout").hidden = !token;
    const m = location.hash.match(/^#\/run\/(.+)$/);
    view = m ? runView(decodeURIComponent(m[1])) : listView();
  }
  window.addEventListener("hashchange", route);
  route();
})();
