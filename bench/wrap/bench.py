#!/usr/bin/env python3
"""`weir wrap`'s cost, side by side in one run (issue 26): the same upstream MCP server
called directly and through `weir wrap`, by ONE plain client (this file, standard library
only, raw newline-delimited JSON-RPC over each server's stdin and stdout).

The upstream is bench/e2e/ts_server.mjs on stdio: the official TypeScript SDK v1
(`McpServer`), a tool `stream` that sends one `notifications/progress` per item when the
call carries a progress token, awaiting each send. Three peers, each one process tree:

  direct        node ts_server.mjs --stdio
  wrap          weir wrap --data-dir TMP -- node ts_server.mjs --stdio   (the default: runs kept, SQLite)
  wrap-memory   weir wrap --memory -- node ts_server.mjs --stdio

Two workloads, each peer's calls interleaved with the others' (round robin), so that
whatever else the machine does weighs on all three alike:

  call latency     `tools/call stream {count: 0}` without a progress token, CALLS times per
                   peer: ms from writing the request to reading its response; p50 and p99,
                   and the added latency (through minus direct, at the same percentile)
  notifications    `tools/call stream {count: 20000, size: 16}` with a progress token, ROUNDS
                   times per peer: the 20,000 progress notifications the upstream sends;
                   notifications/s = 20,000 / seconds from writing the request to reading the
                   response (median of the rounds), and the ratio to direct. Direct, the
                   client reads every one of them; through weir, every one is an event of the
                   run's log (checked: `runs_list`'s event count) and the client gets them
                   coalesced, at most one per 20 ms (weir's rule for progress, a state: the
                   newest replaces one not yet sent, the last is never lost); both counts are
                   reported, and weir's own CPU time per notification (its process, not
                   the upstream's), beside the upstream's and this client's: on a machine
                   with no core to spare the rate follows the sum

CALLS is 2,000 and ROUNDS 5 (--quick: 100 and 1). With --before PATH (another weir
binary, say the build before a change), two more peers run that binary the same two ways
(wrap-before, wrap-memory-before), interleaved with the rest: a before/after comparison
on the same machine at the same moment.

Usage: bench.py --weir PATH --node-server PATH [--before PATH] [--quick]
Writes results/<timestamp>.{json,md} and prints the markdown.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
PROTOCOL = "2025-11-25"
NOTIFICATIONS = 20_000
clock = time.perf_counter


@dataclass
class Peer:
    """One MCP server on a pipe, and this client of it."""

    name: str
    command: list[str]
    process: subprocess.Popen[bytes] = field(init=False)
    next_id: int = 1

    def start(self, stderr: Any) -> "Peer":
        self.process = subprocess.Popen(
            self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr
        )
        self.reader = self.process.stdout
        answer = self.request(
            "initialize",
            {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "bench-wrap", "version": "0"}},
        )
        assert "result" in answer, f"{self.name}: {answer}"
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        tools = self.request("tools/list", {})["result"]["tools"]
        assert any(tool["name"] == "stream" for tool in tools), f"{self.name}: {tools}"
        return self

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")
        self.process.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return self.call(method, params)[0]

    def call(self, method: str, params: dict[str, Any]) -> tuple[dict[str, Any], int, float]:
        """Sends a request and reads to its response: (response, progress notifications
        before it, seconds from the write to the response)."""
        id_ = self.next_id
        self.next_id += 1
        marker = f'"id":{id_}'.encode()
        progress = 0
        started = clock()
        self.send({"jsonrpc": "2.0", "id": id_, "method": method, "params": params})
        while True:
            line = self.reader.readline()
            if not line:
                raise RuntimeError(f"{self.name} closed its stdout")
            if b'"notifications/progress"' in line:
                progress += 1
                continue
            if marker in line:
                message = json.loads(line)
                if message.get("id") == id_ and "method" not in message:
                    return message, progress, clock() - started

    def stop(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def cpu_seconds(pid: int) -> float:
    """User and system CPU of process `pid` (not its children), from /proc."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def upstream_pid(peer: Peer) -> int:
    """The upstream server's process: the peer itself (direct), or weir's child."""
    if peer.name == "direct":
        return peer.process.pid
    children = []
    for task in os.listdir(f"/proc/{peer.process.pid}/task"):
        with open(f"/proc/{peer.process.pid}/task/{task}/children") as listed:
            children += [int(child) for child in listed.read().split()]
    assert len(children) == 1, f"{peer.name}: weir's children {children}"
    return children[0]


