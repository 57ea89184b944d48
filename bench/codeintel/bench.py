#!/usr/bin/env python3
"""The figures of bench/codeintel, through the release `weir` binary.

    bench.py WEIR SCIP_BIN OUT_JSON NAME:DIR:RG_TYPE:GLOB:WORD[,WORD...] ...

For each corpus: `weir index` cold and again with nothing changed, once
with no SCIP indexer on PATH (the tags path) and once with SCIP_BIN (the
directory holding scip-python and scip-typescript) first on PATH (the SCIP
path), each in a fresh data directory; wall time, the weir process's peak
RSS and each indexer process's, polled from /proc, and the whole tree's
from wait4. Then, on each index, `find_references WORD` through
`weir serve --stdio` as a host calls it (a progress token, no partial
results, default page budget), every page to the end: time to the first
notification (the first chunk) and to the last page's result, against
`rg -nw -t RG_TYPE WORD` and `grep -rnw --include=GLOB WORD .` in the same
tree (time to the first line and to the end), with the recall of rg's
`file:line` hits among the answer's items. Timings are medians of
REPEAT runs (first runs included), warm page cache.
"""

import json
import os
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time

REPEAT = int(os.environ.get("WEIR_BENCH_REPEAT", "5"))
POLL_S = 0.02


def status_kib(pid, field):
    """A `VmHWM:`-style field of /proc/PID/status, in KiB (0 when gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def descendants(pid):
    """Every process below PID, from /proc's children lists."""
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{parent}/task/{tid}/children") as f:
                    kids = [int(k) for k in f.read().split()]
            except OSError:
                continue
            found += kids
            todo += kids
    return found


