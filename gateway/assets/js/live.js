// The page's connection to the gateway: one session, authorized with the stored token,
// subscribed to one board's compact view, and a loop of session.get_events.
//
// Versions keep the picture right: the subscription answers a state with its seq, and
// each `tiles` event says which seqs it carries, so tiles already applied are skipped and a
// gap (never expected) makes the page subscribe again. On any error the loop backs off
// (with jitter) and tries again; an unknown session (the gateway restarted, or the session
// expired) means: create a new one, authorize again, subscribe again, and draw the fresh
// state in place of the old one.

import { api, CODES, RpcError } from './api.js';

const POLL_SECONDS = 25;
// See `pace`.
const MIN_POLL_MS = 50;
const BACKOFF_FIRST_MS = 250;
const BACKOFF_MAX_MS = 8000;

export class Live {
  /**
   * handlers: state(state) (a whole board: draw it instead of anything shown),
   * tiles([[x, y, color], ...]), frozen([[x, y], ...]) (frozen from now on), watching(n),
   * cursors([{id, x, y, name}]) (where the others point),
   * settings(settings), deleted(), status(name, error), user({user_id, name} | null),
   * authFailed(error).
   */
  constructor(handlers, getToken) {
    this.on = handlers;
    this.getToken = getToken;
    this.session = null;
    this.user = null;
    this.board = null; // the id or name asked for
    this.boardId = null; // the subscribed board's id
    this.key = null;
    this.seq = 0;
    this.subscribed = null; // the board the subscription is for
    this.region = null; // the rectangle to follow instead of the whole board (showRegion)
    this.subscribedRegion = null; // the rectangle the subscription is for, or null
    this.poll = null;
    this.running = false;
    this.wake = null;
    this.liveWaiters = [];
    // What arrived, for tests and for curious people in the console.
    this.stats = { sessions: 0, states: 0, resumed: 0, resets: 0, tileEvents: 0, tiles: 0, settings: 0, frozenEvents: 0, frozenTiles: 0 };
    this.layout = null; // width, height, bits_per_tile of the shown state
  }

  /** Shows `board` (an id or a name) from now on. */
  show(board) {
    this.board = board;
    this.poll?.abort();
    this.wake?.();
    if (!this.running) {
      this.running = true;
      this.loop();
    }
  }

  /** Follows only `rect` ({x, y, width, height}) of the shown board from now on (a
   * `board_region` view: the gateway sends nothing from elsewhere), or the whole board
   * again (null). */
  showRegion(rect) {
    if (sameRect(rect, this.region)) return;
    this.region = rect;
    this.poll?.abort();
    this.wake?.();
  }

  /** Forces a fresh session (used by tests and after a sign-out). */
  restart() {
    this.session = null;
    this.key = null;
    this.poll?.abort();
    this.wake?.();
  }

  async loop() {
    let failures = 0;
    for (;;) {
      try {
        if (!this.session) await this.connect();
        if (this.subscribed !== this.board || !sameRect(this.subscribedRegion, this.region)) await this.subscribe();
        if (!this.key) {
          // The board was deleted: wait until another board is chosen.
          await new Promise((resolve) => { this.wake = resolve; });
          continue;
        }
        this.on.status('live');
        for (const resolve of this.liveWaiters.splice(0)) resolve();
        failures = 0;
        await this.pace();
        // Another board or region chosen while paced (which only woke the pause): subscribe
        // to it first, or this poll would wait on the old one with nobody to abort it.
        if (this.subscribed !== this.board || !sameRect(this.subscribedRegion, this.region)) continue;
        this.poll = new AbortController();
        this.pollStarted = performance.now();
        const answer = await api.getEvents(this.session, POLL_SECONDS, this.cursor, this.poll.signal);
        this.poll = null;
        this.cursor = answer.cursor;
        this.handle(answer.events);
      } catch (error) {
        this.poll = null;
        // Aborted or not: the cursor stays, so whatever that poll held comes with the next.
        if (error?.name === 'AbortError') continue;
        if (error instanceof RpcError && error.code === CODES.INVALID_PARAMS && this.cursor) {
          // Not a cursor the gateway accepts (never expected): start the session over.
          this.session = null;
          this.subscribed = null;
          continue;
        }
        if (error instanceof RpcError && error.code === CODES.UNKNOWN_SESSION) {
          this.session = null;
          this.subscribed = null;
          // The first time, at once: the gateway is answering, only the session is gone.
          if (failures++ === 0) continue;
        } else {
          failures++;
        }
        if (error instanceof RpcError && error.code === CODES.UNKNOWN_BOARD) {
          this.key = null;
          this.subscribed = this.board;
          this.on.status('error', error);
          continue;
        }
        this.on.status('reconnecting', error);
        const ms = Math.min(BACKOFF_MAX_MS, BACKOFF_FIRST_MS * 2 ** (failures - 1));
        await this.sleep(ms * (0.5 + Math.random() / 2));
      }
    }
  }

  /** Starts polls at least MIN_POLL_MS apart: on a busy board each poll returns at once,
   * and the gateway keeps what arrives meanwhile, so fewer, fuller answers cost the page
   * (and the gateway) far less for at most MIN_POLL_MS more latency. */
  async pace() {
    const wait = (this.pollStarted ?? -Infinity) + MIN_POLL_MS - performance.now();
    if (wait > 0) await this.sleep(wait);
  }

