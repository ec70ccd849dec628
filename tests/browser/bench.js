// The web page's benchmark (issue 3), run by bench.sh (which creates the board and the
// users and writes fixture.json): on a 2000x2000 board,
//   1. time from page open (navigation start) to the first full board on screen, over
//      fresh page loads, quiet and with placements streaming in;
//   2. frame times while panning (mouse drag in circles) at several zoom levels, with
//      ~1,000 placements/s streaming in (psql calling place.place_many with 10 tiles every
//      10 ms), from the browser's own timing: requestAnimationFrame deltas (how often a
//      frame was produced) and window.pgplace.frames (the page's work per drawn frame);
//   3. that the page is in sync at the end (its board image equals GET /boards/{id}/bits);
//   4. with PGPLACE_BENCH_PROFILE=1 (the default) a CPU profile and a Chrome trace of the
//      page while panning, summarised.
// Prints tables; writes everything to target/bench-page/ (bench-page.json, *.cpuprofile,
// trace.json). Timing in the page comes from an init script (`instrument` below) that
// wraps putImageData, drawImage and fetch: it changes nothing the page does.

import { spawn } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { databaseUrl, fixture, Gateway, launchBrowser, resultsDir, sleep, sql, tileAt } from './harness.js';

const num = (name, value) => Number(process.env[name] ?? value);
const BOARD = fixture.bench.board;
const USERS = fixture.bench.users;
const RATE = num('PGPLACE_BENCH_RATE', 1000); // tiles per second
const PER_CALL = 10; // tiles per place_many (one every 10 ms at 1,000/s)
const PAN_SECONDS = num('PGPLACE_BENCH_PAN_SECONDS', 10);
const LOADS = num('PGPLACE_BENCH_LOADS', 5);
const PROFILE = num('PGPLACE_BENCH_PROFILE', 1) === 1;
const EXPERIMENT = num('PGPLACE_BENCH_EXPERIMENT', 1) === 1;
const VIEWPORT = { width: 1000, height: 700 };
const W = 2000, H = 2000;

// ---- in the page -------------------------------------------------------------------------

/** Runs before the page's scripts: timestamps (performance.now(), i.e. ms since navigation start). */
function instrument() {
  const b = (window.__bench = {
    fullPutAt: null, firstDrawAt: null, nextFrameAt: null, subscribe: null, minPollGap: 0,
    put: { calls: 0, pixels: 0 }, draws: 0, calls: {}, longTasks: [], raf: [], rafOn: false,
  });
  const C2D = CanvasRenderingContext2D.prototype;
  const put = C2D.putImageData;
  C2D.putImageData = function (image, dx, dy, ...dirty) {
    const result = put.call(this, image, dx, dy, ...dirty);
    b.put.calls++;
    b.put.pixels += dirty.length === 4 ? dirty[2] * dirty[3] : image.width * image.height;
    if (b.fullPutAt === null && dirty.length === 0) b.fullPutAt = performance.now();
    return result;
  };
  const draw = C2D.drawImage;
  C2D.drawImage = function (...args) {
    const result = draw.apply(this, args);
    if (this.canvas.isConnected) b.draws++;
    // The first draw of the board image (once it holds the whole board) onto the page.
    if (b.firstDrawAt === null && b.fullPutAt !== null && this.canvas.isConnected) {
      b.firstDrawAt = performance.now();
      // The next frame's callback: the frame with the board has been produced by then.
      requestAnimationFrame(() => { b.nextFrameAt = performance.now(); });
    }
    return result;
  };
  const fetch0 = window.fetch;
  window.fetch = async function (input, init) {
    let method = null;
    if (typeof init?.body === 'string') method = /"method":"([^"]+)"/.exec(init.body)?.[1] ?? null;
    const start = performance.now();
    // The experiment's second part: get_events no more often than every minPollGap ms.
    if (method === 'session.get_events' && b.minPollGap > 0) {
      const wait = (b.lastPoll ?? 0) + b.minPollGap - performance.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      b.lastPoll = performance.now();
    }
    const response = await fetch0.call(this, input, init);
    if (method) b.calls[method] = (b.calls[method] ?? 0) + 1;
    if (method === 'session.subscribe' && !b.subscribe) {
      const headersAt = performance.now();
      const json = response.json.bind(response);
      response.json = async () => {
        const value = await json();
        b.subscribe = { start, headersAt, parsedAt: performance.now() };
        return value;
      };
    }
    return response;
  };
  try {
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) b.longTasks.push(e.duration);
    }).observe({ type: 'longtask' });
  } catch {}
  b.startRaf = () => {
    b.raf = [];
    b.rafOn = true;
    const loop = (t) => {
      if (!b.rafOn) return;
      b.raf.push(t);
      requestAnimationFrame(loop);
    };
    requestAnimationFrame(loop);
  };
}

