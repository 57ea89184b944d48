"""`weir wrap` around real third-party MCP servers (issue 26), driven by the official Python
SDK client (`mcp` 1.x, ClientSession): the Python SDK's low-level server and a FastMCP 4
server (tests/wrap/), each with a tool `slow` that sleeps and reports progress and a log
line every interval, wrapped by weir and served over stdio and Streamable HTTP. Run by
scripts/wrap-tests, in target/clients/py-mcp1.

Per server and transport: every progress and log line of the upstream reaches the client
and the run; a 2025-11-25 task of a tool the upstream runs as a plain call; a cancel
(`notifications/cancelled`, which mcp 1.x leaves to the caller) that the upstream process
records, the run ending canceled once; kill -9 of the upstream mid-call, which ends the
call with an error naming the signal and the run failed once, the next call starting the
server again.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
import warnings
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, types
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from weirtest import REPO, WEIR_BIN

pytestmark = pytest.mark.anyio

ENVS = REPO / "target" / "clients"
SERVERS = {
    "sdk": (os.environ.get("WRAP_SDK_PYTHON") or str(ENVS / "py-mcp1" / "bin" / "python"), REPO / "tests" / "wrap" / "sdk_server.py"),
    "fastmcp": (
        os.environ.get("WRAP_FASTMCP_PYTHON") or str(ENVS / "py-fastmcp" / "bin" / "python"),
        REPO / "tests" / "wrap" / "fastmcp_server.py",
    ),
}
SHORT = {"duration_s": 3, "interval_s": 0.5}
LONG = {"duration_s": 30, "interval_s": 0.5}


class UpstreamLog:
    """What the upstream processes recorded ($WRAP_LOG): one JSON object per line."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        events = [json.loads(line) for line in self.path.read_text().splitlines() if line]
        return [e for e in events if kind is None or e["event"] == kind]

    async def wait_for(self, kind: str, skip: int = 0, timeout: float = 15.0) -> dict[str, Any]:
        with anyio.fail_after(timeout):
            while len(found := self.events(kind)) <= skip:
                await anyio.sleep(0.05)
        return found[skip]


class Wrapped:
    """`weir wrap` around one of SERVERS, over stdio (the SDK spawns it per connection) or
    HTTP (started here, on port 0, and killed at the end)."""

    def __init__(self, server: str, transport: str, directory: Path) -> None:
        python, script = SERVERS[server]
        assert Path(python).exists(), f"{python} is missing: run scripts/wrap-tests, which installs it"
        self.command = [python, str(script)]
        self.transport = transport
        self.log = UpstreamLog(directory / "upstream.jsonl")
        self.env = {**os.environ, "WRAP_LOG": str(self.log.path)}
        self.process: subprocess.Popen[str] | None = None
        self.url = ""

    def start(self) -> "Wrapped":
        if self.transport == "http":
            self.process = subprocess.Popen(
                [WEIR_BIN, "wrap", "--http", "127.0.0.1:0", "--memory", "--", *self.command],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                env=self.env,
            )
            found = threading.Event()
            lines: list[str] = []

            def drain() -> None:
                assert self.process is not None and self.process.stderr is not None
                for line in self.process.stderr:
                    lines.append(line)
                    match = re.search(r"serving MCP at (http://\S+/mcp)", line)
                    if match:
                        self.url = match.group(1)
                        found.set()

            threading.Thread(target=drain, daemon=True).start()
            assert found.wait(60), f"weir wrap did not serve: {''.join(lines)}"
        return self

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    @asynccontextmanager
    async def connect(self, message_handler=None):
        async with AsyncExitStack() as stack:
            if self.transport == "stdio":
                parameters = StdioServerParameters(
                    command=WEIR_BIN, args=["wrap", "--memory", "--", *self.command], env=self.env
                )
                read, write = await stack.enter_async_context(stdio_client(parameters))
            else:
                read, write, _ = await stack.enter_async_context(streamable_http_client(self.url))
            session = await stack.enter_async_context(ClientSession(read, write, message_handler=message_handler))
            await session.initialize()
            yield session


@pytest.fixture(params=["sdk", "fastmcp"])
def server(request) -> str:
    return request.param


@pytest.fixture(params=["stdio", "http"])
def wrapped(request, server):
    with tempfile.TemporaryDirectory(prefix="weir-wrap-test-") as directory:
        target = Wrapped(server, request.param, Path(directory)).start()
        try:
            yield target
        finally:
            target.stop()


def texts_of(result: Any) -> list[str]:
    return [block.text for block in result.content if isinstance(block, types.TextContent)]


def ticks_of(texts: list[str]) -> list[int]:
    return [int(m[1]) for text in texts if (m := re.search(r"tick (\d+)", text))]


async def newest_run(session: ClientSession) -> str:
    listed = await session.call_tool("runs_list", {"limit": 1})
    return listed.structuredContent["runs"][0]["run_id"]


async def run_events(session: ClientSession, run_id: str) -> list[dict[str, Any]]:
    page = await session.call_tool("runs_events", {"run_id": run_id, "limit": 1000})
    return page.structuredContent["events"]


