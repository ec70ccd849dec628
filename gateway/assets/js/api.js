// The JSON-RPC 2.0 client: one function per call, errors as RpcError with the API's code,
// and a sentence for every code the gateway can answer (shown to people as is).

export const CODES = {
  UNKNOWN_SESSION: -32001,
  NOT_AUTHORIZED: -32002,
  COOLDOWN: -32003,
  UNKNOWN_VIEW: -32004,
  UNKNOWN_BOARD: -32005,
  BOARD_NOT_OPEN: -32006,
  TOO_MANY: -32007,
  RETRY: -32008,
  UNAVAILABLE: -32009,
  FROZEN: -32010,
  TOO_FAST: -32011,
  PARSE_ERROR: -32700,
  INVALID_REQUEST: -32600,
  METHOD_NOT_FOUND: -32601,
  INVALID_PARAMS: -32602,
  INTERNAL: -32603,
  // Not from the gateway: the request never got a JSON-RPC answer.
  NETWORK: 0,
};

export class RpcError extends Error {
  constructor(code, message, data) {
    super(message);
    this.name = 'RpcError';
    this.code = code;
    this.data = data;
  }
}

let nextId = 1;

// The gateway that served this module, also when a page of another site imports it
// (client/pgplace.js): that site's origin must be in the gateway's --cors-origins.
const ENDPOINT = new URL('/jsonrpc', import.meta.url);

/** Calls `method`; resolves with its result or rejects with an RpcError. `keepalive`: the
 * request outlives the page (sent while it closes). */
export async function call(method, params, { signal, keepalive = false } = {}) {
  const id = nextId++;
  let response;
  try {
    response = await fetch(ENDPOINT, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id, method, params }),
      signal,
      keepalive,
      cache: 'no-store',
    });
  } catch (error) {
    if (signal?.aborted) throw error;
    throw new RpcError(CODES.NETWORK, `cannot reach the gateway (${error.message})`);
  }
  let body;
  try {
    body = await response.json();
  } catch (error) {
    if (signal?.aborted) throw error;
    throw new RpcError(CODES.NETWORK, `the gateway answered HTTP ${response.status} without JSON`);
  }
  if (body.error) throw new RpcError(body.error.code, body.error.message, body.error.data);
  return body.result;
}

const when = (iso) => (iso ? new Date(iso).toLocaleTimeString() : 'later');

/** A sentence for a person about `error` (an RpcError or anything thrown). */
export function describe(error) {
  if (!(error instanceof RpcError)) return `Something went wrong: ${error?.message ?? error}`;
  switch (error.code) {
    case CODES.NETWORK: return 'Cannot reach the gateway; retrying.';
    case CODES.UNKNOWN_SESSION: return 'The session expired (the gateway may have restarted); reconnecting.';
    case CODES.NOT_AUTHORIZED: return `Not signed in, or not allowed here: ${error.message}`;
    case CODES.COOLDOWN: return `Cooldown: you can place again at ${when(error.data?.retry_at)}.`;
    case CODES.UNKNOWN_VIEW: return `The gateway does not know this view: ${error.message}`;
    case CODES.UNKNOWN_BOARD: return `This board does not exist: ${error.message}`;
    case CODES.BOARD_NOT_OPEN: return `The board is not open, no placements now: ${error.message}`;
    case CODES.TOO_MANY: return `The gateway is full (too many sessions or subscriptions); try again later. ${error.message}`;
    case CODES.RETRY: return 'The board changed during the request; please try again.';
    case CODES.UNAVAILABLE: return 'The database is unavailable; retrying in a moment.';
    case CODES.FROZEN: return `${error.data ? `Tile (${error.data.x}, ${error.data.y})` : 'This tile'} is frozen: it has not changed for long enough that it can no longer change.`;
    case CODES.TOO_FAST: return 'Too fast; slowing down.';
    case CODES.INVALID_PARAMS: return `The gateway refused the request: ${error.message}`;
    case CODES.METHOD_NOT_FOUND: return `This gateway does not offer that call (${error.message}).`;
    case CODES.PARSE_ERROR:
    case CODES.INVALID_REQUEST:
    case CODES.INTERNAL:
    default: return `The gateway could not handle the request (${error.code}): ${error.message}`;
  }
}

// The methods the page uses (gateway/README.md, "JSON-RPC").
export const api = {
  createSession: () => call('session.create', []),
  authorize: (session, token) => call('session.authorize', { session, token }),
  // A visitor without an account, on a board that takes guests: `{user_id, name, token}`.
  playAsGuest: (session, board) => call('session.play_as_guest', { session, board }),
  // `since`: the seq of a board the page kept; answered `{seq, resumed: true}` when the
  // gateway continues from there, else with a fresh state.
  subscribe: (session, board, since) => call('session.subscribe', {
    session, view: 'board', params: { board, compact: true, presence: true, ...(since === undefined ? {} : { since }) },
  }),
  subscribeRegion: (session, board, { x, y, width, height }) => call('session.subscribe', {
    session, view: 'board_region', params: { board, x, y, width, height, compact: true, presence: true },
  }),
  unsubscribe: (session, key) => call('session.unsubscribe', { session, key }),
  setPresence: (session, board, x, y) => call('session.set_presence', { session, board, position: { x, y } }),
  // Resumable: `ack` is '' first, then the last answer's cursor (an answer lost or aborted
  // comes again; any gateway answers it).
  getEvents: (session, timeout, ack, signal) => call('session.get_events', { session, timeout, ack }, { signal }),
  destroy: (session) => call('session.destroy', { session }),
  // From `pagehide`: the session ends at once, and with it the page's cursor and its place
  // among the watchers. A fetch with keepalive, not sendBeacon: a beacon cannot send the
  // JSON content type the gateway asks of a JSON-RPC request.
  leave: (session) => call('session.destroy', { session }, { keepalive: true }).catch(() => {}),
  listBoards: () => call('board.list', []),
  place: (session, board, x, y, color) => call('board.place', { session, board, x, y, color }),
  tileHistory: (board, x, y, limit) => call('board.tile_history', { board, x, y, limit }),
};
