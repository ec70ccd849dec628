// The page: wires the board image, the view, the live connection and the controls
// (board chooser, sign-in, palette, placing with confirmation, cooldown, who placed).
//
// Layout (one job per module, no build step; served from the gateway binary, see
// gateway/src/assets.rs):
//   ../client/pgplace.js  the protocol for any page (another site embeds a board with it):
//                   api.js and live.js, and Stream, a resumable stream of any views
//   api.js          JSON-RPC calls, RpcError, a sentence for every error code
//   packed.js       the packed tile layout (MSB first, like Redis BITFIELD) and palette packing
//   board-image.js  one pixel per tile: putImageData of the whole board, batched live tiles
//   view.js         zoom, pan, pinch, keys, taps, long presses; draws once per animation frame
//   live.js         session, sign-in, subscription, get_events loop, backoff, re-subscribe
//   cooldown.js     the countdown to next_allowed_at / retry_at
//   history.js      who placed a tile (board.tile_history), cached
//   frozen.js       frozen tiles: which ones (kept in stream order) and their marks on the view
//   cursors.js      other people's cursors on the view, and telling the gateway where ours is
//   (app.js itself: which region of a large board to follow when zoomed in)
//   hash.js         board, position and zoom in the URL hash
//   resume.js       the board kept across a reload, resumed with `since`

import { api, CODES, describe, Live, RpcError } from '../client/pgplace.js';
import { BoardImage } from './board-image.js';
import { Countdown, describeCooldown } from './cooldown.js';
import { describeFreezeAfter, FrozenTiles, frozenMessage, MARK_MIN_ZOOM } from './frozen.js';
import { Cursors } from './cursors.js';
import { readHash, writeHash } from './hash.js';
import { TileHistory } from './history.js';
import { keepBoard, takeKeptBoard } from './resume.js';
import { View } from './view.js';

const $ = (id) => document.getElementById(id);
const els = {
  canvas: $('view'), boards: $('boards'), info: $('info'), status: $('status'),
  signin: $('signin'), token: $('token'), user: $('user'), userName: $('user-name'), signout: $('signout'),
  palette: $('palette'), cooldown: $('cooldown'), coords: $('coords'), message: $('message'),
  confirm: $('confirm'), confirmText: $('confirm-text'), confirmSwatch: $('confirm-swatch'),
  confirmPlace: $('confirm-place'), confirmCancel: $('confirm-cancel'), tooltip: $('tooltip'), paused: $('paused'),
  frozenCount: $('frozen-count'),
  watching: $('watching'),
  guest: $('guest'), help: $('help'), helpOpen: $('help-open'), helpClose: $('help-close'),
};
const HELP_SEEN_KEY = 'pgplace.help-seen';
const TOKEN_KEY = 'pgplace.token';

const board = new BoardImage();
const view = new View(els.canvas, board);
const tileHistory = new TileHistory();
const frozen = new FrozenTiles();
view.overlays.push(frozen);
const cursors = new Cursors();
view.overlays.push(cursors);
cursors.onChange = () => view.invalidate();
const countdown = new Countdown(els.cooldown);
let token = localStorage.getItem(TOKEN_KEY);
let color = null; // the chosen palette index
let wanted = readHash(); // the position to show once the board arrives

// ---- messages -------------------------------------------------------------------------

let messageKind = null;
/** Shows `text` in the message line; kind 'connection' messages go away once live. */
function say(text, kind = 'info') {
  els.message.textContent = text;
  els.message.dataset.kind = kind;
  messageKind = text ? kind : null;
}

// ---- the live connection ----------------------------------------------------------------

