// "Who placed this tile": the newest placement of a tile from board.tile_history, cached
// until the tile changes. A gateway without the method (-32601) turns the feature off.

import { api, CODES, RpcError } from './api.js';

export class TileHistory {
  constructor() {
    this.available = true;
    this.cache = new Map(); // "board:x:y" → promise of the newest placement or null
  }

  /** The newest placement of (x, y) on `board`, null if none, undefined if unavailable. */
  async newest(board, x, y) {
    if (!this.available) return undefined;
    const key = `${board}:${x}:${y}`;
    if (!this.cache.has(key)) {
      const answer = api.tileHistory(board, x, y, 1).then(
        (rows) => rows[0] ?? null,
        (error) => {
          this.cache.delete(key);
          if (error instanceof RpcError && error.code === CODES.METHOD_NOT_FOUND) {
            this.available = false;
            return undefined;
          }
          throw error;
        },
      );
      this.cache.set(key, answer);
    }
    return this.cache.get(key);
  }

  /** Forgets what is known about tiles that changed. */
  forget(board, tiles) {
    if (this.cache.size === 0) return;
    for (const [x, y] of tiles) this.cache.delete(`${board}:${x}:${y}`);
  }

  clear() {
    this.cache.clear();
  }
}
