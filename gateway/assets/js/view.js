// Zoom and pan: shows a BoardImage on the page's canvas. The position is the board point
// at the middle of the canvas (cx, cy) and the zoom is screen pixels per tile. Input:
// wheel and pinch zoom, drag and touch pan, arrow keys (+/- zoom), tap/click on a tile,
// hover and long-press. Drawing happens once per animation frame, after the board image
// has applied the tiles that arrived since the last frame.

export const MIN_ZOOM = 0.25;
export const MAX_ZOOM = 64;
const DRAG_SLOP = 5; // px a pointer may move and still count as a tap
const LONG_PRESS_MS = 500;

export class View {
  constructor(canvas, board) {
    this.canvas = canvas;
    this.board = board;
    this.ctx = canvas.getContext('2d');
    this.zoom = 4;
    this.cx = 0;
    this.cy = 0;
    this.selected = null; // {x, y} of the tile waiting for confirmation
    // Drawn over the board each frame: objects with draw(ctx, area), area being the visible
    // tiles [sx, ex) × [sy, ey), the board point (left, top) at the canvas origin, z device
    // pixels per tile and the zoom. They draw only what is visible, within the frame budget.
    this.overlays = [];
    this.frameRequested = false;
    // Callbacks set by the app.
    this.onTap = () => {};
    this.onHover = () => {};
    this.onLongPress = () => {};
    this.onMove = () => {};
    this.onFrame = () => {};
    board.onDirty = () => this.invalidate();
    this.listen();
    new ResizeObserver(() => this.invalidate()).observe(canvas);
  }

  /** Fits the whole board in the canvas. */
  fit() {
    const { width, height } = this.board;
    const rect = this.canvas.getBoundingClientRect();
    this.cx = width / 2;
    this.cy = height / 2;
    this.zoom = clamp(Math.min(rect.width / width, rect.height / height) * 0.95, MIN_ZOOM, MAX_ZOOM);
    this.changed();
  }

  set(cx, cy, zoom) {
    this.cx = clamp(cx, 0, this.board.width);
    this.cy = clamp(cy, 0, this.board.height);
    this.zoom = clamp(zoom, MIN_ZOOM, MAX_ZOOM);
    this.changed();
  }

  /** Screen (client) coordinates → board coordinates (fractional). */
  toBoard(clientX, clientY) {
    const rect = this.canvas.getBoundingClientRect();
    return {
      x: this.cx + (clientX - rect.left - rect.width / 2) / this.zoom,
      y: this.cy + (clientY - rect.top - rect.height / 2) / this.zoom,
    };
  }

  /** The tile under a screen point, or null outside the board. */
  tileAt(clientX, clientY) {
    const p = this.toBoard(clientX, clientY);
    const x = Math.floor(p.x), y = Math.floor(p.y);
    if (x < 0 || y < 0 || x >= this.board.width || y >= this.board.height) return null;
    return { x, y };
  }

  /** Board tile (x, y)'s top-left corner in client coordinates. */
  toClient(x, y) {
    const rect = this.canvas.getBoundingClientRect();
    return {
      x: rect.left + rect.width / 2 + (x - this.cx) * this.zoom,
      y: rect.top + rect.height / 2 + (y - this.cy) * this.zoom,
    };
  }

  /** Zooms by `factor` keeping the board point under (clientX, clientY) in place. */
  zoomAt(factor, clientX, clientY) {
    const before = this.toBoard(clientX, clientY);
    this.zoom = clamp(this.zoom * factor, MIN_ZOOM, MAX_ZOOM);
    const after = this.toBoard(clientX, clientY);
    this.cx = clamp(this.cx + before.x - after.x, 0, this.board.width);
    this.cy = clamp(this.cy + before.y - after.y, 0, this.board.height);
    this.changed();
  }

  panBy(dxScreen, dyScreen) {
    this.cx = clamp(this.cx - dxScreen / this.zoom, 0, this.board.width);
    this.cy = clamp(this.cy - dyScreen / this.zoom, 0, this.board.height);
    this.changed();
  }

  changed() {
    this.onMove();
    this.invalidate();
  }

  invalidate() {
    if (this.frameRequested) return;
    this.frameRequested = true;
    requestAnimationFrame((time) => {
      this.frameRequested = false;
      const start = performance.now();
      this.board.flush();
      this.draw();
      this.onFrame(performance.now() - start, time);
    });
  }

  draw() {
    const { canvas, ctx, board } = this;
    const dpr = window.devicePixelRatio || 1;
    const rect = canvas.getBoundingClientRect();
    const w = Math.round(rect.width * dpr), h = Math.round(rect.height * dpr);
    if (canvas.width !== w || canvas.height !== h) {
      canvas.width = w;
      canvas.height = h;
    }
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    ctx.clearRect(0, 0, w, h);
    if (!board.settings) return;
    const z = this.zoom * dpr;
    // Only the visible part of the board is drawn (whole tiles, clipped to the board).
    const left = this.cx - w / 2 / z, top = this.cy - h / 2 / z;
    const sx = Math.max(0, Math.floor(left)), sy = Math.max(0, Math.floor(top));
    const ex = Math.min(board.width, Math.ceil(left + w / z)), ey = Math.min(board.height, Math.ceil(top + h / z));
    if (ex <= sx || ey <= sy) return;
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(board.canvas, sx, sy, ex - sx, ey - sy,
      (sx - left) * z, (sy - top) * z, (ex - sx) * z, (ey - sy) * z);
    ctx.strokeStyle = 'rgba(0,0,0,0.5)';
    ctx.lineWidth = 1;
    ctx.strokeRect((0 - left) * z - 0.5, (0 - top) * z - 0.5, board.width * z + 1, board.height * z + 1);
    const area = { sx, sy, ex, ey, left, top, z, zoom: this.zoom };
    for (const overlay of this.overlays) overlay.draw(ctx, area);
    if (this.selected) {
      const { x, y } = this.selected;
      ctx.lineWidth = Math.max(2, z / 8);
      ctx.strokeStyle = '#000';
      ctx.strokeRect((x - left) * z, (y - top) * z, z, z);
      ctx.strokeStyle = '#fff';
      ctx.lineWidth = Math.max(1, z / 16);
      ctx.strokeRect((x - left) * z, (y - top) * z, z, z);
    }
  }