  sleep(ms) {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.wake = () => { clearTimeout(timer); resolve(); };
    });
  }

  async connect() {
    this.on.status('connecting');
    this.session = await api.createSession();
    this.cursor = '';
    this.stats.sessions++;
    this.subscribed = null;
    this.key = null;
    await this.authorize();
  }

  /** Binds the stored token's user to the session (if there is a token). */
  async authorize() {
    const token = this.getToken();
    if (!token || !this.session) {
      this.user = null;
      this.on.user(null);
      return;
    }
    try {
      this.user = await api.authorize(this.session, token);
      this.on.user(this.user);
    } catch (error) {
      if (error instanceof RpcError && error.code === CODES.NOT_AUTHORIZED) {
        this.user = null;
        this.on.authFailed(error);
        return;
      }
      throw error;
    }
  }

  /** The page is closing: ends the session now instead of leaving it to expire. (A page
   * restored from the back-forward cache finds it gone and starts a new one.) */
  leave() {
    if (this.session) api.leave(this.session);
  }

  /** Signs the session in as a new guest on `board` (one that takes guests); resolves
   * with the guest `{user_id, name, token}`, whose token signs in again later. */
  async playAsGuest(board) {
    const guest = await api.playAsGuest(this.session, board);
    this.user = { user_id: guest.user_id, name: guest.name, guest: true };
    this.on.user(this.user);
    return guest;
  }

  async subscribe() {
    const board = this.board;
    // A region belongs to the board it was chosen on.
    const region = this.subscribed === board || this.subscribed === null ? this.region : null;
    if (this.key) api.unsubscribe(this.session, this.key).catch(() => {});
    this.key = null;
    // A board kept by the page before it was reloaded continues from its seq.
    const kept = region ? null : this.on.keptBoard?.(board) ?? null;
    let [key, state] = region
      ? await api.subscribeRegion(this.session, board, region)
      : await api.subscribe(this.session, board, kept?.seq);
    if (state.resumed && kept) {
      state = kept;
      this.stats.resumed++;
    }
    this.key = key;
    this.subscribed = board;
    this.subscribedRegion = region;
    if (!region) this.region = null;
    this.boardId = state.id;
    this.seq = state.seq;
    this.layout = layoutOf(state);
    this.stats.states++;
    this.on.state(state);
  }

  handle(events) {
    for (const event of events) {
      if (event.key !== this.key) continue;
      switch (event.action) {
        case 'tiles': {
          const [first, last] = event.seq;
          if (last <= this.seq) break;
          if (first > this.seq + 1) {
            this.subscribed = null; // a gap: start again from a fresh state
            return;
          }
          const fresh = event.tiles.slice(this.seq + 1 - first);
          this.stats.tileEvents++;
          this.stats.tiles += fresh.length;
          this.on.tiles(fresh);
          this.seq = last;
          break;
        }
        case 'frozen':
          // Its seq is the board's when the tiles froze, so it comes after the placements
          // up to that seq. One older than the state shown is already in that state (and
          // a placement after it may have thawed a tile since): skip it, like old tiles.
          if (event.obj.seq < this.seq) break;
          this.stats.frozenEvents++;
          this.stats.frozenTiles += event.obj.tiles.length;
          this.on.frozen(event.obj.tiles);
          break;
        case 'settings':
          if (layoutOf(event.obj) !== this.layout) {
            this.subscribed = null; // resized: only a fresh state can be drawn
            return;
          }
          this.stats.settings++;
          this.on.settings(event.obj);
          break;
        case 'reset':
          this.seq = event.obj.seq;
          this.boardId = event.obj.id;
          this.layout = layoutOf(event.obj);
          this.stats.resets++;
          this.on.state(event.obj);
          break;
        case 'presence':
          this.on.watching(event.obj.watching);
          break;
        case 'cursors':
          this.on.cursors(event.obj.cursors);
          break;
        case 'deleted':
          this.key = null;
          this.on.deleted();
          return;
        default:
          break; // a newer gateway's event this page does not know
      }
    }
  }

  /** Resolves when the loop is polling again (or rejects after `ms`). */
  whenLive(ms) {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new RpcError(CODES.NETWORK, 'not connected; try again in a moment')), ms);
      this.liveWaiters.push(() => { clearTimeout(timer); resolve(); });
    });
  }

  /** Tells the gateway where this page points; its cursor's id, or null (not connected,
   * or too soon: the next move tells it). */
  async setPresence(x, y) {
    if (!this.session || !this.key) return null;
    try {
      const { id } = await api.setPresence(this.session, this.boardId, x, y);
      return id;
    } catch {
      return null;
    }
  }

  /** board.place on the shown board; a lost session is replaced once, then retried. */
  async place(x, y, color) {
    for (let attempt = 0; ; attempt++) {
      if (!this.session || !this.key) await this.whenLive(5000);
      try {
        return await api.place(this.session, this.boardId, x, y, color);
      } catch (error) {
        if (attempt === 0 && error instanceof RpcError && error.code === CODES.UNKNOWN_SESSION) {
          this.restart();
          await this.whenLive(5000);
          continue;
        }
        throw error;
      }
    }
  }
}

const layoutOf = (s) => `${s.width}x${s.height}x${s.bits_per_tile}`;
const sameRect = (a, b) => (a === null || b === null ? a === b
  : a.x === b.x && a.y === b.y && a.width === b.width && a.height === b.height);
