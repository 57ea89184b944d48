#!/usr/bin/env python3
"""Markdown tables from bench.py's JSON: `table.py RESULTS.json...`."""

import json
import sys


def ms(seconds):
    return f"{seconds * 1000:.0f} ms" if seconds < 10 else f"{seconds:.1f} s"


def secs(seconds):
    return f"{seconds:.2f} s" if seconds < 10 else f"{seconds:.1f} s"


def mib(kib):
    return f"{kib / 1024:.0f} MiB"


def indexers(run):
    """The SCIP indexers that ran, with their peak RSS and their own time."""
    parts = []
    backends = run["report"].get("backends", {})
    for name, kib in sorted(run["children_kib"].items()):
        if not name.startswith(("scip-", "rust-analyzer")):
            continue
        why = next((b["why"] for b in backends.values() if b["backend"] == name or b["why"].startswith(name)), "")
        why = why.removeprefix(f"{name} ").split(":")[0][:40]
        why += ")" if why.count("(") > why.count(")") else ""
        parts.append(f"{name} {mib(kib)}" + (f", {why}" if why else ""))
    return "; ".join(parts) or "none ran"


def main():
    rows = [corpus for path in sys.argv[1:] for corpus in json.load(open(path))]
    print("| corpus | on disk | indexed by weir | path | index (cold) | weir peak RSS | SCIP indexer (peak RSS, time) | re-index (no change) | index on disk |")
    print("|---|---|---|---|---|---|---|---|---|")
    for c in rows:
        for path, p in c["paths"].items():
            cold, warm = p["cold"], p["warm"]
            report = cold["report"]
            languages = ", ".join(f"{n} {l}" for l, n in sorted(report["languages"].items(), key=lambda x: -x[1])[:3])
            backends = ", ".join(f"{l}: {b['backend']}" for l, b in sorted(report.get("backends", {}).items()) if b["backend"] != "tags")
            label = path + (f" ({backends})" if backends else "")
            print(f"| {c['corpus']} | {c['files_on_disk']:,} files, {c['bytes_on_disk'] / 2**20:.0f} MiB | {report['files']:,} files ({languages}…) | {label} "
                  f"| {secs(cold['seconds'])} | {mib(cold['self_kib'])} | {indexers(cold) if path == 'scip' else '—'} | {ms(warm['seconds'])} | {cold['index_bytes'] / 2**20:.0f} MiB |")
    print()
    print("| corpus | index | word | items (pages) | files | first chunk | all pages | rg -nw: first line / all | rg lines | grep -rnw: first line / all | grep lines | recall of rg lines |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for c in rows:
        for path, p in c["paths"].items():
            for w in p["words"]:
                a, rg, grep = w["weir"], w["rg"], w["grep"]
                print(f"| {c['corpus']} | {path} | `{w['word']}` | {a['items']:,} ({len(a['pages'])}) | {a['files']:,} | {ms(a['first_chunk_s'])} | {ms(a['all_pages_s'])} "
                      f"| {ms(rg['first_line_s'])} / {ms(rg['all_s'])} | {rg['lines']:,} | {ms(grep['first_line_s'])} / {ms(grep['all_s'])} | {grep['lines']:,} | {w['recall_of_rg'] * 100:.1f}% |")


if __name__ == "__main__":
    main()
