// Frozen tiles (One Million Checkboxes' ending): on a board with `freeze_after`, a tile
// left at a non-zero colour for that long can no longer change. The page keeps one byte
// per tile saying so — loaded from the state's `frozen` bitmap, set by `frozen` events,
// cleared by any placement on the tile, applied in stream order as events arrive (not at
// the next frame, as colours are: the order of freezes and placements decides the bit) —
// so a tap on a frozen tile is refused without asking the gateway, and frozen tiles get
// a mark on the view.
//
// The marks are one pattern fill per frame: the visible frozen tiles, merged into runs
// along each row, become rectangles of one path filled with a tile-sized pattern. A board
// that is mostly frozen then costs a rectangle per visible row, not a shape per tile, and
// the 60 fps panning budget holds. Below MARK_MIN_ZOOM no marks: they would cover the
// picture (and there would be too many tiles to scan).

import { fromBase64, unpack } from './packed.js';

/** Screen pixels per tile from which frozen tiles are marked. */
export const MARK_MIN_ZOOM = 8;
// The pattern is drawn at about the tile's device size (so it is neither blurred nor
// aliased), within these bounds; the rest is scaling.
const PATTERN_MIN = 8;
const PATTERN_MAX = 128;

export class FrozenTiles {
  constructor() {
    this.width = 0;
    this.height = 0;
    this.tiles = null; // Uint8Array, 1 = frozen; null while no tile is known to be frozen
    this.count = 0;
    this.onChange = () => {};
    this.marked = 0; // tiles marked in the last frame (for tests and measuring)
    this.pattern = null;
    this.patternSize = 0;
  }

  /** Replaces everything with a state's `frozen` (base64 bitmap, one bit per tile, or null). */
  load(state) {
    this.width = state.width;
    this.height = state.height;
    const tiles = state.width * state.height;
    this.tiles = state.frozen ? unpack(fromBase64(state.frozen), 1, tiles) : null;
    this.count = 0;
    if (this.tiles) for (let n = 0; n < tiles; n++) this.count += this.tiles[n];
    this.onChange();
  }

  isFrozen(x, y) {
    return !!this.tiles && x >= 0 && y >= 0 && x < this.width && y < this.height
      && this.tiles[x + this.width * y] === 1;
  }

  /** Marks [[x, y], ...] frozen (a `frozen` event, or the gateway refusing a placement). */
  freeze(tiles) {
    // Allocated on first use: a board whose state said "never freezes" has no bitmap.
    this.tiles ??= new Uint8Array(this.width * this.height);
    this.set(tiles, 1);
  }

  /** [[x, y, ...], ...] changed: they are not frozen any more (their clock restarts). */
  thaw(tiles) {
    if (this.count > 0) this.set(tiles, 0);
  }

  set(tiles, value) {
    let changed = false;
    for (const [x, y] of tiles) {
      if (x < 0 || y < 0 || x >= this.width || y >= this.height) continue;
      const n = x + this.width * y;
      if (this.tiles[n] === value) continue;
      this.tiles[n] = value;
      this.count += value ? 1 : -1;
      changed = true;
    }
    if (changed) this.onChange();
  }

  /**
   * The view's overlay hook: marks the frozen tiles among the visible ones [sx, ex) ×
   * [sy, ey); board point (left, top) is the canvas origin, z device pixels per tile.
   */
  draw(ctx, { sx, sy, ex, ey, left, top, z, zoom }) {
    this.marked = 0;
    if (this.count === 0 || zoom < MARK_MIN_ZOOM) return;
    const { tiles, width } = this;
    ctx.beginPath();
    for (let y = sy; y < ey; y++) {
      const row = width * y;
      for (let x = sx; x < ex; x++) {
        if (tiles[row + x] === 0) continue;
        const start = x;
        while (x + 1 < ex && tiles[row + x + 1] === 1) x++;
        ctx.rect((start - left) * z, (y - top) * z, (x + 1 - start) * z, z);
        this.marked += x + 1 - start;
      }
    }
    if (this.marked === 0) return;
    const size = Math.min(PATTERN_MAX, Math.max(PATTERN_MIN, Math.round(z)));
    if (size !== this.patternSize) {
      this.pattern = ctx.createPattern(markTile(size), 'repeat');
      this.patternSize = size;
    }
    // Pattern cell (0, 0) on board tile (0, 0), one cell per tile.
    const scale = z / size;
    this.pattern.setTransform(new DOMMatrix([scale, 0, 0, scale, -left * z, -top * z]));
    ctx.fillStyle = this.pattern;
    ctx.fill();
  }
}

/**
 * One tile's mark, size×size pixels: a thin dark frame (frozen areas read as a block) and a
 * small padlock in the lower right corner, white with a dark outline so it shows on every
 * colour. The tile's middle stays uncovered: the picture is still the picture.
 */
function markTile(size) {
  const canvas = document.createElement('canvas');
  canvas.width = canvas.height = size;
  const c = canvas.getContext('2d');
  const line = Math.max(1, size / 24);
  c.strokeStyle = 'rgba(0, 0, 0, 0.45)';
  c.lineWidth = line;
  c.strokeRect(line / 2, line / 2, size - line, size - line);
  // The padlock: a shackle, then the body over its ends, within x 0.58–0.9, y 0.55–0.9 of the tile.
  const u = size / 100;
  c.lineJoin = 'round';
  c.beginPath();
  c.moveTo(65 * u, 72 * u);
  c.lineTo(65 * u, 64 * u);
  c.arc(74 * u, 64 * u, 9 * u, Math.PI, 0);
  c.lineTo(83 * u, 72 * u);
  c.strokeStyle = 'rgba(0, 0, 0, 0.85)';
  c.lineWidth = Math.max(1, 7 * u);
  c.stroke();
  c.strokeStyle = '#fff';
  c.lineWidth = Math.max(0.5, 3 * u);
  c.stroke();
  c.beginPath();
  c.rect(58 * u, 72 * u, 32 * u, 18 * u);
  c.fillStyle = '#fff';
  c.strokeStyle = 'rgba(0, 0, 0, 0.85)';
  c.lineWidth = Math.max(1, 3 * u);
  c.fill();
  c.stroke();
  return canvas;
}

/** A `freeze_after` (seconds) for people: "2 s", "10 min", "1 h", "3 d". */
export function describeFreezeAfter(seconds) {
  if (seconds % 86400 === 0) return `${seconds / 86400} d`;
  if (seconds % 3600 === 0) return `${seconds / 3600} h`;
  if (seconds % 60 === 0) return `${seconds / 60} min`;
  return `${+seconds.toFixed(3)} s`;
}

/** Why tile (x, y) cannot be placed on, for people. */
export function frozenMessage(x, y, freezeAfter) {
  const rested = freezeAfter ? ` for ${describeFreezeAfter(freezeAfter)}` : '';
  return `Tile (${x}, ${y}) is frozen: it has not changed${rested} and can no longer change.`;
}
