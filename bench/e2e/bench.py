#!/usr/bin/env python3
"""End-to-end streaming benchmark: weir vs the official TypeScript SDK v1 and
Python SDK, measured by ONE plain client (this file, standard library only).

The client speaks raw JSON-RPC: newline-delimited over the server's stdin and
stdout for stdio, and hand-written HTTP/1.1 over a socket (chunked transfer
and SSE parsed here) for Streamable HTTP. No SDK client is involved, so every
server is measured by the same code.

For each server x transport x workload it starts the server, initializes
(declaring `partialResults: {}`), makes one warm-up `tools/call stream` whose
every message is checked, then 3 measured calls, and reports the median of:

  items/s         per-item messages received / seconds from writing the
                  tools/call to the arrival of its final response
  first item      ms from writing the tools/call to the arrival of item 0
  peak RSS        VmHWM of the server process (plus any children) from
                  /proc, read after the last call, right before killing it

Usage: bench.py --weir PATH [--quick] [--only weir,ts,py] [--no-progress-variant] [--reps 3] [--rounds 1]
Writes results/bench-<timestamp>.{json,md} and prints the markdown.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
PROTOCOL = "2025-11-25"
WORKLOADS = [(20_000, 100), (2_000, 1_000)]
MEASURED_RUNS = 3
CALL_DEADLINE_S = 600
TRANSPORTS = ("stdio", "http")

# What marks a per-item message, by how the server sends items.
ITEM_MARKER = {
    "partial": b'"notifications/tools/partial_result"',
    "progress": b'"notifications/progress"',
}
clock = time.perf_counter


# --------------------------------------------------------------------------
# Servers


@dataclass
class ServerSpec:
    key: str  # weir | ts | py | floor
    label: str
    store: str = "memory"  # weir only: memory | sqlite

    def command(self, transport: str, weir: str, data_dir: str | None) -> list[str]:
        if self.key == "weir":
            cmd = [weir]
            if data_dir:
                cmd += ["--data-dir", data_dir]
            cmd += ["serve"]
            cmd += ["--stdio"] if transport == "stdio" else ["--http", "127.0.0.1:0"]
            cmd += ["--fixtures"]
            if self.store == "memory":
                cmd += ["--memory"]
            return cmd
        if self.key == "ts":
            return ["node", os.path.join(HERE, "ts_server.mjs"), f"--{transport}"]
        if self.key == "py":
            return [sys.executable, os.path.join(HERE, "py_server.py"), f"--{transport}"]
        if self.key == "floor":
            return [sys.executable, os.path.join(HERE, "floor_server.py"), f"--{transport}"]
        raise ValueError(self.key)


def proc_tree(pid: int) -> list[int]:
    """pid and its descendants."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    tree, todo = [], [pid]
    while todo:
        p = todo.pop()
        tree.append(p)
        todo.extend(children.get(p, []))
    return tree


