#!/usr/bin/env python3
"""Chaos and load suite for `weir serve`: drives the real binary from outside,
over loopback only, and checks the event-log invariants while things break.

Four phases (see README.md for what each proves):

  crash       kill -9 of the server mid-stream, restart on the same data dir,
              then check every run's log (dense seqs, no duplicate, nothing a
              client acknowledged missing, exactly one terminal event) and
              resume a follower across the crash
  disconnect  SSE readers of GET /runs/{id}/events and MCP 2025-11-25 calls
              whose streams are cut at random byte offsets and resumed with
              Last-Event-ID (or ?from=); events lost/duplicated across seams
  slow        readers at a few KiB/s of runs that stream fast (a round over
              SSE, a round over MCP); they get everything in order; the
              server's RSS meanwhile
  load        1,000 concurrent MCP tools/call streams over HTTP (progress +
              partial results), each checked item by item; every run's log
              checked; peak RSS and time-to-first-item

Standard library only. Exits 1 when any invariant is broken (or something
hangs, or a phase cannot run), 2 on a usage error, 130 when interrupted.

Usage: chaos.py --weir PATH [--quick] [--phases crash,disconnect,slow,load] [--seed N]
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import json
import os
import platform
import random
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
# Loopback only: the suite never talks to any other address.
HOST = "127.0.0.1"
PROTOCOL = "2025-11-25"
clock = time.monotonic
TERMINAL = ("completed", "failed", "canceled")


# --------------------------------------------------------------------------
# Configuration: the full run and --quick differ only in counts and times.


@dataclass
class Config:
    crash_iterations: int
    crash_max_delay_s: float
    sse_resumers: int
    mcp_resumers: int
    slow_readers: int
    slow_for_s: float
    slow_count: int
    load_calls: int
    load_count: int
    load_interval_ms: int


FULL = Config(
    crash_iterations=30,
    crash_max_delay_s=0.6,
    sse_resumers=16,
    mcp_resumers=16,
    slow_readers=2,
    slow_for_s=20.0,
    slow_count=100_000,
    load_calls=1000,
    load_count=200,
    load_interval_ms=10,
)
QUICK = Config(
    crash_iterations=3,
    crash_max_delay_s=0.6,
    sse_resumers=3,
    mcp_resumers=3,
    slow_readers=1,
    slow_for_s=5.0,
    slow_count=20_000,
    load_calls=100,
    load_count=100,
    load_interval_ms=10,
)

# How long a phase may take before it counts as a hang (the suite then
# fails instead of waiting forever), and how long a stream may stay silent
# (weir sends an SSE heartbeat every 15 s on a run's stream).
PHASE_DEADLINE_S = {"crash": 420, "disconnect": 240, "slow": 300, "load": 300}
STALL_S = 60


def item_text(index: int, size: int) -> str:
    """The `stream` fixture's item `index`: `00000042:xxxx…`, `size` bytes."""
    head = f"{index:08d}:"
    return head[:size] if len(head) >= size else head + "x" * (size - len(head))


# --------------------------------------------------------------------------
# Results: every phase adds its figures and any broken invariant.


class Report:
    def __init__(self) -> None:
        self.violations: list[str] = []

    def violate(self, phase: str, what: str) -> None:
        line = f"[{phase}] {what}"
        self.violations.append(line)
        print(f"  VIOLATION {line}", file=sys.stderr, flush=True)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# The server under test.