/**
 * The experiment (PGPLACE_BENCH_EXPERIMENT=1, after the measurements of the page as it is):
 * BoardImage.flush puts the bounding box of the tiles that arrived since the last frame;
 * random tiles on a big board make that box nearly the whole board every frame. This
 * version puts each tile's own 1x1 rectangle instead when the box is mostly untouched.
 */
function patchFlush() {
  const board = window.pgplace.board;
  const MISSING = 0xffff00ff; // #ff00ff packed little-endian, as the page does
  board.flush = function flush() {
    if (this.pending.length === 0 || !this.image) return;
    const { width, height, pixels, indexes, colors, pending } = this;
    let x0 = width, y0 = height, x1 = -1, y1 = -1, count = 0;
    for (const [x, y, color] of pending) {
      if (x < 0 || y < 0 || x >= width || y >= height) continue;
      const n = x + width * y;
      indexes[n] = color;
      pixels[n] = colors[color] ?? MISSING;
      count++;
      if (x < x0) x0 = x;
      if (x > x1) x1 = x;
      if (y < y0) y0 = y;
      if (y > y1) y1 = y;
    }
    this.pending = [];
    if (x1 < 0) return;
    const area = (x1 - x0 + 1) * (y1 - y0 + 1);
    if (area <= 64 * count || count > 1000) {
      this.ctx.putImageData(this.image, 0, 0, x0, y0, x1 - x0 + 1, y1 - y0 + 1);
    } else {
      for (const [x, y] of pending) {
        if (x >= 0 && y >= 0 && x < width && y < height) this.ctx.putImageData(this.image, 0, 0, x, y, 1, 1);
      }
    }
  };
}

// ---- the machine -------------------------------------------------------------------------------

const TICK = 100; // USER_HZ on Linux

function processes() {
  const list = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const close = stat.lastIndexOf(')');
      const comm = stat.slice(stat.indexOf('(') + 1, close);
      const f = stat.slice(close + 2).split(' ');
      list.push({ pid: Number(name), comm, ppid: Number(f[1]), ticks: Number(f[11]) + Number(f[12]) });
    } catch {}
  }
  return list;
}

/** CPU ticks used so far by each group of processes, and by the whole machine. */
function cpuSnapshot(pids) {
  const list = processes();
  const children = new Map();
  for (const p of list) children.set(p.ppid, [...(children.get(p.ppid) ?? []), p]);
  const tree = (pid) => {
    const out = [];
    const walk = (p) => { out.push(p); for (const c of children.get(p) ?? []) walk(c.pid); };
    walk(pid);
    return new Set(out);
  };
  // Chromium: whatever else this node process started (the gateway and psql are its children too).
  const skip = new Set([...tree(pids.gateway), ...tree(pids.streamer), process.pid]);
  const chromium = new Set([...tree(process.pid)].filter((pid) => !skip.has(pid)));
  const groups = { chromium: 0, gateway: 0, postgres: 0, streamer: 0, node: 0 };
  for (const p of list) {
    if (chromium.has(p.pid)) groups.chromium += p.ticks;
    else if (p.pid === pids.gateway) groups.gateway += p.ticks;
    else if (p.comm === 'postgres') groups.postgres += p.ticks;
    else if (p.pid === pids.streamer) groups.streamer += p.ticks;
    else if (p.pid === process.pid) groups.node += p.ticks;
  }
  const [, ...cpu] = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).map(Number);
  const idle = cpu[3] + cpu[4];
  const total = cpu.reduce((a, v) => a + v, 0);
  return { at: performance.now(), groups, busy: total - idle, total };
}

