// What the wrap tests (wrap.test.mjs, wrap-timeout.test.mjs) share: the two third-party
// servers of tests/wrap/ (Python SDK `mcp` 1.x and FastMCP 4), `weir wrap` around one of
// them over stdio or HTTP, and the record each server process keeps of what it saw
// ($WRAP_LOG: `start` with its pid, `progress`, `cancelled`, `done`).

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

import { WEIR_BIN, sleep, until } from './weir.mjs';

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..');
const envs = join(repo, 'target', 'clients');

/** The upstream servers: the Python each runs on (scripts/wrap-tests makes the venvs) and
 * its script. */
export const SERVERS = {
    sdk: {
        python: process.env.WRAP_SDK_PYTHON || join(envs, 'py-mcp1', 'bin', 'python'),
        script: join(repo, 'tests', 'wrap', 'sdk_server.py')
    },
    fastmcp: {
        python: process.env.WRAP_FASTMCP_PYTHON || join(envs, 'py-fastmcp', 'bin', 'python'),
        script: join(repo, 'tests', 'wrap', 'fastmcp_server.py')
    }
};

/** The command that starts `server` on stdio. */
export function upstreamCommand(server) {
    const { python, script } = SERVERS[server];
    assert.ok(existsSync(python), `${python} is missing: run scripts/wrap-tests, which installs it`);
    return [python, script];
}

/** A temporary directory and the upstream's record in it. */
export function upstreamLog() {
    const dir = mkdtempSync(join(tmpdir(), 'weir-wrap-test-'));
    const path = join(dir, 'upstream.jsonl');
    return {
        path,
        dir,
        /** Every event the upstream processes recorded so far. */
        events() {
            if (!existsSync(path)) return [];
            return readFileSync(path, 'utf8')
                .split('\n')
                .filter(Boolean)
                .map(line => JSON.parse(line));
        },
        /** Waits for an event of `kind` (after the first `skip` of them). */
        async waitFor(kind, { timeoutMs = 15_000, skip = 0 } = {}) {
            return until(() => this.events().filter(e => e.event === kind)[skip], {
                timeoutMs,
                what: `the upstream to record ${kind}`
            });
        },
        remove: () => rmSync(dir, { recursive: true, force: true })
    };
}

/** `weir wrap --http 127.0.0.1:0 --memory OPTIONS -- UPSTREAM`; resolves once it serves. */
export function startWrapHttp(command, { env, options = [] } = {}) {
    const args = ['wrap', '--http', '127.0.0.1:0', '--memory', ...options, '--', ...command];
    const child = spawn(WEIR_BIN, args, { stdio: ['ignore', 'ignore', 'pipe'], env });
    const stderr = [];
    const exited = new Promise(resolve => child.once('exit', resolve));
    const stop = async () => {
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 3_000);
        await exited;
        clearTimeout(timer);
    };
    return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
            stop();
            reject(new Error(`weir wrap did not report its address: ${stderr.join('\n')}`));
        }, 60_000);
        exited.then(code => {
            clearTimeout(timer);
            reject(new Error(`weir wrap exited (${code}) before serving: ${stderr.join('\n')}`));
        });
        createInterface({ input: child.stderr }).on('line', line => {
            stderr.push(line);
            const match = /serving MCP at (http:\/\/\S+\/mcp)/.exec(line);
            if (match) {
                clearTimeout(timer);
                resolve({ url: new URL(match[1]), stop, stderr });
            }
        });
    });
}

/** The events of run `runId`, through `runs_events`. */
export async function runEvents(client, runId) {
    const page = await client.callTool({ name: 'runs_events', arguments: { run_id: runId, limit: 1000 } });
    return page.structuredContent.events;
}

/** The terminal events of a run's log: exactly one when it ended. */
export const terminals = events =>
    events.map(e => e.type).filter(type => ['completed', 'failed', 'canceled'].includes(type));

/** The newest run's id, through `runs_list`. */
export async function newestRun(client) {
    const listed = await client.callTool({ name: 'runs_list', arguments: { limit: 1 } });
    return listed.structuredContent.runs[0].run_id;
}

/** Waits for run `runId` to end; its state. */
export async function endedState(client, runId, timeoutMs = 20_000) {
    return until(
        async () => {
            const got = await client.callTool({ name: 'runs_get', arguments: { run_id: runId } });
            const state = got.structuredContent.run.state;
            return ['pending', 'working', 'input_required'].includes(state) ? undefined : state;
        },
        { timeoutMs, what: `run ${runId} to end` }
    );
}

export { sleep };
