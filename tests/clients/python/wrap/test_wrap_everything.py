"""`weir wrap` around the official reference server, `@modelcontextprotocol/server-everything`
(the npm registry, pinned exactly in tests/third_party/package.json), driven by the official
Python SDK client (`mcp` 1.x, ClientSession), over stdio and Streamable HTTP: its
long-running operation's progress reaches the client step by step, its result is the call's
result, and weir's run of it holds the same progress and ends completed once; a 2025-11-25
task of it (the server knows nothing of tasks) completes with its result; kill -9 of the
server mid-call ends the call with an error naming the signal and the run failed once, the
next call starting the server again. Run by scripts/wrap-tests, which installs the server
(npm ci in tests/third_party).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
import uuid
import warnings
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, AsyncIterator

import anyio
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
async def http_wrap(env: dict[str, str]) -> AsyncIterator[str]:
    """`weir wrap --http 127.0.0.1:0` around the server; its URL, the process killed after."""
    process = subprocess.Popen(
        [WEIR_BIN, "wrap", "--http", "127.0.0.1:0", "--memory", "--", *COMMAND],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
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
async def connect(transport: str, mark: str = "") -> AsyncIterator[ClientSession]:
    """A session with `weir wrap` around the server; the server's environment carries
    `mark`, to find its process by."""
    assert ENTRY.exists(), f"{ENTRY} is missing: run scripts/wrap-tests (npm ci in tests/third_party)"
    env = {**os.environ, "WEIR_WRAP_TEST_MARK": mark}
    async with AsyncExitStack() as stack:
        if transport == "stdio":
            parameters = StdioServerParameters(command=WEIR_BIN, args=["wrap", "--memory", "--", *COMMAND], env=env)
            read, write = await stack.enter_async_context(stdio_client(parameters))
        else:
            url = await stack.enter_async_context(http_wrap(env))
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


def texts_of(result: Any) -> list[str]:
    return [block.text for block in result.content if isinstance(block, types.TextContent)]


def server_pids(mark: str) -> list[int]:
    """The server-everything processes whose environment carries `mark`."""
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as cmdline, open(f"/proc/{name}/environ", "rb") as environ:
                words = cmdline.read().split(b"\0")
                if words[0] == b"node" and str(ENTRY).encode() in words and mark.encode() in environ.read():
                    pids.append(int(name))
        except OSError:
            continue
    return pids


async def newest_run_state(session: ClientSession) -> tuple[str, str, list[str]]:
    """The newest run's id, state and terminal events."""
    listed = await session.call_tool("runs_list", {"limit": 1})
    run = listed.structuredContent["runs"][0]
    page = await session.call_tool("runs_events", {"run_id": run["run_id"], "limit": 1000})
    ends = [e["type"] for e in page.structuredContent["events"] if e["type"] in ("completed", "failed", "canceled")]
    return run["run_id"], run["state"], ends


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_task_of_its_long_running_operation_completes_with_its_result(transport: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # 1.30 deprecates session.experimental
        async with connect(transport) as session:
            created = await session.experimental.call_tool_as_task(TOOL, {"duration": 2, "steps": 4}, ttl=60_000)
            assert created.task.status == "working"
            with anyio.fail_after(20):
                while (task := await session.experimental.get_task(created.task.taskId)).status == "working":
                    await anyio.sleep(0.1)
            assert task.status == "completed"
            result = await session.experimental.get_task_result(created.task.taskId, types.CallToolResult)
            assert texts_of(result) == ["Long running operation completed. Duration: 2 seconds, Steps: 4."]


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_kill_9_of_the_server_mid_call_ends_the_run_once(transport: str) -> None:
    mark = str(uuid.uuid4())
    async with connect(transport, mark) as session:
        outcome: list[Any] = []
        first = anyio.Event()

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            first.set()

        async def call() -> None:
            outcome.append(await session.call_tool(TOOL, {"duration": 30, "steps": 30}, progress_callback=on_progress))

        async with anyio.create_task_group() as group:
            group.start_soon(call)
            with anyio.fail_after(20):
                await first.wait()
            (pid,) = server_pids(mark)
            os.kill(pid, signal.SIGKILL)
        (result,) = outcome
        assert result.isError
        text = "\n".join(texts_of(result))
        assert "upstream wrapped: the server process exited (signal: 9 (SIGKILL))" in text, text
        run_id, state, ends = await newest_run_state(session)
        assert (state, ends) == ("failed", ["failed"]), run_id
        again = await session.call_tool("echo", {"message": "again"})
        assert texts_of(again) == ["Echo: again"]
        (restarted,) = server_pids(mark)
        assert restarted != pid
        listed = await session.call_tool("runs_get", {"run_id": run_id})
        assert listed.structuredContent["run"]["state"] == "failed"
