// weir driven by the official TypeScript SDK 1.x (`@modelcontextprotocol/sdk`), over stdio and
// Streamable HTTP. Protocol 2025-11-25 (the SDK's latest).
//
// What SDK 1.x can and cannot do here:
// - Progress: `onprogress` in the request options.
// - Partial results: declared at initialize as `capabilities.experimental.partialResults`
//   (the SDK's ClientCapabilities schema strips an unknown top-level `partialResults`, so
//   the SEP-2998 spelling cannot be sent at initialize); received with
//   `setNotificationHandler(<zod schema with the method literal>, handler)`.
// - Cancellation: an AbortSignal; the SDK sends `notifications/cancelled` and rejects.
// - Tasks (2025-11-25): `client.request(tools/call + params.task, CreateTaskResultSchema)`,
//   then `client.experimental.tasks.getTask/getTaskResult/listTasks`.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, CreateTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';

import {
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

const PartialResultNotificationSchema = z.object({
    method: z.literal(PARTIAL_METHOD),
    params: z.object({
        partialResultToken: z.union([z.string(), z.number()]),
        seq: z.number().int(),
        content: z.array(z.object({ type: z.string(), text: z.string().optional() })),
        structuredContent: z.unknown().optional()
    })
});

/** Where a test's clients connect: stdio (the SDK spawns and kills one server per
 * connection) or an HTTP server the test started (killed when the test ends). */
async function openTarget(t, transport, { dataDir } = {}) {
    const server = transport === 'http' ? await startHttpServer({ dataDir }) : undefined;
    const clients = [];
    t.after(async () => {
        for (const client of clients) await client.close().catch(() => {});
        await server?.stop();
    });
    return {
        server,
        async connect({ capabilities = {} } = {}) {
            const client = new Client({ name: 'weir-client-tests-sdk1', version: '0.0.0' }, { capabilities });
            const channel =
                transport === 'stdio'
                    ? new StdioClientTransport({ ...stdioServer(), stderr: 'inherit' })
                    : new StreamableHTTPClientTransport(server.url);
            await client.connect(channel);
            clients.push(client);
            return client;
        }
    };
}

async function createTask(client) {
    const created = await client.request(
        { method: 'tools/call', params: { name: 'stream', arguments: STREAM_ARGS, task: { ttl: 60_000 } } },
        CreateTaskResultSchema
    );
    assert.equal(created.task.status, 'working');
    return created.task.taskId;
}

async function pollTask(client, taskId) {
    return until(
        async () => {
            const task = await client.experimental.tasks.getTask(taskId);
            assert.equal(task.taskId, taskId);
            return ['working', 'input_required'].includes(task.status) ? undefined : task;
        },
        { timeoutMs: 20_000, what: `task ${taskId} to end` }
    );
}

async function fetchTaskResult(client, taskId) {
    const result = await client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema);
    checkFinal(result);
    assert.equal(result._meta[RELATED_TASK_KEY].taskId, taskId);
}

