// `weir wrap` around the official reference server, `@modelcontextprotocol/server-everything`
// (the npm registry, pinned exactly in tests/third_party/package.json), driven by the
// official TypeScript SDK client (`@modelcontextprotocol/sdk` 1.x): its long-running
// operation's progress reaches `onprogress`, in order, its result is the call's result, and
// weir's run of it holds the same progress and ends completed once. Over stdio (the SDK
// spawns `weir wrap -- node …/server-everything stdio`) and Streamable HTTP. Run by
// scripts/wrap-tests.

import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

import { WEIR_BIN, droppedProgress, textsOf } from './lib/weir.mjs';
import { newestRun, runEvents, startWrapHttp, terminals } from './lib/wrap.mjs';

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const ENTRY = join(repo, 'tests', 'third_party', 'node_modules', '@modelcontextprotocol', 'server-everything', 'dist', 'index.js');
const TOOL = 'trigger-long-running-operation';

/** `weir wrap` around server-everything over `transport`; a connected SDK 1.x client. */
async function connectWrapped(t, transport) {
    assert.ok(existsSync(ENTRY), `${ENTRY} is missing: run scripts/wrap-tests, which installs it (npm ci in tests/third_party)`);
    const command = ['node', ENTRY, 'stdio'];
    const http = transport === 'http' ? await startWrapHttp(command) : undefined;
    const client = new Client({ name: 'weir-wrap-everything-tests', version: '0.0.0' });
    t.after(async () => {
        await client.close().catch(() => {});
        await http?.stop();
    });
    await client.connect(
        transport === 'stdio'
            ? new StdioClientTransport({ command: WEIR_BIN, args: ['wrap', '--memory', '--', ...command], stderr: 'inherit' })
            : new StreamableHTTPClientTransport(http.url)
    );
    return client;
}

for (const transport of ['stdio', 'http']) {
    describe(`weir wrap around server-everything, over ${transport}`, () => {
        test('its long-running operation: every step reaches onprogress, then its result', async t => {
            const client = await connectWrapped(t, transport);
            const listed = await client.listTools();
            const tool = listed.tools.find(tool => tool.name === TOOL);
            assert.ok(tool, `${TOOL} is not listed: ${listed.tools.map(tool => tool.name)}`);
            assert.equal(tool.title, 'Trigger Long Running Operation Tool');
            const dropped = droppedProgress(client);
            const seen = [];
            const started = Date.now();
            const result = await client.callTool({ name: TOOL, arguments: { duration: 3, steps: 6 } }, undefined, {
                onprogress: p => seen.push({ ...p, at: Date.now() - started })
            });
            assert.equal(result.isError, undefined, JSON.stringify(result));
            assert.deepEqual(textsOf(result), ['Long running operation completed. Duration: 3 seconds, Steps: 6.']);
            // The last may reach the SDK in the response's chunk, which the SDK drops (see
            // droppedProgress); every step arrived either way, once and in order.
            assert.deepEqual([...seen.map(p => p.progress), ...dropped], [1, 2, 3, 4, 5, 6]);
            assert.ok(seen.length >= 5 && seen.every(p => p.total === 6), JSON.stringify(seen));
            // They came as the steps ended (0.5 s apart), not all at the end.
            assert.ok(seen[0].at < 2_000, `first progress after ${seen[0].at} ms`);
            // weir's run of the call keeps the same progress and ended once.
            const events = await runEvents(client, await newestRun(client));
            assert.equal(events[0].tool, TOOL);
            assert.deepEqual(
                events.filter(e => e.type === 'progress').map(e => e.progress),
                [1, 2, 3, 4, 5, 6]
            );
            assert.deepEqual(terminals(events), ['completed']);
            t.diagnostic(`FIGURES progress=${seen.length} dropped_by_sdk=${dropped.length} first_progress_ms=${seen[0].at} call_ms=${Date.now() - started}`);
        });
    });
}
