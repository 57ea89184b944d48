"""The Redis store benchmark (bench/redis/run): one run of the `stream`
fixture per setup, followed by a plain SSE client on every node at once.

Setups: SQLite (one node, the default store), Redis with one node, Redis
with three nodes (the run executes on the first; the followers read it from
all three). Several binaries (`--weir LABEL=PATH`, repeated) are measured
in one go, interleaved round by round (`--reps`), each round on fresh nodes
and a fresh Redis; the table shows medians. For each setup:

- appended/s: the run's events over its own span (started to terminal, the
  timestamps the run writer stamps), i.e. how fast the store took them;
- delivered/s: events over the time from the call to the last follower's
  terminal event, per follower, slowest shown;
- resume ms: `GET /runs/{id}/events` with `Last-Event-ID` in the middle of
  the finished run, to its first event, median of 20, on the last node;
- CPU ms: what the writing node, the other nodes and Redis spent from the
  call to the slowest follower's end (from /proc), and Redis's
  `INFO commandstats` over the same span (calls and µs per call of the
  append script and the commands it runs), to tell whose CPU is the limit.

Redis runs with AOF `appendfsync everysec` (the setting docs/operations.md recommends).
"""

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

STATELESS = "2026-07-28"
SESSIONS = "2025-11-25"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_redis(directory):
    port = free_port()
    child = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "yes", "--appendfsync", "everysec", "--dir", directory],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    for line in child.stdout:
        if "Ready to accept connections" in line:
            return child, f"redis://127.0.0.1:{port}/0"
    raise SystemExit("redis-server did not start")


def start_node(weir, data_dir, redis_url=None, name=None):
    args = [weir, "--data-dir", data_dir, "serve", "--http", "127.0.0.1:0", "--fixtures",
            "--retention-days", "0"]
    if redis_url:
        args += ["--redis", redis_url, "--node", name]
    child = subprocess.Popen(args, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for line in child.stderr:
        if "serving MCP at http://" in line:
            addr = line.split("serving MCP at http://")[1].split("/")[0]
            threading.Thread(target=lambda: [None for _ in child.stderr], daemon=True).start()
            return child, addr
    raise SystemExit(f"weir serve did not start: {args}")


def post(addr, body, headers=None):
    host, port = addr.split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    all_headers = {"Content-Type": "application/json",
                   "Accept": "application/json, text/event-stream"}
    all_headers.update(headers or {})
    conn.request("POST", "/mcp", json.dumps(body), all_headers)
    response = conn.getresponse()
    text = response.read().decode()
    session = response.getheader("mcp-session-id")
    conn.close()
    if "data:" in text:
        text = [line for line in text.splitlines() if line.startswith("data:")][-1][5:]
    return json.loads(text), session


def start_task(addr, count, size):
    _, session = post(addr, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": SESSIONS, "capabilities": {"tasks": {}},
        "clientInfo": {"name": "bench", "version": "0"}}})
    message, _ = post(addr, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "stream", "arguments": {"count": count, "size": size, "interval_ms": 0},
        "task": {"ttl": 600000}}},
        {"Mcp-Session-Id": session, "MCP-Protocol-Version": SESSIONS})
    return message["result"]["task"]["taskId"]


def run_summary(addr, run_id):
    message, _ = post(addr, {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "runs_get", "arguments": {"run_id": run_id},
        "_meta": {"io.modelcontextprotocol/protocolVersion": STATELESS,
                  "io.modelcontextprotocol/clientCapabilities": {}}}})
    return message["result"]["structuredContent"]["run"]


def follow(addr, run_id, last_event_id=None, first_only=False):
    """Reads the run's SSE to its end (or its first event): (events, seconds to first, seconds to end)."""
    host, port = addr.split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=300)
    headers = {} if last_event_id is None else {"Last-Event-ID": str(last_event_id)}
    began = time.perf_counter()
    conn.request("GET", f"/runs/{run_id}/events", headers=headers)
    response = conn.getresponse()
    events, first, name = 0, None, None
    while True:
        line = response.fp.readline()
        if not line:
            break
        line = line.decode().rstrip("\r\n")
        if line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:") and name not in ("heartbeat", None):
            events += 1
            if first is None:
                first = time.perf_counter() - began
                if first_only:
                    break
            if name in ("done", "error", "end"):
                break
    conn.close()
    return events, first, time.perf_counter() - began


TERMINAL = (b"event: done", b"event: error", b"event: end")


