// `weir wrap` around real third-party MCP servers (issue 26), driven by the official
// TypeScript SDK clients: the Python SDK's low-level server (`mcp` 1.x) and a FastMCP 4
// server (tests/wrap/), each with a tool `slow` that sleeps and reports progress, wrapped
// by weir and served over stdio and Streamable HTTP. Run by scripts/wrap-tests.
//
// Per server and transport, through `@modelcontextprotocol/sdk` 1.x unless said:
// - progress: every progress the upstream sent reaches `onprogress`, in order, and the
//   run's log holds them all;
// - a 2025-11-25 task (`params.task`, `tasks/get`, `tasks/result`) though the upstream
//   gets a plain call; a 2026-07-28 task (the tasks extension, `@modelcontextprotocol/client`
//   2.x negotiating 2026-07-28; the SDK has no client for the extension, so the test takes
//   the task answer off the transport, see acceptTasks) the same;
// - cancel (AbortSignal): the upstream process records the cancellation, the run ends
//   canceled once;
// - kill -9 of the upstream mid-call: the call ends with an error naming the signal, the
//   run fails once, the next call starts the server again;
// - HTTP only: a client that drops its stream mid-call and resumes with `Last-Event-ID`
//   (the SDK's resumption token, from a new client on the same session) gets every log
//   message it missed, once and in order, the newest progress, and the result.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, CreateTaskResultSchema, LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { Client as Client2, StreamableHTTPClientTransport as Http2 } from '@modelcontextprotocol/client';
import { StdioClientTransport as Stdio2 } from '@modelcontextprotocol/client/stdio';
import { z } from 'zod';

import { CLIENT_CAPABILITIES_KEY, WEIR_BIN, droppedProgress, sleep, textsOf, until } from './lib/weir.mjs';
import { endedState, newestRun, runEvents, startWrapHttp, terminals, upstreamCommand, upstreamLog } from './lib/wrap.mjs';

/** A short call: 3 s, progress every 0.5 s (six reports). */
const SHORT = { duration_s: 3, interval_s: 0.5 };
/** A call long enough to cancel or kill in the middle of. */
const LONG = { duration_s: 30, interval_s: 0.5 };
const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';

/** `weir wrap` around `server`, served over `transport`; `connect()` gives an SDK 1.x
 * client, `connect2()` a client 2.x one negotiating 2026-07-28. Over stdio each client
 * starts its own weir (and upstream). */
async function openWrapped(t, server, transport, { options = [] } = {}) {
    const log = upstreamLog();
    const env = { ...process.env, WRAP_LOG: log.path };
    const command = upstreamCommand(server);
    const http = transport === 'http' ? await startWrapHttp(command, { env, options }) : undefined;
    const clients = [];
    t.after(async () => {
        for (const client of clients) await client.close().catch(() => {});
        await http?.stop();
        log.remove();
    });
    const stdio = { command: WEIR_BIN, args: ['wrap', '--memory', ...options, '--', ...command], env, stderr: 'inherit' };
    return {
        log,
        http,
        async connect() {
            const client = new Client({ name: 'weir-wrap-tests-sdk1', version: '0.0.0' });
            clients.push(client);
            await client.connect(transport === 'stdio' ? new StdioClientTransport(stdio) : new StreamableHTTPClientTransport(http.url));
            return client;
        },
        async connect2() {
            const client = new Client2({ name: 'weir-wrap-tests-client2', version: '0.0.0' }, { versionNegotiation: { mode: 'auto' } });
            clients.push(client);
            await client.connect(transport === 'stdio' ? new Stdio2(stdio) : new Http2(http.url));
            assert.equal(client.getNegotiatedProtocolVersion(), '2026-07-28');
            return client;
        }
    };
}

/** The progress values the upstream recorded sending, in order. */
const upstreamProgress = log => log.events().filter(e => e.event === 'progress').map(e => e.progress);

function checkIncreasing(values) {
    for (let i = 1; i < values.length; i++) {
        assert.ok(values[i] > values[i - 1], `progress went from ${values[i - 1]} to ${values[i]}: ${values}`);
    }
}

/** Starts a LONG call with progress; resolves once the first progress arrived, with the
 * call (wrapped: a promise would be awaited). */
async function startLong(client, signal) {
    let first;
    const started = new Promise(resolve => (first = resolve));
    const call = client.callTool({ name: 'slow', arguments: LONG }, undefined, { signal, onprogress: () => first() });
    call.catch(() => {});
    await started;
    return { call };
}

/** The tick numbers in log notifications' data (a string from the SDK server, an object
 * holding it from FastMCP's). */
