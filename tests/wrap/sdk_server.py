"""A third-party MCP server written with the official Python SDK (`mcp` 1.x, its low-level
`Server`), for weir's wrap tests (scripts/wrap-tests). One tool, `slow`: it sleeps
`duration_s` seconds and reports progress every `interval_s` seconds (90 s and 10 s unless
told), the long-running tool that hosts give up on.

What the process itself sees goes to the file named by $WRAP_LOG, one JSON line per event
(`start` with its pid, `progress`, `cancelled`, `done`), so a test can tell that a cancel
reached this process and which process to kill.

    python sdk_server.py            # stdio
"""

from __future__ import annotations

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from wrapserver import SLOW_DESCRIPTION, SLOW_SCHEMA, record, slow

server: Server = Server("weir-wrap-sdk-server")


@server.list_tools()
async def list_tools() -> list[types.Tool]:
    return [types.Tool(name="slow", description=SLOW_DESCRIPTION, inputSchema=SLOW_SCHEMA)]


@server.call_tool()
async def call_tool(name: str, arguments: dict) -> list[types.TextContent]:
    if name != "slow":
        raise ValueError(f"unknown tool {name}")
    context = server.request_context
    token = context.meta.progressToken if context.meta is not None else None

    async def report(progress: float, total: float, message: str) -> None:
        if token is not None:
            await context.session.send_progress_notification(
                token, progress, total, message, related_request_id=context.request_id
            )

    async def say(text: str) -> None:
        await context.session.send_log_message("info", text, related_request_id=context.request_id)

    text = await slow(arguments, report, say, request_id=context.request_id)
    return [types.TextContent(type="text", text=text)]


async def main() -> None:
    record("listening", transport="stdio", server="sdk")
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
