// See bench/llmstxt/run.
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import readline from "node:readline";

const [weir, modelDir, roundsArg] = process.argv.slice(2);
const rounds = Number(roundsArg ?? 3);
const nowMs = () => performance.timeOrigin + performance.now();
const work = fs.mkdtempSync(path.join(os.tmpdir(), "weir-ttft-"));
const timings = path.join(work, "timings.jsonl");
const children = [];
process.on("exit", () => children.forEach((c) => c.kill()));

function startUntil(command, args, marker, stream) {
  const child = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"] });
  children.push(child);
  return new Promise((resolve, reject) => {
    const lines = readline.createInterface({ input: child[stream] });
    lines.on("line", (line) => {
      if (line.includes(marker)) resolve(line.split(/\s+/).find((w) => w.startsWith("http://")));
    });
    child.on("exit", (code) => reject(new Error(`${command} exited ${code}`)));
  });
}

const repo = path.join(work, "repo");
for (const [file, text] of [
  ["README.md", "# Tally\n\nTally counts words in text files and prints the totals.\n"],
  ["docs/usage.md", "# Usage\n\nRun `tally FILE` to count the words of FILE.\n"],
  ["Cargo.toml", '[package]\nname = "tally"\ndescription = "Counts words."\n'],
]) {
  fs.mkdirSync(path.dirname(path.join(repo, file)), { recursive: true });
  fs.writeFileSync(path.join(repo, file), text);
}

const endpoint = await startUntil("node", [path.join(modelDir, "server.mjs"), "--model", path.join(modelDir, "model.gguf"), "--port", "0", "--threads", "2", "--timings", timings], "listening", "stdout");
const url = await startUntil(weir, ["serve", "--http", "127.0.0.1:0", "--memory", "--no-exec", "--llm-endpoint", endpoint, "--llm-model", "smollm2"], "serving MCP at", "stderr");

const rows = [];
for (let round = 0; round < rounds; round++) {
  fs.writeFileSync(timings, "");
  const call = spawn(weir, ["call", "--url", url, "--output", "jsonl", "llmstxt_generate", `source=${repo}`, "max_model_links=3"], { stdio: ["ignore", "pipe", "inherit"] });
  const firsts = []; // arrival of each prompt's first token
  let afterLabel = false;
  for await (const line of readline.createInterface({ input: call.stdout })) {
    const at = nowMs();
    const event = JSON.parse(line);
    if (event.type !== "partial") continue;
    const text = event.content?.[0]?.text ?? "";
    if (text.endsWith(": ")) afterLabel = true;
    else if (afterLabel && text !== "\n") { firsts.push(at); afterLabel = false; }
  }
  const model = fs.readFileSync(timings, "utf8").trim().split("\n").map((l) => JSON.parse(l));
  model.forEach((m, i) => {
    if (firsts[i] === undefined || m.first_token_at_ms === null) return;
    rows.push({ model_ttft_ms: m.first_token_ms, added_ms: firsts[i] - m.first_token_at_ms });
  });
}
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };
for (const r of rows) console.log(`model first token ${r.model_ttft_ms.toFixed(1)} ms; weir added ${r.added_ms.toFixed(2)} ms`);
const added = rows.map((r) => r.added_ms);
console.log(`prompts: ${rows.length}; model's own time to first token: median ${median(rows.map((r) => r.model_ttft_ms)).toFixed(1)} ms; weir's part (model's first token → partial result at weir call): median ${median(added).toFixed(2)} ms, max ${Math.max(...added).toFixed(2)} ms (acceptance ≤ 20 ms)`);
process.exit(0);
