// `weir wrap` around the official reference server, `@modelcontextprotocol/server-everything`
// (the npm registry, pinned exactly in tests/third_party/package.json), driven by the
// official TypeScript SDK client (`@modelcontextprotocol/sdk` 1.x), over stdio (the SDK
// spawns `weir wrap -- node …/server-everything stdio`) and Streamable HTTP:
// - its long-running operation's progress reaches `onprogress`, in order, its result is the
//   call's result, and weir's run of it holds the same progress and ends completed once;
// - a 2025-11-25 task of it (the server knows nothing of tasks) completes with its result;
// - a cancel (AbortSignal) reaches the server process: its stdin, copied on the way by
//   `tee`, holds `notifications/cancelled` for the call weir made; the run ends canceled once;
// - kill -9 of the server mid-call ends the call with an error naming the signal, the run
//   failed once, and the next call starts the server again.
// Run by scripts/wrap-tests.

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

import { CallToolResultSchema, CreateTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';

import { WEIR_BIN, droppedProgress, sleep, textsOf, until } from './lib/weir.mjs';
import { endedState, newestRun, runEvents, startWrapHttp, terminals, upstreamLog } from './lib/wrap.mjs';

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const ENTRY = join(repo, 'tests', 'third_party', 'node_modules', '@modelcontextprotocol', 'server-everything', 'dist', 'index.js');
const TOOL = 'trigger-long-running-operation';

/** A call long enough to cancel or kill in the middle of: 30 steps of 1 s. */
const LONG = { duration: 30, steps: 30 };

/** `weir wrap` around server-everything over `transport`; a connected SDK 1.x client.
 * `heard`: a file the server's stdin is copied to (`sh -c 'tee FILE | exec node …'`).
 * The server's environment carries a mark of this test, to find its process by. */
async function connectWrapped(t, transport, { heard } = {}) {
    assert.ok(existsSync(ENTRY), `${ENTRY} is missing: run scripts/wrap-tests, which installs it (npm ci in tests/third_party)`);
    const command = heard ? ['sh', '-c', 'tee "$1" | exec node "$0" stdio', ENTRY, heard] : ['node', ENTRY, 'stdio'];
    const mark = randomUUID();
    const env = { ...process.env, WEIR_WRAP_TEST_MARK: mark };
    const http = transport === 'http' ? await startWrapHttp(command, { env }) : undefined;
    const client = new Client({ name: 'weir-wrap-everything-tests', version: '0.0.0' });
    t.after(async () => {
        await client.close().catch(() => {});
        await http?.stop();
    });
    await client.connect(
        transport === 'stdio'
            ? new StdioClientTransport({ command: WEIR_BIN, args: ['wrap', '--memory', '--', ...command], env, stderr: 'inherit' })
            : new StreamableHTTPClientTransport(http.url)
    );
    client.mark = mark;
    return client;
}

/** The pids of the server-everything processes started for `client` (by its mark). */
function serverPids(client) {
    const pids = [];
    for (const name of readdirSync('/proc')) {
        if (!/^\d+$/.test(name)) continue;
        try {
            const cmdline = readFileSync(`/proc/${name}/cmdline`, 'utf8');
            const environ = readFileSync(`/proc/${name}/environ`, 'utf8');
            if (cmdline.startsWith('node\0') && cmdline.includes(ENTRY) && environ.includes(client.mark)) pids.push(Number(name));
        } catch {
            // gone meanwhile
        }
    }
    return pids;
}

/** Starts a LONG call with progress; resolves once its first progress arrived, with the
 * call (wrapped: a promise would be awaited). */
async function startLong(client, signal) {
    let first;
    const started = new Promise(resolve => (first = resolve));
    const call = client.callTool({ name: TOOL, arguments: LONG }, undefined, { signal, onprogress: () => first() });
    call.catch(() => {});
    await started;
    return { call };
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

        test('a 2025-11-25 task of its long-running operation completes with its result', async t => {
            const client = await connectWrapped(t, transport);
            const created = await client.request(
                { method: 'tools/call', params: { name: TOOL, arguments: { duration: 2, steps: 4 }, task: { ttl: 60_000 } } },
                CreateTaskResultSchema
            );
            assert.equal(created.task.status, 'working');
            const task = await until(
                async () => {
                    const task = await client.experimental.tasks.getTask(created.task.taskId);
                    return task.status === 'working' ? undefined : task;
                },
                { timeoutMs: 20_000, what: 'the task to end' }
            );
            assert.equal(task.status, 'completed');
            const result = await client.experimental.tasks.getTaskResult(created.task.taskId, CallToolResultSchema);
            assert.deepEqual(textsOf(result), ['Long running operation completed. Duration: 2 seconds, Steps: 4.']);
        });

        test('cancel reaches the server process and ends the run once', async t => {
            const heard = upstreamLog();
            t.after(() => heard.remove());
            const client = await connectWrapped(t, transport, { heard: heard.path });
            const controller = new AbortController();
            const { call } = await startLong(client, controller.signal);
            const runId = await newestRun(client);
            controller.abort('the test cancels');
            await assert.rejects(call);
            // What the server read on its stdin: the call weir made, then its cancel.
            const cancelled = await until(() => heard.events().find(m => m.method === 'notifications/cancelled'), {
                timeoutMs: 10_000,
                what: 'the server to read notifications/cancelled'
            });
            const calls = heard.events().filter(m => m.method === 'tools/call' && m.params.name === TOOL);
            assert.equal(calls.length, 1);
            assert.equal(cancelled.params.requestId, calls[0].id);
            assert.equal(await endedState(client, runId), 'canceled');
            await sleep(500);
            assert.deepEqual(terminals(await runEvents(client, runId)), ['canceled']);
        });

        test('kill -9 of the server mid-call ends the run once with a clear error', async t => {
            const client = await connectWrapped(t, transport);
            const { call } = await startLong(client);
            const runId = await newestRun(client);
            const [pid, ...others] = serverPids(client);
            assert.ok(pid && others.length === 0, `server processes: ${[pid, ...others]}`);
            process.kill(pid, 'SIGKILL');
            const result = await call;
            assert.equal(result.isError, true);
            assert.match(textsOf(result).join('\n'), /upstream wrapped: the server process exited \(signal: 9 \(SIGKILL\)\)/);
            assert.equal(await endedState(client, runId), 'failed');
            const again = await client.callTool({ name: 'echo', arguments: { message: 'again' } });
            assert.deepEqual(textsOf(again), ['Echo: again']);
            const [restarted] = serverPids(client);
            assert.ok(restarted && restarted !== pid, `${restarted} after ${pid}`);
            assert.deepEqual(terminals(await runEvents(client, runId)), ['failed']);
        });
    });
}
