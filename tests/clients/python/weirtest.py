"""Shared helpers for driving the real `weir` binary with the official Python MCP SDKs.

Imported by the `mcp1/` (mcp 1.x) and `mcp2/` (mcp 2.x) test modules, which run in
separate virtualenvs; nothing here imports `mcp`, so it works with both.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import threading
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Callable

import anyio

REPO = Path(__file__).resolve().parents[3]
WEIR_BIN = os.environ.get("WEIR_BIN") or str(REPO / "target" / "debug" / "weir")

# The streaming call every test makes: 200 partials of 100 bytes, 2 ms apart, with a
# progress notification every 2 items (the fixture reports ~100 times).
COUNT = 200
SIZE = 100
STREAM_ARGS = {"count": COUNT, "size": SIZE, "interval_ms": 2, "mode": "text"}
# A call long enough to cancel in the middle of (10,000 items, 2 ms apart: ~20 s).
LONG_ARGS = {"count": 10_000, "size": 10, "interval_ms": 2, "mode": "text"}

PARTIAL_METHOD = "notifications/tools/partial_result"
PROGRESS_METHOD = "notifications/progress"
CLIENT_CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
RELATED_TASK_KEY = "io.modelcontextprotocol/related-task"

# `_meta` asking for partial results in the SEP-2998 per-call form: the capability inside
# the call's own clientCapabilities, next to the token. weir honours it in both eras.
PARTIALS_META = {CLIENT_CAPABILITIES_KEY: {"partialResults": {}}, "partialResultToken": "weir-partials"}


# `execute_code` on a Python program that prints LINES lines 200 ms apart, each stamped with
# the time it was printed: what a host sees of a running program.
LINES = 10
PRINTER = (
    "import time\n"
    f"for i in range({LINES}):\n"
    "    print(f'line {i} {time.time():.6f}', flush=True)\n"
    "    time.sleep(0.2)\n"
)
EXEC_ARGS = {"language": "python", "code": PRINTER}
LINE = re.compile(r"line (\d+) (\d+\.\d+)")
# The bar for a progress-only client: this many notifications before the result,
# the first this soon after the program printed its first line.
MIN_LINE_PROGRESS = 5
FIRST_PROGRESS_S = 0.3


def printed_lines(text: str) -> list[tuple[int, float]]:
    """(line number, time printed) of every line of PRINTER's output found in `text`."""
    return [(int(m[1]), float(m[2])) for m in LINE.finditer(text)]


def check_line_progress(progress: list[tuple[float, dict[str, Any]]], output: str) -> dict[str, Any]:
    """Checks what a client with only a progress token got from PRINTER: `progress` holds
    (arrival time, params) of each progress notification that arrived before the result,
    `output` the result's text. Returns the figures (count, first-progress latency)."""
    printed = printed_lines(output)
    assert [n for n, _ in printed] == list(range(LINES)), f"the result lacks the lines: {output!r}"
    assert len(progress) >= MIN_LINE_PROGRESS, f"{len(progress)} progress notifications before the result: {progress}"
    values = [params["progress"] for _, params in progress]
    assert all(b > a for a, b in zip(values, values[1:])), f"progress not strictly increasing: {values}"
    shown = [printed_lines(params.get("message", "")) for _, params in progress]
    assert all(len(lines) == 1 for lines in shown), f"a message without one line of output: {progress}"
    shown_lines = [lines[0][0] for lines in shown]
    assert shown_lines == sorted(shown_lines), f"messages out of order: {shown_lines}"
    first_s = progress[0][0] - printed[0][1]
    assert first_s <= FIRST_PROGRESS_S, f"first progress {first_s * 1000:.0f} ms after the first line"
    return {"progress": len(progress), "first_ms": round(first_s * 1000)}


def check_line_partials(params: list[dict[str, Any]], token: str = "weir-partials") -> None:
    """With partial results declared, PRINTER's partials are what they were before progress was
    counted from them: one per line of stdout, dense from seq 0, the lines in order."""
    assert [p["seq"] for p in params] == list(range(len(params))), "partial seqs not dense"
    assert all(p["partialResultToken"] == token for p in params)
    texts = [block["text"] for p in params for block in p["content"]]
    assert len(texts) == LINES, f"{len(texts)} partials for {LINES} lines printed 200 ms apart"
    assert [n for n, _ in printed_lines("".join(texts))] == list(range(LINES))
    assert all(p.get("structuredContent", {}).get("group") == "stdout" for p in params)


class WireLog:
    """What the server sent, as it came out of the SDK's transport (see `tap`), with the
    time each message arrived. Its `append` is the recorder `tap` calls."""

    def __init__(self) -> None:
        self.entries: list[tuple[float, dict[str, Any]]] = []

    def append(self, message: dict[str, Any]) -> None:
        self.entries.append((time.time(), message))

    def messages(self) -> list[dict[str, Any]]:
        return [message for _, message in self.entries]

    def progress_before_result(self) -> list[tuple[float, dict[str, Any]]]:
        """(arrival, params) of the progress notifications before the first CallToolResult."""
        progress = []
        for at, message in self.entries:
            if message.get("method") == PROGRESS_METHOD:
                progress.append((at, message["params"]))
            elif "content" in (message.get("result") or {}):
                return progress
        raise AssertionError("no CallToolResult arrived")


def item_text(index: int, size: int = SIZE) -> str:
    """Item `index` of the `stream` fixture in text mode: `00000042:xxxx…`, `size` bytes."""
    head = f"{index:08}:"
    return (head + "x" * max(0, size - len(head)))[:size]


