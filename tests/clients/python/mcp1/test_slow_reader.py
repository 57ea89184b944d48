"""A slow reader: weir keeps every partial for a client far slower than the run, in order,
with a bounded number of progress notifications, in bounded server memory.

The client is mcp 1.x's own transports (stdio and Streamable HTTP) without a
ClientSession: the session would drop the partial results it has no type for, while the
transports pass every message on through zero-capacity streams, so a client that reads
slowly really does stop reading the server's pipe or socket. The test reads 10 items a
second until the run has ended (watched with `weir runs list` on the same data
directory), then reads the rest at full speed, and measures the server's peak resident
memory (VmHWM) against the bytes it had to deliver.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import types
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage

from weirtest import (
    CLIENT_CAPABILITIES_KEY,
    PARTIAL_METHOD,
    PROGRESS_METHOD,
    WEIR_BIN,
    HttpServer,
    item_text,
    message_dict,
)

pytestmark = pytest.mark.anyio

ITEMS = 100_000
SIZE = 1_000
# Items a second while the run is going.
SLOW_RATE = 10
# The run (100k items into SQLite, in a debug build) ends within seconds; past this the
# server is not keeping up with the log, which is a failure of its own.
RUN_DEADLINE_S = 120
# How much the server's peak memory may grow during the call, as a share of the bytes of
# partial results it delivers: a queue that held what the client had not read (or a live
# channel pinned by a follower that waits) would hold nearly all of them; the bounded
# queue and the log keep the growth to a few pages and buffers.
MAX_GROWTH_SHARE = 0.3


def request(id: int, method: str, params: dict[str, Any]) -> SessionMessage:
    message = types.JSONRPCRequest(jsonrpc="2.0", id=id, method=method, params=params)
    return SessionMessage(types.JSONRPCMessage(message))


def notification(method: str) -> SessionMessage:
    return SessionMessage(types.JSONRPCMessage(types.JSONRPCNotification(jsonrpc="2.0", method=method)))


def vm_hwm_bytes(pid: int) -> int:
    """Peak resident memory of process `pid`, from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmHWM for process {pid}")


def weir_child() -> int:
    """The pid of the `weir` process this test process spawned (the SDK's stdio server)."""
    me = os.getpid()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces, so split after its ')'.
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        if ppid == me and comm == "weir":
            found.append(int(entry.name))
    assert len(found) == 1, f"weir children: {found}"
    return found[0]


def run_state(data_dir: Path) -> str | None:
    """The state of the one `stream` run in `data_dir`, read by `weir runs list`."""
    listed = subprocess.run(
        [WEIR_BIN, "runs", "list", "--data-dir", str(data_dir), "--tool", "stream", "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    if listed.returncode != 0:
        return None  # the database may not exist yet
    runs = json.loads(listed.stdout)
    runs = runs.get("runs", runs) if isinstance(runs, dict) else runs
    return runs[0]["state"] if runs else None


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_slow_reader_gets_every_partial_in_order_in_bounded_memory(transport: str, tmp_path: Path) -> None:
    async with AsyncExitStack() as stack:
        if transport == "stdio":
            args = ["serve", "--stdio", "--fixtures", "--no-exec", "--data-dir", str(tmp_path)]
            read, write = await stack.enter_async_context(
                stdio_client(StdioServerParameters(command=WEIR_BIN, args=args))
            )
        else:
            server = stack.enter_context(HttpServer(tmp_path))
            read, write, _ = await stack.enter_async_context(streamable_http_client(server.url))

        hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "slow", "version": "0"}}
        await write.send(request(0, "initialize", hello))
        async for item in read:
            if (message := message_dict(item)) is not None and message.get("id") == 0:
                break
        await write.send(notification("notifications/initialized"))
        pid = weir_child() if transport == "stdio" else server.process.pid
        idle = vm_hwm_bytes(pid)

        meta = {
            "progressToken": "p",
            "partialResultToken": "r",
            CLIENT_CAPABILITIES_KEY: {"partialResults": {}},
        }
        arguments = {"count": ITEMS, "size": SIZE, "interval_ms": 0, "mode": "text"}
        await write.send(request(1, "tools/call", {"name": "stream", "arguments": arguments, "_meta": meta}))

        partials = 0
        progress: list[float] = []
        slow = True
        started = time.monotonic()
        next_look = started
        read_when_done = None
        result = None
        async for item in read:
            message = message_dict(item)
            assert message is not None, f"transport error: {item!r}"
            method = message.get("method")
            if method == PARTIAL_METHOD:
                params = message["params"]
                assert params["seq"] == partials, f"partial {params['seq']} where {partials} was due"
                assert params["content"] == [{"type": "text", "text": item_text(partials, SIZE)}]
                partials += 1
            elif method == PROGRESS_METHOD:
                progress.append(message["params"]["progress"])
            elif message.get("id") == 1:
                result = message
                break
            if slow and method == PARTIAL_METHOD:
                await anyio.sleep(1 / SLOW_RATE)
                if time.monotonic() >= next_look:
                    next_look += 1
                    state = await anyio.to_thread.run_sync(run_state, tmp_path)
                    if state not in (None, "pending", "working"):
                        assert state == "completed", state
                        # The run is over while the client has read a few dozen items:
                        # the rest waits in the log, not in the server.
                        slow, read_when_done = False, partials
                    assert time.monotonic() - started < RUN_DEADLINE_S, "the run did not end"
        hwm = vm_hwm_bytes(pid)

    assert result is not None and "result" in result, result
    assert partials == ITEMS
    assert read_when_done is not None and read_when_done < ITEMS // 100
    assert progress and progress[-1] == ITEMS
    assert all(b > a for a, b in zip(progress, progress[1:])), "progress not strictly increasing"
    # The fixture reports progress about 100 times; coalescing only ever removes some.
    assert len(progress) <= 101, f"{len(progress)} progress notifications"
    delivered = ITEMS * SIZE
    assert hwm - idle < MAX_GROWTH_SHARE * delivered, (
        f"server peak memory grew from {idle / 2**20:.1f} to {hwm / 2**20:.1f} MiB "
        f"for {delivered / 2**20:.0f} MiB delivered"
    )
    print(
        f"FIGURES slow-reader {transport}: {partials} partials in order, {len(progress)} progress, "
        f"run over after {read_when_done} items read at {SLOW_RATE}/s, server VmHWM {hwm / 2**20:.1f} MiB "
        f"({idle / 2**20:.1f} MiB before the call) "
        f"for {delivered / 2**20:.0f} MiB of partials, {time.monotonic() - started:.1f} s"
    )
