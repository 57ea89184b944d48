// Shared helpers for driving the real `weir` binary with the official TypeScript MCP SDKs.
// Nothing here imports an SDK, so the 1.x and 2.x test files share it.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..');
export const WEIR_BIN = process.env.WEIR_BIN || join(repo, 'target', 'debug', 'weir');

// The streaming call every test makes: 200 partials of 100 bytes, 2 ms apart, with a
// progress notification every 2 items (the fixture reports ~100 times).
export const COUNT = 200;
export const SIZE = 100;
export const STREAM_ARGS = { count: COUNT, size: SIZE, interval_ms: 2, mode: 'text' };
// A call long enough to cancel in the middle of (10,000 items, 2 ms apart: ~20 s).
export const LONG_ARGS = { count: 10_000, size: 10, interval_ms: 2, mode: 'text' };

// `execute_code` on a Python program that prints LINES lines 200 ms apart, each stamped with
// the time it was printed: what a host sees of a running program.
export const LINES = 10;
export const PRINTER = [
    'import time',
    `for i in range(${LINES}):`,
    "    print(f'line {i} {time.time():.6f}', flush=True)",
    '    time.sleep(0.2)',
    ''
].join('\n');
export const EXEC_ARGS = { language: 'python', code: PRINTER };
// The bar for a progress-only client: this many notifications before the result,
// the first this soon after the program printed its first line.
export const MIN_LINE_PROGRESS = 5;
export const FIRST_PROGRESS_MS = 300;

/** [line number, time printed (Unix s)] of every line of PRINTER's output in `text`. */
export function printedLines(text) {
    return [...text.matchAll(/line (\d+) (\d+\.\d+)/g)].map(m => [Number(m[1]), Number(m[2])]);
}

/**
 * Checks what a client with only a progress token got from PRINTER: `progress` holds
 * `{ at (Unix ms), progress, message }` for each progress notification that reached the
 * client before the call resolved, `result` the CallToolResult. Returns the figures.
 */
export function checkLineProgress(progress, result) {
    assert.ok(!result.isError, `tool error: ${JSON.stringify(result.content)}`);
    const printed = printedLines(textsOf(result).join(''));
    assert.deepEqual(
        printed.map(([n]) => n),
        Array.from({ length: LINES }, (_, i) => i),
        'the result lacks the program\'s lines'
    );
    assert.ok(progress.length >= MIN_LINE_PROGRESS, `${progress.length} progress notifications before the result`);
    for (let i = 1; i < progress.length; i++) {
        assert.ok(progress[i].progress > progress[i - 1].progress, 'progress not strictly increasing');
    }
    const shown = progress.map(p => printedLines(p.message ?? ''));
    assert.ok(shown.every(lines => lines.length === 1), `a message without one line of output: ${JSON.stringify(progress)}`);
    const firstMs = progress[0].at - printed[0][1] * 1000;
    assert.ok(firstMs <= FIRST_PROGRESS_MS, `first progress ${Math.round(firstMs)} ms after the first line`);
    return { progress: progress.length, firstMs: Math.round(firstMs) };
}

/** With partial results declared, PRINTER's partials are what they were before progress was
 * counted from them: one per line of stdout, dense from seq 0, the lines in order. */
export function checkLinePartials(params, { token = PARTIAL_TOKEN } = {}) {
    assert.deepEqual(
        params.map(p => p.seq),
        params.map((_, i) => i),
        'partial seqs not dense'
    );
    assert.ok(params.every(p => p.partialResultToken === token));
    const texts = params.flatMap(p => p.content.map(block => block.text));
    assert.equal(texts.length, LINES, `${texts.length} partials for ${LINES} lines printed 200 ms apart`);
    assert.deepEqual(
        printedLines(texts.join('')).map(([n]) => n),
        Array.from({ length: LINES }, (_, i) => i)
    );
    assert.ok(params.every(p => p.structuredContent?.group === 'stdout'));
}

export const PARTIAL_METHOD = 'notifications/tools/partial_result';
export const CLIENT_CAPABILITIES_KEY = 'io.modelcontextprotocol/clientCapabilities';
export const RELATED_TASK_KEY = 'io.modelcontextprotocol/related-task';
export const PARTIAL_TOKEN = 'weir-partials';

/** Item `index` of the `stream` fixture in text mode: `00000042:xxxx…`, `size` bytes. */
export function itemText(index, size = SIZE) {
    const head = String(index).padStart(8, '0') + ':';
    return (head + 'x'.repeat(Math.max(0, size - head.length))).slice(0, size);
}

export function expectedItems(count = COUNT, size = SIZE) {
    return Array.from({ length: count }, (_, i) => itemText(i, size));
}

/** Command and arguments for an SDK's stdio transport to spawn. */
export function stdioServer() {
    return { command: WEIR_BIN, args: ['serve', '--stdio', '--fixtures', '--memory'] };
}

/** Every progress notification is strictly greater than the one before; the last is `count`
 * (sent before the result) and there are no more of them than the tool reported. */
