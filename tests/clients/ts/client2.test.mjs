// weir driven by the official TypeScript SDK 2.x client (`@modelcontextprotocol/client`),
// over stdio and Streamable HTTP, in both of its negotiation modes: 'legacy' (the default:
// initialize, 2025-11-25) and 'auto' (probes server/discover; weir answers, so the client
// speaks the stateless 2026-07-28 revision).
//
// The 'modern' tests connect with `connect(transport, { prior: { kind: 'modern', discover } })`
// (no probe); the '[auto]' test checks that probing server/discover negotiates 2026-07-28.
//
// What client 2.x can and cannot do here:
// - Progress: `onprogress` in the request options.
// - Partial results: received with the custom-method form
//   `setNotificationHandler(method, { params: <standard schema> }, handler)`. Declared at
//   initialize as `capabilities.experimental.partialResults` (legacy); in 2026-07-28 the
//   SDK stamps `_meta["io.modelcontextprotocol/clientCapabilities"]` on every request but
//   lets a caller's own `_meta` key win, so the call declares `partialResults` there
//   (the SEP-2998 per-call form).
// - Cancellation: an AbortSignal; the SDK sends `notifications/cancelled` (or, in
//   2026-07-28 over HTTP, closes the request's stream).
// - Tasks (2025-11-25): the SDK keeps the task types but has no task methods ("wire
//   vocabulary with no SDK runtime"). `client.request(request, schema)` sends them with
//   a caller-supplied result schema; legacy mode only (2026-07-28 moved tasks to the
//   io.modelcontextprotocol/tasks extension, a separate package not tested here).

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { z } from 'zod';

import {
    CLIENT_CAPABILITIES_KEY,
    EXEC_ARGS,
    LONG_ARGS,
    PARTIAL_METHOD,
    PARTIAL_TOKEN,
    RELATED_TASK_KEY,
    STREAM_ARGS,
    checkFinal,
    checkLinePartials,
    checkLineProgress,
    checkPartials,
    checkProgress,
    droppedProgress,
    sleep,
    startHttpServer,
    stdioServer,
    tempDir,
    textsOf,
    until,
    onlyStreamRun,
    runState,
} from './lib/weir.mjs';

const PartialParams = z.object({
    partialResultToken: z.union([z.string(), z.number()]),
    seq: z.number().int(),
    content: z.array(z.object({ type: z.string(), text: z.string().optional() })),
    structuredContent: z.unknown().optional()
});

const TaskSchema = z.object({
    taskId: z.string(),
    status: z.enum(['working', 'input_required', 'completed', 'failed', 'cancelled']),
    createdAt: z.string(),
    lastUpdatedAt: z.string(),
    ttl: z.number().nullable(),
    pollInterval: z.number().optional()
});
const CreateTaskResult = z.object({ task: TaskSchema });
const ListTasksResult = z.object({ tasks: z.array(TaskSchema), nextCursor: z.string().optional() });
const CallToolResult = z.object({
    content: z.array(z.object({ type: z.string(), text: z.string().optional() })),
    structuredContent: z.record(z.string(), z.unknown()).optional(),
    isError: z.boolean().optional(),
    _meta: z.record(z.string(), z.unknown()).optional()
});

// A DiscoverResult as weir would send it without the bug (minus serverInfo): adopted
// directly for the 2026-07-28 tests while weir's own fails validation.
const WEIR_DISCOVER = {
    supportedVersions: ['2026-07-28', '2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05'],
    capabilities: {
        tools: { listChanged: false },
        resources: { subscribe: true, listChanged: false },
        prompts: { listChanged: false },
        completions: {},
        logging: {},
        extensions: { 'io.modelcontextprotocol/tasks': {} }
    },
    resultType: 'complete',
    ttlMs: 0,
    cacheScope: 'private'
};

/** Where a test's clients connect: stdio (the SDK spawns and kills the server) or an
 * HTTP server the test started (killed when the test ends). */