const live = new Live({
  keptBoard(wantedBoard) {
    return takeKeptBoard(wantedBoard);
  },
  state(state) {
    const another = board.settings?.id !== state.id;
    if (another) countdown.clear();
    else if (state.cooldown !== board.settings.cooldown) countdown.cooldownChanged(state.cooldown);
    board.load(state);
    // A region's state has no frozen tiles: the page keeps those it knows, and the
    // region's `frozen` events and placements keep them current.
    if (!state.region) frozen.load(state);
    if (another) cursors.clear();
    // What was said of the board before (a refusal, a cooldown) is not about this one.
    if (another && messageKind !== 'connection') say('');
    if (state.watching !== undefined) showWatching(state.watching);
    tileHistory.clear();
    if (another) {
      if (wanted && wanted.x !== null && wanted.y !== null && wanted.zoom !== null) {
        view.set(wanted.x, wanted.y, wanted.zoom);
      } else {
        view.fit();
      }
      wanted = null;
      cancelPlacing();
    }
    showBoard();
    followRegion();
  },
  tiles(tiles) {
    board.queue(tiles);
    frozen.thaw(tiles);
    tileHistory.forget(board.settings.id, tiles);
  },
  frozen(tiles) {
    frozen.freeze(tiles);
    // The tile waiting for confirmation just froze: the gateway would refuse it.
    const selected = view.selected;
    if (selected && frozen.isFrozen(selected.x, selected.y)) {
      cancelPlacing();
      say(frozenMessage(selected.x, selected.y, board.settings.freeze_after), 'error');
    }
  },
  watching(count) {
    showWatching(count);
  },
  cursors(list) {
    cursors.set(list);
  },
  settings(settings) {
    if (settings.cooldown !== board.settings.cooldown) countdown.cooldownChanged(settings.cooldown);
    board.updateSettings(settings);
    showBoard();
  },
  deleted() {
    say('This board was deleted. Choose another one.', 'error');
    loadBoardList();
  },
  status(name, error) {
    // Called on every poll: touch the DOM only when the status changes (each write
    // forces a layout).
    if (document.body.dataset.status !== name) {
      document.body.dataset.status = name;
      els.status.textContent = { live: 'live', connecting: 'connecting…', reconnecting: 'reconnecting…', error: 'error' }[name];
    }
    if (error) say(describe(error), name === 'error' ? 'error' : 'connection');
    else if (name === 'live' && messageKind === 'connection') say('');
  },
  user(user) {
    els.user.hidden = !user;
    els.signin.hidden = !!user;
    els.userName.textContent = user?.name ?? '';
    document.body.dataset.signedIn = user ? 'yes' : 'no';
    showGuestButton();
  },
  authFailed(error) {
    token = null;
    localStorage.removeItem(TOKEN_KEY);
    say(describe(error), 'error');
    this.user(null);
  },
}, () => token);

function showBoard() {
  const s = board.settings;
  const colours = s.palette.length;
  const freezing = s.freeze_after == null ? '' : ` · tiles freeze after ${describeFreezeAfter(s.freeze_after)}`;
  els.info.textContent = `${s.width}×${s.height} · ${colours} colours · ${describeCooldown(s.cooldown)} · ${s.state}${freezing}`;
  els.info.dataset.cooldown = s.cooldown;
  els.info.dataset.freezeAfter = s.freeze_after ?? '';
  els.info.dataset.state = s.state;
  els.paused.hidden = s.state === 'open';
  els.paused.textContent = `This board is ${s.state}: no placements now.`;
  showPalette();
  if ([...els.boards.options].some((o) => o.value === String(s.id))) els.boards.value = String(s.id);
  document.title = `${s.name} · pgplace`;
  showFrozenCount();
  showGuestButton();
  saveHash();
}

// ---- frozen tiles -------------------------------------------------------------------------

let frozenCountQueued = false;
frozen.onChange = () => {
  // Marks are drawn only when zoomed in; the count is written once per frame at most
  // (a busy board thaws tiles on every delivery, and each DOM write forces a layout).
  if (view.zoom >= MARK_MIN_ZOOM) view.invalidate();
  if (frozenCountQueued) return;
  frozenCountQueued = true;
  requestAnimationFrame(() => {
    frozenCountQueued = false;
    showFrozenCount();
  });
};

/** How many watch the board (this page included), from the state and `presence` events. */
function showWatching(count) {
  const text = count ? `${count} watching` : '';
  els.watching.textContent = text;
  els.watching.hidden = !text;
}

function showFrozenCount() {
  const text = frozen.count ? `${frozen.count} ${frozen.count === 1 ? 'tile' : 'tiles'} frozen` : '';
  if (els.frozenCount.textContent !== text) els.frozenCount.textContent = text;
  els.frozenCount.hidden = !text;
}

function saveHash() {
  if (board.settings) writeHash({ board: board.settings.name, x: view.cx, y: view.cy, zoom: view.zoom });
}

// ---- board chooser --------------------------------------------------------------------

/** The ids of the boards a visitor may play on as a guest (`board.list`). */
let guestBoards = new Set();

/** "Play as a guest" where the board takes guests and nobody is signed in. */
function showGuestButton() {
  els.guest.hidden = !!live.user || !board.settings || !guestBoards.has(board.settings.id);
}

