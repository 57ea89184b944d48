// The benchmark's TypeScript peer: weir's `stream` fixture tool, written with
// the official TypeScript SDK v1 (@modelcontextprotocol/sdk, McpServer).
// Plain JavaScript (ESM) so that no compile step sits between the SDK and
// node; the SDK ships compiled JavaScript, so this is what a TS server runs.
//
//   node ts_server.mjs --stdio
//   node ts_server.mjs --http      (port 0; prints "serving MCP at http://127.0.0.1:PORT/mcp" on stderr)
//
// Per item the tool sends ONE notification on the call's own channel (stdio,
// or the call's SSE response stream over HTTP), awaiting each send:
//   - when the call's _meta has partialResultToken: the same message weir sends,
//     {"method":"notifications/tools/partial_result",
//      "params":{"partialResultToken":T,"seq":i,"content":[{"type":"text","text":ITEM}]}}
//   - else, when it has progressToken:
//     {"method":"notifications/progress",
//      "params":{"progressToken":T,"progress":i+1,"total":count,"message":ITEM}}
// The final result mirrors weir's: the item texts as text blocks up to 512 KiB
// (each block counted as its JSON length), then "streamed N items", or a
// truncation note and a resource link; structuredContent {"count": N}.

import { randomUUID } from 'node:crypto';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { createMcpExpressApp } from '@modelcontextprotocol/sdk/server/express.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';

const RESULT_LIMIT = 512 * 1024;

function itemText(index, size, filler) {
    const head = String(index).padStart(8, '0') + ':';
    if (head.length >= size) return head.slice(0, size);
    return head + filler.slice(0, size - head.length);
}

function buildServer() {
    const server = new McpServer({ name: 'ts-sdk-stream', version: '1.0.0' });
    server.registerTool(
        'stream',
        {
            description: 'Streams `count` items of `size` bytes each, `interval_ms` apart.',
            inputSchema: {
                count: z.number().int().min(0).max(10_000_000).default(10),
                size: z.number().int().min(0).max(1 << 20).default(100),
                interval_ms: z.number().int().min(0).max(60_000).default(0),
                mode: z.enum(['text']).default('text')
            }
        },
        async ({ count, size, interval_ms }, extra) => {
            const partialToken = extra._meta?.partialResultToken;
            const progressToken = extra._meta?.progressToken;
            const filler = 'x'.repeat(size);
            const content = [];
            let used = 0;
            let truncated = false;
            const keep = block => {
                const length = JSON.stringify(block).length;
                if (truncated || used + length > RESULT_LIMIT) {
                    truncated = true;
                    return;
                }
                used += length;
                content.push(block);
            };
            for (let i = 0; i < count; i++) {
                if (i > 0 && interval_ms > 0) await new Promise(r => setTimeout(r, interval_ms));
                const text = itemText(i, size, filler);
                const block = { type: 'text', text };
                if (partialToken !== undefined) {
                    await extra.sendNotification({
                        method: 'notifications/tools/partial_result',
                        params: { partialResultToken: partialToken, seq: i, content: [block] }
                    });
                } else if (progressToken !== undefined) {
                    await extra.sendNotification({
                        method: 'notifications/progress',
                        params: { progressToken, progress: i + 1, total: count, message: text }
                    });
                }
                if (!truncated) keep(block);
            }
            keep({ type: 'text', text: `streamed ${count} items` });
            if (truncated) {
                const id = randomUUID();
                content.push({
                    type: 'text',
                    text: `[output truncated at ${RESULT_LIMIT} bytes; the whole output is in run ${id}]`
                });
                content.push({ type: 'resource_link', uri: `bench://runs/${id}`, name: `run ${id}`, mimeType: 'application/json' });
            }
            return { content, structuredContent: { count } };
        }
    );
    return server;
}

async function serveStdio() {
    await buildServer().connect(new StdioServerTransport());
}

// Stateful Streamable HTTP, as in the SDK's simpleStreamableHttp example: one
// transport (and McpServer) per session, SSE responses (enableJsonResponse off).
async function serveHttp() {
    const app = createMcpExpressApp({ host: '127.0.0.1' });
    const transports = new Map();
    app.post('/mcp', async (req, res) => {
        const sessionId = req.headers['mcp-session-id'];
        let transport = sessionId ? transports.get(sessionId) : undefined;
        if (!transport) {
            if (sessionId || !isInitializeRequest(req.body)) {
                res.status(sessionId ? 404 : 400).json({
                    jsonrpc: '2.0',
                    error: { code: -32000, message: 'no valid session' },
                    id: null
                });
                return;
            }
            transport = new StreamableHTTPServerTransport({
                sessionIdGenerator: () => randomUUID(),
                onsessioninitialized: id => transports.set(id, transport)
            });
            transport.onclose = () => transport.sessionId && transports.delete(transport.sessionId);
            await buildServer().connect(transport);
        }
        await transport.handleRequest(req, res, req.body);
    });
    const sessionRequest = async (req, res) => {
        const transport = transports.get(req.headers['mcp-session-id']);
        if (!transport) {
            res.status(404).send('session not found');
            return;
        }
        await transport.handleRequest(req, res);
    };
    app.get('/mcp', sessionRequest);
    app.delete('/mcp', sessionRequest);
    const listener = app.listen(0, '127.0.0.1', () => {
        const { port } = listener.address();
        process.stderr.write(`ts-sdk: serving MCP at http://127.0.0.1:${port}/mcp\n`);
    });
}

const mode = process.argv[2];
if (mode === '--stdio') {
    await serveStdio();
} else if (mode === '--http') {
    await serveHttp();
} else {
    process.stderr.write('usage: node ts_server.mjs --stdio | --http\n');
    process.exit(2);
}