for (const transport of ['stdio', 'http']) {
    describe(`@modelcontextprotocol/sdk 1.x over ${transport}`, () => {
        test('stream: progress strictly increasing, partials dense and complete, final result complete', async t => {
            const target = await openTarget(t, transport);
            const client = await target.connect({ capabilities: { experimental: { partialResults: {} } } });
            const partials = [];
            client.setNotificationHandler(PartialResultNotificationSchema, notification => {
                partials.push(notification.params);
            });
            const progress = [];
            const dropped = droppedProgress(client);
            const result = await client.callTool(
                { name: 'stream', arguments: STREAM_ARGS, _meta: { partialResultToken: PARTIAL_TOKEN } },
                CallToolResultSchema,
                { onprogress: ({ progress: value }) => progress.push(value) }
            );
            checkFinal(result);
            await sleep(10); // let dropped ones reach onerror
            checkProgress([...progress, ...dropped]);
            if (dropped.length) t.diagnostic(`the SDK dropped progress ${dropped} (read together with the response)`);
            checkPartials(partials);

            // Without a partialResultToken the same client gets no partials, and the same result.
            partials.length = 0;
            checkFinal(await client.callTool({ name: 'stream', arguments: STREAM_ARGS }));
            assert.equal(partials.length, 0);
        });

        test('stream without the partialResults capability: no partials, same result', async t => {
            const target = await openTarget(t, transport);
            const client = await target.connect();
            const partials = [];
            client.setNotificationHandler(PartialResultNotificationSchema, n => partials.push(n.params));
            const progress = [];
            const dropped = droppedProgress(client);
            const result = await client.callTool(
                { name: 'stream', arguments: STREAM_ARGS, _meta: { partialResultToken: PARTIAL_TOKEN } },
                CallToolResultSchema,
                { onprogress: ({ progress: value }) => progress.push(value) }
            );
            checkFinal(result);
            await sleep(10); // let dropped ones reach onerror
            checkProgress([...progress, ...dropped]);
            if (dropped.length) t.diagnostic(`the SDK dropped progress ${dropped} (read together with the response)`);
            assert.equal(partials.length, 0);
        });

        test('execute_code with only a progress token: the program\'s lines arrive as progress', async t => {
            const target = await openTarget(t, transport);
            const client = await target.connect();
            const progress = [];
            const result = await client.callTool({ name: 'execute_code', arguments: EXEC_ARGS }, CallToolResultSchema, {
                onprogress: ({ progress: value, message }) => progress.push({ at: Date.now(), progress: value, message })
            });
            const figures = checkLineProgress(progress, result);
            t.diagnostic(`FIGURES ts-sdk1 ${transport} progress-only ${JSON.stringify(figures)}`);
        });

        test('execute_code with partials declared: the partials are as they always were', async t => {
            const target = await openTarget(t, transport);
            const client = await target.connect({ capabilities: { experimental: { partialResults: {} } } });
            const partials = [];
            client.setNotificationHandler(PartialResultNotificationSchema, n => partials.push(n.params));
            const result = await client.callTool(
                { name: 'execute_code', arguments: EXEC_ARGS, _meta: { partialResultToken: PARTIAL_TOKEN } },
                CallToolResultSchema,
                { onprogress: () => {} }
            );
            assert.ok(!result.isError);
            checkLinePartials(partials);
        });

        for (const quiet of [false, true]) {
            test(`cancel with an AbortSignal${quiet ? ' (no progress token)' : ''}: the run ends canceled and the server keeps serving`, async t => {
                const target = await openTarget(t, transport);
                const client = await target.connect();
                const controller = new AbortController();
                let started;
                const running = new Promise(resolve => (started = resolve));
                const options = { signal: controller.signal };
                if (!quiet) options.onprogress = () => started();
                const call = client.callTool({ name: 'stream', arguments: LONG_ARGS }, CallToolResultSchema, options);
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
                    { what: 'the run to end' }
                );
                assert.equal(state, 'canceled');
                checkFinal(await client.callTool({ name: 'stream', arguments: { count: 5, size: 100 } }), { count: 5 });
                assert.ok(textsOf(await client.callTool({ name: 'test_simple_text', arguments: {} })).length > 0);
            });
        }

        test('task: created, polled with tasks/get, result from tasks/result, listed', async t => {
            const target = await openTarget(t, transport);
            const client = await target.connect();
            const taskId = await createTask(client);
            assert.equal((await pollTask(client, taskId)).status, 'completed');
            await fetchTaskResult(client, taskId);
            const listed = await client.experimental.tasks.listTasks();
            assert.ok(listed.tasks.some(task => task.taskId === taskId));
        });

        if (transport === 'http') {
            test('task survives a server restart on the same --data-dir', async t => {
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
                const listed = await client.experimental.tasks.listTasks();
                assert.ok(listed.tasks.some(task => task.taskId === taskId));
            });
        }
    });
}