export function checkProgress(values, count = COUNT) {
    assert.ok(values.length > 0, 'no progress notification arrived');
    for (let i = 1; i < values.length; i++) {
        assert.ok(values[i] > values[i - 1], `progress went from ${values[i - 1]} to ${values[i]}`);
    }
    // weir coalesces progress (at most one per ~20 ms of event time) but always sends the
    // newest before the result; the fixture reports every count/100 items.
    assert.equal(values.at(-1), count);
    assert.ok(values.length <= Math.min(count, 100), `${values.length} progress notifications`);
}

/** Partials are dense (seq 0..N-1, in order), carry the token, and together hold every item. */
export function checkPartials(params, { token = PARTIAL_TOKEN, count = COUNT, size = SIZE } = {}) {
    assert.deepEqual(
        params.map(p => p.seq),
        Array.from({ length: count }, (_, i) => i),
        'partial seqs are not dense 0..N-1 in order'
    );
    assert.ok(params.every(p => p.partialResultToken === token));
    const texts = params.flatMap(p => p.content.map(block => block.text));
    assert.deepEqual(texts, expectedItems(count, size), 'partials do not add up to the streamed items');
}

/**
 * Collects the progress values a TypeScript SDK received but dropped. Both SDKs (1.x and
 * 2.x) run notification handlers in a microtask but handle a response synchronously, and
 * the response removes the request's progress handler: a progress notification read in
 * the same chunk as the response (weir sends its newest progress right before the
 * result) reaches `onerror` as "a progress notification for an unknown token" instead
 * of `onprogress`. They are appended, in arrival order, after the values `onprogress` got.
 */
export function droppedProgress(client) {
    const dropped = [];
    const previous = client.onerror;
    client.onerror = error => {
        const match = /progress notification for an unknown token: (.*)$/s.exec(error?.message ?? '');
        if (match) dropped.push(JSON.parse(match[1]).params.progress);
        else previous?.(error);
    };
    return dropped;
}

export function textsOf(result) {
    return result.content.filter(block => block.type === 'text').map(block => block.text);
}

/** The final CallToolResult holds every item, then the summary, and `{count}`. */
export function checkFinal(result, { count = COUNT, size = SIZE } = {}) {
    assert.ok(!result.isError, `tool error: ${JSON.stringify(result.content?.slice(-1))}`);
    assert.deepEqual(textsOf(result), [...expectedItems(count, size), `streamed ${count} items`]);
    assert.deepEqual(result.structuredContent, { count });
}

/**
 * `weir serve --http 127.0.0.1:0 --fixtures` in a child process; resolves once it
 * printed its address. `stop()` SIGKILLs it. With `dataDir`, runs are stored in
 * DIR/weir.db (they survive a restart); otherwise `--memory`.
 */
export function startHttpServer({ dataDir } = {}) {
    const store = dataDir ? ['--data-dir', dataDir] : ['--memory'];
    const child = spawn(WEIR_BIN, ['serve', '--http', '127.0.0.1:0', '--fixtures', ...store], {
        stdio: ['ignore', 'ignore', 'pipe']
    });
    const stderr = [];
    const exited = new Promise(resolve => child.once('exit', resolve));
    const stop = async () => {
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
        await exited;
    };
    return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
            stop();
            reject(new Error(`weir did not report its address: ${stderr.join('\n')}`));
        }, 20_000);
        child.once('error', error => {
            clearTimeout(timer);
            reject(error);
        });
        exited.then(code => {
            clearTimeout(timer);
            reject(new Error(`weir exited (${code}) before serving: ${stderr.join('\n')}`));
        });
        createInterface({ input: child.stderr }).on('line', line => {
            stderr.push(line);
            const match = /serving MCP at (http:\/\/\S+\/mcp)/.exec(line);
            if (match) {
                clearTimeout(timer);
                resolve({ url: new URL(match[1]), stop, stderr, pid: child.pid });
            }
        });
    });
}

export function tempDir() {
    const dir = mkdtempSync(join(tmpdir(), 'weir-client-test-'));
    return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

export const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));

/** Polls `probe` until it returns a value other than undefined, or fails after `timeoutMs`. */
export async function until(probe, { timeoutMs = 10_000, everyMs = 50, what = 'condition' } = {}) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
        const value = await probe();
        if (value !== undefined) return value;
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
        await sleep(everyMs);
    }
}

/** The state of run `runId`, through weir's `runs_get` tool (any SDK's `callTool`). */
export async function runState(client, runId) {
    const result = await client.callTool({ name: 'runs_get', arguments: { run_id: runId } });
    return result.structuredContent.run.state;
}

/** The id of the one `stream` run the server has, through `runs_list`. */
export async function onlyStreamRun(client) {
    const listed = await client.callTool({ name: 'runs_list', arguments: { tool: 'stream' } });
    assert.equal(listed.structuredContent.runs.length, 1);
    return listed.structuredContent.runs[0].run_id;
}
