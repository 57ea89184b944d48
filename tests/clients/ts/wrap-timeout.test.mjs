// The 90 s call and the TypeScript SDK's default 60 s request timeout (issue 26): a client
// that passes no `onprogress` sends no progress token, so no progress (the upstream's, or
// weir's heartbeat) can reset its timeout. Three clients at once, each calling the Python
// SDK server's `slow` tool for 90 s (progress every 10 s) with the SDK's defaults:
// - straight to the server: the call fails with the SDK's timeout after 60 s;
// - through `weir wrap`: the same;
// - through `weir wrap --defer-after 30`: weir answers the call after 30 s with "still
//   working" and the run's id, and the client waits with `runs_wait` (each call under
//   the 60 s) until it returns the tool's own result, after 90 s.
// Run by scripts/wrap-tests; about 95 s.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';

import { WEIR_BIN, textsOf } from './lib/weir.mjs';
import { runEvents, terminals, upstreamCommand, upstreamLog } from './lib/wrap.mjs';

const CALL = { name: 'slow', arguments: { duration_s: 90, interval_s: 10 } };

async function connect(t, command, args, env) {
    const client = new Client({ name: 'weir-wrap-timeout-test', version: '0.0.0' });
    await client.connect(new StdioClientTransport({ command, args, env, stderr: 'inherit' }));
    t.after(() => client.close().catch(() => {}));
    return client;
}

/** The call with the SDK's defaults; how it ended and after how long. */
async function plainCall(client) {
    const started = Date.now();
    try {
        const result = await client.callTool(CALL);
        return { result, ms: Date.now() - started };
    } catch (error) {
        return { error, ms: Date.now() - started };
    }
}

/** The call, then `runs_wait` until the run's result. */
async function deferredCall(client) {
    const started = Date.now();
    const first = await client.callTool(CALL);
    const deferredMs = Date.now() - started;
    assert.equal(first.structuredContent?.still_working, true, JSON.stringify(first));
    const runId = first.structuredContent.run_id;
    let waits = 0;
    for (;;) {
        const waited = await client.callTool({ name: 'runs_wait', arguments: { run_id: runId, timeout_s: 45 } });
        waits += 1;
        if (waited.structuredContent?.still_working !== true) {
            return { result: waited, runId, deferredMs, waits, ms: Date.now() - started };
        }
    }
}

test('a 90 s call: the TS client times out at 60 s straight and through weir, and completes through weir --defer-after', { timeout: 150_000 }, async t => {
    const [python, script] = upstreamCommand('sdk');
    const log = upstreamLog();
    t.after(() => log.remove());
    const env = { ...process.env, WRAP_LOG: log.path };
    const direct = await connect(t, python, [script], env);
    const wrapped = await connect(t, WEIR_BIN, ['wrap', '--memory', '--', python, script], env);
    const deferring = await connect(t, WEIR_BIN, ['wrap', '--memory', '--defer-after', '30', '--', python, script], env);

    const [straight, through, deferred] = await Promise.all([plainCall(direct), plainCall(wrapped), deferredCall(deferring)]);

    for (const [what, outcome] of [['straight to the server', straight], ['through weir wrap', through]]) {
        assert.ok(outcome.error instanceof McpError, `${what}: ${JSON.stringify(outcome.result)}`);
        assert.equal(outcome.error.code, ErrorCode.RequestTimeout, `${what}: ${outcome.error}`);
        assert.ok(outcome.ms >= 59_000 && outcome.ms < 75_000, `${what}: timed out after ${outcome.ms} ms`);
    }
    assert.deepEqual(textsOf(deferred.result), ['slept 90 s']);
    assert.ok(!deferred.result.isError);
    assert.ok(deferred.deferredMs >= 29_000 && deferred.deferredMs < 40_000, `deferred after ${deferred.deferredMs} ms`);
    assert.ok(deferred.ms >= 89_000, `completed after ${deferred.ms} ms`);
    // The run got the upstream's progress every 10 s.
    const events = await runEvents(deferring, deferred.runId);
    assert.equal(events.filter(e => e.type === 'progress').length, 9);
    assert.deepEqual(terminals(events), ['completed']);
    t.diagnostic(
        `FIGURES straight_timeout_ms=${straight.ms} weir_timeout_ms=${through.ms} deferred_ms=${deferred.deferredMs} ` +
            `runs_wait_calls=${deferred.waits} completed_ms=${deferred.ms}`
    );
});