/** % of one core per group between two snapshots, and the machine's busy share. */
function cpuUse(a, b) {
  const seconds = (b.at - a.at) / 1000;
  const out = {};
  for (const k of Object.keys(a.groups)) out[k] = ((b.groups[k] - a.groups[k]) / TICK / seconds) * 100;
  // The whole machine, in % of one core too; `other` is what none of the groups used.
  out.machine = ((b.busy - a.busy) / (b.total - a.total)) * 100 * os.cpus().length;
  out.other = out.machine - Object.keys(a.groups).reduce((sum, k) => sum + out[k], 0);
  return out;
}

// ---- placements streaming in ----------------------------------------------------------------

/**
 * One psql process fed `SELECT count(*) FROM place.place_many(...)` statements, paced to
 * `rate` tiles/s (one call of PER_CALL random tiles from distinct random users per
 * 1000*PER_CALL/rate ms), with at most 4 calls in flight; psql prints one line per call.
 */
class Stream {
  constructor(rate) {
    this.rate = rate;
    this.sent = 0;
    this.done = 0;
    this.child = spawn(process.env.PSQL, [databaseUrl(), '-XAtq', '-v', 'ON_ERROR_STOP=1'], { stdio: ['pipe', 'pipe', 'pipe'] });
    this.child.stdout.on('data', (chunk) => { this.done += String(chunk).split('\n').length - 1; });
    this.errors = '';
    this.child.stderr.on('data', (chunk) => { this.errors += chunk; });
    this.exited = new Promise((resolve) => this.child.on('exit', resolve));
    this.running = false;
  }

  statement() {
    const users = new Set();
    while (users.size < PER_CALL) users.add(USERS[Math.floor(Math.random() * USERS.length)]);
    const xs = [], ys = [], cs = [];
    for (let i = 0; i < PER_CALL; i++) {
      xs.push(Math.floor(Math.random() * W));
      ys.push(Math.floor(Math.random() * H));
      cs.push(Math.floor(Math.random() * 16));
    }
    return `SELECT count(*) FROM place.place_many(${BOARD}, '{${[...users]}}', '{${xs}}', '{${ys}}', '{${cs}}');\n`;
  }

  start() {
    this.running = true;
    const t0 = performance.now();
    const sent0 = this.sent;
    const every = (1000 * PER_CALL) / this.rate;
    this.loop = (async () => {
      while (this.running) {
        const due = sent0 + Math.floor((performance.now() - t0) / every) + 1;
        while (this.sent < due && this.sent - this.done < 4) {
          this.child.stdin.write(this.statement());
          this.sent++;
        }
        if (this.child.exitCode !== null) throw new Error(`the streaming psql exited: ${this.errors}`);
        await sleep(2);
      }
    })();
  }

  /** Stops sending and waits until every call sent has returned. */
  async stop() {
    this.running = false;
    await this.loop;
    while (this.done < this.sent) await sleep(5);
  }

  mark() { return { at: performance.now(), tiles: this.done * PER_CALL }; }

  async close() {
    this.child.stdin.end();
    await this.exited;
  }
}

// ---- statistics -------------------------------------------------------------------------------

const quantile = (values, q) => {
  if (values.length === 0) return NaN;
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))];
};
const median = (values) => quantile(values, 0.5);
const f = (v, digits = 1) => (Number.isFinite(v) ? v.toFixed(digits) : '–');

function table(headers, rows) {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i]).length)));
  const line = (cells) => cells.map((c, i) => (i === 0 ? String(c).padEnd(widths[i]) : String(c).padStart(widths[i]))).join('  ');
  console.log(line(headers));
  console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  for (const r of rows) console.log(line(r));
}

// ---- 1. page open to first full board -----------------------------------------------------------

async function newPage(browser) {
  const context = await browser.newContext({ viewport: VIEWPORT });
  await context.addInitScript(instrument);
  const page = await context.newPage();
  page.errors = [];
  page.on('pageerror', (error) => page.errors.push(String(error)));
  // (A missing favicon is a "Failed to load resource" 404: not the page's fault.)
  page.on('console', (m) => { if (m.type() === 'error' && !/Failed to load resource/.test(m.text())) page.errors.push(m.text()); });
  return page;
}