async function loadBoardList() {
  try {
    const boards = await api.listBoards();
    guestBoards = new Set(boards.filter((b) => b.guests).map((b) => b.id));
    showGuestButton();
    els.boards.replaceChildren(...boards.map((b) => {
      const option = new Option(`${b.name} (${b.width}×${b.height})`, String(b.id));
      option.dataset.name = b.name;
      return option;
    }));
    if (board.settings) els.boards.value = String(board.settings.id);
    return boards;
  } catch (error) {
    say(describe(error), 'connection');
    return [];
  }
}

els.boards.addEventListener('change', () => {
  wanted = null;
  live.show(Number(els.boards.value));
});

addEventListener('hashchange', () => {
  const hash = readHash();
  if (!hash.board) return;
  const same = board.settings && (hash.board === board.settings.name || hash.board === String(board.settings.id));
  if (same) {
    if (hash.x !== null && hash.y !== null && hash.zoom !== null) view.set(hash.x, hash.y, hash.zoom);
  } else {
    wanted = hash;
    live.show(hash.board);
  }
});

// ---- sign-in ----------------------------------------------------------------------------

els.signin.addEventListener('submit', async (event) => {
  event.preventDefault();
  const value = els.token.value.trim();
  if (!value) return;
  token = value;
  localStorage.setItem(TOKEN_KEY, token);
  els.token.value = '';
  try {
    await live.authorize();
    if (live.user) say(`Signed in as ${live.user.name}.`);
  } catch (error) {
    say(describe(error), 'error');
  }
});

els.guest.addEventListener('click', async () => {
  try {
    const guest = await live.playAsGuest(board.settings.id);
    // The token is the guest's account: kept, it signs them in on the next visit.
    token = guest.token;
    localStorage.setItem(TOKEN_KEY, token);
    say(`Playing as ${guest.name}: pick a colour, tap a tile.`);
  } catch (error) {
    say(describe(error), 'error');
  }
});

// ---- help -------------------------------------------------------------------------------

function showHelp(open) {
  els.help.hidden = !open;
  if (!open) localStorage.setItem(HELP_SEEN_KEY, '1');
}
els.helpOpen.addEventListener('click', () => showHelp(els.help.hidden));
els.helpClose.addEventListener('click', () => showHelp(false));
showHelp(!localStorage.getItem(HELP_SEEN_KEY));

els.signout.addEventListener('click', () => {
  token = null;
  localStorage.removeItem(TOKEN_KEY);
  countdown.clear();
  live.restart(); // a fresh session, bound to nobody
  say('Signed out.');
});

// ---- palette and placing ---------------------------------------------------------------

/** A person's name for colour `i` of a board: its palette name ("red"), else its code. */
function colourName(settings, i) {
  return settings.palette_names?.[i] ?? settings.palette[i];
}

function showPalette() {
  const palette = board.settings.palette;
  const key = JSON.stringify([palette, board.settings.palette_names]);
  if (els.palette.dataset.key === key) return;
  els.palette.dataset.key = key;
  if (color !== null && color >= palette.length) color = null;
  els.palette.replaceChildren(...palette.map((hex, i) => {
    const button = document.createElement('button');
    button.type = 'button';
    button.className = 'swatch';
    button.style.background = hex;
    const name = colourName(board.settings, i);
    button.title = name === hex ? `${i}: ${hex}` : `${name} (${i}: ${hex})`;
    button.setAttribute('role', 'radio');
    button.setAttribute('aria-label', name === hex ? `colour ${i} ${hex}` : `colour ${i} ${name} ${hex}`);
    button.setAttribute('aria-checked', String(i === color));
    button.dataset.color = i;
    button.addEventListener('click', () => pickColor(i));
    return button;
  }));
}

function pickColor(i) {
  color = i;
  for (const b of els.palette.children) b.setAttribute('aria-checked', String(Number(b.dataset.color) === i));
  if (view.selected) showConfirm();
}