def follow_counting(addr, run_id):
    """Reads the run's SSE to its end over a raw socket in large reads,
    counting events without parsing lines or HTTP chunks, so that the
    client's CPU stays small beside the nodes' (http.client spends about
    2.5 us per event on chunk framing alone): (events, None, seconds to end).
    Every event has one `data:` line; heartbeats are not counted; the
    stream must end with a terminal event, and `measure` checks the count
    against the run's."""
    host, port = addr.split(":")
    began = time.perf_counter()
    with socket.create_connection((host, int(port)), timeout=300) as conn:
        conn.sendall(f"GET /runs/{run_id}/events HTTP/1.1\r\nHost: {addr}\r\n"
                     "Connection: close\r\n\r\n".encode())
        events, heartbeats, carry, last_event = 0, 0, b"", b""
        while True:
            chunk = conn.recv(1 << 16)
            if not chunk:
                break
            text = carry + chunk
            # A marker split between reads is counted once, in the read that completes it.
            events += text.count(b"\ndata:") - carry.count(b"\ndata:")
            heartbeats += text.count(b"event: heartbeat") - carry.count(b"event: heartbeat")
            at = text.rfind(b"event: ")
            if at >= 0:
                last_event = text[at:at + 32]
            carry = text[-32:]
    if not last_event.startswith(TERMINAL):
        raise SystemExit(f"the stream of {run_id} on {addr} ended without a terminal event")
    return events - heartbeats, None, time.perf_counter() - began


def cpu_ms(pid):
    """CPU time (user + system) a process has used so far, in ms."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def redis_cli(url, *args):
    port = url.rsplit(":", 1)[1].split("/")[0]
    try:
        return subprocess.run(["redis-cli", "-p", port, *args], capture_output=True,
                              text=True, timeout=10).stdout
    except FileNotFoundError:
        return ""


def command_stats(url):
    """Calls and µs per call of the commands an append runs, from INFO."""
    stats = {}
    for line in redis_cli(url, "INFO", "commandstats").splitlines():
        if not line.startswith("cmdstat_"):
            continue
        name, _, values = line[8:].partition(":")
        if name in ("evalsha", "eval", "xadd", "xrange", "publish", "hset", "hget"):
            fields = dict(kv.split("=") for kv in values.split(","))
            stats[name] = {"calls": int(fields["calls"]),
                           "usec_per_call": float(fields["usec_per_call"])}
    return stats


def measure(label, weir, nodes, count, size, redis=None):
    addrs = [addr for _, addr in nodes]
    pids = [child.pid for child, _ in nodes] + ([redis[0].pid] if redis else [])
    if redis:
        redis_cli(redis[1], "CONFIG", "RESETSTAT")
    cpu_before = [cpu_ms(pid) for pid in pids]
    found = {}
    run_id_box = []
    ready = threading.Event()

    def follower(i):
        ready.wait()
        found[i] = follow_counting(addrs[i], run_id_box[0])

    threads = [threading.Thread(target=follower, args=(i,)) for i in range(len(addrs))]
    for thread in threads:
        thread.start()
    began = time.perf_counter()
    run_id_box.append(start_task(addrs[0], count, size))
    ready.set()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - began
    spent = [cpu_ms(pid) - before for pid, before in zip(pids, cpu_before)]
    cpu = {"writer": spent[0], "other nodes": sum(spent[1:len(addrs)]),
           "redis": spent[len(addrs)] if redis else None}
    stats = command_stats(redis[1]) if redis else {}
    run = run_summary(addrs[-1], run_id_box[0])
    span_ms = max(1, run["finished_ts"] - run["created_ts"])
    events = run["events"]
    delivered = [found[i][0] / wall for i in found]
    short = [found[i][0] for i in found if found[i][0] != events]
    if short:
        raise SystemExit(f"{label}: a follower got {short} events of {events}")
    resumes = []
    for _ in range(20):
        _, first, _ = follow(addrs[-1], run_id_box[0], last_event_id=events // 2, first_only=True)
        resumes.append(first * 1000)
    row = {
        "setup": label, "nodes": len(addrs), "events": events,
        "appended_per_s": events / (span_ms / 1000),
        "delivered_per_s_slowest": min(delivered),
        "followers": len(addrs),
        "resume_ms_median": statistics.median(resumes),
        "cpu_ms": cpu, "redis_commands": stats,
    }
    print(f"  {label}: {json.dumps(row)}", file=sys.stderr)
    return row


def binaries(specs):
    """`--weir` values: `LABEL=PATH` or a bare path (labelled by itself)."""
    found = []
    for spec in specs:
        label, _, path = spec.rpartition("=")
        found.append((label or path, path))
    return found


def one_rep(label, weir, tmp, count, size):
    """The three setups for one binary, each on fresh nodes and a fresh Redis."""
    rows = []
    children = []
    try:
        node = start_node(weir, os.path.join(tmp, "sqlite"))
        children.append(node[0])
        rows.append(measure("SQLite", weir, [node], count, size))
        node[0].kill()
        redis, url = start_redis(tmp)
        children.append(redis)
        one = [start_node(weir, os.path.join(tmp, "r1"), url, "solo")]
        children += [c for c, _ in one]
        rows.append(measure("Redis, 1 node", weir, one, count, size, (redis, url)))
        for c, _ in one:
            c.kill()
        three = [start_node(weir, os.path.join(tmp, f"r3{n}"), url, n) for n in "abc"]
        children += [c for c, _ in three]
        rows.append(measure("Redis, 3 nodes", weir, three, count, size, (redis, url)))
    finally:
        for child in children:
            child.kill()
            child.wait()
    for row in rows:
        row["binary"] = label
    return rows


def median_or_none(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def summarize(rows):
    """Median (and range) over the reps of each binary's setups, in run order."""
    groups = {}
    for row in rows:
        groups.setdefault((row["binary"], row["setup"]), []).append(row)
    table = []
    for (binary, setup), reps in groups.items():
        appended = [r["appended_per_s"] for r in reps]
        table.append({
            "binary": binary, "setup": setup, "nodes": reps[0]["nodes"],
            "events": reps[0]["events"], "reps": len(reps),
            "appended_per_s": statistics.median(appended),
            "appended_min": min(appended), "appended_max": max(appended),
            "delivered_per_s_slowest": statistics.median(r["delivered_per_s_slowest"] for r in reps),
            "resume_ms_median": statistics.median(r["resume_ms_median"] for r in reps),
            "resume_ms_max": max(r["resume_ms_median"] for r in reps),
            "cpu_ms": {who: median_or_none([r["cpu_ms"][who] for r in reps])
                       for who in ("writer", "other nodes", "redis")},
        })
    return table