def client_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def vm_kb(pid: int, name: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(name + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def die_with_parent() -> None:
    """In the child, before exec: SIGKILL it when the suite dies, however
    it dies (Ctrl-C, a timeout's kill, kill -9), so no server outlives it."""
    libc = ctypes.CDLL(None, use_errno=True)
    PR_SET_PDEATHSIG = 1
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class Server:
    """`weir serve --http 127.0.0.1:0 --fixtures` on a data directory."""

    starts = 0

    def __init__(self, weir: str, data_dir: str, extra: list[str] | None = None):
        Server.starts += 1
        self.weir = weir
        self.data_dir = data_dir
        self.stderr_path = os.path.join(data_dir, f"server-{Server.starts}.stderr")
        # --no-exec: the suite is about the run engine and its projections;
        # the exec pack's start-up probes would only slow every restart.
        cmd = [weir, "--data-dir", data_dir, "serve", "--http", f"{HOST}:0", "--fixtures", "--no-exec"]
        cmd += extra or []
        env = {k: v for k, v in os.environ.items() if k not in ("RUST_LOG", "WEIR_TOKEN", "WEIR_DATA_DIR")}
        t0 = clock()
        self.stderr = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.stderr, env=env,
            preexec_fn=die_with_parent,
        )
        self.pid = self.proc.pid
        self.port = self._wait_for_port()
        self.ready_s = clock() - t0

    def _wait_for_port(self) -> int:
        pattern = re.compile(rb"serving MCP at http://127\.0\.0\.1:(\d+)/mcp")
        deadline = clock() + 60
        while clock() < deadline:
            with open(self.stderr_path, "rb") as f:
                found = pattern.search(f.read())
            if found:
                port = int(found.group(1))
                # The line may come just before the socket accepts.
                while clock() < deadline:
                    try:
                        socket.create_connection((HOST, port), timeout=1).close()
                        return port
                    except OSError:
                        time.sleep(0.005)
            if self.proc.poll() is not None:
                break
            time.sleep(0.005)
        raise RuntimeError(f"weir serve did not start: {self.stderr_tail()}")

    def stderr_tail(self) -> str:
        with open(self.stderr_path, "rb") as f:
            return f.read()[-2000:].decode(errors="replace")

    def rss_kb(self) -> int:
        return vm_kb(self.pid, "VmRSS")

    def cpu_s(self) -> float:
        """User + system CPU the server has used so far."""
        try:
            with open(f"/proc/{self.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except OSError:
            return 0.0

    def hwm_kb(self) -> int:
        return vm_kb(self.pid, "VmHWM")

    def kill9(self) -> None:
        os.kill(self.pid, signal.SIGKILL)
        self.proc.wait()
        self.stderr.close()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.stderr.close()

    def cli(self, *args: str) -> str:
        return self.cli_bytes(*args).decode()

    def cli_bytes(self, *args: str) -> bytes:
        """`weir --data-dir D ARGS…`, its stdout (it reads the store itself,
        not through the server: an independent view of the log)."""
        out = subprocess.run(
            [self.weir, "--data-dir", self.data_dir, *args],
            capture_output=True, timeout=120,
        )
        if out.returncode != 0:
            raise RuntimeError(f"weir {' '.join(args)}: exit {out.returncode}: {out.stderr.decode(errors='replace')[-500:]}")
        return out.stdout

    def log_events(self, run_id: str) -> tuple[list[dict], list[bytes]]:
        """The run's whole log, parsed and as the JSON lines the CLI printed."""
        out = self.cli_bytes("runs", "events", run_id, "--json", "--limit", "100000000")
        lines = [line for line in out.split(b"\n") if line.strip()]
        return [json.loads(line) for line in lines], lines

    def runs(self) -> list[dict]:
        return json.loads(self.cli("runs", "list", "--json", "--limit", "1000000"))


class RssSampler:
    """The server's VmRSS every 100 ms while it runs."""

    def __init__(self, server: Server):
        self.server = server
        self.samples: list[tuple[float, int]] = []
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        t0 = clock()
        while True:
            self.samples.append((clock() - t0, self.server.rss_kb()))
            await asyncio.sleep(0.1)

    def peak_kb(self, since: float = 0.0, until: float = float("inf")) -> int:
        return max((kb for t, kb in self.samples if since <= t <= until), default=0)

    def now(self) -> float:
        return self.samples[-1][0] if self.samples else 0.0

    def stop(self) -> None:
        self.task.cancel()


# --------------------------------------------------------------------------
# HTTP/1.1 and SSE, by hand over asyncio sockets, so a stream can be cut at
# any byte and read at any pace.


class Dechunker:
    """Incremental `Transfer-Encoding: chunked` decoder. It walks its buffer
    by offset and trims it once per feed: an SSE server may send each event
    as its own small chunk, and re-slicing per chunk would be quadratic."""

    def __init__(self) -> None:
        self.buf = b""
        self.state = "size"
        self.left = 0
        self.done = False

    def feed(self, data: bytes) -> bytes:
        buf = self.buf + data if self.buf else data
        pos, end_all = 0, len(buf)
        out = []
        while not self.done:
            if self.state == "size":
                end = buf.find(b"\r\n", pos)
                if end < 0:
                    break
                size = int(buf[pos:end].split(b";", 1)[0], 16)
                pos = end + 2
                if size == 0:
                    self.done = True
                    break
                self.left, self.state = size, "data"
            elif self.state == "data":
                if pos >= end_all:
                    break
                take = min(self.left, end_all - pos)
                out.append(buf[pos : pos + take])
                pos += take
                self.left -= take
                if self.left == 0:
                    self.state = "crlf"
            else:
                if end_all - pos < 2:
                    break
                pos += 2
                self.state = "size"
        self.buf = buf[pos:]
        return b"".join(out)


class SseEvent:
    __slots__ = ("id", "event", "data")

    def __init__(self, id: str | None, event: str | None, data: bytes):
        self.id, self.event, self.data = id, event, data


class SseParser:
    """Complete SSE events only: a cut mid-event leaves it undelivered, as a
    browser's EventSource would."""

    def __init__(self) -> None:
        self.buf = b""

    def feed(self, data: bytes) -> list[SseEvent]:
        buf = self.buf + data if self.buf else data
        if b"\n\n" not in buf:
            self.buf = buf
            return []
        blocks = buf.split(b"\n\n")
        self.buf = blocks.pop()
        events = []
        for block in blocks:
            ev_id = ev_name = None
            data_lines = []
            for line in block.split(b"\n"):
                head = line[:3]
                if head == b"dat":
                    data_lines.append(line[6:] if line[5:6] == b" " else line[5:])
                elif head == b"id:":
                    ev_id = line[3:].strip().decode()
                elif head == b"eve":
                    ev_name = line[6:].strip().decode()
            if data_lines or ev_id is not None:
                events.append(SseEvent(ev_id, ev_name, data_lines[0] if len(data_lines) == 1 else b"\n".join(data_lines)))
        return events


class Conn:
    """One keep-alive HTTP/1.1 connection to the server."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, port: int):
        self.reader, self.writer, self.port = reader, writer, port

    @classmethod
    async def open(cls, port: int, rcvbuf: int | None = None, limit: int = 1 << 20) -> "Conn":
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if rcvbuf:
            # Set before connecting so the window is small from the start:
            # a slow reader then pushes back on the server at once.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, (HOST, port))
        reader, writer = await asyncio.open_connection(sock=sock, limit=limit)
        return cls(reader, writer, port)

    def send(self, method: str, path: str, headers: dict[str, str] | None = None, body: bytes | None = None) -> None:
        lines = [f"{method} {path} HTTP/1.1", f"Host: {HOST}:{self.port}"]
        for name, value in (headers or {}).items():
            lines.append(f"{name}: {value}")
        if body is not None:
            lines.append(f"Content-Length: {len(body)}")
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + (body or b""))

    async def head(self) -> tuple[int, dict[str, str]]:
        status_line = await self.reader.readline()
        if not status_line:
            raise ConnectionError("connection closed before a response")
        status = int(status_line.split()[1])
        headers = {}
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b"\n", b""):
                break
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        return status, headers

    async def body(self, headers: dict[str, str]) -> bytes:
        if "chunked" in headers.get("transfer-encoding", "").lower():
            dechunk, out = Dechunker(), []
            while not dechunk.done:
                raw = await self.reader.read(1 << 16)
                if not raw:
                    raise ConnectionError("connection closed mid-body")
                out.append(dechunk.feed(raw))
            return b"".join(out)
        if "content-length" in headers:
            return await self.reader.readexactly(int(headers["content-length"]))
        return await self.reader.read()

    def abort(self) -> None:
        """Drop the connection at once, mid-stream (an RST, as a crashed or
        killed client would)."""
        try:
            self.writer.transport.abort()
        except Exception:
            pass

    def close(self) -> None:
        try:
            self.writer.close()
        except Exception:
            pass


def messages_of(status: int, headers: dict[str, str], body: bytes) -> list[dict]:
    if not body:
        return []
    if headers.get("content-type", "").startswith("text/event-stream"):
        return [json.loads(e.data) for e in SseParser().feed(body.replace(b"\r\n", b"\n") + b"\n\n") if e.data]
    return [json.loads(body)]


class McpSession:
    """An MCP 2025-11-25 session over Streamable HTTP; control requests on
    their own keep-alive connection, each call stream on a fresh one."""

    def __init__(self, port: int):
        self.port = port
        self.session_id: str | None = None
        self.next_id = 1
        self.conn: Conn | None = None

    def headers(self, accept: str = "application/json, text/event-stream") -> dict[str, str]:
        h = {"Content-Type": "application/json", "Accept": accept}
        if self.session_id:
            h["Mcp-Session-Id"] = self.session_id
            h["MCP-Protocol-Version"] = PROTOCOL
        return h

    async def request(self, method: str, params: dict | None, notify: bool = False) -> dict | None:
        if self.conn is None:
            self.conn = await Conn.open(self.port)
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        if not notify:
            msg["id"] = self.next_id
            self.next_id += 1
        self.conn.send("POST", "/mcp", self.headers(), json.dumps(msg).encode())
        status, headers = await self.conn.head()
        body = await self.conn.body(headers)
        if notify:
            if status != 202:
                raise RuntimeError(f"{method}: HTTP {status}: {body[:200]!r}")
            return None
        if status != 200:
            raise RuntimeError(f"{method}: HTTP {status}: {body[:200]!r}")
        if "mcp-session-id" in headers:
            self.session_id = headers["mcp-session-id"]
        for reply in messages_of(status, headers, body):
            if reply.get("id") == msg["id"]:
                return reply
        raise RuntimeError(f"{method}: no response in {body[:200]!r}")

    async def initialize(self) -> None:
        await self.request("initialize", {
            "protocolVersion": PROTOCOL,
            "capabilities": {"partialResults": {}},
            "clientInfo": {"name": "weir-chaos", "version": "1"},
        })
        await self.request("notifications/initialized", None, notify=True)

    def call_request(self, args: dict, task: bool = False) -> tuple[int, bytes]:
        req_id = self.next_id
        self.next_id += 1
        params: dict[str, Any] = {"name": "stream", "arguments": args,
                                  "_meta": {"progressToken": f"p{req_id}", "partialResultToken": f"r{req_id}"}}
        if task:
            params["task"] = {}
        body = {"jsonrpc": "2.0", "id": req_id, "method": "tools/call", "params": params}
        return req_id, json.dumps(body).encode()

    async def start_task(self, args: dict) -> str:
        """A `stream` call as a task (the answer comes at once); its run id."""
        req_id, body = self.call_request(args, task=True)
        conn = await Conn.open(self.port)
        try:
            conn.send("POST", "/mcp", self.headers(), body)
            status, headers = await conn.head()
            data = await conn.body(headers)
        finally:
            conn.close()
        for reply in messages_of(status, headers, data):
            if reply.get("id") == req_id:
                return reply["result"]["task"]["taskId"]
        raise RuntimeError(f"task call: HTTP {status}: {data[:300]!r}")

    def close(self) -> None:
        if self.conn:
            self.conn.close()


def split_event_id(ev_id: str) -> tuple[str, int]:
    run, _, seq = ev_id.rpartition(".")
    return run, int(seq)


# --------------------------------------------------------------------------
# Checking a run's log.


def partial_index(event: dict) -> int | None:
    """The item number a `partial` event carries (text or items mode)."""
    if event.get("items"):
        return event["items"][0]["i"]
    content = event.get("content") or []
    if content and content[0].get("type") == "text":
        return int(content[0]["text"][:8])
    return None


def partial_text(event: dict) -> str | None:
    if event.get("items"):
        return event["items"][0]["data"]
    content = event.get("content") or []
    return content[0].get("text") if content else None


@dataclass
class LogCheck:
    events: int
    terminals: int
    terminal_type: str | None
    terminal_code: str | None
    gaps: int  # seqs missing from 0..max
    duplicates: int  # seqs present more than once
    bad_items: int  # partials out of order or with the wrong text
    problems: list[str] = field(default_factory=list)
    started_ts: int | None = None  # wall-clock ms the run writer stamped
    first_item_ts: int | None = None


def check_log(events: list[dict], size: int) -> LogCheck:
    """The invariants of one run's complete log: seqs dense from 0 with no
    duplicate, `started` first, exactly one terminal event and it is the
    last, items numbered 0, 1, 2… with the fixture's exact text."""
    seqs = [e["seq"] for e in events]
    distinct = set(seqs)
    duplicates = len(seqs) - len(distinct)
    top = max(seqs, default=-1)
    gaps = (top + 1) - len(distinct)
    terminals = [e for e in events if e["type"] in TERMINAL]
    problems = []
    if seqs != sorted(seqs):
        problems.append("events out of seq order")
    if events and events[0]["type"] != "started":
        problems.append(f"seq 0 is {events[0]['type']}, not started")
    if len(terminals) != 1:
        problems.append(f"{len(terminals)} terminal events")
    elif events[-1]["type"] not in TERMINAL:
        problems.append(f"the last event is {events[-1]['type']}, after the terminal one")
    bad_items = 0
    expect = 0
    for e in events:
        if e["type"] == "partial":
            # The text starts with the item's number, so this checks order too.
            if partial_text(e) != item_text(expect, size) or ("items" in e and e["items"][0].get("i") != expect):
                bad_items += 1
            expect += 1
    if gaps:
        problems.append(f"{gaps} seqs missing")
    if duplicates:
        problems.append(f"{duplicates} duplicate seqs")
    if bad_items:
        problems.append(f"{bad_items} items out of order or wrong")
    term = terminals[-1] if terminals else None
    first_item = next((e for e in events if e["type"] == "partial"), None)
    return LogCheck(
        started_ts=events[0]["ts"] if events else None,
        first_item_ts=first_item["ts"] if first_item else None,
        events=len(events),
        terminals=len(terminals),
        terminal_type=term["type"] if term else None,
        terminal_code=(term.get("error") or {}).get("code") if term else None,
        gaps=gaps, duplicates=duplicates, bad_items=bad_items, problems=problems,
    )


async def read_run_sse(port: int, run_id: str, start: dict[str, str] | None = None,
                       path_suffix: str = "", parse: bool = True) -> list[tuple[SseEvent, Any]]:
    """GET /runs/{id}/events to its end, fast: the events with their JSON
    (parsed, or the raw `data` bytes)."""
    conn = await Conn.open(port)
    try:
        conn.send("GET", f"/runs/{run_id}/events{path_suffix}", {"Accept": "text/event-stream", **(start or {})})
        status, headers = await conn.head()
        if status != 200:
            raise RuntimeError(f"GET /runs/{run_id}/events: HTTP {status}")
        dechunk, parser, out = Dechunker(), SseParser(), []
        while not dechunk.done:
            raw = await conn.reader.read(1 << 16)
            if not raw:
                break
            for ev in parser.feed(dechunk.feed(raw)):
                if ev.event == "heartbeat":
                    continue
                out.append((ev, json.loads(ev.data) if parse else ev.data))
                # The stream ends after a terminal event (or `end`); stop
                # there rather than wait for the server to close.
                if ev.event in ("done", "error", "end"):
                    return out
        return out
    finally:
        conn.close()


async def check_run_over_http(port: int, run_id: str, size: int) -> LogCheck:
    """The run's log as GET /runs/{id}/events serves it, plus proof that
    nothing follows its terminal event: asked from the seq after it, the
    server serves no event (a second terminal event, or any event, would be
    served), only closes the stream or says `end` with next_seq = that seq."""
    events = [data for ev, data in await read_run_sse(port, run_id) if ev.event != "end"]
    result = check_log(events, size)
    if events:
        after = events[-1]["seq"] + 1
        tail = await read_run_sse(port, run_id, path_suffix=f"?from={after}")
        if any(ev.event != "end" or data.get("next_seq") != after for ev, data in tail):
            result.terminals += sum(1 for ev, d in tail if d.get("type") in TERMINAL)
            result.problems.append(f"after the terminal event: {[(ev.event, ev.id) for ev, _ in tail][:5]}")
    return result


def self_test() -> None:
    """The checkers catch what they are meant to catch, so that a 0 in the
    results means something. Runs in milliseconds, before every suite."""
    size = 12

    def ev(seq: int, kind: str, **fields: Any) -> dict:
        return {"run_id": "r", "seq": seq, "ts": 0, "type": kind, **fields}

    def item(seq: int, i: int) -> dict:
        return ev(seq, "partial", content=[{"type": "text", "text": item_text(i, size)}])

    good = [ev(0, "started"), ev(1, "meta"), item(2, 0), item(3, 1), ev(4, "completed")]
    assert not check_log(good, size).problems
    assert check_log(good[:2] + good[3:], size).gaps == 1
    assert check_log(good[:3] + good[2:], size).duplicates == 1
    assert check_log(good + [ev(5, "failed", error={"code": "interrupted"})], size).terminals == 2
    assert check_log(good[:-1], size).terminals == 0
    assert check_log([good[0], good[1], good[3], good[2], good[4]], size).problems
    assert check_log([good[0], good[1], item(2, 0), item(3, 2), good[4]], size).bad_items == 1
    crashed = check_log(good[:4] + [ev(4, "failed", error={"code": "interrupted"})], size)
    assert (crashed.terminal_type, crashed.terminal_code, crashed.problems) == ("failed", "interrupted", [])

    # SSE inside chunked encoding, split at every possible byte.
    body = b'event: chunk\nid: 1\ndata: {"a":1}\n\n: keep-alive\n\nid: 2\ndata: x\n\nid: 3\ndata: cut here'
    wire = b"".join(b"%x\r\n%s\r\n" % (len(body[i : i + 7]), body[i : i + 7]) for i in range(0, len(body), 7))
    for step in (1, 2, 5, 64, len(wire)):
        dechunk, parser, got = Dechunker(), SseParser(), []
        for i in range(0, len(wire), step):
            got += parser.feed(dechunk.feed(wire[i : i + step]))
        assert [(e.id, e.event, e.data) for e in got] == [("1", "chunk", b'{"a":1}'), ("2", None, b"x")], got
    end = Dechunker()
    end.feed(b"3\r\nabc\r\n0\r\n\r\n")
    assert end.done

    # A client's tally: a missing item is lost, a repeated one duplicated.
    st = McpStream()
    for n in (0, 1, 1, 3):
        msg = {"jsonrpc": "2.0", "method": "notifications/tools/partial_result",
               "params": {"partialResultToken": "t", "seq": n, "content": [{"type": "text", "text": item_text(n, size)}]}}
        st.take(SseEvent(f"r.{n + 2}", None, json.dumps(msg).encode()), 1, size, keep_acked=False)
    assert st.lost_and_duplicated(4) == (1, 1)
    st.take(SseEvent("r.2", None, b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}'), 1, size, False)
    assert st.id_regressions == 1
    assert pct([3, 1, 2, 4], 50) == 2 and pct(list(range(1, 101)), 99) == 99


def pct(values: list[float], p: float) -> float:
    """The p-th percentile (nearest rank)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(p / 100 * len(ordered) + 0.5 - 1e-9)))
    return ordered[rank - 1]


# --------------------------------------------------------------------------
# Clients of one run.


@dataclass
class McpStream:
    """What a client of one tools/call stream received."""

    run_id: str | None = None
    partials: dict[int, int] = field(default_factory=dict)  # partial seq -> times received
    acked: list[tuple[int, int, str]] = field(default_factory=list)  # (log seq, partial seq, text)
    last_event_id: str | None = None
    last_method: str | None = None  # of the last message with an event id
    cuts: list[tuple[str | None, str | None]] = field(default_factory=list)  # (last id, its method) at each cut
    last_log_seq: int = -1
    id_regressions: int = 0  # an event id not above the one before: a repeat
    progress_regressions: int = 0  # a progress not above the one before (MCP: it must increase)
    progress_repeats: list[tuple[float, float, str | None, int]] = field(default_factory=list)  # (before, after, id, cuts so far)
    last_progress: float = 0.0
    bad_items: int = 0
    response: dict | None = None
    responses: int = 0
    first_item_at: float | None = None
    first_item_wall_ms: float | None = None
    drops: int = 0
    problems: list[str] = field(default_factory=list)

    def take(self, ev: SseEvent, req_id: int, size: int | None, keep_acked: bool) -> bool:
        """Handles one SSE event; True when it is the call's response."""
        if not ev.data:
            return False
        msg = json.loads(ev.data)
        log_seq = None
        if ev.id is not None:
            run_id, log_seq = split_event_id(ev.id)
            if self.run_id is None:
                self.run_id = run_id
            elif run_id != self.run_id:
                self.problems.append(f"event id of another run: {ev.id}")
            if log_seq < self.last_log_seq:
                self.id_regressions += 1
            self.last_log_seq = max(self.last_log_seq, log_seq)
            self.last_event_id = ev.id
            self.last_method = msg.get("method")
        method = msg.get("method")
        if method == "notifications/tools/partial_result":
            if self.first_item_at is None:
                self.first_item_at = clock()
                self.first_item_wall_ms = time.time() * 1000
            p = msg["params"]
            pseq = p["seq"]
            self.partials[pseq] = self.partials.get(pseq, 0) + 1
            if p.get("content"):
                text = p["content"][0].get("text")
            else:  # `items` mode: the item rides in structuredContent
                items = (p.get("structuredContent") or {}).get("items") or [{}]
                text = items[0].get("data")
            if size is not None and text != item_text(pseq, size):
                self.bad_items += 1
            if keep_acked and log_seq is not None:
                self.acked.append((log_seq, pseq, text))
        elif method == "notifications/progress":
            progress = msg["params"]["progress"]
            if progress <= self.last_progress:
                self.progress_regressions += 1
                self.progress_repeats.append((self.last_progress, progress, ev.id, self.drops))
            self.last_progress = progress
        elif method is None and msg.get("id") == req_id:
            self.response = msg
            self.responses += 1
            return True
        return False

    def lost_and_duplicated(self, count: int) -> tuple[int, int]:
        lost = sum(1 for i in range(count) if i not in self.partials)
        duplicated = sum(n - 1 for n in self.partials.values() if n > 1)
        duplicated += sum(1 for i in self.partials if i >= count)
        return lost, duplicated


async def read_stream(conn: Conn, feed, budget: int | None = None, pace_bps: float | None = None,
                      pace_until: float | None = None, can_cut=None) -> str:
    """Reads an SSE response body from `conn` into `feed(events) -> done?`.
    Returns "done" (feed said so), "eof" (the server closed), or "cut" once
    `budget` bytes of body were read (the rest of that read is thrown away:
    the cut lands at an arbitrary byte) and `can_cut()`, if given, agrees
    (else it reads on and cuts as soon as it does). With `pace_bps`, reads that many
    bytes a second until `pace_until` (clock), then as fast as it can."""
    status, headers = await conn.head()
    if status != 200:
        body = await conn.body(headers)
        raise RuntimeError(f"HTTP {status}: {body[:200]!r}")
    chunked = "chunked" in headers.get("transfer-encoding", "").lower()
    dechunk, parser = Dechunker(), SseParser()
    used = 0
    while True:
        # The server sends a heartbeat at least every 15 s on a run's
        # stream: 60 s without a byte is a stall, reported as such.
        if pace_bps and clock() < pace_until:
            step = max(1, int(pace_bps / 20))
            raw = await asyncio.wait_for(conn.reader.read(step), STALL_S)
            await asyncio.sleep(len(raw) / pace_bps)
        else:
            raw = await asyncio.wait_for(conn.reader.read(1 << 16), STALL_S)
        if not raw:
            return "eof"
        if budget is not None and used + len(raw) >= budget and (can_cut is None or can_cut()):
            raw = raw[: max(0, budget - used)]
            used = budget
        else:
            used += len(raw)
        body = dechunk.feed(raw) if chunked else raw
        if feed(parser.feed(body)):
            return "done"
        if budget is not None and used >= budget and (can_cut is None or can_cut()):
            return "cut"
        if chunked and dechunk.done:
            return "eof"


# --------------------------------------------------------------------------
# Phase 1: kill -9 mid-stream.


async def crash_phase(weir: str, cfg: Config, rng: random.Random, report: Report, work: str) -> dict:
    data_dir = os.path.join(work, "crash")
    os.makedirs(data_dir)
    server = Server(weir, data_dir)
    iterations = []
    totals = {"runs": 0, "acked_events": 0, "lost": 0, "duplicated": 0, "not_one_terminal": 0,
              "interrupted": 0, "completed_before_kill": 0, "resumed_events": 0}
    restart_ms: list[float] = []
    runs: list[dict] = []
    open_runs: list[dict] = []
    db_mib = 0.0
    try:
        for it in range(cfg.crash_iterations):
            delay = rng.uniform(0.0, cfg.crash_max_delay_s)
            # Three runs at once, watched four ways: a call that floods the
            # log as fast as it can (the writer is mid-batch when the kill
            # lands), followed also over GET /runs/{id}/events by a reader
            # that lags behind it (so resuming after the restart has much to
            # replay); a paced call; and a paced task followed over SSE,
            # live. Sizes and pace vary per iteration.
            sizes = {"flood": rng.choice([16, 64, 100]), "paced": rng.choice([100, 1000]),
                     "task": rng.choice([32, 200])}
            call_args = {
                "flood": {"count": 1_000_000, "size": sizes["flood"], "interval_ms": 0},
                "paced": {"count": 100_000, "size": sizes["paced"], "interval_ms": rng.choice([1, 2, 5])},
            }
            task_args = {"count": 100_000, "size": sizes["task"], "interval_ms": 1}
            session = McpSession(server.port)
            await session.initialize()
            streams: dict[str, McpStream] = {name: McpStream() for name in call_args}
            followed: dict[str, list[dict]] = {"flood": [], "task": []}
            run_ids: dict[str, str | None] = {"flood": None, "paced": None, "task": None}
            known = {name: asyncio.Event() for name in run_ids}
            watchers = 4
            streaming: set[str] = set()
            started = asyncio.Event()

            def has_started(who: str) -> None:
                streaming.add(who)
                if len(streaming) == watchers:
                    started.set()

            async def mcp_call(name: str, args: dict) -> None:
                st = streams[name]
                req_id, body = session.call_request(args)
                conn = await Conn.open(server.port)
                try:
                    conn.send("POST", "/mcp", session.headers(), body)

                    def feed(events: list[SseEvent]) -> bool:
                        done = False
                        for ev in events:
                            done |= st.take(ev, req_id, args["size"], keep_acked=True)
                        if st.run_id and not known[name].is_set():
                            run_ids[name] = st.run_id
                            known[name].set()
                        if st.partials and name not in streaming:
                            has_started(name)
                        return done

                    await read_stream(conn, feed)
                except (ConnectionError, OSError, asyncio.IncompleteReadError):
                    pass  # the kill
                finally:
                    conn.close()

            async def follower(name: str) -> None:
                await known[name].wait()
                seen = followed[name]
                conn = await Conn.open(server.port)
                try:
                    conn.send("GET", f"/runs/{run_ids[name]}/events", {"Accept": "text/event-stream"})

                    def feed(events: list[SseEvent]) -> bool:
                        for ev in events:
                            if ev.event != "heartbeat":
                                seen.append(json.loads(ev.data))
                        if f"{name}-sse" not in streaming and any(e["type"] == "partial" for e in seen[-50:]):
                            has_started(f"{name}-sse")
                        return bool(seen) and seen[-1]["type"] in TERMINAL

                    await read_stream(conn, feed)
                except (ConnectionError, OSError, asyncio.IncompleteReadError):
                    pass  # the kill
                finally:
                    conn.close()

            run_ids["task"] = await session.start_task(task_args)
            known["task"].set()
            tasks = [asyncio.create_task(c) for c in (
                mcp_call("flood", call_args["flood"]), mcp_call("paced", call_args["paced"]),
                follower("flood"), follower("task"))]
            try:
                await asyncio.wait_for(started.wait(), 20)
            except asyncio.TimeoutError:
                report.violate("crash", f"iteration {it}: streams did not start within 20 s ({sorted(streaming)} did)")
            await asyncio.sleep(delay)
            server.kill9()
            _, pending = await asyncio.wait(tasks, timeout=15)
            for t in pending:
                report.violate("crash", f"iteration {it}: a client still reading 15 s after the kill")
                t.cancel()
            session.close()

            server = Server(weir, data_dir)
            restart_ms.append(server.ready_s * 1000)

            it_result: dict[str, Any] = {"delay_ms": round(delay * 1000), "restart_ms": round(server.ready_s * 1000, 1)}
            for name, run_id in run_ids.items():
                if run_id is None:
                    report.violate("crash", f"iteration {it}: the {name} call never saw its run id")
                    continue
                where = f"iteration {it}: {name} run {run_id}"
                # The log as the CLI reads it from the store, not through the server.
                events, raw = await asyncio.to_thread(server.log_events, run_id)
                chk = check_log(events, sizes[name])
                totals["runs"] += 1
                if chk.terminals != 1:
                    totals["not_one_terminal"] += 1
                if chk.terminal_type == "failed" and chk.terminal_code == "interrupted":
                    totals["interrupted"] += 1
                elif chk.terminal_type == "completed":
                    totals["completed_before_kill"] += 1
                else:
                    report.violate("crash", f"{where} ended {chk.terminal_type}/{chk.terminal_code}, expected failed/interrupted")
                totals["duplicated"] += chk.duplicates
                for p in chk.problems:
                    report.violate("crash", f"{where}: {p}")
                by_seq = {e["seq"]: e for e in events}
                acked = lost = 0
                figures: dict[str, Any] = {"run": run_id, "log_events": chk.events, "terminal": f"{chk.terminal_type}/{chk.terminal_code}"}
                # Everything a client saw before the kill is in the log, as it saw it.
                if name in streams:
                    st = streams[name]
                    ordinal = {}
                    k = 0
                    for e in events:
                        if e["type"] == "partial":
                            ordinal[e["seq"]] = k
                            k += 1
                    for log_seq, pseq, text in st.acked:
                        e = by_seq.get(log_seq)
                        if e is None or e["type"] != "partial" or ordinal.get(log_seq) != pseq or partial_text(e) != text:
                            lost += 1
                    seen_dups = sum(n - 1 for n in st.partials.values() if n > 1) + st.id_regressions
                    totals["duplicated"] += seen_dups
                    if seen_dups:
                        report.violate("crash", f"{where}: the MCP client saw {seen_dups} repeated items or ids")
                    if st.bad_items:
                        report.violate("crash", f"{where}: the MCP client saw {st.bad_items} wrong items")
                    acked += len(st.acked)
                    figures["mcp_acked"] = len(st.acked)
                if name in followed:
                    seen = followed[name]
                    for e in seen:
                        if by_seq.get(e["seq"]) != e:
                            lost += 1
                    if [e["seq"] for e in seen] != list(range(len(seen))):
                        report.violate("crash", f"{where}: the SSE follower did not get seqs 0, 1, 2… in order")
                    acked += len(seen)
                    # Resume the follower across the crash: the rest of the
                    # log, ending with its terminal event, nothing twice.
                    last = seen[-1]["seq"] if seen else None
                    start = {"Last-Event-ID": str(last)} if last is not None else None
                    # Compared as bytes (the SSE data and the CLI's line are
                    # the same JSON), parsed only when they differ: the
                    # replay can be hundreds of thousands of events.
                    rest = [d for ev, d in await read_run_sse(server.port, run_id, start, parse=False) if ev.event != "end"]
                    first = 0 if last is None else last + 1
                    want = raw[first:] if first <= len(raw) else []
                    totals["resumed_events"] += len(rest)
                    if rest != want and [json.loads(d) for d in rest] != [json.loads(w) for w in want]:
                        report.violate("crash", f"{where}: the follower resumed after {last} got {len(rest)} events, the log has {len(want)} after it")
                        lost += max(0, len(want) - len(rest))
                    figures["sse_acked"] = len(seen)
                    figures["sse_resumed"] = len(rest)
                if lost:
                    report.violate("crash", f"{where}: {lost} acknowledged events not in the log as seen")
                totals["lost"] += lost
                totals["acked_events"] += acked
                it_result[name] = figures
            # Tasks survive a restart: the task's run failed, and says so.
            s2 = McpSession(server.port)
            await s2.initialize()
            got = await s2.request("tasks/get", {"taskId": run_ids["task"]})
            s2.close()
            status = ((got or {}).get("result") or {}).get("status")
            it_result["task_status_after_restart"] = status
            if status != "failed":
                report.violate("crash", f"iteration {it}: tasks/get {run_ids['task']} after the restart says {status!r}, expected failed: {got}")
            iterations.append(it_result)
            f, p, t = (it_result.get(k, {}) for k in ("flood", "paced", "task"))
            log(f"  kill {it + 1}/{cfg.crash_iterations} at {it_result['delay_ms']} ms: flood {f.get('log_events')} events "
                f"(MCP acked {f.get('mcp_acked')}, SSE acked {f.get('sse_acked')}, resumed {f.get('sse_resumed')}), "
                f"paced {p.get('log_events')}, task {t.get('log_events')}; restart {it_result['restart_ms']} ms")
        # Nothing anywhere in the store is left without its terminal event.
        runs = await asyncio.to_thread(server.runs)
        open_runs = [r for r in runs if r.get("state") not in TERMINAL]
        if open_runs:
            report.violate("crash", f"{len(open_runs)} runs in the store not ended after restarts: {[r.get('run_id') for r in open_runs][:5]}")
        db = os.path.join(data_dir, "weir.db")
        db_mib = os.path.getsize(db) / 2**20 if os.path.exists(db) else 0
    finally:
        server.stop()
    return {
        "kills": cfg.crash_iterations,
        **totals,
        "store_runs": len(runs),
        "store_runs_not_ended": len(open_runs),
        "restart_ms_p50": round(statistics.median(restart_ms), 1) if restart_ms else None,
        "restart_ms_max": round(max(restart_ms), 1) if restart_ms else None,
        "db_mib": round(db_mib, 1),
        "iterations": iterations,
    }


# --------------------------------------------------------------------------
# Phase 2: random disconnects, resumed.


async def disconnect_phase(weir: str, cfg: Config, rng: random.Random, report: Report, work: str) -> dict:
    data_dir = os.path.join(work, "disconnect")
    os.makedirs(data_dir)
    server = Server(weir, data_dir, ["--max-concurrent", "64"])
    sampler = RssSampler(server)
    out: dict[str, Any] = {}
    try:
        control = McpSession(server.port)
        await control.initialize()

        def budget(r: random.Random) -> int:
            # Cuts a few bytes to a few hundred KB apart: within the first
            # bytes of a response, mid-event, mid-chunk.
            return r.choice([r.randint(1, 400), r.randint(400, 20_000), r.randint(20_000, 300_000)])

        def cuts(r: random.Random) -> int:
            # How many times a reader cuts before it reads to the end: a
            # client that always cuts sooner than the next message ends (a
            # 512 KiB result, say) would never get it, whatever the server.
            return r.randint(5, 40)

        # Plain SSE readers of GET /runs/{id}/events.
        sse_specs = []
        for i in range(cfg.sse_resumers):
            sse_specs.append(rng.choice([
                {"count": 20_000, "size": 100, "interval_ms": 0},
                {"count": 3_000, "size": 300, "interval_ms": 1},
                {"count": 5_000, "size": 16, "interval_ms": 0, "mode": "items"},
            ]))

        async def sse_resumer(args: dict, seed: int) -> dict:
            r = random.Random(seed)
            run_id = await control.start_task(args)
            counts: dict[int, int] = {}
            order_breaks = 0
            last: int | None = None
            terminal: dict | None = None
            drops = eofs = 0
            bad = 0
            next_item = 0
            max_drops = cuts(r)
            while terminal is None:
                if eofs > 20:
                    raise RuntimeError(f"GET /runs/{run_id}/events closed 20 times before the terminal event")
                conn = await Conn.open(server.port)
                headers = {"Accept": "text/event-stream"}
                path = f"/runs/{run_id}/events"
                if last is not None:
                    # Both ways to resume, at random.
                    if r.random() < 0.5:
                        headers["Last-Event-ID"] = str(last)
                    else:
                        path += f"?from={last + 1}"
                conn.send("GET", path, headers)

                def feed(events: list[SseEvent]) -> bool:
                    nonlocal last, terminal, order_breaks, bad, next_item
                    for ev in events:
                        if ev.event == "heartbeat":
                            continue
                        data = json.loads(ev.data)
                        seq = data["seq"]
                        if ev.id != str(seq):
                            bad += 1
                        counts[seq] = counts.get(seq, 0) + 1
                        if last is not None and seq != last + 1:
                            order_breaks += 1
                        last = seq
                        if data["type"] == "partial":
                            if partial_index(data) != next_item or partial_text(data) != item_text(next_item, args["size"]):
                                bad += 1
                            next_item += 1
                        if data["type"] in TERMINAL:
                            terminal = data
                            return True
                    return False

                try:
                    how = await read_stream(conn, feed, budget=budget(r) if drops < max_drops else None)
                finally:
                    conn.abort()
                if how == "cut":
                    drops += 1
                elif how == "eof" and terminal is None:
                    eofs += 1
            top = terminal["seq"]
            lost = sum(1 for s in range(top + 1) if s not in counts)
            dup = sum(n - 1 for n in counts.values() if n > 1)
            return {"run": run_id, "kind": "sse", "events": top + 1, "lost": lost, "duplicated": dup,
                    "order_breaks": order_breaks, "bad": bad, "drops": drops, "server_eofs": eofs,
                    "terminal": terminal["type"], "items": next_item, "count": args["count"]}

        mcp_specs = []
        for i in range(cfg.mcp_resumers):
            mcp_specs.append(rng.choice([
                {"count": 20_000, "size": 100, "interval_ms": 0},
                {"count": 3_000, "size": 300, "interval_ms": 1},
                {"count": 2_000, "size": 2_000, "interval_ms": 0},
                # A human pace with progress after every item: progress held
                # back by the rate limit and items interleave.
                {"count": 100, "size": 1_000, "interval_ms": 15},
            ]))

        async def mcp_resumer(args: dict, seed: int) -> dict:
            r = random.Random(seed)
            session = McpSession(server.port)
            await session.initialize()
            st = McpStream()
            req_id, body = session.call_request(args)
            conn = await Conn.open(server.port)
            conn.send("POST", "/mcp", session.headers(), body)
            eofs = 0

            def feed(events: list[SseEvent]) -> bool:
                done = False
                for ev in events:
                    done |= st.take(ev, req_id, args["size"], keep_acked=False)
                return done

            max_drops = cuts(r)
            while True:
                if eofs > 20:
                    raise RuntimeError(f"the call's stream closed 20 times before its response (run {st.run_id})")
                # Never cut before an event id arrived: without one there is
                # nothing to resume from (a client's problem, not the server's).
                try:
                    how = await read_stream(conn, feed, budget=budget(r) if st.drops < max_drops else None,
                                            can_cut=lambda: st.last_event_id is not None)
                finally:
                    conn.abort()
                if how == "done":
                    break
                if how == "cut":
                    st.drops += 1
                    st.cuts.append((st.last_event_id, st.last_method))
                else:
                    eofs += 1
                    if st.last_event_id is None:
                        raise RuntimeError("the call's stream closed before any event")
                conn = await Conn.open(server.port)
                conn.send("GET", "/mcp", {**session.headers(accept="text/event-stream"),
                                          "Last-Event-ID": st.last_event_id})
            session.close()
            lost, dup = st.lost_and_duplicated(args["count"])
            result = (st.response or {}).get("result") or {}
            if result.get("structuredContent") != {"count": args["count"]} or result.get("isError"):
                st.problems.append(f"unexpected response {json.dumps(st.response)[:200]}")
            missing = [i for i in range(args["count"]) if i not in st.partials]
            return {"run": st.run_id, "kind": "mcp", "items": len(st.partials), "count": args["count"],
                    "missing": missing[:20], "cuts": st.cuts, "progress_repeats": st.progress_repeats[:5],
                    "lost": lost, "duplicated": dup + st.id_regressions, "id_regressions": st.id_regressions,
                    "progress_regressions": st.progress_regressions, "bad": st.bad_items, "drops": st.drops,
                    "server_eofs": eofs, "responses": st.responses, "problems": st.problems}

        t0 = clock()
        results = await asyncio.gather(
            *[sse_resumer(a, rng.randrange(1 << 30)) for a in sse_specs],
            *[mcp_resumer(a, rng.randrange(1 << 30)) for a in mcp_specs],
        )
        elapsed = clock() - t0
        control.close()
        # Each run's log, independently of what the readers saw.
        not_one = 0
        for res, args in zip(results, [*sse_specs, *mcp_specs]):
            chk = await check_run_over_http(server.port, res["run"], args["size"])
            res["log_events"] = chk.events
            if chk.terminals != 1:
                not_one += 1
            for p in chk.problems:
                report.violate("disconnect", f"run {res['run']}: {p}")
            who = f"{res['kind']} reader of run {res['run']}"
            if res["lost"] or res["duplicated"]:
                report.violate("disconnect", f"{who}: {res['lost']} lost, {res['duplicated']} duplicated after {res['drops']} drops")
                if res.get("missing"):
                    report.violate("disconnect", await explain_missing(server.port, res))
            if res.get("order_breaks"):
                report.violate("disconnect", f"{who}: {res['order_breaks']} events out of order across seams")
            if res["bad"]:
                report.violate("disconnect", f"{who}: {res['bad']} wrong items")
            if res.get("progress_regressions"):
                report.violate("disconnect", f"{who}: progress did not increase {res['progress_regressions']} times: "
                               + ", ".join(f"{a:g} then {b:g} (id {i}, after cut {n})" for a, b, i, n in res["progress_repeats"]))
            if res["kind"] == "mcp" and (res["responses"] != 1 or res["problems"]):
                report.violate("disconnect", f"{who}: {res['responses']} responses; {res['problems']}")
            if res["kind"] == "sse" and (res["terminal"] != "completed" or res["items"] != res["count"]):
                report.violate("disconnect", f"{who}: ended {res['terminal']} with {res['items']}/{res['count']} items")
        sse = [r for r in results if r["kind"] == "sse"]
        mcp = [r for r in results if r["kind"] == "mcp"]
        out = {
            "sse_readers": len(sse),
            "sse_drops": sum(r["drops"] for r in sse),
            "sse_events": sum(r["events"] for r in sse),
            "mcp_calls": len(mcp),
            "mcp_drops": sum(r["drops"] for r in mcp),
            "mcp_items": sum(r["count"] for r in mcp),
            "lost": sum(r["lost"] for r in results),
            "duplicated": sum(r["duplicated"] for r in results),
            "out_of_order": sum(r.get("order_breaks", 0) for r in results),
            "progress_not_increasing": sum(r.get("progress_regressions", 0) for r in results),
            "not_one_terminal": not_one,
            "server_closed_early": sum(r["server_eofs"] for r in results),
            "seconds": round(elapsed, 1),
            "peak_rss_mib": round(sampler.peak_kb() / 1024, 1),
            "readers": results,
        }
    finally:
        sampler.stop()
        server.stop()
    return out


async def explain_missing(port: int, res: dict) -> str:
    """For a call that lost partial results: where each missing one is in
    the log, and the cut the client resumed from just before it."""
    events = [d for ev, d in await read_run_sse(port, res["run"]) if ev.event != "end"]
    log_seq_of = [e["seq"] for e in events if e["type"] == "partial"]
    lines = []
    for pseq in res["missing"][:5]:
        at = log_seq_of[pseq] if pseq < len(log_seq_of) else None
        # The cut whose resume point (its last event id) is at or just past it.
        near = [(cid, m) for cid, m in res["cuts"] if cid and at is not None and at <= split_event_id(cid)[1] <= at + 2]
        lines.append(f"partial seq {pseq} (log seq {at}) never delivered; cuts right after: {near or 'none'}")
    return f"run {res['run']}: " + "; ".join(lines)


# --------------------------------------------------------------------------
# Phase 3: slow readers.


async def slow_phase(weir: str, cfg: Config, rng: random.Random, report: Report, work: str) -> dict:
    # One round per kind of reader, each on a fresh server, so that the RSS
    # each kind costs the server is its own.
    rounds = {kind: await slow_round(weir, cfg, rng, report, work, kind) for kind in ("sse", "mcp")}
    return {
        "lost": sum(r["lost"] for r in rounds.values()),
        "duplicated": sum(r["duplicated"] for r in rounds.values()),
        "not_one_terminal": sum(r["not_one_terminal"] for r in rounds.values()),
        "readers": sum(r["readers"] for r in rounds.values()),
        "slow_for_s": cfg.slow_for_s,
        "count": cfg.slow_count,
        "rounds": rounds,
    }


async def slow_round(weir: str, cfg: Config, rng: random.Random, report: Report, work: str, kind: str) -> dict:
    """`cfg.slow_readers` readers of one kind (`sse`: GET /runs/{id}/events;
    `mcp`: a tools/call stream), each of its own run, and a fast reader."""
    data_dir = os.path.join(work, f"slow-{kind}")
    os.makedirs(data_dir)
    server = Server(weir, data_dir)
    await asyncio.sleep(0.3)
    baseline_kb = server.rss_kb()
    sampler = RssSampler(server)
    size = 100
    args = {"count": cfg.slow_count, "size": size, "interval_ms": 0}
    readers = []
    try:
        control = McpSession(server.port)
        await control.initialize()
        t0 = clock()
        slow_until = t0 + cfg.slow_for_s

        async def slow_sse(rate: float) -> dict:
            run_id = await control.start_task(args)
            # Small socket buffers on the client: what the server cannot
            # send waits on the server's side, which is what is measured.
            conn = await Conn.open(server.port, rcvbuf=4096, limit=4096)
            conn.send("GET", f"/runs/{run_id}/events", {"Accept": "text/event-stream"})
            seqs: list[int] = []
            bad = 0
            nxt = 0
            crawled = None

            def feed(events: list[SseEvent]) -> bool:
                nonlocal bad, nxt, crawled
                if crawled is None and clock() >= slow_until:
                    crawled = len(seqs)
                for ev in events:
                    if ev.event == "heartbeat":
                        continue
                    d = json.loads(ev.data)
                    seqs.append(d["seq"])
                    if d["type"] == "partial":
                        if partial_text(d) != item_text(nxt, size):
                            bad += 1
                        nxt += 1
                    if d["type"] in TERMINAL:
                        return True
                return False

            start = clock()
            how = await read_stream(conn, feed, pace_bps=rate, pace_until=slow_until)
            conn.close()
            chk = await check_run_over_http(server.port, run_id, size)
            ok_order = seqs == list(range(chk.events))
            return {"kind": "sse", "run": run_id, "rate_bps": rate, "events": len(seqs), "log_events": chk.events,
                    "events_while_slow": crawled,
                    "in_order": ok_order, "bad": bad, "items": nxt, "ended": how,
                    "seconds": round(clock() - start, 1), "log_problems": chk.problems, "terminals": chk.terminals}

        async def slow_mcp(rate: float) -> dict:
            session = McpSession(server.port)
            await session.initialize()
            st = McpStream()
            req_id, body = session.call_request(args)
            conn = await Conn.open(server.port, rcvbuf=4096, limit=4096)
            conn.send("POST", "/mcp", session.headers(), body)
            start = clock()
            crawled = None

            def feed(events: list[SseEvent]) -> bool:
                nonlocal crawled
                if crawled is None and clock() >= slow_until:
                    crawled = len(st.partials)
                done = False
                for ev in events:
                    done |= st.take(ev, req_id, size, keep_acked=False)
                return done

            how = await read_stream(conn, feed, pace_bps=rate, pace_until=slow_until)
            conn.close()
            session.close()
            lost, dup = st.lost_and_duplicated(args["count"])
            chk = await check_run_over_http(server.port, st.run_id, size)
            in_order = list(st.partials) == list(range(len(st.partials)))
            return {"kind": "mcp", "run": st.run_id, "rate_bps": rate, "items": len(st.partials), "lost": lost,
                    "items_while_slow": crawled,
                    "duplicated": dup + st.id_regressions, "in_order": in_order, "bad": st.bad_items,
                    "responses": st.responses, "ended": how, "seconds": round(clock() - start, 1),
                    "log_problems": chk.problems, "terminals": chk.terminals, "log_events": chk.events}

        async def fast_sse() -> dict:
            # A fast reader alongside: slow readers must not hold it back.
            run_id = await control.start_task(args)
            start = clock()
            events = await read_run_sse(server.port, run_id)
            return {"kind": "fast-sse", "events": len(events), "seconds": round(clock() - start, 2)}

        jobs = []
        for i in range(cfg.slow_readers):
            rate = rng.uniform(2048, 8192)
            jobs.append(slow_sse(rate) if kind == "sse" else slow_mcp(rate))
        jobs.append(fast_sse())
        window = (sampler.now(), sampler.now() + cfg.slow_for_s)
        readers = await asyncio.gather(*jobs)
        control.close()
        elapsed = clock() - t0
        slow_peak = sampler.peak_kb(*window)
        # RSS at the end of the crawl: the runs are long done, the readers
        # still far behind; what the server holds for them then.
        crawl_end = [kb for t, kb in sampler.samples if t <= window[1]]
        crawl_end_kb = crawl_end[-1] if crawl_end else 0
        drain_peak = sampler.peak_kb(window[1])
        for r in readers:
            if r["kind"] == "fast-sse":
                continue
            who = f"slow {r['kind']} reader of run {r['run']}"
            if not r["in_order"] or r["bad"]:
                report.violate("slow", f"{who}: not everything in order ({r['bad']} wrong items)")
            if r["kind"] == "mcp" and (r["lost"] or r["duplicated"] or r["responses"] != 1):
                report.violate("slow", f"{who}: {r['lost']} lost, {r['duplicated']} duplicated, {r['responses']} responses")
            if r["kind"] == "sse" and r["events"] != r["log_events"]:
                report.violate("slow", f"{who}: got {r['events']} of {r['log_events']} events")
            if r["items"] != args["count"]:
                report.violate("slow", f"{who}: {r['items']} of {args['count']} items")
            for p in r["log_problems"]:
                report.violate("slow", f"run {r['run']}: {p}")
        slow = [r for r in readers if r["kind"] != "fast-sse"]
        fast = next(r for r in readers if r["kind"] == "fast-sse")
        return {
            "kind": kind,
            "readers": len(slow),
            "rates_kib_s": [round(r["rate_bps"] / 1024, 1) for r in slow],
            "slow_for_s": cfg.slow_for_s,
            "count": args["count"],
            "events_per_reader": max(r.get("log_events", 0) for r in slow),
            "lost": sum(r.get("lost", 0) for r in slow) + sum(0 if r["in_order"] else 1 for r in slow),
            "duplicated": sum(r.get("duplicated", 0) for r in slow),
            "not_one_terminal": sum(1 for r in slow if r["terminals"] != 1),
            "rss_baseline_mib": round(baseline_kb / 1024, 1),
            "rss_peak_mib": round(slow_peak / 1024, 1),
            "rss_end_of_crawl_mib": round(crawl_end_kb / 1024, 1),
            "rss_peak_drain_mib": round(drain_peak / 1024, 1),
            "received_while_slow": [r.get("events_while_slow", r.get("items_while_slow")) for r in slow],
            "vm_hwm_mib": round(server.hwm_kb() / 1024, 1),
            "fast_reader_seconds": fast["seconds"],
            "fast_reader_events": fast["events"],
            "seconds": round(elapsed, 1),
            "detail": slow,
        }
    finally:
        sampler.stop()
        server.stop()


# --------------------------------------------------------------------------
# Phase 4: 1,000 concurrent streaming calls.


async def load_phase(weir: str, cfg: Config, rng: random.Random, report: Report, work: str) -> dict:
    data_dir = os.path.join(work, "load")
    os.makedirs(data_dir)
    n = cfg.load_calls
    # Every call runs at once: the default limits (16 running, 256 queued)
    # would queue or refuse most of them.
    server = Server(weir, data_dir, ["--max-concurrent", str(n), "--max-queue", str(n)])
    await asyncio.sleep(0.3)
    baseline_kb = server.rss_kb()
    sampler = RssSampler(server)
    args = {"count": cfg.load_count, "size": 100, "interval_ms": cfg.load_interval_ms}
    try:
        sessions = [McpSession(server.port) for _ in range(n)]
        gate = asyncio.Semaphore(50)

        async def init(s: McpSession) -> None:
            async with gate:
                await s.initialize()

        t_init = clock()
        await asyncio.gather(*[init(s) for s in sessions])
        init_s = clock() - t_init
        fire = asyncio.Event()
        t_fire = 0.0

        async def call(s: McpSession) -> dict:
            st = McpStream()
            req_id, body = s.call_request(args)
            conn = s.conn  # the session's keep-alive connection carries the call
            await fire.wait()
            t0 = clock()
            sent_wall_ms = time.time() * 1000
            conn.send("POST", "/mcp", s.headers(), body)

            def feed(events: list[SseEvent]) -> bool:
                done = False
                for ev in events:
                    done |= st.take(ev, req_id, args["size"], keep_acked=False)
                return done

            try:
                how = await read_stream(conn, feed)
            except (ConnectionError, OSError, asyncio.IncompleteReadError) as e:
                how = f"error {type(e).__name__}"
            t_end = clock()
            conn.close()
            lost, dup = st.lost_and_duplicated(args["count"])
            result = (st.response or {}).get("result") or {}
            ok = result.get("structuredContent") == {"count": args["count"]} and not result.get("isError")
            return {"run": st.run_id, "how": how, "lost": lost, "duplicated": dup + st.id_regressions,
                    "bad": st.bad_items, "progress_regressions": st.progress_regressions, "responses": st.responses,
                    "ok": ok, "ttfi_ms": None if st.first_item_at is None else (st.first_item_at - t0) * 1000,
                    "call_ms": (t_end - t0) * 1000, "error": None if ok else json.dumps(st.response)[:300],
                    "sent_wall_ms": sent_wall_ms, "first_item_wall_ms": st.first_item_wall_ms}

        jobs = [asyncio.create_task(call(s)) for s in sessions]
        await asyncio.sleep(0.2)
        calls_since = sampler.samples[-1][0] if sampler.samples else 0.0
        cpu0, client0 = server.cpu_s(), client_cpu_s()
        t_fire = clock()
        fire.set()
        results = await asyncio.gather(*jobs)
        wall = clock() - t_fire
        server_cpu, client_cpu = server.cpu_s() - cpu0, client_cpu_s() - client0
        peak_kb = sampler.peak_kb(calls_since)
        hwm_kb = server.hwm_kb()
        # Every run's log, read back over GET /runs/{id}/events.
        t_verify = clock()
        gate = asyncio.Semaphore(16)
        not_one = 0
        log_problems = 0

        async def verify(res: dict) -> LogCheck | None:
            if not res["run"]:
                return None
            async with gate:
                return await check_run_over_http(server.port, res["run"], args["size"])

        checks = await asyncio.gather(*[verify(r) for r in results])
        verify_s = clock() - t_verify
        runs_listed = await asyncio.to_thread(server.runs)
        for res, chk in zip(results, checks):
            if chk is None:
                report.violate("load", f"a call got no run id ({res['how']}): {res['error']}")
                not_one += 1
                continue
            if chk.terminals != 1:
                not_one += 1
            for p in chk.problems:
                report.violate("load", f"run {res['run']}: {p}")
                log_problems += 1
            if chk.terminal_type != "completed":
                report.violate("load", f"run {res['run']} ended {chk.terminal_type}/{chk.terminal_code}")
            if res["lost"] or res["duplicated"] or res["bad"] or res["progress_regressions"] or res["responses"] != 1 or not res["ok"]:
                report.violate("load", f"call of run {res['run']}: {res['lost']} lost, {res['duplicated']} duplicated, "
                               f"{res['bad']} wrong, {res['progress_regressions']} progress regressions, "
                               f"{res['responses']} responses, {res['how']}, {res['error']}")
        stored = [r for r in runs_listed if r.get("tool") == "stream"]
        if len(stored) != n:
            report.violate("load", f"{len(stored)} stream runs in the store, expected {n}")
        ttfi = [r["ttfi_ms"] for r in results if r["ttfi_ms"] is not None]
        # Where the time to first item goes, from the log's timestamps (the
        # run writer stamps wall-clock ms; client and server share the
        # clock): the request until `started` is stored (HTTP, session,
        # scheduler, first commit), `started` until item 0 is stored, and
        # stored until the client has parsed it (projection, SSE, and this
        # one-threaded client's own queue of 1,000 sockets).
        split: dict[str, list[float]] = {"to_started": [], "to_stored": [], "to_client": []}
        for res, chk in zip(results, checks):
            if chk and chk.started_ts and chk.first_item_ts and res["first_item_wall_ms"]:
                split["to_started"].append(chk.started_ts - res["sent_wall_ms"])
                split["to_stored"].append(chk.first_item_ts - chk.started_ts)
                split["to_client"].append(res["first_item_wall_ms"] - chk.first_item_ts)
        durations = [r["call_ms"] for r in results]
        items = sum(args["count"] - r["lost"] for r in results)
        return {
            "calls": n,
            "kind": "MCP 2025-11-25 tools/call over Streamable HTTP, progressToken + partialResultToken, one session and connection per call",
            "args": args,
            "items_delivered": items,
            "lost": sum(r["lost"] for r in results),
            "duplicated": sum(r["duplicated"] for r in results),
            "not_one_terminal": not_one,
            "log_events_checked": sum(c.events for c in checks if c),
            "ttfi_ms_p50": round(pct(ttfi, 50), 1),
            "ttfi_ms_p99": round(pct(ttfi, 99), 1),
            "ttfi_ms_max": round(max(ttfi), 1) if ttfi else None,
            "ttfi_split_ms": {k: {"p50": round(pct(v, 50), 1), "p99": round(pct(v, 99), 1)} for k, v in split.items()},
            "call_ms_p50": round(pct(durations, 50)),
            "call_ms_p99": round(pct(durations, 99)),
            "wall_s": round(wall, 2),
            "server_cpu_s": round(server_cpu, 1),
            "client_cpu_s": round(client_cpu, 1),
            "items_per_s": round(items / wall),
            "init_s": round(init_s, 2),
            "verify_s": round(verify_s, 1),
            "rss_baseline_mib": round(baseline_kb / 1024, 1),
            "rss_peak_mib": round(peak_kb / 1024, 1),
            "vm_hwm_mib": round(hwm_kb / 1024, 1),
        }
    finally:
        sampler.stop()
        server.stop()


# --------------------------------------------------------------------------


def machine() -> dict:
    cpu = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem_kb = vm_kb_meminfo("MemTotal")
    return {
        "cores": os.cpu_count(),
        "cpu": cpu,
        "memory_gib": round(mem_kb / 2**20, 1),
        "kernel": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "loadavg_start": open("/proc/loadavg").read().split()[:3],
    }


def loadavg() -> float:
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def vm_kb_meminfo(name: str) -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith(name + ":"):
                return int(line.split()[1])
    return 0


def git_rev() -> str:
    try:
        rev = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=HERE, capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "crates"], cwd=HERE, capture_output=True, text=True).stdout.strip()
        return rev + (" + uncommitted changes under crates/" if dirty else "")
    except OSError:
        return "unknown"


PHASES = {"crash": crash_phase, "disconnect": disconnect_phase, "slow": slow_phase, "load": load_phase}


def summary(res: dict) -> str:
    p = res["phases"]
    rows = ["| phase | what | lost | duplicated | runs without exactly one terminal | figures |",
            "|---|---|--:|--:|--:|---|"]
    if "crash" in p and "kills" in p["crash"]:
        c = p["crash"]
        rows.append(f"| crash | {c['kills']} × kill -9 mid-stream, {c['runs']} runs | {c['lost']} of {c['acked_events']:,} acked | "
                    f"{c['duplicated']} | {c['not_one_terminal']} | {c['interrupted']} ended failed/interrupted, "
                    f"{c['completed_before_kill']} completed first; followers resumed across the crash: {c['resumed_events']:,} events; "
                    f"restart p50 {c['restart_ms_p50']} ms (max {c['restart_ms_max']}); {c['store_runs_not_ended']} of {c['store_runs']} stored runs not ended |")
    if "disconnect" in p and "lost" in p["disconnect"]:
        d = p["disconnect"]
        rows.append(f"| disconnect | {d['sse_readers']} SSE readers ({d['sse_drops']} cuts, {d['sse_events']:,} events), "
                    f"{d['mcp_calls']} MCP calls ({d['mcp_drops']} cuts, {d['mcp_items']:,} items) | {d['lost']} | {d['duplicated']} | "
                    f"{d['not_one_terminal']} | {d['out_of_order']} out of order; {d['progress_not_increasing']} progress notifications "
                    f"not above the one before; peak RSS {d['peak_rss_mib']} MiB |")
    if "slow" in p and "lost" in p["slow"]:
        s = p["slow"]
        what = {"sse": "GET /runs/{id}/events", "mcp": "MCP tools/call"}
        for kind, r in s["rounds"].items():
            rows.append(f"| slow | {r['readers']} {what[kind]} reader{'s' if r['readers'] != 1 else ''} at {', '.join(map(str, r['rates_kib_s']))} KiB/s for {s['slow_for_s']:g} s, "
                        f"then drained ({r['events_per_reader']:,} events each) | {r['lost']} | {r['duplicated']} | {r['not_one_terminal']} | "
                        f"server RSS {r['rss_baseline_mib']} MiB idle, peak {r['rss_peak_mib']} MiB while they crawl "
                        f"({r['rss_end_of_crawl_mib']} MiB at its end), {r['rss_peak_drain_mib']} MiB while they drain; "
                        f"a fast reader alongside took {r['fast_reader_seconds']} s |")
    if "load" in p and "lost" in p["load"]:
        l = p["load"]
        rows.append(f"| load | {l['calls']:,} concurrent MCP tools/call streams × {l['args']['count']} items | {l['lost']} | {l['duplicated']} | "
                    f"{l['not_one_terminal']} | time to first item p50 {l['ttfi_ms_p50']} ms, p99 {l['ttfi_ms_p99']} ms; "
                    f"peak RSS {l['vm_hwm_mib']} MiB (VmHWM; idle {l['rss_baseline_mib']}); {l['items_per_s']:,} items/s; all done in {l['wall_s']} s |")
    return "\n".join(rows)


async def main_async(args: argparse.Namespace) -> int:
    cfg = QUICK if args.quick else FULL
    seed = args.seed if args.seed is not None else random.randrange(1 << 31)
    phases = args.phases.split(",")
    for name in phases:
        if name not in PHASES:
            log(f"chaos: unknown phase {name!r}: choose from {', '.join(PHASES)}")
            return 2
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = 4 * cfg.load_calls + 256
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(need, soft)), hard))
    self_test()
    report = Report()
    work = tempfile.mkdtemp(prefix="weir-chaos-")
    version = subprocess.run([args.weir, "--version"], capture_output=True, text=True).stdout.strip()
    res: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "mode": "quick" if args.quick else "full",
        "seed": seed,
        "weir": version,
        "commit": args.built_from or git_rev(),
        "machine": machine(),
        "config": cfg.__dict__,
        "phases": {},
    }
    log(f"chaos: {res['mode']} run, seed {seed}, {version} ({res['commit']}), work dir {work}")
    t_all = clock()
    try:
        for name in phases:
            log(f"== {name}")
            rng = random.Random(f"{seed}-{name}")
            load_before = loadavg()
            t0 = clock()
            try:
                figures = await asyncio.wait_for(PHASES[name](args.weir, cfg, rng, report, work), PHASE_DEADLINE_S[name])
            except asyncio.TimeoutError:
                report.violate(name, f"did not finish within {PHASE_DEADLINE_S[name]} s (a hang)")
                figures = {}
            except Exception as e:  # a phase that breaks is a failure, not a crash of the suite
                report.violate(name, f"aborted: {type(e).__name__}: {e}")
                figures = {}
            figures["phase_seconds"] = round(clock() - t0, 1)
            # Other work on the machine moves the timings: keep its load.
            figures["loadavg_1m"] = [load_before, loadavg()]
            res["phases"][name] = figures
            log(f"   {name} took {figures['phase_seconds']} s")
    finally:
        res["seconds"] = round(clock() - t_all, 1)
        res["machine"]["loadavg_end"] = open("/proc/loadavg").read().split()[:3]
        res["violations"] = report.violations
        if report.violations or args.keep:
            res["work_dir"] = work
        else:
            shutil.rmtree(work, ignore_errors=True)
    os.makedirs(args.out, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = os.path.join(args.out, f"chaos-{res['mode']}-{stamp}.json")
    with open(path, "w") as f:
        json.dump(res, f, indent=1)
    m = res["machine"]
    print(f"weir chaos/load suite, {res['mode']} run, {res['date']}, seed {seed}")
    print(f"{m['cores']} cores ({m['cpu']}), {m['memory_gib']} GiB, {m['kernel']}; {version} ({res['commit']})")
    print()
    print(summary(res))
    print()
    print(f"total {res['seconds']} s; results in {os.path.relpath(path)}")
    if report.violations:
        print(f"\nFAILED: {len(report.violations)} broken invariants (data kept in {work}):")
        for v in report.violations[:50]:
            print(f"  {v}")
        return 1
    print("OK: 0 lost, 0 duplicated, every run ended with exactly one terminal event")
    return 0


def main() -> int:
    # SIGTERM (a CI timeout) unwinds like Ctrl-C: every phase's `finally`
    # stops its server and the work directory is left as it is.
    signal.signal(signal.SIGTERM, interrupt)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--weir", required=True, help="the weir binary to test")
    parser.add_argument("--quick", action="store_true", help="a few iterations of each phase (~1 minute)")
    parser.add_argument("--phases", default="crash,disconnect,slow,load", help="comma-separated subset")
    parser.add_argument("--seed", type=int, help="seed for every random choice (printed, and in the results)")
    parser.add_argument("--out", default=os.path.join(HERE, "results"), help="where to write the JSON result")
    parser.add_argument("--keep", action="store_true", help="keep the data directories")
    parser.add_argument("--built-from", help="what the binary was built from, for the results "
                        "(default: this checkout's HEAD, noting uncommitted changes under crates/)")
    args = parser.parse_args()
    if not os.access(args.weir, os.X_OK):
        log(f"chaos: {args.weir} is not an executable: build it with cargo build --release -p weir")
        return 2
    try:
        return asyncio.run(main_async(args))
    except KeyboardInterrupt:
        log("chaos: interrupted; no result written")
        return 130


def interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
