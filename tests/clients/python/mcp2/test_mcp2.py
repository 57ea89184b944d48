"""weir driven by the official Python SDK, `mcp` 2.x (`mcp.Client`), over stdio and HTTP.

mcp 2.x negotiates by default (`mode="auto"`): it probes `server/discover` and, since weir
answers it, speaks the stateless 2026-07-28 revision. `mode="legacy"` forces the
2025-11-25 `initialize` handshake. Streaming and cancellation are tested in both modes;
2025-11-25 tasks only in legacy mode.

What mcp 2.x can and cannot do here:

- Progress: `call_tool(progress_callback=...)`. The SDK runs each progress callback in a
  task of its own, so the tests check the order on the wire (recorded between the
  transport and the session) and that the callback received every value.
- Receiving partial results: yes, through a `ClientExtension` whose
  `NotificationBinding` observes `notifications/tools/partial_result` (the SDK hands
  bindings only methods its own protocol tables do not define). Bindings are delivered
  through a queue per method, possibly out of wire order, so the tests order them by `seq`.
- Declaring partial results: the SDK builds `ClientCapabilities` itself
  (`experimental=None`; extensions only as `extensions[<vendor/name>]`), so the
  top-level `partialResults` capability cannot be declared at `initialize`. In legacy
  mode the per-call SEP-2998 form works: `call_tool(meta=...)` passes
  `_meta["io.modelcontextprotocol/clientCapabilities"] = {"partialResults": {}}` and
  `partialResultToken` through untouched. In 2026-07-28 mode the SDK overwrites that
  `_meta` key with its own capabilities on every request, so a 2.x client speaking
  2026-07-28 cannot get partials from weir; the test checks that none are sent.
- Cancellation: cancelling the task awaiting `call_tool` makes the SDK send
  `notifications/cancelled` (legacy, and 2026-07-28 on stdio) or close the request's
  HTTP stream (2026-07-28 over HTTP, where that is the cancellation signal).
- Tasks (2025-11-25): the SDK ships the types (`types.GetTaskRequest`, ...) but no
  methods; the tests send them with `client.session.send_request`.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from mcp import Client, types
from mcp.client.extension import ClientExtension, NotificationBinding
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from pydantic import BaseModel, ConfigDict, ValidationError

from weirtest import (
    CLIENT_CAPABILITIES_KEY,
    COUNT,
    EXEC_ARGS,
    LONG_ARGS,
    PARTIAL_METHOD,
    PARTIALS_META,
    PROGRESS_METHOD,
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
MODES = ["legacy", "auto"]
MODERN = "2026-07-28"




class PartialParams(BaseModel):
    model_config = ConfigDict(extra="allow")
    partialResultToken: str | int
    seq: int
    content: list[dict[str, Any]]
    structuredContent: Any = None


class PartialResults(ClientExtension):
    """Observes `notifications/tools/partial_result` (SEP-2998 draft)."""

    identifier = "dev.weir/partial-results"

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []

    def notifications(self):
        async def handle(params: PartialParams) -> None:
            self.received.append(params.model_dump())

        return [NotificationBinding(method=PARTIAL_METHOD, params_type=PartialParams, handler=handle)]


class Target:
    """Where a test's clients connect: a stdio command (one server per connection, spawned
    and killed by the SDK) or an HTTP server the test started."""

    def __init__(self, transport: str, server: HttpServer | None = None) -> None:
        self.transport = transport
        self.server = server

    def transport_cm(self):
        if self.transport == "stdio":
            command, args = stdio_command()
            return stdio_client(StdioServerParameters(command=command, args=args))
        assert self.server is not None
        return streamable_http_client(self.server.url)

    @asynccontextmanager
    async def connect(
        self,
        mode: str = "legacy",
        *,
        recorder: list[dict[str, Any]] | None = None,
        outgoing: list[dict[str, Any]] | None = None,
        **options: Any,
    ):
        inner = self.transport_cm()
        if recorder is not None:

            @asynccontextmanager
            async def recorded():
                async with inner as (read, write):
                    sent = outgoing.append if outgoing is not None else None
                    async with tap(read, write, recorder.append, sent) as streams:
                        yield streams

            transport = recorded()
        else:
            transport = inner
        async with Client(transport, mode=mode, **options) as client:
            assert client.protocol_version == (MODERN if mode == "auto" else "2025-11-25")
            yield client


@pytest.fixture(params=TRANSPORTS)
def target(request):
    if request.param == "stdio":
        yield Target("stdio")
    else:
        with HttpServer() as server:
            yield Target("http", server)


def texts_of(result: types.CallToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, types.TextContent)]


def wire_progress(wire: list[dict[str, Any]]) -> list[float]:
    return [m["params"]["progress"] for m in wire if m.get("method") == PROGRESS_METHOD]


@pytest.mark.parametrize("mode", MODES)
async def test_stream_progress_partials_and_final_result(target: Target, mode: str) -> None:
    wire: list[dict[str, Any]] = []
    outgoing: list[dict[str, Any]] = []
    progress: list[float] = []
    partials = PartialResults()

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async with target.connect(mode, recorder=wire, outgoing=outgoing, extensions=[partials]) as client:
        result = await client.call_tool("stream", STREAM_ARGS, progress_callback=on_progress, meta=PARTIALS_META)
        assert not result.is_error
        # Bindings are fed through a queue and each progress callback runs in a task of its
        # own: let them drain (no partials arrive in 2026-07-28 mode).
        with anyio.move_on_after(5):
            while len(progress) < len(wire_progress(wire)):
                await anyio.sleep(0.01)
        with anyio.move_on_after(5 if mode == "legacy" else 0.2):
            while len(partials.received) < COUNT:
                await anyio.sleep(0.01)
    check_final(texts_of(result), result.structured_content)
    check_progress(wire_progress(wire))
    assert sorted(progress) == wire_progress(wire), "the progress callback missed notifications"
    on_wire = [m["params"] for m in wire if m.get("method") == PARTIAL_METHOD]
    if mode == "legacy":
        check_partials(on_wire)
        check_partials(sorted(partials.received, key=lambda p: p["seq"]))
    else:
        # 2026-07-28: the SDK replaced the call's clientCapabilities, so the capability
        # was not declared and the server must not send partials.
        sent = [m for m in outgoing if m.get("method") == "tools/call"]
        assert len(sent) == 1 and sent[0]["params"]["_meta"]["partialResultToken"] == "weir-partials"
        assert "partialResults" not in sent[0]["params"]["_meta"][CLIENT_CAPABILITIES_KEY]
        assert on_wire == [] and partials.received == []


@pytest.mark.parametrize("mode", MODES)
async def test_execute_code_lines_reach_a_progress_only_client(target: Target, mode: str) -> None:
    """Only a progress token, as most hosts send: the program's lines arrive as progress."""
    wire = WireLog()
    messages: list[str | None] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        messages.append(message)

    async with target.connect(mode, recorder=wire) as client:
        result = await client.call_tool("execute_code", EXEC_ARGS, progress_callback=on_progress)
        assert not result.is_error, texts_of(result)
        on_wire = wire.progress_before_result()
        # Each callback runs in a task of its own: let them finish.
        with anyio.move_on_after(5):
            while len(messages) < len(on_wire):
                await anyio.sleep(0.01)
    figures = check_line_progress(on_wire, "".join(texts_of(result)))
    assert sorted(messages) == sorted(params.get("message") for _, params in on_wire)
    print(f"FIGURES mcp2 {mode} {target.transport} progress-only {figures}")