def own_cpu() -> float:
    """This client's user and system CPU."""
    times = os.times()
    return times.user + times.system


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def stream_call(peer: Peer, count: int, token: bool) -> tuple[int, float]:
    params: dict[str, Any] = {"name": "stream", "arguments": {"count": count, "size": 16}}
    if token:
        params["_meta"] = {"progressToken": f"bench-{peer.next_id}"}
    answer, progress, seconds = peer.call("tools/call", params)
    result = answer.get("result", {})
    assert not result.get("isError") and result.get("structuredContent") == {"count": count}, f"{peer.name}: {answer}"
    return progress, seconds


def logged_progress(peer: Peer) -> int:
    """The progress events in the log of `peer`'s newest run (weir's `runs_list`)."""
    listed = peer.request("tools/call", {"name": "runs_list", "arguments": {"limit": 1}})
    run = listed["result"]["structuredContent"]["runs"][0]
    assert run["state"] == "completed", run
    return run["events"] - 2  # all but `started` and `completed`


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--weir", required=True)
    parser.add_argument("--node-server", required=True, help="bench/e2e/ts_server.mjs")
    parser.add_argument("--quick", action="store_true", help="fewer calls and rounds, a smoke run")
    parser.add_argument("--before", help="another weir binary, run beside --weir (before/after)")
    args = parser.parse_args()
    calls, rounds = (100, 1) if args.quick else (2000, 5)
    upstream = ["node", args.node_server, "--stdio"]
    scratch = tempfile.mkdtemp(prefix="weir-bench-wrap-")
    stderr = open(os.path.join(scratch, "stderr.log"), "wb")
    peers = [
        Peer("direct", upstream),
        Peer("wrap", [args.weir, "wrap", "--data-dir", os.path.join(scratch, "data"), "--", *upstream]),
        Peer("wrap-memory", [args.weir, "wrap", "--memory", "--", *upstream]),
    ]
    if args.before:
        peers += [
            Peer("wrap-before", [args.before, "wrap", "--data-dir", os.path.join(scratch, "data-before"), "--", *upstream]),
            Peer("wrap-memory-before", [args.before, "wrap", "--memory", "--", *upstream]),
        ]
    try:
        for peer in peers:
            peer.start(stderr)
        # Warm-up: a few calls of each kind, checked.
        for peer in peers:
            for _ in range(20):
                stream_call(peer, 0, False)
            got, _ = stream_call(peer, 1000, True)
            assert got >= 1, f"{peer.name}: no progress"
        latency: dict[str, list[float]] = {peer.name: [] for peer in peers}
        for _ in range(calls):
            for peer in peers:
                latency[peer.name].append(stream_call(peer, 0, False)[1] * 1000)
        rates: dict[str, list[float]] = {peer.name: [] for peer in peers}
        received: dict[str, list[int]] = {peer.name: [] for peer in peers}
        logged: dict[str, list[int]] = {peer.name: [] for peer in peers}
        cpu: dict[str, float] = {peer.name: 0.0 for peer in peers}
        upstream_cpu: dict[str, float] = {peer.name: 0.0 for peer in peers}
        client_cpu: dict[str, float] = {peer.name: 0.0 for peer in peers}
        for _ in range(rounds):
            for peer in peers:
                server = upstream_pid(peer)
                before, server_before, client_before = cpu_seconds(peer.process.pid), cpu_seconds(server), own_cpu()
                got, seconds = stream_call(peer, NOTIFICATIONS, True)
                client_cpu[peer.name] += own_cpu() - client_before
                upstream_cpu[peer.name] += cpu_seconds(server) - server_before
                cpu[peer.name] += cpu_seconds(peer.process.pid) - before
                received[peer.name].append(got)
                rates[peer.name].append(NOTIFICATIONS / seconds)
                logged[peer.name].append(logged_progress(peer) if peer.name != "direct" else got)
            assert received["direct"][-1] == NOTIFICATIONS, received
            assert all(values[-1] == NOTIFICATIONS for values in logged.values()), logged
    finally:
        for peer in peers:
            peer.stop()
        stderr.close()

    machine = (
        f"{os.cpu_count()} CPUs, {cpu_model()}, {platform.system()} {platform.release()}; "
        f"load before: {load_before}; node {subprocess.run(['node', '--version'], capture_output=True, text=True).stdout.strip()}"
    )
    rows = []
    direct = peers[0].name
    for peer in peers:
        name = peer.name
        p50, p99 = percentile(latency[name], 50), percentile(latency[name], 99)
        rate = statistics.median(rates[name])
        rows.append(
            {
                "peer": name,
                "calls": len(latency[name]),
                "p50_ms": p50,
                "p99_ms": p99,
                "added_p50_ms": p50 - percentile(latency[direct], 50),
                "added_p99_ms": p99 - percentile(latency[direct], 99),
                "notifications_received": received[name],
                "notifications_logged": logged[name],
                "notifications_per_s": rate,
                "ratio_to_direct": rate / statistics.median(rates[direct]),
                "weir_cpu_us_per_notification": None
                if name == direct
                else cpu[name] / (rounds * NOTIFICATIONS) * 1e6,
                "upstream_cpu_us_per_notification": upstream_cpu[name] / (rounds * NOTIFICATIONS) * 1e6,
                "client_cpu_us_per_notification": client_cpu[name] / (rounds * NOTIFICATIONS) * 1e6,
            }
        )
    table = [
        "| peer | call p50 | call p99 | added p50 | added p99 | notifications/s | × direct | in the run's log | sent to the client | weir's CPU per notification | upstream's | client's |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        through = row["peer"] != direct
        added_p50 = f"{row['added_p50_ms']:+.2f} ms" if through else "—"
        added_p99 = f"{row['added_p99_ms']:+.2f} ms" if through else "—"
        logged_text = f"{min(row['notifications_logged']):,}" if through else "—"
        cpu_text = f"{row['weir_cpu_us_per_notification']:.1f} µs" if through else "—"
        table.append(
            f"| {row['peer']} | {row['p50_ms']:.2f} ms | {row['p99_ms']:.2f} ms | {added_p50} | {added_p99} | "
            f"{row['notifications_per_s']:,.0f} | {row['ratio_to_direct']:.2f} | "
            f"{logged_text} | {min(row['notifications_received']):,} of {NOTIFICATIONS:,} | {cpu_text} | "
            f"{row['upstream_cpu_us_per_notification']:.1f} µs | {row['client_cpu_us_per_notification']:.1f} µs |"
        )
    markdown = "\n".join(
        [
            f"Machine: {machine}.",
            f"{calls} calls per peer (`stream {{count: 0}}`), {rounds} round(s) of {NOTIFICATIONS:,} progress "
            "notifications per peer (`stream {count: 20000, size: 16}`), interleaved.",
            *([f"Before: {args.before}; after: {args.weir}."] if args.before else []),
            "",
            *table,
        ]
    )
    print(markdown)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", f"{stamp}.md"), "w") as out:
        out.write(markdown + "\n")
    with open(os.path.join(HERE, "results", f"{stamp}.json"), "w") as out:
        json.dump({"machine": machine, "calls": calls, "rounds": rounds, "rows": rows, "latency_ms": latency}, out)


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


load_before = " ".join(open("/proc/loadavg").read().split()[:3]) if os.path.exists("/proc/loadavg") else "?"

if __name__ == "__main__":
    sys.exit(main())