const ticksOf = notes => notes.map(note => Number(/tick (\d+)/.exec(JSON.stringify(note.data))?.[1]));

/** Answers a 2026-07-28 `tools/call` that weir ran as a task the way the tasks extension's
 * client package would (client 2.x has none, and refuses `resultType: "task"`): the task
 * is kept in `tasks`, the SDK gets an empty complete result in its place. */
function acceptTasks(transport, tasks) {
    const deliver = transport.onmessage;
    transport.onmessage = (message, extra) => {
        if (message.result?.resultType === 'task') {
            tasks.push(message.result);
            message = { ...message, result: { resultType: 'complete', content: [] } };
        }
        deliver(message, extra);
    };
}

for (const server of ['sdk', 'fastmcp']) {
    for (const transport of ['stdio', 'http']) {
        describe(`weir wrap around the ${server} server, over ${transport}`, () => {
            test('every progress of the upstream reaches onprogress and the run', async t => {
                const wrapped = await openWrapped(t, server, transport);
                const client = await wrapped.connect();
                const dropped = droppedProgress(client);
                const seen = [];
                const result = await client.callTool({ name: 'slow', arguments: SHORT }, undefined, {
                    onprogress: p => seen.push(p)
                });
                assert.deepEqual(textsOf(result), ['slept 3 s']);
                const values = [...seen.map(p => p.progress), ...dropped];
                const sent = upstreamProgress(wrapped.log);
                assert.equal(sent.length, 6, `the upstream sent ${sent}`);
                assert.deepEqual(values, sent);
                assert.ok(seen.every(p => p.total === 3 && / of 3 s$/.test(p.message)), JSON.stringify(seen));
                const runId = await newestRun(client);
                const events = await runEvents(client, runId);
                assert.deepEqual(events.filter(e => e.type === 'progress').map(e => e.progress), sent);
                assert.deepEqual(ticksOf(events.filter(e => e.type === 'log').map(e => ({ data: e.text }))), [1, 2, 3, 4, 5, 6]);
                assert.deepEqual(terminals(events), ['completed']);
                t.diagnostic(`FIGURES progress=${values.length} dropped_by_sdk=${dropped.length}`);
            });

            test('a 2025-11-25 task of a tool the upstream runs as a plain call', async t => {
                const wrapped = await openWrapped(t, server, transport);
                const client = await wrapped.connect();
                const created = await client.request(
                    { method: 'tools/call', params: { name: 'slow', arguments: SHORT, task: { ttl: 60_000 } } },
                    CreateTaskResultSchema
                );
                assert.equal(created.task.status, 'working');
                const taskId = created.task.taskId;
                const task = await until(
                    async () => {
                        const task = await client.experimental.tasks.getTask(taskId);
                        return task.status === 'working' ? undefined : task;
                    },
                    { timeoutMs: 20_000, what: 'the task to end' }
                );
                assert.equal(task.status, 'completed');
                const result = await client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema);
                assert.deepEqual(textsOf(result), ['slept 3 s']);
                const starts = wrapped.log.events().filter(e => e.event === 'start');
                assert.equal(starts.length, 1);
                assert.equal(wrapped.log.events().filter(e => e.event === 'done').length, 1);
            });

            test('a 2026-07-28 task (the tasks extension) through client 2.x', async t => {
                const wrapped = await openWrapped(t, server, transport);
                const client = await wrapped.connect2();
                const Task = z.looseObject({ taskId: z.string(), status: z.string() });
                const tasks = [];
                acceptTasks(client.transport, tasks);
                await client.request(
                    {
                        method: 'tools/call',
                        params: {
                            name: 'slow',
                            arguments: SHORT,
                            _meta: { [CLIENT_CAPABILITIES_KEY]: { extensions: { [TASKS_EXTENSION]: {} } } }
                        }
                    },
                    z.looseObject({})
                );
                assert.equal(tasks.length, 1, 'weir did not answer with a task');
                const created = tasks[0];
                assert.equal(created.status, 'working');
                const done = await until(
                    async () => {
                        const task = await client.request({ method: 'tasks/get', params: { taskId: created.taskId } }, Task);
                        return task.status === 'working' ? undefined : task;
                    },
                    { timeoutMs: 20_000, everyMs: 250, what: 'the task to end' }
                );
                assert.equal(done.status, 'completed');
                assert.deepEqual(textsOf(done.result), ['slept 3 s']);
            });

            test('cancel reaches the upstream process and ends the run once', async t => {
                const wrapped = await openWrapped(t, server, transport);
                const client = await wrapped.connect();
                const controller = new AbortController();
                const { call } = await startLong(client, controller.signal);
                const runId = await newestRun(client);
                const asked = Date.now();
                controller.abort('the test cancels');
                await assert.rejects(call);
                const cancelled = await wrapped.log.waitFor('cancelled');
                assert.equal(await endedState(client, runId), 'canceled');
                await sleep(500);
                assert.deepEqual(terminals(await runEvents(client, runId)), ['canceled']);
                assert.equal(wrapped.log.events().filter(e => e.event === 'done').length, 0);
                t.diagnostic(`FIGURES cancel_reached_upstream_ms=${Math.round(cancelled.at * 1000 - asked)}`);
            });

            test('kill -9 of the upstream mid-call ends the run once with a clear error', async t => {
                const wrapped = await openWrapped(t, server, transport);
                const client = await wrapped.connect();
                const { call } = await startLong(client);
                const runId = await newestRun(client);
                const start = await wrapped.log.waitFor('start');
                process.kill(start.pid, 'SIGKILL');
                const result = await call;
                assert.equal(result.isError, true);
                const text = textsOf(result).join('\n');
                assert.match(text, /upstream wrapped: the server process exited \(signal: 9 \(SIGKILL\)\)/);
                assert.equal(await endedState(client, runId), 'failed');
                // The next call starts the server again; the failed run stays failed.
                const again = await client.callTool({ name: 'slow', arguments: { duration_s: 0.5, interval_s: 0.25 } });
                assert.deepEqual(textsOf(again), ['slept 0.5 s']);
                const restarted = await wrapped.log.waitFor('start', { skip: 1 });
                assert.notEqual(restarted.pid, start.pid);
                assert.deepEqual(terminals(await runEvents(client, runId)), ['failed']);
            });

            if (transport === 'http') {
                test('a dropped stream resumed with Last-Event-ID loses no progress and gets the result', async t => {
                    const wrapped = await openWrapped(t, server, transport);
                    const first = new StreamableHTTPClientTransport(wrapped.http.url);
                    const a = new Client({ name: 'weir-wrap-tests-a', version: '0.0.0' });
                    await a.connect(first);
                    await a.setLoggingLevel('info');
                    const logged = [];
                    a.setNotificationHandler(LoggingMessageNotificationSchema, note => logged.push(note.params));
                    const call = { method: 'tools/call', params: { name: 'slow', arguments: { duration_s: 4, interval_s: 0.5 } } };
                    let token;
                    const before = [];
                    let twoSeen;
                    const two = new Promise(resolve => (twoSeen = resolve));
                    const dropped = a.request(call, CallToolResultSchema, {
                        onprogress: p => {
                            before.push(p.progress);
                            if (before.length === 2) twoSeen();
                        },
                        onresumptiontoken: id => (token = id)
                    });
                    dropped.catch(() => {});
                    await two;
                    const sessionId = first.sessionId;
                    // The stream breaks; the upstream goes on reporting meanwhile.
                    await first.close();
                    await assert.rejects(dropped);
                    await sleep(1_200);
                    assert.ok(token, 'no event id to resume from');
                    const b = new Client({ name: 'weir-wrap-tests-b', version: '0.0.0' });
                    const replayed = droppedProgress(b); // the call's token is the first client's
                    const loggedBefore = logged.length;
                    b.setNotificationHandler(LoggingMessageNotificationSchema, note => logged.push(note.params));
                    await b.connect(new StreamableHTTPClientTransport(wrapped.http.url, { sessionId }));
                    const result = await b.request(call, CallToolResultSchema, { resumptionToken: token });
                    assert.deepEqual(textsOf(result), ['slept 4 s']);
                    const sent = upstreamProgress(wrapped.log);
                    assert.equal(sent.length, 8, `the upstream sent ${sent}`);
                    // Every log message, once, in order; progress is a state: strictly
                    // increasing, each a value the upstream sent, the last the end (weir
                    // sends a reader the newest of the progress it missed).
                    assert.deepEqual(ticksOf(logged), [1, 2, 3, 4, 5, 6, 7, 8]);
                    const progress = [...before, ...replayed];
                    checkIncreasing(progress);
                    assert.ok(progress.every(p => sent.includes(p)), `${progress} not all in ${sent}`);
                    assert.equal(progress.at(-1), 4);
                    t.diagnostic(
                        `FIGURES logs_before_break=${loggedBefore} logs_after=${logged.length - loggedBefore} ` +
                            `progress_before_break=${before.length} progress_after=${replayed.length} of ${sent.length}`
                    );
                    await b.close();
                    await a.close();
                });
            }
        });
    }
}
