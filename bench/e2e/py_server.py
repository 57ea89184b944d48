"""The benchmark's Python peer: weir's `stream` fixture tool, written with the
official Python SDK (`mcp`, MCPServer), served the way the SDK serves by default.

    python py_server.py --stdio
    python py_server.py --http     (port 0; prints "serving MCP at http://127.0.0.1:PORT/mcp" on stderr)

Per item the tool sends ONE notification on the call's own channel (stdio, or
the call's SSE response stream over HTTP), awaiting each send:
  - when the call's _meta has partialResultToken: the same message weir sends,
    {"method":"notifications/tools/partial_result",
     "params":{"partialResultToken":T,"seq":i,"content":[{"type":"text","text":ITEM}]}}
    through the public ServerSession.send_notification with a typed model;
  - else, when it has progressToken: ctx.report_progress(i+1, count, ITEM),
    i.e. notifications/progress with the item text as "message".
The final result mirrors weir's: the item texts as text blocks up to 512 KiB
(each block counted as its JSON length), then "streamed N items", or a
truncation note and a resource link; structuredContent {"count": N}.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import uuid
from typing import Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import (
    CallToolResult,
    Notification,
    NotificationParams,
    ResourceLink,
    TextContent,
)

RESULT_LIMIT = 512 * 1024


class PartialResultParams(NotificationParams):
    partial_result_token: str | int
    seq: int
    content: list[TextContent]


class PartialResultNotification(
    Notification[PartialResultParams, Literal["notifications/tools/partial_result"]]
):
    """SEP-2998 draft partial result (what weir sends per item)."""

    method: Literal["notifications/tools/partial_result"] = "notifications/tools/partial_result"
    params: PartialResultParams


def item_text(index: int, size: int, filler: str) -> str:
    head = f"{index:08d}:"
    if len(head) >= size:
        return head[:size]
    return head + filler[: size - len(head)]


server = MCPServer("py-sdk-stream", log_level="WARNING")


@server.tool(description="Streams `count` items of `size` bytes each, `interval_ms` apart.")
async def stream(
    ctx: Context,
    count: int = 10,
    size: int = 100,
    interval_ms: int = 0,
    mode: Literal["text"] = "text",
) -> CallToolResult:
    meta: Any = ctx.request_context.meta or {}
    partial_token = meta.get("partialResultToken")
    progress_token = meta.get("progress_token", meta.get("progressToken"))
    session = ctx.session
    filler = "x" * size
    content: list[Any] = []
    used = 0
    truncated = False

    def keep(block: TextContent) -> None:
        nonlocal used, truncated
        length = len(json.dumps({"type": "text", "text": block.text}, separators=(",", ":")))
        if truncated or used + length > RESULT_LIMIT:
            truncated = True
            return
        used += length
        content.append(block)

    for i in range(count):
        if i > 0 and interval_ms > 0:
            await asyncio.sleep(interval_ms / 1000)
        text = item_text(i, size, filler)
        block = TextContent(type="text", text=text)
        if partial_token is not None:
            await session.send_notification(
                PartialResultNotification(
                    params=PartialResultParams(partial_result_token=partial_token, seq=i, content=[block])
                ),
                related_request_id=ctx.request_context.request_id,
            )
        elif progress_token is not None:
            await ctx.report_progress(i + 1, count, text)
        if not truncated:
            keep(block)
    keep(TextContent(type="text", text=f"streamed {count} items"))
    if truncated:
        run = uuid.uuid4()
        content.append(
            TextContent(type="text", text=f"[output truncated at {RESULT_LIMIT} bytes; the whole output is in run {run}]")
        )
        content.append(
            ResourceLink(type="resource_link", uri=f"bench://runs/{run}", name=f"run {run}", mime_type="application/json")
        )
    return CallToolResult(content=content, structured_content={"count": count})


async def serve_http() -> None:
    import uvicorn

    app = server.streamable_http_app()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)  # connections queue from now on, before uvicorn starts accepting
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning")
    print(f"py-sdk: serving MCP at http://127.0.0.1:{port}/mcp", file=sys.stderr, flush=True)
    await uvicorn.Server(config).serve(sockets=[sock])


if __name__ == "__main__":
    if sys.argv[1:] == ["--stdio"]:
        server.run("stdio")
    elif sys.argv[1:] == ["--http"]:
        asyncio.run(serve_http())
    else:
        sys.exit("usage: py_server.py --stdio | --http")
