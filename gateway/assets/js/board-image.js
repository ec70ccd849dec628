// The board as an image: one pixel per tile on a board-sized canvas, drawn from the
// packed bits in one putImageData through a Uint32Array view over the ImageData (the
// palette pre-packed in machine byte order: one write per tile). Live tiles are queued
// and applied together when `flush` runs (the view calls it in its next animation frame):
// one putImageData of their bounding box, or one 1x1 put per tile when they are scattered
// (random tiles on a big board span most of it: re-uploading that costs far more).

import { fromBase64, packColor, unpack } from './packed.js';

// Put the bounding box only while it is at most this many pixels per tile.
const BOX_PIXELS_PER_TILE = 64;
// Beyond this many tiles in one frame, one box is cheaper than many small puts anyway.
const MAX_SINGLE_PUTS = 1000;

// Tiles whose colour is outside the palette (a palette shortened by an admin).
const MISSING = packColor('#ff00ff');

export class BoardImage {
  constructor() {
    this.canvas = document.createElement('canvas');
    this.ctx = this.canvas.getContext('2d', { willReadFrequently: false });
    this.settings = null;
    this.seq = 0;
    this.pending = [];
    this.onDirty = () => {};
  }

  get width() { return this.settings?.width ?? 0; }
  get height() { return this.settings?.height ?? 0; }

  /** Replaces everything with a board state ({width, height, bits_per_tile, palette, seq, bits}),
   * or, for a region's state (`region`: {x, y, width, height}), the rectangle it holds. */
  load(state) {
    if (state.region) {
      this.loadRegion(state);
      return;
    }
    const { width, height, bits_per_tile: bitsPerTile } = state;
    this.settings = { ...state };
    // The big parts of a state live elsewhere (bits here as pixels, frozen in frozen.js).
    delete this.settings.bits;
    delete this.settings.frozen;
    this.seq = state.seq;
    this.pending = [];
    this.indexes = unpack(fromBase64(state.bits), bitsPerTile, width * height);
    this.canvas.width = width;
    this.canvas.height = height;
    this.image = this.ctx.createImageData(width, height);
    this.pixels = new Uint32Array(this.image.data.buffer);
    this.repaint();
  }

  /** A region's state: its rectangle replaces those tiles; the rest of the board stays as
   * last seen (a page follows a region only while it shows nothing outside it). */
  loadRegion(state) {
    const { width, height, bits_per_tile: bitsPerTile, region } = state;
    const sameLayout = this.image && this.width === width && this.height === height
      && this.settings.bits_per_tile === bitsPerTile;
    this.settings = { ...state };
    delete this.settings.bits;
    delete this.settings.frozen;
    delete this.settings.region;
    if (!sameLayout) {
      this.indexes = new Uint8Array(width * height);
      this.canvas.width = width;
      this.canvas.height = height;
      this.image = this.ctx.createImageData(width, height);
      this.pixels = new Uint32Array(this.image.data.buffer);
    }
    this.colors = this.settings.palette.map(packColor);
    this.seq = state.seq;
    this.pending = [];
    const inside = unpack(fromBase64(state.bits), bitsPerTile, region.width * region.height);
    for (let row = 0; row < region.height; row++) {
      for (let col = 0; col < region.width; col++) {
        const n = region.x + col + width * (region.y + row);
        const color = inside[col + region.width * row];
        this.indexes[n] = color;
        this.pixels[n] = this.colors[color] ?? MISSING;
      }
    }
    if (sameLayout) {
      if (region.width > 0 && region.height > 0) {
        this.ctx.putImageData(this.image, 0, 0, region.x, region.y, region.width, region.height);
      }
      this.onDirty();
    } else {
      this.repaint();
    }
  }

  /** New settings that keep the layout (palette, cooldown, state, name). */
  updateSettings(settings) {
    const paletteChanged = JSON.stringify(settings.palette) !== JSON.stringify(this.settings.palette);
    this.settings = { ...this.settings, ...settings };
    if (paletteChanged) this.repaint();
  }

  repaint() {
    this.colors = this.settings.palette.map(packColor);
    const { pixels, indexes, colors } = this;
    for (let n = 0; n < indexes.length; n++) pixels[n] = colors[indexes[n]] ?? MISSING;
    this.ctx.putImageData(this.image, 0, 0);
    this.onDirty();
  }

  /** Queues [[x, y, color], ...] (already in seq order) for the next flush. */
  queue(tiles) {
    for (const tile of tiles) this.pending.push(tile);
    this.onDirty();
  }

  /** Applies the queued tiles at once. */
  flush() {
    if (this.pending.length === 0 || !this.image) return;
    const { width, height, pixels, indexes, colors } = this;
    let x0 = width, y0 = height, x1 = -1, y1 = -1;
    const pending = this.pending;
    for (const [x, y, color] of pending) {
      if (x < 0 || y < 0 || x >= width || y >= height) continue;
      const n = x + width * y;
      indexes[n] = color;
      pixels[n] = colors[color] ?? MISSING;
      if (x < x0) x0 = x;
      if (x > x1) x1 = x;
      if (y < y0) y0 = y;
      if (y > y1) y1 = y;
    }
    this.pending = [];
    if (x1 < 0) return;
    const box = (x1 - x0 + 1) * (y1 - y0 + 1);
    if (box <= BOX_PIXELS_PER_TILE * pending.length || pending.length > MAX_SINGLE_PUTS) {
      this.ctx.putImageData(this.image, 0, 0, x0, y0, x1 - x0 + 1, y1 - y0 + 1);
      return;
    }
    for (const [x, y] of pending) {
      if (x >= 0 && y >= 0 && x < width && y < height) this.ctx.putImageData(this.image, 0, 0, x, y, 1, 1);
    }
  }

  /** The palette index of tile (x, y), counting queued tiles. */
  colorAt(x, y) {
    for (let i = this.pending.length - 1; i >= 0; i--) {
      const [px, py, color] = this.pending[i];
      if (px === x && py === y) return color;
    }
    return this.indexes[x + this.width * y];
  }
}