async def test_execute_code_with_partials_declared_gets_its_partials(target: Target) -> None:
    """The same call, with partial results declared (legacy mode: 2026-07-28 cannot declare
    them, see above): the partials are as they always were."""
    wire = WireLog()
    partials = PartialResults()

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        pass

    async with target.connect("legacy", recorder=wire, extensions=[partials]) as client:
        result = await client.call_tool("execute_code", EXEC_ARGS, progress_callback=on_progress, meta=PARTIALS_META)
        assert not result.is_error, texts_of(result)
    check_line_partials([m["params"] for m in wire.messages() if m.get("method") == PARTIAL_METHOD])


async def wait_for_state(client: Client, run_id: str, timeout: float = 10.0) -> str:
    with anyio.fail_after(timeout):
        while True:
            state = run_state(await client.call_tool("runs_get", {"run_id": run_id}))
            if state not in ("pending", "working"):
                return state
            await anyio.sleep(0.05)


async def stream_run_id(client: Client) -> str:
    listed = await client.call_tool("runs_list", {"tool": "stream"})
    runs = listed.structured_content["runs"]
    assert len(runs) == 1, runs
    return runs[0]["run_id"]


@pytest.mark.parametrize("with_progress", [True, False], ids=["progress", "quiet"])
@pytest.mark.parametrize("mode", MODES)
async def test_cancel_ends_the_run_canceled(target: Target, mode: str, with_progress: bool) -> None:
    """Cancel a long call by cancelling the task awaiting it; the SDK tells the server."""
    async with target.connect(mode) as client:
        started = anyio.Event()
        finished: list[Any] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            started.set()

        async def call() -> None:
            callback = on_progress if with_progress else None
            finished.append(await client.call_tool("stream", LONG_ARGS, progress_callback=callback))

        async with anyio.create_task_group() as group:
            group.start_soon(call)
            with anyio.fail_after(10):
                if with_progress:
                    await started.wait()
                else:
                    while not (await client.call_tool("runs_list", {"tool": "stream"})).structured_content["runs"]:
                        await anyio.sleep(0.05)
                    await anyio.sleep(0.3)
            group.cancel_scope.cancel()
        assert not finished

        run_id = await stream_run_id(client)
        # (A ~20 s run cannot end by itself within 3 s.)
        assert await wait_for_state(client, run_id, timeout=10.0) == "canceled"
        after = await client.call_tool("stream", {"count": 5, "size": 100})
        check_final(texts_of(after), after.structured_content, count=5)
        assert texts_of(await client.call_tool("test_simple_text", {}))


