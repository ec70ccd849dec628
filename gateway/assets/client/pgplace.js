// pgplace's client for any page: the protocol (sessions, subscriptions, the resumable
// event stream, signing in, placing) as one ES module at a stable path, for a site that
// embeds a board or a list view in a few lines:
//
//   <script type="module">
//     import { Stream } from '/client/pgplace.js';  // another site: the gateway's URL of it
//     const stream = new Stream();
//     const [key, state] = await stream.subscribe('board', { board: 'demo', compact: true });
//     stream.listen((events) => { /* each event once, in order: tiles, settings, ... */ },
//                   (key, state) => { /* a view started over: its whole state again */ });
//     await stream.authorize(token);               // a pgplace token, or your site's JWT
//     await stream.place('demo', 10, 20, 5);       // {placed, seq, next_allowed_at}
//   </script>
//
// The gateway must list the embedding site's origin in --cors-origins. Events are those of
// gateway/README.md ("JSON-RPC"); every answer is acknowledged with its cursor, so an
// answer lost on the way comes again and none comes twice, on whichever gateway answers.
// A session that expired (the page slept, the gateways restarted) is made again with its
// subscriptions: each view then starts over with its state (`onState`).
//
// The page of the gateway is built on the same parts (it imports them from here).

import { api, call, CODES, describe, RpcError } from '../js/api.js';

export { api, call, CODES, describe, RpcError };
export { Live } from '../js/live.js';

/** How long one poll waits for events (seconds). */
const POLL_SECONDS = 25;

/** One session and its subscriptions, and the stream of their events. */
export class Stream {
  constructor() {
    this.session = null;
    this.cursor = '';
    this.views = [];
    this.token = null;
    this.listeners = [];
    this.running = false;
  }

  /** Subscribes to a view (`board`, `board_region`, `recent_placements`, a list view's
   * name) with its params: resolves with `[key, state]`. */
  async subscribe(view, params = {}) {
    await this.ensureSession();
    const reply = await call('session.subscribe', { session: this.session, view, params });
    this.views.push({ view, params });
    return reply;
  }

  /** Calls `onEvents(events)` with every answer's events, in order, until `close`;
   * `onState(key, state)` when a view starts over. Returns a function that stops it. */
  listen(onEvents, onState = () => {}) {
    const listener = { onEvents, onState };
    this.listeners.push(listener);
    if (!this.running) this.run();
    return () => { this.listeners = this.listeners.filter((l) => l !== listener); };
  }

  /** Signs the session in: a pgplace token, or a JWT of the site (`--jwt-issuer`). */
  async authorize(token) {
    await this.ensureSession();
    this.token = token;
    return call('session.authorize', { session: this.session, token });
  }

  /** Places a tile as the signed-in user. */
  async place(board, x, y, color) {
    await this.ensureSession();
    return call('board.place', { session: this.session, board, x, y, color });
  }

  /** Ends the stream and its session. */
  close() {
    this.running = false;
    if (this.session) api.destroy(this.session).catch(() => {});
    this.session = null;
  }

  async ensureSession() {
    if (!this.session) {
      this.session = await api.createSession();
      this.cursor = '';
    }
  }

  /** The session expired: a new one, signed in again, with every view again. */
  async renew() {
    this.session = null;
    await this.ensureSession();
    if (this.token) await call('session.authorize', { session: this.session, token: this.token });
    for (const { view, params } of this.views) {
      const [key, state] = await call('session.subscribe', { session: this.session, view, params });
      for (const l of this.listeners) l.onState(key, state);
    }
  }

  async run() {
    this.running = true;
    while (this.running) {
      try {
        await this.ensureSession();
        const answer = await api.getEvents(this.session, POLL_SECONDS, this.cursor);
        if (!this.running) break;
        this.cursor = answer.cursor;
        if (answer.events.length) for (const l of this.listeners) l.onEvents(answer.events);
      } catch (error) {
        if (!this.running) break;
        if (error instanceof RpcError && error.code === CODES.UNKNOWN_SESSION) {
          await this.renew().catch(() => {});
        } else {
          await new Promise((resolve) => setTimeout(resolve, 1000));
        }
      }
    }
  }
}