async function loadOnce(browser, url) {
  const page = await newPage(browser);
  await page.goto(url, { waitUntil: 'commit' });
  await page.waitForFunction(() => window.__bench?.nextFrameAt != null, null, { timeout: 60000, polling: 50 });
  const r = await page.evaluate(() => {
    const b = window.__bench;
    const nav = performance.getEntriesByType('navigation')[0];
    // The subscription's answer is the biggest /jsonrpc response.
    const rpc = performance.getEntriesByType('resource').filter((e) => e.name.endsWith('/jsonrpc'));
    const big = rpc.reduce((a, e) => (e.encodedBodySize > (a?.encodedBodySize ?? -1) ? e : a), null);
    return {
      domContentLoaded: nav.domContentLoadedEventEnd,
      subscribeStart: b.subscribe.start,
      firstByte: big.responseStart,
      responseEnd: big.responseEnd,
      parsed: b.subscribe.parsedAt,
      fullPut: b.fullPutAt,
      firstDraw: b.firstDrawAt,
      nextFrame: b.nextFrameAt,
      bytes: big.encodedBodySize,
      zoom: window.pgplace.view.zoom,
    };
  });
  const errors = page.errors;
  await page.context().close();
  if (errors.length) throw new Error(`page errors: ${errors.join('; ')}`);
  return r;
}

async function measureLoads(browser, url, label) {
  const runs = [];
  for (let i = 0; i < LOADS; i++) runs.push(await loadOnce(browser, url));
  return { label, runs };
}

// ---- 2. panning --------------------------------------------------------------------------------

/** Drags the board in circles (one turn per 2 s) for `seconds`, a move every ~16 ms. */
async function pan(page, seconds) {
  const box = await page.locator('#view').boundingBox();
  const cx = box.x + box.width / 2, cy = box.y + box.height / 2, r = Math.min(box.width, box.height) * 0.2;
  await page.mouse.move(cx + r, cy);
  await page.mouse.down();
  const t0 = performance.now();
  let moves = 0;
  for (let now = 0; now < seconds * 1000; now = performance.now() - t0) {
    const a = (now / 2000) * 2 * Math.PI;
    await page.mouse.move(cx + r * Math.cos(a), cy + r * Math.sin(a));
    moves++;
    const wait = t0 + moves * 16 - performance.now();
    if (wait > 0) await sleep(wait);
  }
  await page.mouse.up();
  return moves / ((performance.now() - t0) / 1000);
}

/** One phase: the view at `zoom` (null = fit), panned (or not) for PAN_SECONDS, measured. */
async function phase(page, stream, pids, { label, zoom, panning, streaming, minPollGap = 0 }) {
  await page.evaluate((gap) => { window.__bench.minPollGap = gap; }, minPollGap);
  await page.evaluate((zoom) => {
    const { view } = window.pgplace;
    if (zoom === null) view.fit();
    else view.set(1000, 1000, zoom);
  }, zoom);
  await sleep(300);
  if (streaming && !stream.running) stream.start();
  if (!streaming && stream.running) await stream.stop();
  await sleep(streaming ? 1000 : 300);
  await page.evaluate(() => {
    const b = window.__bench;
    window.pgplace.frames.length = 0;
    b.longTasks = [];
    b.put = { calls: 0, pixels: 0 };
    b.draws = 0;
    b.calls = {};
    b.seq0 = window.pgplace.live.seq;
    b.startRaf();
  });
  const cpu0 = cpuSnapshot(pids);
  const s0 = stream.mark();
  const t0 = performance.now();
  let movesPerSecond = 0;
  if (panning) movesPerSecond = await pan(page, PAN_SECONDS);
  else await sleep(PAN_SECONDS * 1000);
  const seconds = (performance.now() - t0) / 1000;
  const s1 = stream.mark();
  const cpu1 = cpuSnapshot(pids);
  const got = await page.evaluate(() => {
    const b = window.__bench;
    b.rafOn = false;
    return {
      raf: b.raf, work: [...window.pgplace.frames], longTasks: b.longTasks, put: b.put, draws: b.draws,
      calls: b.calls, tilesApplied: window.pgplace.live.seq - b.seq0, seq: window.pgplace.live.seq,
    };
  });
  const expectedSeq = fixture.bench.seq + stream.done * PER_CALL;
  const deltas = got.raf.slice(1).map((t, i) => t - got.raf[i]);
  const interval = median(deltas); // the display's frame interval as Chromium runs it
  let dropped = 0;
  for (const d of deltas) dropped += Math.max(0, Math.round(d / interval) - 1);
  return {
    label, zoom: await page.evaluate(() => window.pgplace.view.zoom), panning, streaming, seconds,
    rate: ((s1.tiles - s0.tiles) / (s1.at - s0.at)) * 1000,
    movesPerSecond,
    frames: got.raf.length,
    fps: got.raf.length / seconds,
    interval,
    p50: median(deltas), p99: quantile(deltas, 0.99), max: Math.max(...deltas),
    droppedShare: (dropped / (dropped + deltas.length)) * 100,
    drawn: got.work.length,
    workP50: median(got.work), workP99: quantile(got.work, 0.99),
    putPixelsPerDraw: got.put.pixels / Math.max(1, got.put.calls),
    putCallsPerSecond: got.put.calls / seconds,
    longTasks: got.longTasks.length,
    longTaskMs: got.longTasks.reduce((a, v) => a + v, 0),
    getEventsPerSecond: (got.calls['session.get_events'] ?? 0) / seconds,
    tilesAppliedPerSecond: got.tilesApplied / seconds,
    lag: expectedSeq - got.seq,
    cpu: cpuUse(cpu0, cpu1),
  };
}