def expected_items(count: int = COUNT, size: int = SIZE) -> list[str]:
    return [item_text(i, size) for i in range(count)]


def stdio_command(*extra: str) -> tuple[str, list[str]]:
    """Command and arguments for an SDK's stdio transport to spawn."""
    return WEIR_BIN, ["serve", "--stdio", "--fixtures", *(extra or ("--memory",))]


def check_progress(values: list[float], count: int = COUNT) -> None:
    """Every progress notification is strictly greater than the one before; the last is `count`
    (sent before the result) and there are no more of them than the tool reported."""
    assert values, "no progress notification arrived"
    for before, after in zip(values, values[1:]):
        assert after > before, f"progress went from {before} to {after}: {values}"
    # weir coalesces progress (at most one per ~20 ms of event time) but always sends the
    # newest before the result; the fixture reports every count/100 items.
    assert values[-1] == count, f"last progress {values[-1]}, expected {count}"
    assert len(values) <= min(count, 100), f"{len(values)} progress notifications for {min(count, 100)} reports"


def check_partials(params: list[dict[str, Any]], token: str = "weir-partials", count: int = COUNT, size: int = SIZE) -> None:
    """Partials are dense (seq 0..N-1, in order), carry the token, and together hold every item."""
    seqs = [p["seq"] for p in params]
    assert seqs == list(range(count)), f"partial seqs not dense 0..{count - 1}: {seqs[:10]}… ({len(seqs)} partials)"
    assert all(p["partialResultToken"] == token for p in params)
    texts = [block["text"] for p in params for block in p["content"]]
    assert texts == expected_items(count, size), "partials do not add up to the streamed items"


def check_final(texts: list[str], structured: Any, count: int = COUNT, size: int = SIZE) -> None:
    """The final CallToolResult holds every item, then the summary, and `{count}`."""
    assert texts == expected_items(count, size) + [f"streamed {count} items"], (
        f"final content: {len(texts)} blocks, first {texts[:2]}, last {texts[-1:]}"
    )
    assert structured == {"count": count}


class HttpServer:
    """`weir serve --http 127.0.0.1:0 --fixtures` in a child process, killed on exit.

    With `data_dir`, runs are stored in DIR/weir.db (so they survive a restart);
    otherwise `--memory`.
    """

    def __init__(self, data_dir: str | os.PathLike[str] | None = None) -> None:
        self.data_dir = data_dir
        self.process: subprocess.Popen[str] | None = None
        self.url = ""
        self.stderr: list[str] = []

    def start(self, timeout: float = 20.0) -> "HttpServer":
        store = ["--data-dir", str(self.data_dir)] if self.data_dir is not None else ["--memory"]
        self.process = subprocess.Popen(
            [WEIR_BIN, "serve", "--http", "127.0.0.1:0", "--fixtures", *store],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        lines: queue.Queue[str | None] = queue.Queue()

        def drain() -> None:
            assert self.process is not None and self.process.stderr is not None
            for line in self.process.stderr:
                self.stderr.append(line)
                lines.put(line)
            lines.put(None)

        threading.Thread(target=drain, daemon=True).start()
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self.stop()
                raise RuntimeError(f"weir did not report its address within {timeout}s: {''.join(self.stderr)}")
            if line is None:
                self.stop()
                raise RuntimeError(f"weir exited before serving: {''.join(self.stderr)}")
            match = re.search(r"serving MCP at (http://\S+/mcp)", line)
            if match:
                self.url = match.group(1)
                return self

    def stop(self) -> None:
        """SIGKILL: nothing may depend on a graceful shutdown."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        if self.process is not None:
            self.process.wait(timeout=10)

    def __enter__(self) -> "HttpServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def message_dict(session_message: Any) -> dict[str, Any] | None:
    """A transport item (SessionMessage or Exception) as a plain JSON-RPC dict."""
    message = getattr(session_message, "message", None)
    if message is None:
        return None
    root = getattr(message, "root", message)  # 1.x wraps it in a RootModel
    return root.model_dump(by_alias=True, mode="json", exclude_none=True)


@asynccontextmanager
async def tap(
    read_stream: Any,
    write_stream: Any,
    seen: Callable[[dict[str, Any]], None],
    sent: Callable[[dict[str, Any]], None] | None = None,
):
    """Puts a recorder between an SDK transport and its session: every message the
    server sends passes through `seen` (as a dict) on its way to the session, and
    every message the session sends through `sent`.

    Used to check what actually crossed the wire: where an SDK drops notifications
    it has no type for, or delivers them out of order.
    """
    in_send, in_recv = anyio.create_memory_object_stream(1000)
    out_send, out_recv = anyio.create_memory_object_stream(1000)

    async def pump_in() -> None:
        async with in_send:
            async for item in read_stream:
                as_dict = message_dict(item)
                if as_dict is not None:
                    seen(as_dict)
                await in_send.send(item)

    async def pump_out() -> None:
        async with out_recv:
            async for item in out_recv:
                if sent is not None and (as_dict := message_dict(item)) is not None:
                    sent(as_dict)
                await write_stream.send(item)

    async with anyio.create_task_group() as group:
        group.start_soon(pump_in)
        group.start_soon(pump_out)
        try:
            yield in_recv, out_send
        finally:
            group.cancel_scope.cancel()


def run_state(result: Any) -> str:
    """`state` from a runs_get CallToolResult (either SDK's model)."""
    structured = getattr(result, "structuredContent", None)
    if structured is None:
        structured = getattr(result, "structured_content", None)
    return structured["run"]["state"]