/** Why a tap on `tile` cannot place now, or null. */
function cannotPlace(tile) {
  if (!token || !live.user) {
    return guestBoards.has(board.settings.id)
      ? 'Play as a guest, or sign in with a token, to place tiles.'
      : 'Sign in with a token (from place.create_user) to place tiles.';
  }
  if (live.user.guest && !guestBoards.has(board.settings.id)) {
    return 'Guests place only on the boards that take guests: sign in with a token to place here.';
  }
  if (board.settings.state !== 'open') return `This board is ${board.settings.state}: no placements now.`;
  if (frozen.isFrozen(tile.x, tile.y)) return frozenMessage(tile.x, tile.y, board.settings.freeze_after);
  if (countdown.waiting) return `Cooldown: ${els.cooldown.textContent}.`;
  if (color === null) return 'Pick a colour from the palette first.';
  return null;
}

view.onTap = (tile) => {
  const reason = cannotPlace(tile);
  if (reason) {
    say(reason, 'error');
    return;
  }
  view.selected = tile;
  view.invalidate();
  showConfirm();
};

function showConfirm() {
  const { x, y } = view.selected;
  const name = colourName(board.settings, color);
  els.confirmText.textContent = `Place ${name}, colour ${color} at (${x}, ${y})?`;
  els.confirmSwatch.style.background = board.settings.palette[color];
  els.confirm.hidden = false;
  els.confirmPlace.focus();
}

function cancelPlacing() {
  view.selected = null;
  els.confirm.hidden = true;
  view.invalidate();
}

async function confirmPlacing() {
  if (!view.selected) return;
  const { x, y } = view.selected;
  const chosen = color;
  const boardId = board.settings.id;
  cancelPlacing();
  els.canvas.focus();
  try {
    const result = await live.place(x, y, chosen);
    // Drawn at once when the stream has not brought it yet; the stream brings it again,
    // in seq order with anything placed after it.
    if (result.seq > live.seq) {
      board.queue([[x, y, chosen]]);
      frozen.thaw([[x, y]]);
    }
    countdown.set(result.next_allowed_at, board.settings.cooldown);
    say(`Placed colour ${chosen} at (${x}, ${y}).`);
  } catch (error) {
    if (error instanceof RpcError && error.code === CODES.COOLDOWN) {
      countdown.set(error.data?.retry_at, board.settings.cooldown);
      if (countdown.waiting) {
        say(`Cooldown: ${els.cooldown.textContent}.`, 'error');
        return;
      }
    }
    if (error instanceof RpcError && error.code === CODES.FROZEN && board.settings.id === boardId) {
      // The gateway knew before this page's stream said so: mark it now, so the next tap
      // on it is refused here.
      const at = error.data ?? { x, y };
      frozen.freeze([[at.x, at.y]]);
      say(frozenMessage(at.x, at.y, board.settings.freeze_after), 'error');
      return;
    }
    say(describe(error), 'error');
  }
}

els.confirmPlace.addEventListener('click', confirmPlacing);
els.confirmCancel.addEventListener('click', cancelPlacing);
addEventListener('keydown', (event) => {
  if (els.confirm.hidden) return;
  if (event.key === 'Escape') cancelPlacing();
});
countdown.onReady = () => {
  if (els.message.textContent.startsWith('Cooldown')) say('');
};
// A cooldown message counts down with the footer's.
countdown.onTick = (text) => {
  if (els.message.textContent.startsWith('Cooldown')) say(`Cooldown: ${text}.`, messageKind);
};

// ---- coordinates and who placed a tile ------------------------------------------------------

let hoverTimer = null;
let tooltipFor = null;
function hideTooltip() {
  clearTimeout(hoverTimer);
  tooltipFor = null;
  els.tooltip.hidden = true;
}

async function showWhoPlaced(tile, clientX, clientY) {
  const boardId = board.settings.id;
  const id = `${boardId}:${tile.x}:${tile.y}`;
  tooltipFor = id;
  let text;
  try {
    const newest = await tileHistory.newest(boardId, tile.x, tile.y);
    if (newest === undefined) {
      // The gateway has no tile history: only a frozen tile has something to tell.
      if (!frozen.isFrozen(tile.x, tile.y)) return;
      text = `(${tile.x}, ${tile.y})`;
    } else {
      text = newest
        ? `(${tile.x}, ${tile.y}) placed by ${newest.user_name ?? `user ${newest.user}`} at ${new Date(newest.placed_at).toLocaleString()}`
        : `(${tile.x}, ${tile.y}) was never placed`;
    }
  } catch (error) {
    text = describe(error);
  }
  if (tooltipFor !== id) return;
  // Asked now, not before the wait: the tile may have frozen or changed meanwhile.
  if (frozen.isFrozen(tile.x, tile.y)) text += ' · frozen: it can no longer change';
  els.tooltip.textContent = text;
  els.tooltip.style.left = `${clientX + 14}px`;
  els.tooltip.style.top = `${clientY + 14}px`;
  els.tooltip.hidden = false;
}

