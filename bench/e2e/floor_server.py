#!/usr/bin/env python3
"""The floor: a server with no SDK and no runtime, for the client's own ceiling.

It answers `initialize`, and a `tools/call stream` with the same
`notifications/tools/partial_result` per item and the same final result as
the other servers (items as text blocks up to 512 KiB, a truncation note,
`structuredContent: {count}`), but builds a workload's bytes once (at the
warm-up call) and writes each call in a few large writes. Whatever rate bench.py reaches against it
is what bench.py itself can read: no server is measured faster than that.
Standard library only.

    floor_server.py --stdio
    floor_server.py --http        prints "serving MCP at http://127.0.0.1:PORT/mcp" on stderr
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import uuid

PROTOCOL = "2025-11-25"
RESULT_LIMIT = 512 * 1024
WRITE_CHUNK = 1 << 20


def item_text(index: int, size: int) -> str:
    head = f"{index:08d}:"
    return head[:size] if len(head) >= size else head + "x" * (size - len(head))


def dumps(message: dict) -> bytes:
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()


# A stand-in for the call's token in the cached items, replaced per call.
TOKEN_MARK = b'"\x00floor-token\x00"'
_items: dict[tuple[int, int, str], tuple[bytes, dict]] = {}


def items_of(count: int, size: int, framing: str) -> tuple[bytes, dict]:
    """A call's item messages, framed (`lines` or `sse`) and joined, with
    TOKEN_MARK for its token, and its final result; built once per workload
    (at the warm-up call), so a measured call costs the server one
    `bytes.replace` and its writes."""
    key = (count, size, framing)
    if key not in _items:
        messages, content, used, truncated = [], [], 0, False
        for i in range(count):
            block = {"type": "text", "text": item_text(i, size)}
            encoded = dumps(block)
            messages.append(b'{"jsonrpc":"2.0","method":"notifications/tools/partial_result",'
                            b'"params":{"partialResultToken":%s,"seq":%d,"content":[%s]}}'
                            % (TOKEN_MARK, i, encoded))
            if not truncated and used + len(encoded) <= RESULT_LIMIT:
                used += len(encoded)
                content.append(block)
            else:
                truncated = True
        content.append({"type": "text", "text": f"streamed {count} items"})
        if truncated:
            run = uuid.uuid4().hex
            content.append({"type": "text",
                            "text": f"[output truncated at {RESULT_LIMIT} bytes; the whole output is in run {run}]"})
            content.append({"type": "resource_link", "uri": f"bench://runs/{run}", "name": f"run {run}",
                            "mimeType": "application/json"})
        result = {"content": content, "structuredContent": {"count": count}}
        _items[key] = (b"".join(frame(m, framing) for m in messages), result)
    return _items[key]


def frame(message: bytes, framing: str) -> bytes:
    return message + b"\n" if framing == "lines" else b"event: message\ndata: %s\n\n" % message


def call_bytes(request: dict, framing: str) -> bytes:
    """Every byte a tools/call sends, framed: its items, then its response."""
    params = request.get("params", {})
    args = params.get("arguments", {})
    token = params.get("_meta", {}).get("partialResultToken")
    items, result = items_of(int(args.get("count", 0)), int(args.get("size", 0)), framing)
    response = dumps({"jsonrpc": "2.0", "id": request["id"], "result": result})
    return items.replace(TOKEN_MARK, dumps(token)) + frame(response, framing)


def answer(request: dict) -> bytes | None:
    """The JSON-RPC response to `request` (not a tools/call), or None for a
    notification."""
    if "id" not in request:
        return None
    method = request.get("method")
    if method == "initialize":
        result = {"protocolVersion": PROTOCOL, "capabilities": {"tools": {}},
                  "serverInfo": {"name": "floor", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "stream", "inputSchema": {"type": "object"}}]}
    else:
        return dumps({"jsonrpc": "2.0", "id": request["id"],
                      "error": {"code": -32601, "message": f"no method {method}"}})
    return dumps({"jsonrpc": "2.0", "id": request["id"], "result": result})


def write_all(write, data: bytes) -> None:
    view = memoryview(data)
    for start in range(0, len(view), WRITE_CHUNK):
        write(view[start : start + WRITE_CHUNK])


def serve_stdio() -> None:
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        request = json.loads(line)
        if request.get("method") == "tools/call":
            write_all(out.write, call_bytes(request, "lines"))
        elif (response := answer(request)) is not None:
            out.write(response + b"\n")
        out.flush()


def read_request(rfile) -> tuple[dict, bytes] | None:
    """One HTTP/1.1 request: its headers (lower-cased) and body."""
    line = rfile.readline()
    if not line:
        return None
    headers = {}
    while True:
        line = rfile.readline()
        if line in (b"\r\n", b"\n", b""):
            break
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    return headers, rfile.read(int(headers.get("content-length", "0")))


def serve_connection(conn: socket.socket) -> None:
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    rfile = conn.makefile("rb")
    session = uuid.uuid4().hex
    while True:
        request = read_request(rfile)
        if request is None:
            break
        _, body = request
        message = json.loads(body)
        if message.get("method") == "tools/call":
            # One SSE event per message, the stream's body chunked as the
            # others' are, written in large pieces.
            sse = call_bytes(message, "sse")
            head = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                    b"Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n")
            chunks = [head]
            for start in range(0, len(sse), WRITE_CHUNK):
                piece = sse[start : start + WRITE_CHUNK]
                chunks.append(b"%x\r\n%s\r\n" % (len(piece), piece))
            chunks.append(b"0\r\n\r\n")
            for chunk in chunks:
                conn.sendall(chunk)
        elif (payload := answer(message)) is None:
            conn.sendall(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n")
        else:
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Mcp-Session-Id: %s\r\nContent-Length: %d\r\n\r\n%s"
                         % (session.encode(), len(payload), payload))
    conn.close()


def serve_http() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    print(f"serving MCP at http://127.0.0.1:{port}/mcp", file=sys.stderr, flush=True)
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=serve_connection, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    if sys.argv[1:] == ["--stdio"]:
        serve_stdio()
    elif sys.argv[1:] == ["--http"]:
        serve_http()
    else:
        sys.exit("usage: floor_server.py --stdio | --http")