async function openTarget(t, transport, { dataDir } = {}) {
    const server = transport === 'http' ? await startHttpServer({ dataDir }) : undefined;
    const clients = [];
    t.after(async () => {
        for (const client of clients) await client.close().catch(() => {});
        await server?.stop();
    });
    return {
        server,
        /** mode: 'legacy' | 'auto' (probe) | 'modern' (adopt WEIR_DISCOVER, no probe). */
        async connect({ mode = 'legacy', capabilities = {} } = {}) {
            const client = new Client(
                { name: 'weir-client-tests-client2', version: '0.0.0' },
                { capabilities, versionNegotiation: { mode: mode === 'legacy' ? 'legacy' : 'auto' } }
            );
            const channel =
                transport === 'stdio'
                    ? new StdioClientTransport({ ...stdioServer(), stderr: 'inherit' })
                    : new StreamableHTTPClientTransport(server.url);
            clients.push(client);
            await client.connect(channel, mode === 'modern' ? { prior: { kind: 'modern', discover: WEIR_DISCOVER } } : {});
            if (mode !== 'auto') {
                assert.equal(client.getNegotiatedProtocolVersion(), mode === 'modern' ? '2026-07-28' : '2025-11-25');
            }
            return client;
        }
    };
}

async function createTask(client) {
    const created = await client.request(
        { method: 'tools/call', params: { name: 'stream', arguments: STREAM_ARGS, task: { ttl: 60_000 } } },
        CreateTaskResult
    );
    assert.equal(created.task.status, 'working');
    return created.task.taskId;
}

const getTask = (client, taskId) =>
    client.request({ method: 'tasks/get', params: { taskId } }, TaskSchema.extend({ _meta: z.unknown().optional() }));

async function pollTask(client, taskId) {
    return until(
        async () => {
            const task = await getTask(client, taskId);
            assert.equal(task.taskId, taskId);
            return ['working', 'input_required'].includes(task.status) ? undefined : task;
        },
        { timeoutMs: 20_000, what: `task ${taskId} to end` }
    );
}

async function fetchTaskResult(client, taskId) {
    const result = await client.request({ method: 'tasks/result', params: { taskId } }, CallToolResult);
    checkFinal(result);
    assert.equal(result._meta[RELATED_TASK_KEY].taskId, taskId);
}

async function listedTaskIds(client) {
    const listed = await client.request({ method: 'tasks/list', params: {} }, ListTasksResult);
    return listed.tasks.map(task => task.taskId);
}

/** Starts a ~20 s call, aborts it, and checks that its run ends canceled and that the
 * server still answers. `quiet`: no progress token, so nothing streams before the abort. */
async function cancelLongCall(client, quiet, { endTimeoutMs = 10_000 } = {}) {
    const controller = new AbortController();
    let started;
    const running = new Promise(resolve => (started = resolve));
    const options = { signal: controller.signal };
    if (!quiet) options.onprogress = () => started();
    const call = client.callTool({ name: 'stream', arguments: LONG_ARGS }, options);
    call.catch(() => {});
    if (quiet) {
        await until(
            async () => {
                const listed = await client.callTool({ name: 'runs_list', arguments: { tool: 'stream' } });
                return listed.structuredContent.runs.some(run => run.state === 'working') || undefined;
            },
            { what: 'the call to start' }
        );
        started();
    }
    await running;
    controller.abort('the test cancels');
    await assert.rejects(call);

    const runId = await onlyStreamRun(client);
    const state = await until(
        async () => {
            const s = await runState(client, runId);
            return ['pending', 'working'].includes(s) ? undefined : s;
        },
        { timeoutMs: endTimeoutMs, what: 'the run to end' }
    );
    assert.equal(state, 'canceled');
    checkFinal(await client.callTool({ name: 'stream', arguments: { count: 5, size: 100 } }), { count: 5 });
    assert.ok(textsOf(await client.callTool({ name: 'test_simple_text', arguments: {} })).length > 0);
}