def comm(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return "?"
    # node runs the indexers: name them by their script.
    for arg in argv:
        for name in ("scip-python", "scip-typescript", "rust-analyzer", "git"):
            if name in os.path.basename(arg):
                return name
    return os.path.basename(argv[0]) if argv else "?"


def measured(argv, env):
    """Runs argv; wall seconds, its stdout, and peak RSS (KiB) of the
    process itself (polled VmHWM), of each descendant by name, and of the
    largest in the tree (wait4)."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = {}
    reader = threading.Thread(target=lambda: out.update(stdout=proc.stdout.read(), stderr=proc.stderr.read()))
    reader.start()
    own, kids = 0, {}
    while True:
        own = max(own, status_kib(proc.pid, "VmHWM:"))
        for kid in descendants(proc.pid):
            name = comm(kid)
            kids[name] = max(kids.get(name, 0), status_kib(kid, "VmHWM:"))
        try:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        except ChildProcessError:
            break
        if pid:
            break
        time.sleep(POLL_S)
    wall = time.perf_counter() - started
    reader.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"{argv} failed ({proc.returncode}): {out['stderr'].decode(errors='replace')[-2000:]}")
    return {"seconds": wall, "self_kib": own, "tree_max_kib": usage.ru_maxrss, "children_kib": kids}, out["stdout"]


def index(weir, data, root, env):
    figures, stdout = measured([weir, "--data-dir", data, "index", root, "--json"], env)
    figures["report"] = json.loads(stdout)
    figures["index_bytes"] = sum(
        os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(os.path.join(data)) for f in fs
    )
    return figures


class Server:
    """`weir serve --stdio`, spoken to as a host does: one request at a
    time, a progress token on each call, no partial results declared."""

    def __init__(self, weir, data, root, env):
        self.proc = subprocess.Popen(
            [weir, "--data-dir", data, "serve", "--stdio", "--tools", "codeintel", "--root", root],
            env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )
        self.inbox = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.next_id = 0
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "bench", "version": "0"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _read(self):
        for line in self.proc.stdout:
            self.inbox.put((time.perf_counter(), line))

    def send(self, message):
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def request(self, method, params):
        """The result, seconds to the first notification (None without
        one) and to the result, and the result's size in bytes."""
        self.next_id += 1
        mine = self.next_id
        started = time.perf_counter()
        self.send({"jsonrpc": "2.0", "id": mine, "method": method, "params": params})
        first = None
        while True:
            at, line = self.inbox.get(timeout=600)
            message = json.loads(line)
            if message.get("id") == mine and "method" not in message:
                if "error" in message:
                    sys.exit(f"{method}: {message['error']}")
                return message["result"], first, at - started, len(line)
            if message.get("method", "").startswith("notifications/") and first is None:
                first = at - started

    def call(self, tool, arguments):
        return self.request("tools/call", {"name": tool, "arguments": arguments,
                                           "_meta": {"progressToken": f"t{self.next_id + 1}"}})

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def references(server, root, word):
    """One full answer: every page of find_references WORD."""
    pages, items, cursor = [], [], None
    started = time.perf_counter()
    first_chunk = None
    while True:
        arguments = {"repo": root, "symbol": word}
        if cursor:
            arguments["cursor"] = cursor
        result, first, done, size = server.call("find_references", arguments)
        if result.get("isError"):
            sys.exit(f"find_references {word}: {result['content']}")
        summary = result["structuredContent"]
        if first_chunk is None:
            # The first notification of the first page, else its result.
            first_chunk = first if first is not None else done
        pages.append({"seconds": done, "bytes": size, "items": len(summary.get("items", [])),
                      "server_first_chunk_ms": summary.get("firstChunkMs")})
        items += summary.get("items", [])
        cursor = summary.get("nextCursor")
        if not cursor:
            break
    return {
        "first_chunk_s": first_chunk,
        "all_pages_s": time.perf_counter() - started,
        "pages": pages,
        "items": len(items),
        "total": summary.get("total"),
        "files": summary.get("fileCount"),
        "by_kind": summary.get("byKind"),
        "by_backend": summary.get("byBackend"),
        "precision": summary.get("precision"),
        "headline": summary.get("headline"),
        "lines": sorted({f"{i['file']}:{i['line']}" for i in items if "file" in i}),
    }


def streamed(argv, cwd):
    """Seconds to the first line and to the end of argv's output, and its lines."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    first = None
    lines = []
    for line in proc.stdout:
        if first is None:
            first = time.perf_counter() - started
        lines.append(line)
    proc.wait()
    return first, time.perf_counter() - started, lines


def hits(lines, strip=""):
    """`file:line` of each output line (`path:line:text`)."""
    out = set()
    for raw in lines:
        path, _, rest = raw.decode(errors="replace").partition(":")
        number = rest.partition(":")[0]
        if number.isdigit():
            out.add(f"{path.removeprefix(strip)}:{number}")
    return out


def text_search(argv, cwd, strip=""):
    runs = [streamed(argv, cwd) for _ in range(REPEAT)]
    found = hits(runs[-1][2], strip)
    return {
        "argv": " ".join(argv),
        "first_line_s": statistics.median(r[0] or r[1] for r in runs),
        "all_s": statistics.median(r[1] for r in runs),
        "lines": len(found),
        "files": len({h.rsplit(":", 1)[0] for h in found}),
        "hits": found,
    }


def words(weir, data, root, env, rg_type, glob, wordlist):
    server = Server(weir, data, root, env)
    rows = []
    for word in wordlist:
        runs = [references(server, root, word) for _ in range(REPEAT)]
        answer = dict(runs[-1])
        answer["first_chunk_s"] = statistics.median(r["first_chunk_s"] for r in runs)
        answer["all_pages_s"] = statistics.median(r["all_pages_s"] for r in runs)
        answer["first_run"] = {"first_chunk_s": runs[0]["first_chunk_s"], "all_pages_s": runs[0]["all_pages_s"]}
        rg = text_search(["rg", "-nw", "--no-heading", "-t", rg_type, word], root)
        grep = text_search(["grep", "-rnw", f"--include={glob}", word, "."], root, strip="./")
        ours = set(answer.pop("lines"))
        row = {
            "word": word,
            "weir": answer,
            "rg": {k: v for k, v in rg.items() if k != "hits"},
            "grep": {k: v for k, v in grep.items() if k != "hits"},
            "recall_of_rg": len(rg["hits"] & ours) / max(1, len(rg["hits"])),
            "recall_of_grep": len(grep["hits"] & ours) / max(1, len(grep["hits"])),
            "rg_missed_sample": sorted(rg["hits"] - ours)[:10],
        }
        print(f"   {word}: {answer['items']} items, {len(answer['pages'])} pages, "
              f"first {answer['first_chunk_s']*1000:.0f} ms, all {answer['all_pages_s']*1000:.0f} ms; "
              f"rg {rg['all_s']*1000:.0f} ms {rg['lines']} lines, grep {grep['all_s']*1000:.0f} ms; "
              f"recall {row['recall_of_rg']*100:.1f}%", file=sys.stderr)
        rows.append(row)
    server.close()
    return rows


def tree_size(root):
    files = size = 0
    for d, _, fs in os.walk(root):
        for f in fs:
            p = os.path.join(d, f)
            if os.path.isfile(p) and not os.path.islink(p):
                files += 1
                size += os.path.getsize(p)
    return files, size


def main():
    weir, scip_bin, out_path = sys.argv[1:4]
    base_path = ":".join(p for p in os.environ["PATH"].split(":")
                         if p != scip_bin and not os.path.exists(os.path.join(p, "scip-python")))
    tags_env = dict(os.environ, PATH=base_path)
    scip_env = dict(os.environ, PATH=f"{scip_bin}:{base_path}")
    results = []
    for spec in sys.argv[4:]:
        name, root, rg_type, glob, wordlist = spec.split(":")
        files, size = tree_size(root)
        corpus = {"corpus": name, "files_on_disk": files, "bytes_on_disk": size, "paths": {}}
        for path, env in (("tags", tags_env), ("scip", scip_env)):
            data = tempfile.mkdtemp(prefix=f"weir-bench-{name}-{path}-")
            print(f"== {name} ({files} files, {size/1e6:.0f} MB): {path} path, cold index", file=sys.stderr)
            cold = index(weir, data, root, env)
            print(f"   {cold['seconds']:.1f} s, weir {cold['self_kib']//1024} MiB, {cold['children_kib']}", file=sys.stderr)
            warm = index(weir, data, root, env)
            print(f"   re-index {warm['seconds']*1000:.0f} ms", file=sys.stderr)
            corpus["paths"][path] = {"cold": cold, "warm": warm,
                                     "words": words(weir, data, root, env, rg_type, glob, wordlist.split(","))}
            subprocess.run(["rm", "-rf", data])
        results.append(corpus)
        with open(out_path, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
