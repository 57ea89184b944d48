#!/usr/bin/env python3
"""Resume an MCP 2025-11-25 call at every message boundary.

Streams one finished `stream` call in full over Streamable HTTP, then, for
every message k that carries an event id, does what a client cut right
after message k does: GET /mcp with Last-Event-ID = that id. The messages up
to k plus the resumed stream must hold every partial result exactly once,
and progress only increasing. Deterministic (the run is over; a resume
replays it from the log), unlike the random cuts of chaos.py's disconnect
phase, which found the seams this checks.

Usage: repro_resume_seams.py --weir PATH [--count 100 --size 100 --interval-ms 15]
Exits 1 when a seam loses or repeats something.
"""

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from chaos import Conn, McpSession, Server, SseParser  # noqa: E402


async def messages(conn: Conn) -> list[tuple[str | None, dict]]:
    status, headers = await conn.head()
    body = await conn.body(headers)
    if status != 200:
        raise RuntimeError(f"HTTP {status}: {body[:200]!r}")
    return [(e.id, json.loads(e.data)) for e in SseParser().feed(body)]


async def main(args: argparse.Namespace) -> int:
    data_dir = tempfile.mkdtemp(prefix="weir-seams-")
    server = Server(args.weir, data_dir)
    try:
        session = McpSession(server.port)
        await session.initialize()
        call = {"count": args.count, "size": args.size, "interval_ms": args.interval_ms}
        req_id, body = session.call_request(call)
        conn = await Conn.open(server.port)
        conn.send("POST", "/mcp", session.headers(), body)
        full = await messages(conn)
        conn.close()
        lost_at, repeated_at = [], []
        for k, (ev_id, _) in enumerate(full):
            if ev_id is None:
                continue
            conn = await Conn.open(server.port)
            conn.send("GET", "/mcp", {**session.headers(accept="text/event-stream"), "Last-Event-ID": ev_id})
            combined = [m for _, m in full[: k + 1]] + [m for _, m in await messages(conn)]
            conn.close()
            seqs = [m["params"]["seq"] for m in combined if m.get("method") == "notifications/tools/partial_result"]
            progress = [m["params"]["progress"] for m in combined if m.get("method") == "notifications/progress"]
            missing = sorted(set(range(args.count)) - set(seqs))
            if missing or len(seqs) != len(set(seqs)):
                lost_at.append((k, ev_id, full[k][1].get("method"), missing[:3]))
            if any(b <= a for a, b in zip(progress, progress[1:])):
                repeated_at.append((k, ev_id, full[k][1].get("method")))
        with_ids = sum(1 for i, _ in full if i)
        print(f"{len(full)} messages, {with_ids} with an event id; resumed after each:")
        print(f"  partial results lost or repeated after {len(lost_at)} of them")
        for k, ev_id, method, missing in lost_at[:5]:
            print(f"    cut after message {k} ({method}, id {ev_id}): partial seqs missing {missing}")
        print(f"  progress not increasing after {len(repeated_at)} of them")
        for k, ev_id, method in repeated_at[:5]:
            print(f"    cut after message {k} ({method}, id {ev_id})")
        return 1 if lost_at or repeated_at else 0
    finally:
        server.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--weir", required=True)
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--interval-ms", type=int, default=15)
    sys.exit(asyncio.run(main(parser.parse_args())))