// ---- 3. in sync ------------------------------------------------------------------------------

/** Waits until the page has the database's seq, then compares every tile with /bits. */
async function checkSync(page, gateway) {
  const seq = Number(sql(`SELECT seq FROM place.boards WHERE id = ${BOARD}`));
  const t0 = performance.now();
  await page.waitForFunction((seq) => window.pgplace.live.seq >= seq && window.pgplace.board.pending.length === 0, seq, { timeout: 30000 });
  const catchUp = performance.now() - t0;
  await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => resolve())));
  const { palette } = await gateway.rpc('board.get', { board: BOARD });
  const bits = await gateway.bits(BOARD);
  // The board image's pixels as palette indexes (255 = a colour not in the palette).
  const shown = Buffer.from(await page.evaluate((palette) => {
    const { canvas } = window.pgplace.board;
    const data = new Uint32Array(canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data.buffer);
    const lookup = new Map(palette.map((hex, i) => {
      const rgba = new Uint8Array([1, 3, 5].map((o) => parseInt(hex.slice(o, o + 2), 16)).concat(255));
      return [new Uint32Array(rgba.buffer)[0], i];
    }));
    const out = new Uint8Array(data.length);
    for (let n = 0; n < data.length; n++) out[n] = lookup.get(data[n]) ?? 255;
    let text = '';
    for (let i = 0; i < out.length; i += 0x8000) text += String.fromCharCode(...out.subarray(i, i + 0x8000));
    return btoa(text);
  }, palette), 'base64');
  let wrong = 0;
  const examples = [];
  for (let n = 0; n < bits.width * bits.height; n++) {
    const want = tileAt(bits.bytes, bits.bitsPerTile, n);
    if (shown[n] !== want) {
      wrong++;
      if (examples.length < 5) examples.push(`(${n % bits.width}, ${Math.floor(n / bits.width)}): page ${shown[n]} bits ${want}`);
    }
  }
  const pageSeq = await page.evaluate(() => window.pgplace.live.seq);
  return { dbSeq: seq, bitsSeq: bits.seq, pageSeq, catchUp, wrong, examples, stats: await page.evaluate(() => window.pgplace.live.stats) };
}

// ---- 4. where the time goes ---------------------------------------------------------------------

/** A CPU profile of the page's main thread while panning: self time by function. */
async function profile(page, label, seconds) {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Profiler.enable');
  await cdp.send('Profiler.setSamplingInterval', { interval: 200 });
  await cdp.send('Profiler.start');
  await pan(page, seconds);
  const { profile: p } = await cdp.send('Profiler.stop');
  await cdp.detach();
  writeFileSync(join(resultsDir, `${label}.cpuprofile`), JSON.stringify(p));
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const self = new Map();
  let total = 0;
  p.samples.forEach((id, i) => {
    const n = byId.get(id);
    const { functionName, url, lineNumber } = n.callFrame;
    const key = `${functionName || '(anonymous)'} ${url ? `${url.replace(/^.*\/\/[^/]+/, '')}:${lineNumber + 1}` : ''}`.trim();
    const dt = p.timeDeltas[i] / 1000;
    self.set(key, (self.get(key) ?? 0) + dt);
    total += dt;
  });
  return { label, total, top: [...self.entries()].sort((a, b) => b[1] - a[1]).slice(0, 10) };
}