def terminals(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events if e["type"] in ("completed", "failed", "canceled")]


async def ended_state(session: ClientSession, run_id: str, timeout: float = 20.0) -> str:
    with anyio.fail_after(timeout):
        while True:
            got = await session.call_tool("runs_get", {"run_id": run_id})
            state = got.structuredContent["run"]["state"]
            if state not in ("pending", "working", "input_required"):
                return state
            await anyio.sleep(0.1)


async def test_progress_and_log_lines_reach_the_client_and_the_run(wrapped: Wrapped) -> None:
    progress: list[tuple[float, float | None, str | None]] = []
    logged: list[str] = []

    async def on_message(message: Any) -> None:
        root = getattr(message, "root", None)
        if isinstance(root, types.LoggingMessageNotification):
            logged.append(json.dumps(root.params.data))

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    async with wrapped.connect(message_handler=on_message) as session:
        await session.set_logging_level("info")
        result = await session.call_tool("slow", SHORT, progress_callback=on_progress)
        assert texts_of(result) == ["slept 3 s"]
        sent = [e["progress"] for e in wrapped.log.events("progress")]
        assert len(sent) == 6, sent
        assert [value for value, _, _ in progress] == sent
        assert all(total == 3 and message and message.endswith("of 3 s") for _, total, message in progress)
        assert ticks_of(logged) == [1, 2, 3, 4, 5, 6]
        events = await run_events(session, await newest_run(session))
        assert [e["progress"] for e in events if e["type"] == "progress"] == sent
        assert ticks_of([e["text"] for e in events if e["type"] == "log"]) == [1, 2, 3, 4, 5, 6]
        assert terminals(events) == ["completed"]


async def test_a_task_of_a_tool_the_upstream_runs_as_a_plain_call(wrapped: Wrapped) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # 1.30 deprecates session.experimental
        async with wrapped.connect() as session:
            created = await session.experimental.call_tool_as_task("slow", SHORT, ttl=60_000)
            assert created.task.status == "working"
            task_id = created.task.taskId
            with anyio.fail_after(20):
                while (task := await session.experimental.get_task(task_id)).status == "working":
                    await anyio.sleep(0.1)
            assert task.status == "completed"
            result = await session.experimental.get_task_result(task_id, types.CallToolResult)
            assert texts_of(result) == ["slept 3 s"]
            assert len(wrapped.log.events("start")) == 1
            assert len(wrapped.log.events("done")) == 1


async def start_long(session: ClientSession, group: Any, outcome: list[Any]) -> Any:
    """Starts a LONG call in `group`; returns its run's id once its first progress came."""
    first = anyio.Event()

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        first.set()

    async def call() -> None:
        outcome.append(await session.call_tool("slow", LONG, progress_callback=on_progress))

    group.start_soon(call)
    with anyio.fail_after(20):
        await first.wait()
    return await newest_run(session)


async def test_cancel_reaches_the_upstream_process_and_ends_the_run_once(wrapped: Wrapped) -> None:
    request_ids: list[Any] = []

    async def on_message(message: Any) -> None:
        root = getattr(message, "root", None)
        if isinstance(root, types.ProgressNotification) and not request_ids:
            request_ids.append(root.params.progressToken)  # 1.x: progress token == request id

    async with wrapped.connect(message_handler=on_message) as session:
        outcome: list[Any] = []
        async with anyio.create_task_group() as group:
            run_id = await start_long(session, group, outcome)
            asked = time.time()
            await session.send_notification(
                types.ClientNotification(
                    types.CancelledNotification(
                        params=types.CancelledNotificationParams(requestId=request_ids[0], reason="the test cancels")
                    )
                )
            )
            cancelled = await wrapped.log.wait_for("cancelled")
            group.cancel_scope.cancel()
        assert not outcome, "a cancelled call returned a result"
        assert await ended_state(session, run_id) == "canceled"
        await anyio.sleep(0.5)
        assert terminals(await run_events(session, run_id)) == ["canceled"]
        assert not wrapped.log.events("done")
        print(f"FIGURES cancel_reached_upstream_ms={round((cancelled['at'] - asked) * 1000)}")


async def test_kill_9_of_the_upstream_mid_call_ends_the_run_once(wrapped: Wrapped) -> None:
    async with wrapped.connect() as session:
        outcome: list[Any] = []
        async with anyio.create_task_group() as group:
            run_id = await start_long(session, group, outcome)
            start = await wrapped.log.wait_for("start")
            os.kill(start["pid"], signal.SIGKILL)
        (result,) = outcome
        assert result.isError
        text = "\n".join(texts_of(result))
        assert "upstream wrapped: the server process exited (signal: 9 (SIGKILL))" in text, text
        assert await ended_state(session, run_id) == "failed"
        again = await session.call_tool("slow", {"duration_s": 0.5, "interval_s": 0.25})
        assert texts_of(again) == ["slept 0.5 s"]
        restarted = await wrapped.log.wait_for("start", skip=1)
        assert restarted["pid"] != start["pid"]
        assert terminals(await run_events(session, run_id)) == ["failed"]
