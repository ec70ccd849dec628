// Other people's cursors: where the others watching this board point, as the gateway
// tells it (`cursors` events, at most once a second, the 100 most recently moved), and
// where this page points, told to the gateway (`session.set_presence`) as the mouse moves
// over the board, at most every SEND_EVERY_MS. Drawn as a view overlay from
// SHOW_MIN_ZOOM on (zoomed out, a cursor would hide the picture): a ring on the tile and
// the person's name beside it.

/** Screen pixels per tile from which other people's cursors are drawn. */
export const SHOW_MIN_ZOOM = 4;
const SEND_EVERY_MS = 200;

export class Cursors {
  constructor() {
    this.others = []; // [{id, x, y, name?}]
    this.own = null; // this page's cursor id, once the gateway told it
    this.drawn = 0; // cursors drawn in the last frame (for tests)
    this.onChange = () => {};
    this.lastSent = 0;
    this.pending = null;
    this.timer = null;
  }

  /** A `cursors` event's list: everyone's cursors (this page's own left out). */
  set(cursors) {
    this.others = cursors.filter((c) => c.id !== this.own);
    this.onChange();
  }

  clear() {
    this.others = [];
    this.onChange();
  }

  /** Tells `send(x, y)` where this page points, at most every SEND_EVERY_MS (the last
   * position of a burst is always sent). */
  pointAt(tile, send) {
    if (!tile) return;
    this.pending = tile;
    if (this.timer) return;
    const wait = Math.max(0, this.lastSent + SEND_EVERY_MS - performance.now());
    this.timer = setTimeout(async () => {
      this.timer = null;
      const { x, y } = this.pending;
      this.lastSent = performance.now();
      const id = await send(x, y);
      if (id) this.own = id;
    }, wait);
  }

  /** The view's overlay hook (same area as the other overlays). */
  draw(ctx, { sx, sy, ex, ey, left, top, z, zoom }) {
    this.drawn = 0;
    if (zoom < SHOW_MIN_ZOOM || this.others.length === 0) return;
    ctx.save();
    ctx.font = `${Math.max(11, Math.min(16, z / 2))}px sans-serif`;
    ctx.textBaseline = 'middle';
    for (const c of this.others) {
      if (c.x < sx || c.x >= ex || c.y < sy || c.y >= ey) continue;
      const cx = (c.x - left + 0.5) * z;
      const cy = (c.y - top + 0.5) * z;
      ctx.beginPath();
      ctx.arc(cx, cy, Math.max(4, z * 0.45), 0, 2 * Math.PI);
      ctx.lineWidth = Math.max(2, z / 10);
      ctx.strokeStyle = '#fff';
      ctx.stroke();
      ctx.lineWidth = Math.max(1, z / 20);
      ctx.strokeStyle = colorOf(c.id);
      ctx.stroke();
      const label = c.name ?? 'someone';
      const tx = cx + Math.max(6, z * 0.6);
      ctx.lineWidth = 3;
      ctx.strokeStyle = '#fff';
      ctx.strokeText(label, tx, cy);
      ctx.fillStyle = colorOf(c.id);
      ctx.fillText(label, tx, cy);
      this.drawn++;
    }
    ctx.restore();
  }
}

/** A steady colour per cursor id. */
function colorOf(id) {
  let h = 0;
  for (const ch of String(id)) h = (h * 31 + ch.charCodeAt(0)) % 360;
  return `hsl(${h}, 80%, 35%)`;
}