/** A Chrome trace while panning: time by event name and thread (inclusive, complete events). */
async function trace(browser, page, seconds) {
  await browser.startTracing(page, {
    categories: ['devtools.timeline', 'disabled-by-default-devtools.timeline', 'blink', 'cc', 'gpu', 'viz', 'toplevel'],
  });
  await pan(page, seconds);
  const buffer = await browser.stopTracing();
  writeFileSync(join(resultsDir, 'trace.json'), buffer);
  const { traceEvents } = JSON.parse(buffer.toString());
  const threads = new Map();
  for (const e of traceEvents) if (e.ph === 'M' && e.name === 'thread_name') threads.set(`${e.pid}:${e.tid}`, e.args.name);
  // Self time: an event's duration minus that of the events nested in it on its thread.
  const byThread = new Map();
  for (const e of traceEvents) {
    if (e.ph !== 'X' || !e.dur) continue;
    const t = `${e.pid}:${e.tid}`;
    if (!byThread.has(t)) byThread.set(t, []);
    byThread.get(t).push(e);
  }
  const sums = new Map();
  for (const [t, events] of byThread) {
    const thread = (threads.get(t) ?? '?').replace(/\d+$/, '');
    events.sort((a, b) => a.ts - b.ts || b.dur - a.dur);
    const stack = [];
    for (const e of events) {
      while (stack.length && stack.at(-1).ts + stack.at(-1).dur <= e.ts) stack.pop();
      e.self = e.dur;
      if (stack.length) stack.at(-1).self -= e.dur;
      stack.push(e);
    }
    for (const e of events) {
      const key = `${thread}: ${e.name}`;
      sums.set(key, (sums.get(key) ?? 0) + Math.max(0, e.self) / 1000);
    }
  }
  return [...sums.entries()].sort((a, b) => b[1] - a[1]).slice(0, 15).map(([k, ms]) => [k, ms / seconds]);
}

// ---- the run -------------------------------------------------------------------------------------

const before = os.loadavg();
const gateway = new Gateway({ sessionBuffer: 20000 });
await gateway.start();
const browser = await launchBrowser();
const chromiumVersion = browser.version();
const url = `${gateway.url}/#board=bench`;
const stream = new Stream(RATE);
const pids = { gateway: gateway.process.pid, streamer: stream.child.pid };
const results = { machine: {}, loads: [], phases: [], sync: null, profiles: [], trace: null };
let failed = false;