/** "(x, y)", and whether the tile is frozen (also as the cursor, over the canvas). */
function showCoords(tile) {
  const isFrozen = !!tile && frozen.isFrozen(tile.x, tile.y);
  els.coords.textContent = tile ? `(${tile.x}, ${tile.y})${isFrozen ? ' frozen' : ''}` : '';
  const over = isFrozen ? 'yes' : 'no';
  if (els.canvas.dataset.overFrozen !== over) els.canvas.dataset.overFrozen = over;
}

view.onHover = (tile, clientX, clientY) => {
  showCoords(tile);
  cursors.pointAt(tile, (x, y) => live.setPresence(x, y));
  hideTooltip();
  if (tile) hoverTimer = setTimeout(() => showWhoPlaced(tile, clientX, clientY), 300);
};
view.onLongPress = (tile, clientX, clientY) => {
  showCoords(tile);
  showWhoPlaced(tile, clientX, clientY);
  setTimeout(hideTooltip, 4000);
};

// ---- the view ---------------------------------------------------------------------------

// The last 1000 frame times (ms of work per frame), for measuring by hand.
const frames = [];
view.onFrame = (ms) => {
  frames.push(ms);
  if (frames.length > 1000) frames.shift();
};
view.onMove = () => {
  saveHash();
  followRegion();
};

// ---- regions ----------------------------------------------------------------------------
// Zoomed in on a large board, the page follows only the part around what it shows (a
// `board_region` view): the gateway then sends nothing from elsewhere. The rectangle is
// what is visible and as much again on every side, on a grid of REGION_GRID tiles, and is
// chosen anew when the view leaves it; zoomed out, the page follows the whole board again.
const REGION_MIN_TILES = 1_000_000;
const REGION_MIN_ZOOM = 4;
const REGION_GRID = 64;

function visibleRect() {
  const rect = view.canvas.getBoundingClientRect();
  const halfW = rect.width / 2 / view.zoom;
  const halfH = rect.height / 2 / view.zoom;
  return { x0: view.cx - halfW, y0: view.cy - halfH, x1: view.cx + halfW, y1: view.cy + halfH, halfW, halfH };
}

function followRegion() {
  const s = board.settings;
  if (!s) return;
  if (s.width * s.height < REGION_MIN_TILES || view.zoom < REGION_MIN_ZOOM) {
    live.showRegion(null);
    return;
  }
  const v = visibleRect();
  const have = live.region;
  const covered = have && v.x0 >= have.x && v.y0 >= have.y
    && v.x1 <= have.x + have.width && v.y1 <= have.y + have.height;
  if (covered) return;
  const snap = (value, limit, up) => Math.min(limit, Math.max(0,
    (up ? Math.ceil(value / REGION_GRID) : Math.floor(value / REGION_GRID)) * REGION_GRID));
  const x = snap(v.x0 - v.halfW * 2, s.width, false);
  const y = snap(v.y0 - v.halfH * 2, s.height, false);
  const x1 = snap(v.x1 + v.halfW * 2, s.width, true);
  const y1 = snap(v.y1 + v.halfH * 2, s.height, true);
  live.showRegion({ x, y, width: Math.max(1, x1 - x), height: Math.max(1, y1 - y) });
}

// ---- start -----------------------------------------------------------------------------------

// For tests and for measuring in the console.
window.pgplace = { board, view, live, frames, tileHistory, frozen, cursors };

live.on.user(null);
els.canvas.focus();
const boards = await loadBoardList();
const first = wanted?.board ?? boards.find((b) => b.name === 'demo')?.name ?? boards[0]?.id;
if (first === undefined) {
  say('There is no board yet: create one with SELECT place.create_board(\'name\', 100, 100);', 'error');
} else {
  live.show(first);
}

// Leaving (a reload, another page, closing): end the session, and keep the whole board
// shown, so that the next load continues from its seq instead of fetching it again
// (resume.js).
window.addEventListener('pagehide', () => {
  // Others stop seeing this page's cursor, and stop counting it, at once.
  live.leave();
  if (!live.key || live.subscribedRegion || !board.settings || board.settings.region) return;
  board.flush();
  keepBoard(board.settings, live.seq, board.indexes, frozen.tiles);
});
