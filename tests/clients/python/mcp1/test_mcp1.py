"""weir driven by the official Python SDK, `mcp` 1.x (ClientSession), over stdio and HTTP.

What mcp 1.x can and cannot do here:

- Progress: `call_tool(progress_callback=...)` (the token is the request id).
- Partial results: `initialize` capabilities are fixed by the SDK (`experimental=None`), so
  the capability can only be declared per call, in the SEP-2998 form
  (`_meta["io.modelcontextprotocol/clientCapabilities"] = {"partialResults": {}}` next to
  `partialResultToken`), which `call_tool(meta=...)` passes through. The SDK cannot
  *receive* `notifications/tools/partial_result`: it validates every notification
  against its closed `ServerNotification` union and drops unknown ones (with a
  "Failed to validate notification" warning) before any callback or message handler
  sees them. The tests therefore read partials from a recorder placed between the
  SDK's transport and its session, and check that the session still completes.
- Cancellation: no automatic `notifications/cancelled` when the awaiting task is
  cancelled; the tests send it with `send_notification`, taking the request id from
  the progress token (which 1.x sets to the request id).
- Tasks (2025-11-25): `session.experimental.call_tool_as_task/get_task/
  get_task_result/list_tasks` (deprecated in 1.30, still present).
"""

from __future__ import annotations

import warnings
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
import pytest
from mcp import ClientSession, types
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from weirtest import (
    EXEC_ARGS,
    LONG_ARGS,
    PARTIAL_METHOD,
    PARTIALS_META,
    RELATED_TASK_KEY,
    STREAM_ARGS,
    HttpServer,
    WireLog,
    check_final,
    check_line_partials,
    check_line_progress,
    check_partials,
    check_progress,
    run_state,
    stdio_command,
    tap,
)

pytestmark = pytest.mark.anyio

TRANSPORTS = ["stdio", "http"]


class Target:
    """Where a test's clients connect: a stdio command (one server per connection, spawned
    and killed by the SDK) or an HTTP server the test started."""

    def __init__(self, transport: str, server: HttpServer | None = None) -> None:
        self.transport = transport
        self.server = server

    @asynccontextmanager
    async def connect(self, *, recorder: list[dict[str, Any]] | None = None, message_handler=None):
        async with AsyncExitStack() as stack:
            if self.transport == "stdio":
                command, args = stdio_command()
                read, write = await stack.enter_async_context(
                    stdio_client(StdioServerParameters(command=command, args=args))
                )
            else:
                assert self.server is not None
                read, write, _ = await stack.enter_async_context(streamable_http_client(self.server.url))
            if recorder is not None:
                read, write = await stack.enter_async_context(tap(read, write, recorder.append))
            session = await stack.enter_async_context(
                ClientSession(read, write, message_handler=message_handler)
            )
            await session.initialize()
            yield session


@pytest.fixture(params=TRANSPORTS)
def target(request):
    if request.param == "stdio":
        yield Target("stdio")
    else:
        with HttpServer() as server:
            yield Target("http", server)


def texts_of(result: types.CallToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, types.TextContent)]


async def test_stream_progress_and_final_result(target: Target) -> None:
    wire: list[dict[str, Any]] = []
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async with target.connect(recorder=wire) as session:
        result = await session.call_tool("stream", STREAM_ARGS, progress_callback=on_progress)
    assert not result.isError
    check_progress(progress)
    check_final(texts_of(result), result.structuredContent)
    # Not asked for: the server must not send partials.
    assert not [m for m in wire if m.get("method") == PARTIAL_METHOD]


async def test_partials_declared_per_call(target: Target) -> None:
    wire: list[dict[str, Any]] = []
    handled: list[Any] = []
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async def on_message(message: Any) -> None:
        handled.append(message)

    async with target.connect(recorder=wire, message_handler=on_message) as session:
        result = await session.call_tool("stream", STREAM_ARGS, progress_callback=on_progress, meta=PARTIALS_META)
        # The session survives the notifications it cannot parse and still answers.
        assert texts_of(await session.call_tool("test_simple_text", {}))
    partials = [m["params"] for m in wire if m.get("method") == PARTIAL_METHOD]
    check_partials(partials)
    check_progress(progress)
    check_final(texts_of(result), result.structuredContent)
    # mcp 1.x has no type for the notification: none reached the message handler,
    # which did get the progress notifications.
    assert any(isinstance(getattr(m, "root", None), types.ProgressNotification) for m in handled)
    assert not [m for m in handled if "partial" in type(getattr(m, "root", m)).__name__.lower()]


async def test_execute_code_lines_reach_a_progress_only_client(target: Target) -> None:
    """Only a progress token, as most hosts send: the program's lines arrive as progress."""
    wire = WireLog()
    messages: list[str | None] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        messages.append(message)

    async with target.connect(recorder=wire) as session:
        result = await session.call_tool("execute_code", EXEC_ARGS, progress_callback=on_progress)
    assert not result.isError, texts_of(result)
    figures = check_line_progress(wire.progress_before_result(), "".join(texts_of(result)))
    assert messages == [params.get("message") for _, params in wire.progress_before_result()]
    print(f"FIGURES mcp1 {target.transport} progress-only {figures}")