for (const transport of ['stdio', 'http']) {
    describe(`@modelcontextprotocol/client 2.x over ${transport}`, () => {
        test('[auto] negotiates 2026-07-28 through server/discover', async t => {
            const target = await openTarget(t, transport);
            const client = await target.connect({ mode: 'auto' });
            assert.equal(client.getNegotiatedProtocolVersion(), '2026-07-28');
        });

        for (const mode of ['legacy', 'modern']) {
            test(`[${mode}] stream: progress strictly increasing, partials dense and complete, final result complete`, async t => {
                const target = await openTarget(t, transport);
                const client = await target.connect({
                    mode,
                    capabilities: mode === 'legacy' ? { experimental: { partialResults: {} } } : {}
                });
                const partials = [];
                client.setNotificationHandler(PARTIAL_METHOD, { params: PartialParams }, params => {
                    partials.push(params);
                });
                const _meta = { partialResultToken: PARTIAL_TOKEN };
                if (mode === 'modern') _meta[CLIENT_CAPABILITIES_KEY] = { partialResults: {} };
                const progress = [];
                const dropped = droppedProgress(client);
                const result = await client.callTool(
                    { name: 'stream', arguments: STREAM_ARGS, _meta },
                    { onprogress: ({ progress: value }) => progress.push(value) }
                );
                checkFinal(result);
                await sleep(10); // let dropped ones reach onerror
                checkProgress([...progress, ...dropped]);
                if (dropped.length) t.diagnostic(`the SDK dropped progress ${dropped} (read together with the response)`);
                checkPartials(partials);
            });

            test(`[${mode}] stream without the partialResults capability: no partials, same result`, async t => {
                const target = await openTarget(t, transport);
                const client = await target.connect({ mode });
                const partials = [];
                client.setNotificationHandler(PARTIAL_METHOD, { params: PartialParams }, params => partials.push(params));
                const progress = [];
                const dropped = droppedProgress(client);
                const result = await client.callTool(
                    { name: 'stream', arguments: STREAM_ARGS, _meta: { partialResultToken: PARTIAL_TOKEN } },
                    { onprogress: ({ progress: value }) => progress.push(value) }
                );
                checkFinal(result);
                await sleep(10); // let dropped ones reach onerror
                checkProgress([...progress, ...dropped]);
                if (dropped.length) t.diagnostic(`the SDK dropped progress ${dropped} (read together with the response)`);
                assert.equal(partials.length, 0);
            });

            test(`[${mode}] execute_code with only a progress token: the program's lines arrive as progress`, async t => {
                const target = await openTarget(t, transport);
                const client = await target.connect({ mode });
                const progress = [];
                const result = await client.callTool(
                    { name: 'execute_code', arguments: EXEC_ARGS },
                    { onprogress: ({ progress: value, message }) => progress.push({ at: Date.now(), progress: value, message }) }
                );
                const figures = checkLineProgress(progress, result);
                t.diagnostic(`FIGURES ts-client2 ${mode} ${transport} progress-only ${JSON.stringify(figures)}`);
            });

            test(`[${mode}] execute_code with partials declared: the partials are as they always were`, async t => {
                const target = await openTarget(t, transport);
                const client = await target.connect({
                    mode,
                    capabilities: mode === 'legacy' ? { experimental: { partialResults: {} } } : {}
                });
                const partials = [];
                client.setNotificationHandler(PARTIAL_METHOD, { params: PartialParams }, params => partials.push(params));
                const _meta = { partialResultToken: PARTIAL_TOKEN };
                if (mode === 'modern') _meta[CLIENT_CAPABILITIES_KEY] = { partialResults: {} };
                const result = await client.callTool(
                    { name: 'execute_code', arguments: EXEC_ARGS, _meta },
                    { onprogress: () => {} }
                );
                assert.ok(!result.isError);
                checkLinePartials(partials);
            });

            for (const quiet of [false, true]) {
                const name = `[${mode}] cancel with an AbortSignal${quiet ? ' (no progress token)' : ''}: the run ends canceled and the server keeps serving`;
                test(name, async t => {
                    const target = await openTarget(t, transport);
                    const client = await target.connect({ mode });
                    await cancelLongCall(client, quiet);
                });
            }
        }

        test('[legacy] task: created, polled with tasks/get, result from tasks/result, listed', async t => {
            const target = await openTarget(t, transport);
            const client = await target.connect();
            const taskId = await createTask(client);
            assert.equal((await pollTask(client, taskId)).status, 'completed');
            await fetchTaskResult(client, taskId);
            assert.ok((await listedTaskIds(client)).includes(taskId));
        });

        if (transport === 'http') {
            test('[legacy] task survives a server restart on the same --data-dir', async t => {
                const data = tempDir();
                t.after(data.remove);
                const first = await openTarget(t, 'http', { dataDir: data.dir });
                let client = await first.connect();
                const taskId = await createTask(client);
                assert.equal((await pollTask(client, taskId)).status, 'completed');
                await fetchTaskResult(client, taskId);
                await client.close();
                await first.server.stop(); // SIGKILL

                const second = await openTarget(t, 'http', { dataDir: data.dir });
                client = await second.connect();
                assert.equal((await pollTask(client, taskId)).status, 'completed');
                await fetchTaskResult(client, taskId);
                assert.ok((await listedTaskIds(client)).includes(taskId));
            });
        }
    });
}
