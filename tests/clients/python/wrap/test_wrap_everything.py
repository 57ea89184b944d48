"""`weir wrap` around the official reference server, `@modelcontextprotocol/server-everything`
(the npm registry, pinned exactly in tests/third_party/package.json), driven by the official
Python SDK client (`mcp` 1.x, ClientSession), over stdio and Streamable HTTP: its
long-running operation's progress reaches the client step by step, its result is the call's
result, and weir's run of it holds the same progress and ends completed once. Run by
scripts/wrap-tests, which installs the server (npm ci in tests/third_party).
"""

from __future__ import annotations

import re
import signal
import subprocess
import threading
import time
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, AsyncIterator

import pytest
from mcp import ClientSession, types
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from weirtest import REPO, WEIR_BIN

pytestmark = pytest.mark.anyio

ENTRY = REPO / "tests/third_party/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
COMMAND = ["node", str(ENTRY), "stdio"]
TOOL = "trigger-long-running-operation"


@asynccontextmanager
async def http_wrap() -> AsyncIterator[str]:
    """`weir wrap --http 127.0.0.1:0` around the server; its URL, the process killed after."""
    process = subprocess.Popen(
        [WEIR_BIN, "wrap", "--http", "127.0.0.1:0", "--memory", "--", *COMMAND],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    found = threading.Event()
    said: list[str] = []
    url: list[str] = []

    def drain() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            said.append(line)
            if match := re.search(r"serving MCP at (http://\S+/mcp)", line):
                url.append(match.group(1))
                found.set()

    threading.Thread(target=drain, daemon=True).start()
    try:
        assert found.wait(60), f"weir wrap did not serve: {''.join(said)}"
        yield url[0]
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@asynccontextmanager
async def connect(transport: str) -> AsyncIterator[ClientSession]:
    assert ENTRY.exists(), f"{ENTRY} is missing: run scripts/wrap-tests (npm ci in tests/third_party)"
    async with AsyncExitStack() as stack:
        if transport == "stdio":
            parameters = StdioServerParameters(command=WEIR_BIN, args=["wrap", "--memory", "--", *COMMAND])
            read, write = await stack.enter_async_context(stdio_client(parameters))
        else:
            url = await stack.enter_async_context(http_wrap())
            read, write, _ = await stack.enter_async_context(streamable_http_client(url))
        session = await stack.enter_async_context(ClientSession(read, write))
        await session.initialize()
        yield session


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_its_long_running_operation_streams_every_step_then_its_result(transport: str) -> None:
    seen: list[tuple[float, float | None, float]] = []
    started = time.monotonic()

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, total, time.monotonic() - started))

    async with connect(transport) as session:
        listed = await session.list_tools()
        assert TOOL in [tool.name for tool in listed.tools]
        started = time.monotonic()
        result = await session.call_tool(TOOL, {"duration": 3, "steps": 6}, progress_callback=on_progress)
        took = time.monotonic() - started
        assert not result.isError, result
        texts = [block.text for block in result.content if isinstance(block, types.TextContent)]
        assert texts == ["Long running operation completed. Duration: 3 seconds, Steps: 6."]
        assert [(value, total) for value, total, _ in seen] == [(step, 6) for step in range(1, 7)]
        # They came as the steps ended (0.5 s apart), not all at the end.
        assert seen[0][2] < 2.0, seen
        listed_runs = await session.call_tool("runs_list", {"limit": 1})
        run_id = listed_runs.structuredContent["runs"][0]["run_id"]
        page = await session.call_tool("runs_events", {"run_id": run_id, "limit": 1000})
        events: list[dict[str, Any]] = page.structuredContent["events"]
        assert events[0]["tool"] == TOOL
        assert [e["progress"] for e in events if e["type"] == "progress"] == [1, 2, 3, 4, 5, 6]
        assert [e["type"] for e in events if e["type"] in ("completed", "failed", "canceled")] == ["completed"]
        print(f"FIGURES {transport} progress={len(seen)} first_progress_s={seen[0][2]:.2f} call_s={took:.2f}")