async def test_execute_code_with_partials_declared_gets_its_partials(target: Target) -> None:
    """The same call, with partial results declared: the partials are as they always were."""
    wire = WireLog()

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        pass

    async with target.connect(recorder=wire) as session:
        result = await session.call_tool("execute_code", EXEC_ARGS, progress_callback=on_progress, meta=PARTIALS_META)
    assert not result.isError, texts_of(result)
    check_line_partials([m["params"] for m in wire.messages() if m.get("method") == PARTIAL_METHOD])


async def wait_for_state(session: ClientSession, run_id: str, timeout: float = 10.0) -> str:
    with anyio.fail_after(timeout):
        while True:
            state = run_state(await session.call_tool("runs_get", {"run_id": run_id}))
            if state not in ("pending", "working"):
                return state
            await anyio.sleep(0.05)


async def stream_run_id(session: ClientSession) -> str:
    listed = await session.call_tool("runs_list", {"tool": "stream"})
    runs = listed.structuredContent["runs"]
    assert len(runs) == 1, runs
    return runs[0]["run_id"]


async def test_cancel_ends_the_run_canceled(target: Target) -> None:
    request_id: list[Any] = []
    first_progress = anyio.Event()

    async def on_message(message: Any) -> None:
        root = getattr(message, "root", None)
        if isinstance(root, types.ProgressNotification) and not first_progress.is_set():
            request_id.append(root.params.progressToken)  # 1.x: progress token == request id
            first_progress.set()

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        pass

    async with target.connect(message_handler=on_message) as session:
        finished: list[Any] = []

        async def call() -> None:
            finished.append(await session.call_tool("stream", LONG_ARGS, progress_callback=on_progress))

        async with anyio.create_task_group() as group:
            group.start_soon(call)
            with anyio.fail_after(10):
                await first_progress.wait()
            await session.send_notification(
                types.ClientNotification(
                    types.CancelledNotification(
                        params=types.CancelledNotificationParams(requestId=request_id[0], reason="test cancels")
                    )
                )
            )
            # The server owes no response to a cancelled request: stop waiting for one.
            await anyio.sleep(0.3)
            group.cancel_scope.cancel()
        assert not finished, "a cancelled call returned a result"

        run_id = await stream_run_id(session)
        assert await wait_for_state(session, run_id) == "canceled"
        # The server keeps serving: a streaming call and a plain one.
        after = await session.call_tool("stream", {"count": 5, "size": 100})
        check_final(texts_of(after), after.structuredContent, count=5)
        assert texts_of(await session.call_tool("test_simple_text", {}))


async def poll_task(session: ClientSession, task_id: str, timeout: float = 20.0) -> types.GetTaskResult:
    with anyio.fail_after(timeout):
        while True:
            task = await session.experimental.get_task(task_id)
            assert task.taskId == task_id
            if task.status not in ("working", "input_required"):
                return task
            await anyio.sleep(0.05)


async def fetch_task_result(session: ClientSession, task_id: str) -> None:
    result = await session.experimental.get_task_result(task_id, types.CallToolResult)
    check_final(texts_of(result), result.structuredContent)
    assert result.meta[RELATED_TASK_KEY]["taskId"] == task_id


async def test_task_create_poll_result(target: Target) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # 1.30 deprecates session.experimental
        async with target.connect() as session:
            created = await session.experimental.call_tool_as_task("stream", STREAM_ARGS, ttl=60_000)
            task_id = created.task.taskId
            assert created.task.status == "working"
            assert (await poll_task(session, task_id)).status == "completed"
            await fetch_task_result(session, task_id)
            listed = await session.experimental.list_tasks()
            assert task_id in [task.taskId for task in listed.tasks]


async def test_task_survives_http_restart(tmp_path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with HttpServer(tmp_path) as first:
            async with Target("http", first).connect() as session:
                created = await session.experimental.call_tool_as_task("stream", STREAM_ARGS, ttl=60_000)
                task_id = created.task.taskId
                assert (await poll_task(session, task_id)).status == "completed"
                await fetch_task_result(session, task_id)
        # Killed (SIGKILL); a new process on the same data directory, on a new port.
        with HttpServer(tmp_path) as second:
            async with Target("http", second).connect() as session:
                assert (await poll_task(session, task_id)).status == "completed"
                await fetch_task_result(session, task_id)
                listed = await session.experimental.list_tasks()
                assert task_id in [task.taskId for task in listed.tasks]


async def test_task_interrupted_by_restart_fails(tmp_path) -> None:
    """A task still working when its server dies is not lost: after the restart it
    reads as failed (the run was interrupted), and tasks/result says so."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with HttpServer(tmp_path) as first:
            async with Target("http", first).connect() as session:
                created = await session.experimental.call_tool_as_task("stream", LONG_ARGS, ttl=60_000)
                task_id = created.task.taskId
                assert (await session.experimental.get_task(task_id)).status == "working"
        with HttpServer(tmp_path) as second:
            async with Target("http", second).connect() as session:
                assert (await poll_task(session, task_id)).status == "failed"
                result = await session.experimental.get_task_result(task_id, types.CallToolResult)
                assert result.isError
                assert result.meta[RELATED_TASK_KEY]["taskId"] == task_id