def cpu_cell(cpu):
    return " / ".join("—" if cpu[who] is None else f"{cpu[who]:.0f}"
                      for who in ("writer", "other nodes", "redis"))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--weir", required=True, action="append",
                        help="LABEL=PATH or PATH; give it again to compare binaries in one run")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--reps", type=int, default=1,
                        help="rounds; each runs every binary's setups once, binaries interleaved")
    args = parser.parse_args()
    count = 5_000 if args.quick else 50_000
    size = 64
    weirs = binaries(args.weir)
    load_before = open("/proc/loadavg").read().split()[:3]
    rows = []
    for rep in range(args.reps):
        for label, weir in weirs:
            print(f"== round {rep + 1}/{args.reps}: {label}", file=sys.stderr)
            with tempfile.TemporaryDirectory() as tmp:
                rows += one_rep(label, weir, tmp, count, size)
    load_after = open("/proc/loadavg").read().split()[:3]
    table = summarize(rows)
    lines = [
        f"{count:,} items of {size} B through the `stream` fixture; every node follows the run over SSE; "
        f"median of {args.reps} round(s), binaries interleaved; load average {' '.join(load_before)} "
        f"before, {' '.join(load_after)} after.",
        "",
        "| binary | store | nodes | events | appended/s (min–max) | delivered/s (slowest follower) "
        "| resume (median ms) | CPU ms: writer / other nodes / Redis |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in table:
        spread = (f" ({row['appended_min']:,.0f}–{row['appended_max']:,.0f})"
                  if row["reps"] > 1 else "")
        lines.append(
            f"| {row['binary']} | {row['setup']} | {row['nodes']} | {row['events']:,} "
            f"| {row['appended_per_s']:,.0f}{spread} "
            f"| {row['delivered_per_s_slowest']:,.0f} | {row['resume_ms_median']:.1f} "
            f"| {cpu_cell(row['cpu_ms'])} |")
    text = "\n".join(lines)
    print(text)
    results = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
    os.makedirs(results, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    with open(os.path.join(results, f"{stamp}.md"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(results, f"{stamp}.json"), "w") as f:
        json.dump({"weir": dict(weirs), "reps": args.reps, "load_before": load_before,
                   "load_after": load_after, "table": table, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
