// The cooldown countdown: counts down to the instant the gateway named (next_allowed_at
// from board.place, or retry_at from a cooldown error). A cooldown is measured from the
// user's last placement, so when an admin changes the board's cooldown the countdown
// moves to (last placement + new cooldown).

export class Countdown {
  constructor(element) {
    this.element = element;
    this.until = 0;
    this.timer = null;
    this.onReady = () => {};
    // Each second while waiting, with the text shown ("Next tile in 0:29"): whatever else
    // shows the cooldown counts down with it.
    this.onTick = () => {};
  }

  /**
   * Counts down to `iso` (RFC 3339), an instant the gateway computed with a cooldown of
   * `cooldown` seconds; an instant already past clears the countdown.
   */
  set(iso, cooldown) {
    this.until = Date.parse(iso) || 0;
    this.lastPlaced = this.until ? this.until - cooldown * 1000 : 0;
    this.tick();
  }

  /** The board's cooldown is now `cooldown` seconds. */
  cooldownChanged(cooldown) {
    if (!this.lastPlaced) return;
    this.until = this.lastPlaced + cooldown * 1000;
    this.tick();
  }

  get waiting() {
    return this.until > Date.now();
  }

  clear() {
    this.until = 0;
    this.lastPlaced = 0;
    this.tick();
  }

  tick() {
    clearTimeout(this.timer);
    const left = this.until - Date.now();
    if (left <= 0) {
      const was = this.element.dataset.state === 'waiting';
      this.element.textContent = this.until ? 'You can place a tile now.' : '';
      this.element.dataset.state = 'ready';
      if (was) this.onReady();
      return;
    }
    this.element.dataset.state = 'waiting';
    this.element.textContent = `Next tile in ${formatDuration(left / 1000)}`;
    this.onTick(this.element.textContent);
    this.timer = setTimeout(() => this.tick(), Math.min(1000, left % 1000 || 1000));
  }
}

/** 5 → "0:05", 300 → "5:00", 3700 → "1:01:40" (seconds rounded up). */
export function formatDuration(seconds) {
  const s = Math.ceil(seconds);
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), r = s % 60;
  const pad = (n) => String(n).padStart(2, '0');
  return h > 0 ? `${h}:${pad(m)}:${pad(r)}` : `${m}:${pad(r)}`;
}

/** A board's cooldown setting (seconds) for people: "5 min", "30 s", "none". */
export function describeCooldown(seconds) {
  if (!seconds) return 'no cooldown';
  if (seconds % 3600 === 0) return `${seconds / 3600} h cooldown`;
  if (seconds % 60 === 0) return `${seconds / 60} min cooldown`;
  return `${seconds} s cooldown`;
}
