// A tiny OpenAI-compatible chat server over a local GGUF model, for tests
// and benchmarks: POST /v1/chat/completions, streamed (SSE chunks, then
// `data: [DONE]`) or not. node-llama-cpp runs the model on the CPU with the
// prebuilt binary its npm package ships (nothing downloaded or compiled).
//
//   node server.mjs --model FILE.gguf [--port 0] [--threads 2] [--context 1024] [--timings FILE]
//
// Prints `listening http://127.0.0.1:PORT/v1` on stdout once the model is
// loaded. With --timings, appends one JSON line per request: when it was
// received and when the model produced its first token (Unix ms, the
// machine's clock), so a client on this machine can measure what its own
// path adds to the model's time to first token. Requests are answered one
// at a time (one context sequence); a client that goes away aborts its
// generation.
import http from "node:http";
import fs from "node:fs";
import { getLlama, LlamaChatSession } from "node-llama-cpp";

const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, arg, i, all) => {
    if (arg.startsWith("--")) pairs.push([arg.slice(2), all[i + 1]]);
    return pairs;
  }, []),
);
if (!args.model) {
  console.error("usage: node server.mjs --model FILE.gguf [--port 0] [--threads 2] [--context 1024] [--timings FILE]");
  process.exit(2);
}
const threads = Number(args.threads ?? 2);
const nowMs = () => performance.timeOrigin + performance.now();

const loadStart = nowMs();
const llama = await getLlama({ gpu: false, build: "never" });
const model = await llama.loadModel({ modelPath: args.model });
const context = await model.createContext({ contextSize: Number(args.context ?? 1024), threads });
const sequence = context.getSequence();
const loadMs = nowMs() - loadStart;

let queue = Promise.resolve();
let served = 0;

function chunk(id, delta, finish) {
  return {
    id, object: "chat.completion.chunk", created: Math.floor(Date.now() / 1000), model: "smollm2",
    choices: [{ index: 0, delta, finish_reason: finish }],
  };
}

async function answer(body, req, res, receivedAt) {
  const id = `chatcmpl-${++served}`;
  const messages = Array.isArray(body.messages) ? body.messages : [];
  const systemPrompt = messages.filter((m) => m.role === "system").map((m) => m.content).join("\n") || undefined;
  const user = messages.filter((m) => m.role === "user").map((m) => m.content).at(-1) ?? "";
  const maxTokens = Math.max(1, Math.min(Number(body.max_tokens ?? 128), 512));
  const stream = body.stream === true;
  const abort = new AbortController();
  let finished = false;
  res.on("close", () => { if (!finished) abort.abort(); });
  if (stream) {
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    res.flushHeaders();
    res.write(`data: ${JSON.stringify(chunk(id, { role: "assistant", content: "" }, null))}\n\n`);
  }
  let firstAt = null;
  let tokens = 0;
  let text = "";
  const session = new LlamaChatSession({ contextSequence: sequence, systemPrompt, autoDisposeSequence: false });
  try {
    await session.prompt(user, {
      maxTokens,
      temperature: Number(body.temperature ?? 0),
      signal: abort.signal,
      stopOnAbortSignal: true,
      onTextChunk(piece) {
        if (firstAt === null) firstAt = nowMs();
        tokens += 1;
        text += piece;
        if (stream) res.write(`data: ${JSON.stringify(chunk(id, { content: piece }, null))}\n\n`);
      },
    });
  } finally {
    session.dispose({ disposeSequence: false });
    await sequence.clearHistory();
  }
  const finish = tokens >= maxTokens ? "length" : "stop";
  finished = true;
  if (stream) {
    res.write(`data: ${JSON.stringify(chunk(id, {}, finish))}\n\n`);
    res.end("data: [DONE]\n\n");
  } else {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({
      id, object: "chat.completion", created: Math.floor(Date.now() / 1000), model: "smollm2",
      choices: [{ index: 0, message: { role: "assistant", content: text }, finish_reason: finish }],
    }));
  }
  if (args.timings) {
    fs.appendFileSync(args.timings, JSON.stringify({
      id, received_at_ms: receivedAt, first_token_at_ms: firstAt,
      first_token_ms: firstAt === null ? null : firstAt - receivedAt,
      tokens, done_ms: nowMs() - receivedAt, aborted: abort.signal.aborted,
    }) + "\n");
  }
}

const server = http.createServer((req, res) => {
  if (req.method !== "POST" || !req.url.endsWith("/chat/completions")) {
    res.writeHead(404, { "content-type": "application/json" });
    res.end(JSON.stringify({ error: { message: `no route ${req.method} ${req.url}` } }));
    return;
  }
  const parts = [];
  req.on("data", (part) => parts.push(part));
  req.on("end", () => {
    const receivedAt = nowMs();
    let body;
    try {
      body = JSON.parse(Buffer.concat(parts).toString("utf8"));
    } catch (error) {
      res.writeHead(400, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { message: `bad JSON: ${error.message}` } }));
      return;
    }
    queue = queue.then(() => answer(body, req, res, receivedAt)).catch((error) => {
      console.error(`llm-server: ${error.stack ?? error}`);
      if (!res.headersSent) res.writeHead(500, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { message: String(error.message ?? error) } }));
    });
  });
});
server.keepAliveTimeout = 60_000;
server.listen(Number(args.port ?? 0), "127.0.0.1", () => {
  const { port } = server.address();
  console.log(`listening http://127.0.0.1:${port}/v1 (model loaded in ${Math.round(loadMs)} ms, ${threads} threads)`);
});
for (const signal of ["SIGTERM", "SIGINT"]) process.on(signal, () => process.exit(0));