async def create_task(client: Client) -> str:
    """tools/call with `task`. mcp 2.x cannot send this through its public API:
    `session.send_request` validates every `tools/call` result as a CallToolResult
    (which requires `content`) before looking at the requested result type, so the
    CreateTaskResult is refused. The request goes through the session's dispatcher
    (private) instead; everything after it uses public API."""
    params = types.CallToolRequestParams(name="stream", arguments=STREAM_ARGS, task=types.TaskMetadata(ttl=60_000))
    with pytest.raises(ValidationError, match="content"):
        await client.session.send_request(types.CallToolRequest(params=params), types.CreateTaskResult)
    raw = await client.session._dispatcher.send_raw_request(  # noqa: SLF001
        "tools/call",
        params.model_dump(by_alias=True, mode="json", exclude_none=True),
        {"headers": {"mcp-protocol-version": client.protocol_version}},
    )
    created = types.CreateTaskResult.model_validate(raw)
    assert created.task.status == "working"
    return created.task.task_id


async def get_task(client: Client, task_id: str) -> types.GetTaskResult:
    task = await client.session.send_request(
        types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task_id)), types.GetTaskResult
    )
    assert task.task_id == task_id
    return task


async def poll_task(client: Client, task_id: str, timeout: float = 20.0) -> types.GetTaskResult:
    with anyio.fail_after(timeout):
        while True:
            task = await get_task(client, task_id)
            if task.status not in ("working", "input_required"):
                return task
            await anyio.sleep(0.05)


async def fetch_task_result(client: Client, task_id: str) -> None:
    result = await client.session.send_request(
        types.GetTaskPayloadRequest(params=types.GetTaskPayloadRequestParams(task_id=task_id)),
        types.CallToolResult,
    )
    check_final(texts_of(result), result.structured_content)
    assert result.meta[RELATED_TASK_KEY]["taskId"] == task_id


async def listed_task_ids(client: Client) -> list[str]:
    listed = await client.session.send_request(types.ListTasksRequest(), types.ListTasksResult)
    return [task.task_id for task in listed.tasks]


async def test_task_create_poll_result(target: Target) -> None:
    async with target.connect("legacy") as client:
        task_id = await create_task(client)
        assert (await poll_task(client, task_id)).status == "completed"
        await fetch_task_result(client, task_id)
        assert task_id in await listed_task_ids(client)


async def test_task_survives_http_restart(tmp_path) -> None:
    with HttpServer(tmp_path) as first:
        async with Target("http", first).connect("legacy") as client:
            task_id = await create_task(client)
            assert (await poll_task(client, task_id)).status == "completed"
            await fetch_task_result(client, task_id)
    # Killed (SIGKILL); a new process on the same data directory, on a new port.
    with HttpServer(tmp_path) as second:
        async with Target("http", second).connect("legacy") as client:
            assert (await poll_task(client, task_id)).status == "completed"
            await fetch_task_result(client, task_id)
            assert task_id in await listed_task_ids(client)
