"""What the wrap tests' two third-party servers (sdk_server.py on `mcp` 1.x, fastmcp_server.py
on FastMCP 4) share: the `slow` tool's schema and body, and the record of what the server
process saw ($WRAP_LOG, one JSON line per event). Imports nothing from either SDK."""

from __future__ import annotations

import json
import os
import time
from typing import Any, Awaitable, Callable

import anyio

SLOW_DESCRIPTION = "Sleeps duration_s seconds, reporting progress every interval_s seconds."
SLOW_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "duration_s": {"type": "number", "minimum": 0, "default": 90},
        "interval_s": {"type": "number", "exclusiveMinimum": 0, "default": 10},
    },
}


def record(event: str, **fields: Any) -> None:
    """Appends one line to $WRAP_LOG (if set): what this process saw, with its pid."""
    path = os.environ.get("WRAP_LOG")
    if not path:
        return
    line = json.dumps({"event": event, "pid": os.getpid(), "at": time.time(), **fields})
    with open(path, "a", encoding="utf-8") as log:
        log.write(line + "\n")


async def slow(
    arguments: dict[str, Any],
    report: Callable[[float, float, str], Awaitable[None]],
    say: Callable[[str], Awaitable[None]],
    request_id: Any = None,
) -> str:
    """Sleeps `duration_s`; every `interval_s` calls `report(elapsed, duration, message)`
    (progress) and `say("tick N")` (a log message: unlike progress, which a client may get
    coalesced, every one of them must arrive). A cancel is recorded (`cancelled`) and
    raised on."""
    duration = float(arguments.get("duration_s", 90))
    interval = float(arguments.get("interval_s", 10))
    record("start", duration_s=duration, interval_s=interval, request_id=str(request_id))
    started = time.monotonic()
    elapsed = 0.0
    ticks = 0
    try:
        while elapsed < duration:
            step = min(interval, duration - elapsed)
            await anyio.sleep(step)
            elapsed = min(duration, time.monotonic() - started)
            ticks += 1
            await report(round(elapsed, 3), duration, f"{elapsed:.0f} of {duration:.0f} s")
            record("progress", progress=round(elapsed, 3))
            await say(f"tick {ticks}")
            record("log", text=f"tick {ticks}")
    except anyio.get_cancelled_exc_class():
        record("cancelled", request_id=str(request_id), after_s=round(time.monotonic() - started, 3))
        raise
    record("done", request_id=str(request_id))
    return f"slept {duration:g} s"