try {
  console.log(`bench-page: gateway ${gateway.url}, Chromium ${chromiumVersion} headless (--disable-gpu), viewport ${VIEWPORT.width}x${VIEWPORT.height}`);
  // Warm up (the gateway's board copy, Chromium's caches), then the loads.
  await loadOnce(browser, url);
  results.loads.push(await measureLoads(browser, url, 'quiet'));
  stream.start();
  await sleep(1000);
  results.loads.push(await measureLoads(browser, url, `${RATE} tiles/s streaming`));
  await stream.stop();

  const page = await newPage(browser);
  await page.goto(url);
  await page.waitForFunction(() => window.__bench?.nextFrameAt != null && document.body.dataset.status === 'live', null, { timeout: 60000 });
  const phases = [
    { label: 'idle fit, quiet', zoom: null, panning: false, streaming: false },
    { label: 'pan 1x, quiet', zoom: 1, panning: true, streaming: false },
    { label: 'idle fit, stream', zoom: null, panning: false, streaming: true },
    { label: 'pan fit, stream', zoom: null, panning: true, streaming: true },
    { label: 'pan 1x, stream', zoom: 1, panning: true, streaming: true },
    { label: 'pan 8x, stream', zoom: 8, panning: true, streaming: true },
    { label: 'pan 40x, stream', zoom: 40, panning: true, streaming: true },
  ];
  for (const p of phases) {
    process.stdout.write(`bench-page: ${p.label} …\n`);
    results.phases.push(await phase(page, stream, pids, p));
  }
  if (PROFILE) {
    for (const [label, zoom] of [['profile-fit', null], ['profile-8x', 8]]) {
      await page.evaluate((zoom) => (zoom === null ? window.pgplace.view.fit() : window.pgplace.view.set(1000, 1000, zoom)), zoom);
      results.profiles.push(await profile(page, label, 5));
    }
    await page.evaluate(() => window.pgplace.view.fit());
    results.trace = await trace(browser, page, 4);
  }
  await stream.stop();
  results.sync = await checkSync(page, gateway);
  if (EXPERIMENT) {
    await page.evaluate(patchFlush);
    for (const p of [
      { label: 'idle fit, stream, 1x1 puts', zoom: null, panning: false, streaming: true },
      { label: 'pan fit, stream, 1x1 puts', zoom: null, panning: true, streaming: true },
      { label: 'pan 8x, stream, 1x1 puts', zoom: 8, panning: true, streaming: true },
      { label: 'idle fit, stream, 1x1 puts, polls 50 ms apart', zoom: null, panning: false, streaming: true, minPollGap: 50 },
      { label: 'pan fit, stream, 1x1 puts, polls 50 ms apart', zoom: null, panning: true, streaming: true, minPollGap: 50 },
    ]) {
      process.stdout.write(`bench-page: ${p.label} (experiment) …\n`);
      results.phases.push(await phase(page, stream, pids, p));
    }
    if (PROFILE) {
      await page.evaluate(() => { window.__bench.minPollGap = 0; window.pgplace.view.fit(); });
      results.profiles.push(await profile(page, 'profile-fit-1x1-puts', 5));
    }
    await stream.stop();
    await page.evaluate(() => { window.__bench.minPollGap = 0; });
    results.experimentSync = await checkSync(page, gateway);
    if (results.experimentSync.wrong > 0) failed = true;
  }
  results.pageErrors = page.errors;
  if (results.sync.wrong > 0 || page.errors.length) failed = true;
} finally {
  await stream.close().catch(() => {});
  await browser.close().catch(() => {});
  await gateway.stop();
}

// ---- the report -----------------------------------------------------------------------------------

const cpuModel = os.cpus()[0]?.model ?? '?';
results.machine = { cores: os.cpus().length, cpuModel, loadBefore: before, loadAfter: os.loadavg(), chromiumVersion };
writeFileSync(join(resultsDir, 'bench-page.json'), JSON.stringify(results, null, 2));

console.log('');
console.log(`pgplace page benchmark: ${W}x${H} board, 4 bits/tile, ${fixture.bench.painted} tiles pre-painted, ${USERS.length} users`);
console.log(`machine: ${os.cpus().length} cores (${cpuModel}), ${Math.round(os.totalmem() / 2 ** 30)} GiB, load average ${before.map((v) => v.toFixed(2)).join(' ')} before, ${os.loadavg().map((v) => v.toFixed(2)).join(' ')} after;`);
console.log(`  Chromium ${chromiumVersion} headless, --disable-gpu (software raster), shares the cores with PostgreSQL, the gateway, psql and node.`);
console.log('');
console.log(`1. Page open (navigation start) → first full board on screen: median [min–max] of ${LOADS} fresh page loads, ms`);
const loadRow = (name, pick) => [name, ...results.loads.map((l) => {
  const v = l.runs.map(pick);
  return `${f(median(v), 0)} [${f(Math.min(...v), 0)}–${f(Math.max(...v), 0)}]`;
})];
table(['', ...results.loads.map((l) => l.label)], [
  loadRow('DOMContentLoaded', (r) => r.domContentLoaded),
  loadRow('session.subscribe sent', (r) => r.subscribeStart),
  loadRow('  its first byte', (r) => r.firstByte),
  loadRow('  its last byte', (r) => r.responseEnd),
  loadRow('  JSON parsed', (r) => r.parsed),
  loadRow('whole board put in the image', (r) => r.fullPut),
  loadRow('FIRST FULL BOARD DRAWN', (r) => r.firstDraw),
  loadRow('  next frame begins', (r) => r.nextFrame),
]);
console.log(`  (the subscription's answer is ${(results.loads[0].runs[0].bytes / 1e6).toFixed(2)} MB of JSON, the board as base64 inside; zoom to fit = ${f(results.loads[0].runs[0].zoom, 3)})`);
console.log('');
console.log(`2. Frame times (requestAnimationFrame deltas in the page; the page's own work per drawn frame from window.pgplace.frames), ${PAN_SECONDS} s each`);
table(['phase', 'zoom', 'tiles/s', 'moves/s', 'fps', 'p50 ms', 'p99 ms', 'max ms', 'dropped', 'drawn', 'work p50', 'work p99', 'put px/call', 'long tasks', 'polls/s', 'lag seq'],
  results.phases.map((p) => [p.label, f(p.zoom, 2), f(p.rate, 0), f(p.movesPerSecond, 0), f(p.fps, 1), f(p.p50), f(p.p99), f(p.max, 0),
    `${f(p.droppedShare)}%`, p.drawn, f(p.workP50, 2), f(p.workP99, 2), f(p.putPixelsPerDraw, 0), `${p.longTasks} (${f(p.longTaskMs, 0)} ms)`,
    f(p.getEventsPerSecond, 0), p.lag]));
