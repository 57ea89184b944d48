"""A third-party MCP server written with the official Python SDK (`mcp` 1.x, its low-level
`Server`), for weir's wrap tests (scripts/wrap-tests, crates/weir/tests/it/wrap.rs). Its tool
`slow` sleeps `duration_s` seconds and reports progress every `interval_s` seconds (90 s and
10 s unless told), the long-running tool that hosts give up on. Its tool `add_tool` adds a
tool `echo_N` (N counting from 1) and says so (`notifications/tools/list_changed`); `echo_N`
answers with its name and its `text`. One resource (`notes://readme`), one resource template
(`notes://note/{id}`) and one prompt (`greet {name}`), for the pass-through of resources
and prompts.

What the process itself sees goes to the file named by $WRAP_LOG, one JSON line per event
(`start` with its pid, `progress`, `cancelled`, `done`), so a test can tell that a cancel
reached this process and which process to kill.

    python sdk_server.py            # stdio
    python sdk_server.py http PORT  # Streamable HTTP (sessions) at http://127.0.0.1:PORT/mcp/
"""

from __future__ import annotations

import sys
from contextlib import asynccontextmanager

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from wrapserver import SLOW_DESCRIPTION, SLOW_SCHEMA, record, slow

server: Server = Server("weir-wrap-sdk-server")
ECHO_SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}}
added = 0  # how many echo_N tools add_tool has added


@server.list_tools()
async def list_tools() -> list[types.Tool]:
    tools = [
        types.Tool(name="slow", description=SLOW_DESCRIPTION, inputSchema=SLOW_SCHEMA),
        types.Tool(
            name="add_tool",
            description="Adds a tool echo_N and says the tool list changed.",
            inputSchema={"type": "object"},
        ),
    ]
    for n in range(1, added + 1):
        tools.append(
            types.Tool(name=f"echo_{n}", description="Answers with its name and text.", inputSchema=ECHO_SCHEMA)
        )
    return tools


@server.list_resources()
async def list_resources() -> list[types.Resource]:
    return [types.Resource(uri="notes://readme", name="readme", mimeType="text/plain")]


@server.list_resource_templates()
async def list_resource_templates() -> list[types.ResourceTemplate]:
    return [types.ResourceTemplate(uriTemplate="notes://note/{id}", name="note", mimeType="text/plain")]


@server.read_resource()
async def read_resource(uri) -> str:
    text = str(uri)
    if text == "notes://readme":
        return "the sdk server's readme"
    if text.startswith("notes://note/"):
        return f"note {text.removeprefix('notes://note/')}"
    raise ValueError(f"no resource {text}")


@server.list_prompts()
async def list_prompts() -> list[types.Prompt]:
    argument = types.PromptArgument(name="name", description="Who to greet", required=True)
    return [types.Prompt(name="greet", description="Greets someone.", arguments=[argument])]


@server.get_prompt()
async def get_prompt(name: str, arguments: dict | None) -> types.GetPromptResult:
    if name != "greet":
        raise ValueError(f"no prompt {name}")
    who = (arguments or {}).get("name", "nobody")
    message = types.PromptMessage(role="user", content=types.TextContent(type="text", text=f"Hello, {who}!"))
    return types.GetPromptResult(description="A greeting", messages=[message])


@server.call_tool()
async def call_tool(name: str, arguments: dict) -> list[types.TextContent]:
    global added
    if name == "add_tool":
        added += 1
        await server.request_context.session.send_tool_list_changed()
        return [types.TextContent(type="text", text=f"added echo_{added}")]
    if name.startswith("echo_"):
        return [types.TextContent(type="text", text=f"{name}: {arguments.get('text', '')}")]
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


async def main_http(port: int) -> None:
    """The SDK's Streamable HTTP session manager: a session per client, and what the server
    says outside a request (add_tool's list_changed) on the session's GET stream."""
    import uvicorn
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from starlette.applications import Starlette
    from starlette.routing import Mount

    manager = StreamableHTTPSessionManager(app=server)

    @asynccontextmanager
    async def lifespan(_app):
        async with manager.run():
            yield

    app = Starlette(routes=[Mount("/mcp", app=manager.handle_request)], lifespan=lifespan)
    record("listening", transport="http", port=port, server="sdk")
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    await uvicorn.Server(config).serve()


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        anyio.run(main_http, int(sys.argv[2]))
    else:
        anyio.run(main)