def vm_kb(pid: int, field_name: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
    return 0


def tree_vm_kb(pid: int, field_name: str) -> int:
    total = 0
    for p in proc_tree(pid):
        try:
            total += vm_kb(p, field_name)
        except OSError:
            pass
    return total


def cpu_seconds(pid: int) -> float:
    """CPU time run so far by pid's threads (and its children's), from
    /proc/PID/task/TID/schedstat: nanoseconds, unlike the tick-counted stat."""
    total = 0
    for p in proc_tree(pid):
        try:
            tids = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{p}/task/{tid}/schedstat", "rb") as f:
                    total += int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                pass
    return total / 1e9


class Server:
    """A started server process and how to reach it."""

    def __init__(self, spec: ServerSpec, transport: str, weir: str):
        self.spec = spec
        self.transport = transport
        self.data_dir = tempfile.mkdtemp(prefix="weir-bench-") if spec.store == "sqlite" else None
        self.stderr = tempfile.NamedTemporaryFile(prefix="bench-stderr-", delete=False)
        cmd = spec.command(transport, weir, self.data_dir)
        env = dict(os.environ)
        env.pop("RUST_LOG", None)
        self.proc = subprocess.Popen(
            cmd,
            cwd=HERE,
            env=env,
            stdin=subprocess.PIPE if transport == "stdio" else subprocess.DEVNULL,
            stdout=subprocess.PIPE if transport == "stdio" else subprocess.DEVNULL,
            stderr=self.stderr,
            bufsize=0,
        )
        self.pid = self.proc.pid
        self.port = None
        if transport == "http":
            self.port = self._wait_for_port()

    def _wait_for_port(self) -> int:
        deadline = time.monotonic() + 60
        pattern = re.compile(rb"serving MCP at http://127\.0\.0\.1:(\d+)/mcp")
        while time.monotonic() < deadline:
            with open(self.stderr.name, "rb") as f:
                found = pattern.search(f.read())
            if found:
                return int(found.group(1))
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        raise RuntimeError(f"{self.spec.label} over HTTP did not start: {self.stderr_text()}")

    def stderr_text(self) -> str:
        with open(self.stderr.name, "rb") as f:
            return f.read()[-2000:].decode(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        os.unlink(self.stderr.name)
        if self.data_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)


# --------------------------------------------------------------------------
# Transports: both expose call() for ordinary requests and stream_call() for
# the measured tools/call.


def item_text(index: int, size: int) -> str:
    head = f"{index:08d}:"
    return head[:size] if len(head) >= size else head + "x" * (size - len(head))


class ProtocolError(Exception):
    pass


@dataclass
class CallResult:
    items: int
    seconds: float
    first_item_s: float | None
    final: dict
    final_bytes: int
    others: int
    first_line: bytes | None
    last_line: bytes | None


def check_item(raw: bytes, index: int, size: int, per_item: str, token: Any) -> None:
    msg = json.loads(raw)
    params = msg["params"]
    if per_item == "partial":
        ok = (
            msg["method"] == "notifications/tools/partial_result"
            and params["partialResultToken"] == token
            and params["seq"] == index
            and params["content"] == [{"type": "text", "text": item_text(index, size)}]
        )
    else:
        ok = (
            msg["method"] == "notifications/progress"
            and params["progressToken"] == token
            and params["progress"] == index + 1
            and params["message"] == item_text(index, size)
        )
    if not ok:
        raise ProtocolError(f"item {index} is not as expected: {raw[:300]!r}")


def check_final(result: CallResult, count: int, size: int, per_item: str, token: Any) -> None:
    if "error" in result.final:
        raise ProtocolError(f"tools/call failed: {result.final['error']}")
    res = result.final["result"]
    if res.get("isError") or res.get("structuredContent", {}).get("count") != count:
        raise ProtocolError(f"unexpected final result: {json.dumps(res)[:300]}")
    if result.items != count:
        raise ProtocolError(f"got {result.items} items, expected {count}")
    if count:
        check_item(result.first_line, 0, size, per_item, token)
        check_item(result.last_line, count - 1, size, per_item, token)


def call_params(count: int, size: int, per_item: str, token: Any) -> dict:
    meta_key = "partialResultToken" if per_item == "partial" else "progressToken"
    return {
        "name": "stream",
        "arguments": {"count": count, "size": size, "interval_ms": 0, "mode": "text"},
        "_meta": {meta_key: token},
    }


INITIALIZE = {
    "protocolVersion": PROTOCOL,
    "capabilities": {"partialResults": {}},
    "clientInfo": {"name": "weir-bench-e2e", "version": "1"},
}


class StdioClient:
    def __init__(self, server: Server):
        self.proc = server.proc
        self.stdin_fd = self.proc.stdin.fileno()
        self.out = open(self.proc.stdout.fileno(), "rb", buffering=1 << 20, closefd=False)
        self.next_id = 1

    def send(self, message: dict) -> None:
        data = memoryview(json.dumps(message, separators=(",", ":")).encode() + b"\n")
        while data:
            data = data[os.write(self.stdin_fd, data) :]

    def call(self, method: str, params: dict) -> dict:
        req_id = self.next_id
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": req_id, "method": method, "params": params})
        while True:
            line = self.out.readline()
            if not line:
                raise ProtocolError("server closed stdout")
            msg = json.loads(line)
            if msg.get("id") == req_id and "method" not in msg:
                return msg

    def notify(self, method: str, params: dict | None = None) -> None:
        message = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    def initialize(self) -> dict:
        reply = self.call("initialize", INITIALIZE)
        self.notify("notifications/initialized")
        return reply

    def stream_call(self, count: int, size: int, per_item: str, validate: bool) -> CallResult:
        req_id = self.next_id
        self.next_id += 1
        token = f"bench-{req_id}"
        request = {
            "jsonrpc": "2.0",
            "id": req_id,
            "method": "tools/call",
            "params": call_params(count, size, per_item, token),
        }
        marker = ITEM_MARKER[per_item]
        readline = self.out.readline
        items = others = 0
        first_t = None
        first_line = last_line = None
        payload = json.dumps(request, separators=(",", ":")).encode() + b"\n"
        t0 = clock()
        os.write(self.stdin_fd, payload)
        while True:
            line = readline()
            if not line:
                raise ProtocolError("server closed stdout mid-call")
            if marker in line:
                if items == 0:
                    first_t = clock()
                    first_line = line
                if validate:
                    check_item(line, items, size, per_item, token)
                last_line = line
                items += 1
                continue
            msg = json.loads(line)
            if msg.get("id") == req_id and "method" not in msg:
                t_end = clock()
                result = CallResult(
                    items, t_end - t0, None if first_t is None else first_t - t0,
                    msg, len(line), others, first_line, last_line,
                )
                check_final(result, count, size, per_item, token)
                return result
            others += 1

    def close(self) -> None:
        pass


class HttpResponse:
    def __init__(self, status: int, headers: dict[str, str], rfile):
        self.status = status
        self.headers = headers
        self.rfile = rfile
        te = headers.get("transfer-encoding", "")
        self.chunked = "chunked" in te.lower()
        self.length = int(headers["content-length"]) if "content-length" in headers else None
        self.done = False

    def chunks(self):
        """The body, as the pieces the server wrote."""
        readline, read = self.rfile.readline, self.rfile.read
        if self.chunked:
            while True:
                size_line = readline()
                if not size_line:
                    raise ProtocolError("connection closed mid-body")
                size = int(size_line.split(b";", 1)[0], 16)
                if size == 0:
                    while readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                data = read(size)
                readline()
                yield data
        elif self.length is not None:
            left = self.length
            while left:
                data = self.rfile.read1(min(left, 1 << 16))
                if not data:
                    raise ProtocolError("connection closed mid-body")
                left -= len(data)
                yield data
        else:  # until close
            while True:
                data = self.rfile.read1(1 << 16)
                if not data:
                    break
                yield data
        self.done = True

    def body(self) -> bytes:
        return b"".join(self.chunks())


def sse_data(event: bytes) -> bytes | None:
    """The data of one SSE event block (lines already split on \\n)."""
    data = [line[5:].removeprefix(b" ") for line in event.split(b"\n") if line.startswith(b"data:")]
    return b"\n".join(data) if data else None


class HttpClient:
    def __init__(self, server: Server):
        self.host = f"127.0.0.1:{server.port}"
        for attempt in range(100):  # a server may print its port just before it accepts
            try:
                self.sock = socket.create_connection(("127.0.0.1", server.port))
                break
            except ConnectionRefusedError:
                if attempt == 99:
                    raise
                time.sleep(0.05)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.settimeout(CALL_DEADLINE_S)
        self.rfile = self.sock.makefile("rb", buffering=1 << 20)
        self.session_id: str | None = None
        self.next_id = 1

    def post(self, message: dict) -> HttpResponse:
        body = json.dumps(message, separators=(",", ":")).encode()
        headers = [
            "POST /mcp HTTP/1.1",
            f"Host: {self.host}",
            "Content-Type: application/json",
            "Accept: application/json, text/event-stream",
            f"Content-Length: {len(body)}",
        ]
        if self.session_id:
            headers += [f"Mcp-Session-Id: {self.session_id}", f"MCP-Protocol-Version: {PROTOCOL}"]
        self.sock.sendall(("\r\n".join(headers) + "\r\n\r\n").encode() + body)
        return self.read_head()

    def read_head(self) -> HttpResponse:
        status_line = self.rfile.readline()
        if not status_line:
            raise ProtocolError("connection closed")
        status = int(status_line.split()[1])
        headers: dict[str, str] = {}
        while True:
            line = self.rfile.readline()
            if line in (b"\r\n", b"\n", b""):
                break
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        return HttpResponse(status, headers, self.rfile)

    def messages_of(self, response: HttpResponse) -> list[dict]:
        body = response.body()
        if response.status >= 400:
            raise ProtocolError(f"HTTP {response.status}: {body[:300]!r}")
        if not body:
            return []
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            body = body.replace(b"\r\n", b"\n")
            return [json.loads(d) for d in map(sse_data, body.split(b"\n\n")) if d]
        return [json.loads(body)]

    def call(self, method: str, params: dict) -> dict:
        req_id = self.next_id
        self.next_id += 1
        response = self.post({"jsonrpc": "2.0", "id": req_id, "method": method, "params": params})
        for msg in self.messages_of(response):
            if msg.get("id") == req_id and "method" not in msg:
                if response.headers.get("mcp-session-id"):
                    self.session_id = response.headers["mcp-session-id"]
                return msg
        raise ProtocolError(f"no response to {method}")

    def notify(self, method: str, params: dict | None = None) -> None:
        message = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        response = self.post(message)
        self.messages_of(response)
        if response.status not in (200, 202, 204):
            raise ProtocolError(f"{method}: HTTP {response.status}")

    def initialize(self) -> dict:
        reply = self.call("initialize", INITIALIZE)
        self.notify("notifications/initialized")
        return reply

    def stream_call(self, count: int, size: int, per_item: str, validate: bool) -> CallResult:
        req_id = self.next_id
        self.next_id += 1
        token = f"bench-{req_id}"
        request = {
            "jsonrpc": "2.0",
            "id": req_id,
            "method": "tools/call",
            "params": call_params(count, size, per_item, token),
        }
        marker = ITEM_MARKER[per_item]
        items = others = 0
        first_t = None
        first_line = last_line = None
        pending = b""
        t0 = clock()
        response = self.post(request)
        if response.status != 200 or not response.headers.get("content-type", "").startswith(
            "text/event-stream"
        ):
            raise ProtocolError(f"tools/call: HTTP {response.status} {response.headers}: {response.body()[:300]!r}")
        result = None
        chunks = response.chunks()
        for chunk in chunks:
            now = clock()
            if pending:
                chunk = pending + chunk
            if b"\r" in chunk:
                # sse-starlette ends lines with \r\n; keep a split \r\n whole.
                if chunk.endswith(b"\r"):
                    chunk, carry = chunk[:-1], b"\r"
                else:
                    carry = b""
                chunk = chunk.replace(b"\r\n", b"\n") + carry
            events = chunk.split(b"\n\n")
            pending = events.pop()
            for event in events:
                if marker in event:
                    if items == 0:
                        first_t = now
                        first_line = sse_data(event)
                    if validate:
                        check_item(sse_data(event), items, size, per_item, token)
                    last_line = event
                    items += 1
                    continue
                data = sse_data(event)
                if data is None:
                    continue  # comment / keep-alive
                msg = json.loads(data)
                if msg.get("id") == req_id and "method" not in msg:
                    result = CallResult(
                        items, now - t0, None if first_t is None else first_t - t0,
                        msg, len(data), others, first_line,
                        sse_data(last_line) if last_line else None,
                    )
                    break
                others += 1
            if result is not None:
                break
        if result is None:
            raise ProtocolError("SSE stream ended without the tools/call response")
        for _ in chunks:  # the server closes the stream after the response
            pass
        check_final(result, count, size, per_item, token)
        return result

    def close(self) -> None:
        self.sock.close()


# --------------------------------------------------------------------------
# Measuring


@dataclass
class Measurement:
    server: str
    store: str
    transport: str
    count: int
    size: int
    per_item: str
    runs: list[dict] = field(default_factory=list)
    rss_after_warmup_kb: int = 0
    peak_rss_kb: int = 0
    error: str | None = None

    def median(self, key: str) -> float | None:
        values = [r[key] for r in self.runs if r.get(key) is not None]
        return statistics.median(values) if values else None


def log(*args) -> None:
    print(*args, file=sys.stderr, flush=True)


def measure(spec: ServerSpec, transport: str, count: int, size: int, per_item: str, weir: str,
            reps: int = MEASURED_RUNS) -> Measurement:
    m = Measurement(spec.key, spec.store, transport, count, size, per_item)
    server = Server(spec, transport, weir)
    watchdog = threading.Timer(CALL_DEADLINE_S * (reps + 2), server.proc.kill)
    watchdog.start()
    client = None
    try:
        client = StdioClient(server) if transport == "stdio" else HttpClient(server)
        reply = client.initialize()
        version = reply.get("result", {}).get("protocolVersion")
        if version != PROTOCOL:
            raise ProtocolError(f"negotiated {version!r}, wanted {PROTOCOL}: {reply}")
        client.stream_call(count, size, per_item, validate=True)  # warm-up, every item checked
        m.rss_after_warmup_kb = tree_vm_kb(server.pid, "VmHWM")
        for _ in range(reps):
            cpu0, ccpu0 = cpu_seconds(server.pid), time.process_time()
            r = client.stream_call(count, size, per_item, validate=False)
            cpu1, ccpu1 = cpu_seconds(server.pid), time.process_time()
            m.runs.append(
                {
                    "items": r.items,
                    "seconds": r.seconds,
                    "items_per_s": r.items / r.seconds,
                    "first_item_ms": None if r.first_item_s is None else r.first_item_s * 1000,
                    "final_response_bytes": r.final_bytes,
                    "other_messages": r.others,
                    "server_cpu_s": cpu1 - cpu0,
                    "client_cpu_s": ccpu1 - ccpu0,
                }
            )
        m.peak_rss_kb = tree_vm_kb(server.pid, "VmHWM")
    except Exception as error:  # noqa: BLE001 - reported in the table
        m.error = f"{type(error).__name__}: {error}"
        log(f"    ERROR {m.error}\n    server stderr: {server.stderr_text()}")
    finally:
        watchdog.cancel()
        if client:
            client.close()
        server.stop()
    return m


# --------------------------------------------------------------------------
# Reporting


def fmt_rate(v: float | None) -> str:
    return "—" if v is None else f"{v:,.0f}"


def fmt_ratio(a: float | None, b: float | None) -> str:
    return "—" if a is None or b is None else f"{a / b:.1f}×"


def fmt_ms(v: float | None) -> str:
    if v is None:
        return "—"
    return f"{v:.2f}" if v < 10 else f"{v:.0f}"


def fmt_mib(kb: int | None) -> str:
    return "—" if not kb else f"{kb / 1024:.0f}"


def workload_name(count: int, size: int) -> str:
    return f"{count:,} × {size:,} B"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--weir", required=True, help="path to the release weir binary")
    ap.add_argument("--quick", action="store_true", help="workloads / 10 (a smoke run)")
    ap.add_argument("--only", default="floor,weir,sqlite,ts,py",
                    help="servers to run (comma list of floor, weir, sqlite (weir on its SQLite store), ts, py)")
    ap.add_argument("--no-progress-variant", action="store_true", help="skip the peers' progress-per-item variant")
    ap.add_argument("--no-flatness", action="store_true", help="skip weir's N×5 memory check")
    ap.add_argument("--reps", type=int, default=MEASURED_RUNS,
                    help=f"measured calls per server (default {MEASURED_RUNS})")
    ap.add_argument("--rounds", type=int, default=1,
                    help="run the main comparison this many times, a fresh server each time, and "
                         "take medians over every round's calls: the servers of a row then "
                         "alternate through the run, so a change in the machine's load falls "
                         "on all of them (default 1)")
    ap.add_argument("--transports", default=",".join(TRANSPORTS),
                    help="transports to run (comma list of stdio, http; default both)")
    ap.add_argument("--workloads", default=",".join(f"{c}x{s}" for c, s in WORKLOADS),
                    help="COUNTxSIZE rows to run (comma list; default "
                         + ",".join(f"{c}x{s}" for c, s in WORKLOADS) + ")")
    args = ap.parse_args()
    only = set(args.only.split(","))
    scale = 10 if args.quick else 1
    transports = [t for t in args.transports.split(",") if t]
    for transport in transports:
        if transport not in TRANSPORTS:
            ap.error(f"--transports: {transport!r} is not one of {', '.join(TRANSPORTS)}")
    try:
        chosen = [tuple(int(n) for n in w.split("x")) for w in args.workloads.split(",") if w]
        workloads = [(c // scale, s) for c, s in chosen]
    except ValueError:
        ap.error(f"--workloads: {args.workloads!r} is not a comma list of COUNTxSIZE, e.g. 2000x1000")

    specs = {
        "weir": ServerSpec("weir", "weir"),
        "ts": ServerSpec("ts", "TS SDK"),
        "py": ServerSpec("py", "Python SDK"),
        "floor": ServerSpec("floor", "floor (no SDK)"),
        "sqlite": ServerSpec("weir", "weir", store="sqlite"),
    }
    results: list[Measurement] = []

    def run(spec: ServerSpec, transport: str, count: int, size: int, per_item: str = "partial") -> Measurement:
        log(f"  {spec.label}{'' if spec.store == 'memory' else ' (' + spec.store + ')'} {transport} "
            f"{workload_name(count, size)} per-item={per_item} ...")
        m = measure(spec, transport, count, size, per_item, args.weir, args.reps)
        if not m.error:
            log(f"    {m.median('items_per_s'):,.0f} items/s, first item {m.median('first_item_ms'):.2f} ms, "
                f"peak RSS {m.peak_rss_kb / 1024:.1f} MiB "
                f"(runs: {', '.join(format(r['items_per_s'], ',.0f') for r in m.runs)})")
        # A later round's calls join the same row's earlier ones.
        for earlier in results:
            if (earlier.server, earlier.store, earlier.transport, earlier.count, earlier.size,
                    earlier.per_item) == (m.server, m.store, transport, count, size, per_item):
                if m.error:
                    earlier.error = earlier.error or m.error
                earlier.runs.extend(m.runs)
                earlier.peak_rss_kb = max(earlier.peak_rss_kb, m.peak_rss_kb)
                earlier.rss_after_warmup_kb = max(earlier.rss_after_warmup_kb, m.rss_after_warmup_kb)
                return earlier
        results.append(m)
        return m

    started = time.time()
    load_start = os.getloadavg()
    log("main comparison (per item: notifications/tools/partial_result for all three)")
    for round_number in range(args.rounds):
        if args.rounds > 1:
            log(f" round {round_number + 1} of {args.rounds}")
        for count, size in workloads:
            for transport in transports:
                for key in ("floor", "weir", "sqlite", "ts", "py"):
                    if key in only:
                        run(specs[key], transport, count, size)
    if not args.no_flatness and "weir" in only:
        log("weir memory vs N (N and N×5, memory store and sqlite store)")
        sqlite = ServerSpec("weir", "weir", store="sqlite")
        for count, size in workloads:
            for transport in transports:
                run(specs["weir"], transport, count * 5, size)
                if "sqlite" not in only:
                    run(sqlite, transport, count, size)
                run(sqlite, transport, count * 5, size)
    if not args.no_progress_variant:
        log("peers, progress-per-item variant (notifications/progress with the item as message)")
        for count, size in workloads:
            for transport in transports:
                for key in ("ts", "py"):
                    if key in only:
                        run(specs[key], transport, count, size, per_item="progress")

    def find(server: str, transport: str, count: int, size: int, per_item="partial", store="memory"):
        for m in results:
            if (m.server, m.transport, m.count, m.size, m.per_item, m.store) == (
                server, transport, count, size, per_item, store,
            ) and not m.error:
                return m
        return None

    def med(m: Measurement | None, key: str):
        return None if m is None else m.median(key)

    out: list[str] = []
    measured_calls = (f"{args.reps} measured calls" if args.rounds == 1 else
                      f"{args.rounds} rounds of {args.reps} measured calls, each round a fresh server")
    cpu_model = "?"
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name:"):
                cpu_model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    node_version = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
    out.append(f"Machine: {os.cpu_count()} CPUs ({cpu_model}), {platform.system()} {platform.release()}; "
               f"node {node_version}, Python {platform.python_version()}; "
               f"{measured_calls} after 1 warm-up, medians; load average "
               f"{load_start[0]:.1f} at start, {os.getloadavg()[0]:.1f} at end.\n")
    out.append("Per item every server sends one `notifications/tools/partial_result` "
               "(`{partialResultToken, seq, content:[{type:text,text}]}`) on the call's channel; "
               "the final result holds the items up to 512 KiB.\n")
    out.append("Side by side (issue 27): the floor is this client against a server with no SDK that "
               "builds each call's bytes up front (`floor_server.py`), the client's own ceiling; "
               "SQLite is weir on its default durable store, a fresh data directory per server.\n")
    out.append("| workload | transport | floor | TS SDK | weir memory | weir SQLite | SQLite / memory "
               "| first item ms (memory / SQLite) |")
    out.append("|---|---|--:|--:|--:|--:|--:|--:|")
    for count, size in workloads:
        for transport in transports:
            f, t, w, q = (find("floor", transport, count, size), find("ts", transport, count, size),
                          find("weir", transport, count, size), find("weir", transport, count, size, store="sqlite"))
            fr, tr, wr, qr = (med(x, "items_per_s") for x in (f, t, w, q))
            ratio = "—" if wr is None or qr is None else f"{qr / wr:.2f}"
            out.append(
                f"| {workload_name(count, size)} | {transport} | {fmt_rate(fr)} | {fmt_rate(tr)} | {fmt_rate(wr)} "
                f"| {fmt_rate(qr)} | {ratio} | {fmt_ms(med(w, 'first_item_ms'))} / {fmt_ms(med(q, 'first_item_ms'))} |"
            )
    out.append("")
    out.append("| workload | transport | weir items/s | TS items/s | Py items/s | weir/TS | weir/Py "
               "| first item ms (weir / TS / Py) | peak RSS MiB (weir / TS / Py) |")
    out.append("|---|---|--:|--:|--:|--:|--:|--:|--:|")
    for count, size in workloads:
        for transport in transports:
            w, t, p = (find(k, transport, count, size) for k in ("weir", "ts", "py"))
            wr, tr, pr = (med(x, "items_per_s") for x in (w, t, p))
            out.append(
                f"| {workload_name(count, size)} | {transport} | {fmt_rate(wr)} | {fmt_rate(tr)} | {fmt_rate(pr)} "
                f"| {fmt_ratio(wr, tr)} | {fmt_ratio(wr, pr)} "
                f"| {' / '.join(fmt_ms(med(x, 'first_item_ms')) for x in (w, t, p))} "
                f"| {' / '.join(fmt_mib(x.peak_rss_kb if x else None) for x in (w, t, p))} |"
            )
    out.append("")
    out.append("CPU per item, µs (server / client), medians:\n")
    out.append("| workload | transport | floor | weir | weir SQLite | TS | Py |")
    out.append("|---|---|--:|--:|--:|--:|--:|")
    for count, size in workloads:
        for transport in transports:
            cells = []
            for k, store in (("floor", "memory"), ("weir", "memory"), ("weir", "sqlite"), ("ts", "memory"), ("py", "memory")):
                m = find(k, transport, count, size, store=store)
                if m is None:
                    cells.append("—")
                else:
                    cells.append(f"{med(m, 'server_cpu_s') / count * 1e6:.1f} / {med(m, 'client_cpu_s') / count * 1e6:.1f}")
            out.append(f"| {workload_name(count, size)} | {transport} | {' | '.join(cells)} |")
    if not args.no_flatness and "weir" in only:
        out.append("")
        out.append("weir peak RSS (MiB) as N grows; each cell: after the warm-up call → after all 4 calls "
                   "(items/s in brackets):\n")
        out.append("| workload (N) | transport | memory store, N | memory store, N×5 | sqlite store, N | sqlite store, N×5 |")
        out.append("|---|---|--:|--:|--:|--:|")
        for count, size in workloads:
            for transport in transports:
                cells = []
                for store, n in (("memory", count), ("memory", count * 5), ("sqlite", count), ("sqlite", count * 5)):
                    m = find("weir", transport, n, size, store=store)
                    cells.append("—" if m is None else
                                 f"{fmt_mib(m.rss_after_warmup_kb)} → {fmt_mib(m.peak_rss_kb)} "
                                 f"({fmt_rate(med(m, 'items_per_s'))}/s)")
                out.append(f"| {workload_name(count, size)} | {transport} | {' | '.join(cells)} |")
    if not args.no_progress_variant:
        out.append("")
        out.append("Peers sending notifications/progress per item (item text as `message`) instead; "
                   "items/s, first item ms, peak RSS MiB:\n")
        out.append("| workload | transport | TS (progress) | Py (progress) | weir (partial, from above) |")
        out.append("|---|---|--:|--:|--:|")
        for count, size in workloads:
            for transport in transports:
                cells = []
                for k, per in (("ts", "progress"), ("py", "progress"), ("weir", "partial")):
                    m = find(k, transport, count, size, per_item=per)
                    cells.append("—" if m is None else f"{fmt_rate(med(m, 'items_per_s'))} · "
                                 f"{fmt_ms(med(m, 'first_item_ms'))} ms · {fmt_mib(m.peak_rss_kb)} MiB")
                out.append(f"| {workload_name(count, size)} | {transport} | {' | '.join(cells)} |")
    errors = [m for m in results if m.error]
    if errors:
        out.append("")
        out.append("Errors:")
        for m in errors:
            out.append(f"- {m.server} {m.store} {m.transport} {workload_name(m.count, m.size)} {m.per_item}: {m.error}")
    markdown = "\n".join(out) + "\n"

    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = os.path.join(HERE, "results", f"bench-{stamp}")
    with open(base + ".json", "w") as f:
        json.dump(
            {
                "machine": {"cpus": os.cpu_count(), "cpu_model": cpu_model,
                            "loadavg_at_start": load_start, "loadavg_at_end": os.getloadavg()},
                "seconds": time.time() - started,
                "results": [m.__dict__ for m in results],
            },
            f,
            indent=1,
        )
    with open(base + ".md", "w") as f:
        f.write(markdown)
    log(f"took {time.time() - started:.0f} s; results in {base}.{{json,md}}")
    print(markdown)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