console.log('  dropped = frames missing between rAF callbacks (delta / median interval − 1) over all frame slots;');
console.log('  drawn = frames the page drew (flush + draw); work = ms of script per drawn frame; put px/call = pixels per putImageData;');
console.log('  polls/s = session.get_events calls; lag seq = placements committed but not yet applied by the page at the end of the phase.');
console.log('');
console.log(`   CPU during each phase, % of one core (the machine has ${os.cpus().length} cores = ${os.cpus().length * 100}%; other = anything else on the machine)`);
table(['phase', 'chromium', 'gateway', 'postgres', 'psql', 'node (driver)', 'other', 'machine'],
  results.phases.map((p) => [p.label, f(p.cpu.chromium, 0), f(p.cpu.gateway, 0), f(p.cpu.postgres, 0), f(p.cpu.streamer, 0), f(p.cpu.node, 0), f(p.cpu.other, 0), f(p.cpu.machine, 0)]));
console.log('');
const s = results.sync;
console.log(`3. In sync: after the stream stopped the page reached seq ${s.pageSeq} (database ${s.dbSeq}, /bits ${s.bitsSeq}) in ${f(s.catchUp, 0)} ms; ` +
  `${s.wrong} of ${W * H} tiles differ from /bits${s.wrong ? `: ${s.examples.join('; ')}` : ''}.`);
console.log(`   live.stats: ${JSON.stringify(s.stats)}; page errors: ${results.pageErrors.length ? results.pageErrors.join('; ') : 'none'}`);
if (EXPERIMENT) {
  const e = results.experimentSync;
  console.log(`   The "1x1 puts" rows are an experiment: BoardImage.flush replaced in the page (bench.js, patchFlush) by one that puts each`);
  console.log(`   new tile's 1x1 rectangle instead of their bounding box ("polls 50 ms apart": also session.get_events delayed to start`);
  console.log(`   at least 50 ms after the previous one, in a fetch wrapper); afterwards the page reached seq ${e.pageSeq} (database ${e.dbSeq}) ` +
    `in ${f(e.catchUp, 0)} ms and ${e.wrong} tiles differ from /bits.`);
}
if (PROFILE) {
  console.log('');
  console.log('4. Where the page\'s main thread spends its time while panning with the stream on (CPU profile, self time, ms per second)');
  for (const p of results.profiles) {
    console.log(`   ${p.label} (target/bench-page/${p.label}.cpuprofile):`);
    for (const [name, ms] of p.top) console.log(`     ${f(ms / 5, 1).padStart(6)}  ${name}`);
    console.log(`     ${f(p.total / 5, 1).padStart(6)}  (all samples)`);
  }
  console.log('   Chrome trace, panning at fit with the stream on (target/bench-page/trace.json): self ms per second by thread and event');
  for (const [name, ms] of results.trace) console.log(`     ${f(ms, 1).padStart(6)}  ${name}`);
}
if (failed) {
  console.error('bench-page: the page was not in sync with /bits, or had script errors');
  process.exit(1);
}
