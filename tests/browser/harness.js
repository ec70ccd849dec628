// What the browser tests stand on: the gateway process (started, killed and restarted on
// the same port), psql for admin changes, JSON-RPC and /bits from node, Chromium through
// playwright-core, screenshots, and an independent decoder of the packed layout.

import { spawn, execFileSync } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { createWriteStream, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const here = dirname(fileURLToPath(import.meta.url));
export const root = join(here, '..', '..');
export const resultsDir = process.env.RESULTS_DIR ?? join(root, 'target', 'test-results', 'browser');
mkdirSync(resultsDir, { recursive: true });

const need = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set (run tests/browser/run.sh)`);
  return value;
};

/** The database the tests own (run.sh created it and the fixture in it). */
export function databaseUrl() {
  const url = new URL(need('PGPLACE_ADMIN_URL'));
  url.pathname = `/${process.env.BROWSER_DB ?? 'pgplace_browser'}`;
  return url.toString();
}

export const fixture = JSON.parse(readFileSync(join(resultsDir, 'fixture.json'), 'utf8'));

// Sign-in from an embedding site: the gateway takes JWTs of this issuer, signed with this
// HS256 secret, as a site's identity provider would sign them (`jwt`).
export const JWT_ISSUER = 'https://id.example';
const JWT_AUDIENCE = 'pgplace-browser';
const JWT_SECRET = 'the browser tests\' identity provider secret, 32 bytes or more';
const jwtSecretFile = join(resultsDir, 'jwt-secret');
writeFileSync(jwtSecretFile, JWT_SECRET);

/** A JWT for `sub` named `name`, expiring `expiresIn` seconds from now (negative: expired). */
export function jwt(sub, name, expiresIn = 600) {
  const part = (value) => Buffer.from(JSON.stringify(value)).toString('base64url');
  const exp = Math.floor(Date.now() / 1000) + expiresIn;
  const unsigned = `${part({ alg: 'HS256', typ: 'JWT' })}.${part({ iss: JWT_ISSUER, aud: JWT_AUDIENCE, sub, name, exp })}`;
  return `${unsigned}.${createHmac('sha256', JWT_SECRET).update(unsigned).digest('base64url')}`;
}

/** Runs SQL in the tests' database; returns psql's unaligned output. */
export function sql(text) {
  return execFileSync(need('PSQL'), [databaseUrl(), '-XAtq', '-v', 'ON_ERROR_STOP=1', '-c', text], {
    encoding: 'utf8',
  }).trim();
}

// ---- the gateway ---------------------------------------------------------------------------

export class Gateway {
  /** sessionBuffer: the gateway's --session-buffer (the tests' small default makes resets easy to cause). */
  constructor({ sessionBuffer = 500 } = {}) {
    this.process = null;
    this.port = 0;
    this.sessionBuffer = sessionBuffer;
    this.log = createWriteStream(join(resultsDir, 'gateway.log'), { flags: 'a' });
    // Never leave a gateway behind, however the tests end.
    process.on('exit', () => this.process?.kill('SIGKILL'));
  }

  get url() {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Starts the binary (on a free port the first time, on the same port after) and waits until /readyz says ok. */
  async start() {
    // A small session buffer: a page that stops polling for a while gets a `reset`.
    const args = ['--database-url', databaseUrl(), '--listen', `127.0.0.1:${this.port}`, '--session-buffer', String(this.sessionBuffer),
      // Visitors may play as guests on one board (page.test.js, guests), and sign in with a
      // site's JWTs.
      '--guest-boards', 'duo',
      // Pages of any origin may use it (page.test.js embeds a board from another origin).
      '--cors-origins', '*',
      '--jwt-issuer', JWT_ISSUER, '--jwt-audience', JWT_AUDIENCE, '--jwt-hs256-secret-file', jwtSecretFile];
    const child = spawn(need('GATEWAY_BIN'), args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, RUST_LOG: process.env.RUST_LOG ?? 'info' },
    });
    this.process = child;
    child.stderr.pipe(this.log, { end: false });
    const listening = new Promise((resolve, reject) => {
      let out = '';
      child.stdout.on('data', (chunk) => {
        this.log.write(chunk);
        out += chunk;
        const match = out.match(/listening on http:\/\/[^:]+:(\d+)\//);
        if (match) resolve(Number(match[1]));
      });
      child.on('exit', (code, signal) => reject(new Error(`the gateway exited (${code ?? signal}) before listening; see gateway.log`)));
    });
    this.port = await withTimeout(listening, 20000, 'the gateway did not start listening');
    const deadline = Date.now() + 20000;
    for (;;) {
      try {
        const response = await fetch(`${this.url}/readyz`);
        if (response.ok) return;
      } catch {}
      if (Date.now() > deadline) throw new Error('the gateway is not healthy after 20 s; see gateway.log');
      await sleep(100);
    }
  }

  /** SIGKILL: the process is gone at once, as in a crash. */
  async kill() {
    const child = this.process;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
    this.process = null;
  }

  /** SIGTERM, then SIGKILL if it lingers. */
  async stop() {
    const child = this.process;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    if (!(await Promise.race([exited.then(() => true), sleep(5000).then(() => false)]))) await this.kill();
    this.process = null;
  }

  async rpc(method, params) {
    const response = await fetch(`${this.url}/jsonrpc`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
    });
    const body = await response.json();
    if (body.error) {
      const error = new Error(`${method}: ${body.error.code} ${body.error.message}`);
      error.code = body.error.code;
      throw error;
    }
    return body.result;
  }

  /** GET /boards/{id}/bits → {seq, width, height, bitsPerTile, bytes}. */
  async bits(id) {
    const response = await fetch(`${this.url}/boards/${id}/bits`);
    if (!response.ok) throw new Error(`GET /boards/${id}/bits: ${response.status}`);
    const header = (name) => Number(response.headers.get(name));
    return {
      seq: header('x-pgplace-seq'),
      width: header('x-pgplace-width'),
      height: header('x-pgplace-height'),
      bitsPerTile: header('x-pgplace-bits-per-tile'),
      bytes: new Uint8Array(await response.arrayBuffer()),
    };
  }
}

// ---- the packed layout, decoded independently of the page's code ------------------------------------

/** Colour index of tile n: bits [n*k, (n+1)*k) from the most significant bit of byte 0. */
export function tileAt(bytes, bitsPerTile, n) {
  let value = 0;
  for (let i = 0; i < bitsPerTile; i++) {
    const bit = n * bitsPerTile + i;
    value = (value << 1) | ((bytes[bit >> 3] >> (7 - (bit & 7))) & 1);
  }
  return value;
}

/** The RGBA bytes a board should show: every tile's palette colour, opaque. */
export function expectedRgba(bits, palette) {
  const { width, height, bitsPerTile, bytes } = bits;
  const out = new Uint8Array(width * height * 4);
  for (let n = 0; n < width * height; n++) {
    const hex = palette[tileAt(bytes, bitsPerTile, n)];
    out.set([parseInt(hex.slice(1, 3), 16), parseInt(hex.slice(3, 5), 16), parseInt(hex.slice(5, 7), 16), 255], n * 4);
  }
  return out;
}

// ---- the browser ---------------------------------------------------------------------------------

export async function launchBrowser() {
  // playwright gives each launch a fresh temporary profile (user-data-dir) of its own.
  return chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

/** A page in a context of its own (its own localStorage), with console errors collected. */
export async function openPage(browser, url, options = {}) {
  // A first visit shows the help over the board; the other tests' visitors have seen it.
  const { firstVisit, ...contextOptions } = options;
  const context = await browser.newContext({ viewport: { width: 1000, height: 700 }, ...contextOptions });
  if (!firstVisit) await context.addInitScript(() => localStorage.setItem('pgplace.help-seen', '1'));
  const page = await context.newPage();
  page.errors = [];
  page.on('pageerror', (error) => page.errors.push(String(error)));
  page.on('console', (message) => {
    if (message.type() === 'error' && !/Failed to load resource|ERR_CONNECTION_REFUSED|ERR_EMPTY_RESPONSE|ERR_CONNECTION_RESET/.test(message.text())) {
      page.errors.push(message.text());
    }
  });
  await page.goto(url);
  return page;
}

let shots = 0;
/** Saves a screenshot as NN-name.png in the results folder; returns its path. */
export async function screenshot(page, name) {
  shots += 1;
  const path = join(resultsDir, `${String(shots).padStart(2, '0')}-${name}.png`);
  await page.screenshot({ path });
  return path;
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export function withTimeout(promise, ms, message) {
  let timer;
  return Promise.race([
    promise.finally(() => clearTimeout(timer)),
    new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(message)), ms); }),
  ]);
}
