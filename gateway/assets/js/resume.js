// A reloaded page resumes where it was. On leaving, the page keeps the whole board it
// shows (its state, seq, tiles and frozen tiles) in the tab's sessionStorage; the next
// subscribe to that board asks the gateway for what came `since` that seq, and when the
// gateway can give it, the kept board is shown instead of a fresh one (no board fetched).
// Too big for the storage (several MB), or another board: a fresh state, as before.

import { pack, toBase64 } from './packed.js';

const KEY = 'pgplace:kept-board';

/** Keeps `settings` (a state without its bits), `seq`, the tiles' palette indexes and the
 * frozen tiles (one byte each, or null). */
export function keepBoard(settings, seq, indexes, frozen) {
  try {
    const state = {
      ...settings,
      seq,
      bits: toBase64(pack(indexes, settings.bits_per_tile)),
      frozen: frozen ? toBase64(pack(frozen, 1)) : null,
    };
    sessionStorage.setItem(KEY, JSON.stringify(state));
  } catch {
    // Over the storage's quota, or no storage: the next load fetches the board.
  }
}

/** The kept state of `board` (an id or a name), once; null when none is kept for it. */
export function takeKeptBoard(board) {
  let state = null;
  try {
    state = JSON.parse(sessionStorage.getItem(KEY));
    sessionStorage.removeItem(KEY);
  } catch {
    return null;
  }
  if (!state || (String(state.id) !== String(board) && state.name !== board)) return null;
  return state;
}
