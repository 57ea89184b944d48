"""A third-party MCP server written with FastMCP (4.x), for weir's wrap tests
(scripts/wrap-tests): the same `slow` tool as sdk_server.py (wrapserver.py), reporting
progress through FastMCP's `Context.report_progress`. And `count`, state kept between calls:
each call adds one to the process's count and answers `count N` (recorded with its pid), so
a test can tell which callers share a process.

    python fastmcp_server.py                 # stdio
    python fastmcp_server.py http PORT       # Streamable HTTP at http://127.0.0.1:PORT/mcp
"""

from __future__ import annotations

import sys

from fastmcp import Context, FastMCP

from wrapserver import SLOW_DESCRIPTION, record, slow

mcp = FastMCP("weir-wrap-fastmcp-server")
counted = 0  # `count`'s state: this process's calls of it so far


@mcp.tool(name="count", description="Adds one to this server's count and answers it.")
async def count_tool() -> str:
    global counted
    counted += 1
    record("count", count=counted)
    return f"count {counted}"


@mcp.tool(name="slow", description=SLOW_DESCRIPTION)
async def slow_tool(ctx: Context, duration_s: float = 90, interval_s: float = 10) -> str:
    async def report(progress: float, total: float, message: str) -> None:
        await ctx.report_progress(progress, total, message)

    async def say(text: str) -> None:
        await ctx.info(text)

    arguments = {"duration_s": duration_s, "interval_s": interval_s}
    return await slow(arguments, report, say, request_id=ctx.request_id)


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        port = int(sys.argv[2])
        record("listening", transport="http", port=port, server="fastmcp")
        mcp.run(transport="http", host="127.0.0.1", port=port, show_banner=False, log_level="warning")
    else:
        record("listening", transport="stdio", server="fastmcp")
        mcp.run(show_banner=False, log_level="warning")