  listen() {
    const canvas = this.canvas;
    canvas.addEventListener('wheel', (e) => {
      e.preventDefault();
      const delta = e.deltaMode === 1 ? e.deltaY * 16 : e.deltaY;
      this.zoomAt(Math.exp(-delta * 0.0015), e.clientX, e.clientY);
    }, { passive: false });

    // Pointers: one pans (or taps, or long-presses), two pinch.
    const pointers = new Map();
    let gesture = null; // {moved, startX, startY, pinchDistance, longPress}
    const distance = () => {
      const [a, b] = [...pointers.values()];
      return Math.hypot(a.x - b.x, a.y - b.y);
    };
    const midpoint = () => {
      const [a, b] = [...pointers.values()];
      return { x: (a.x + b.x) / 2, y: (a.y + b.y) / 2 };
    };
    canvas.addEventListener('pointerdown', (e) => {
      // A primary pointer starts a new gesture: forget pointers whose end was never seen.
      if (e.isPrimary) pointers.clear();
      canvas.setPointerCapture(e.pointerId);
      pointers.set(e.pointerId, { x: e.clientX, y: e.clientY });
      if (pointers.size === 1) {
        gesture = { moved: false, startX: e.clientX, startY: e.clientY, longPress: null };
        if (e.pointerType !== 'mouse') {
          gesture.longPress = setTimeout(() => {
            const tile = this.tileAt(e.clientX, e.clientY);
            if (tile && gesture && !gesture.moved) {
              gesture.moved = true; // a long press is not a tap
              this.onLongPress(tile, e.clientX, e.clientY);
            }
          }, LONG_PRESS_MS);
        }
      } else if (pointers.size === 2 && gesture) {
        gesture.moved = true;
        clearTimeout(gesture.longPress);
        gesture.pinchDistance = distance();
        gesture.pinchMid = midpoint();
      }
    });
    canvas.addEventListener('pointermove', (e) => {
      if (!pointers.has(e.pointerId)) {
        if (e.pointerType === 'mouse') this.onHover(this.tileAt(e.clientX, e.clientY), e.clientX, e.clientY);
        return;
      }
      const last = pointers.get(e.pointerId);
      const now = { x: e.clientX, y: e.clientY };
      pointers.set(e.pointerId, now);
      if (!gesture) return;
      if (pointers.size === 2) {
        const d = distance(), mid = midpoint();
        this.panBy(mid.x - gesture.pinchMid.x, mid.y - gesture.pinchMid.y);
        if (gesture.pinchDistance > 0) this.zoomAt(d / gesture.pinchDistance, mid.x, mid.y);
        gesture.pinchDistance = d;
        gesture.pinchMid = mid;
        return;
      }
      if (!gesture.moved && Math.hypot(now.x - gesture.startX, now.y - gesture.startY) > DRAG_SLOP) {
        gesture.moved = true;
        clearTimeout(gesture.longPress);
      }
      if (gesture.moved) this.panBy(now.x - last.x, now.y - last.y);
    });
    const end = (e) => {
      if (!pointers.delete(e.pointerId)) return;
      if (pointers.size > 0 || !gesture) return;
      clearTimeout(gesture.longPress);
      const tapped = !gesture.moved && e.type === 'pointerup';
      gesture = null;
      if (tapped) {
        const tile = this.tileAt(e.clientX, e.clientY);
        if (tile) this.onTap(tile, e.clientX, e.clientY);
      }
    };
    canvas.addEventListener('pointerup', end);
    canvas.addEventListener('pointercancel', end);
    canvas.addEventListener('pointerleave', (e) => {
      if (e.pointerType === 'mouse') this.onHover(null);
    });

    canvas.addEventListener('keydown', (e) => {
      const step = 60;
      const rect = canvas.getBoundingClientRect();
      const mid = [rect.left + rect.width / 2, rect.top + rect.height / 2];
      const actions = {
        ArrowLeft: () => this.panBy(step, 0),
        ArrowRight: () => this.panBy(-step, 0),
        ArrowUp: () => this.panBy(0, step),
        ArrowDown: () => this.panBy(0, -step),
        '+': () => this.zoomAt(1.5, ...mid),
        '=': () => this.zoomAt(1.5, ...mid),
        '-': () => this.zoomAt(1 / 1.5, ...mid),
        '0': () => this.fit(),
      };
      const action = actions[e.key];
      if (action) {
        e.preventDefault();
        action();
      }
    });
  }
}

function clamp(v, lo, hi) {
  return Math.min(hi, Math.max(lo, v));
}
