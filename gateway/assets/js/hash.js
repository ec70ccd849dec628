// The URL's hash remembers the board, the position and the zoom:
// #board=demo&x=500.0&y=500.0&zoom=4

export function readHash() {
  const params = new URLSearchParams(location.hash.slice(1));
  const number = (name) => {
    const v = parseFloat(params.get(name));
    return Number.isFinite(v) ? v : null;
  };
  return { board: params.get('board'), x: number('x'), y: number('y'), zoom: number('zoom') };
}

let timer = null;

/** Writes the hash (throttled, without adding history entries). */
export function writeHash({ board, x, y, zoom }) {
  clearTimeout(timer);
  timer = setTimeout(() => {
    const params = new URLSearchParams({
      board,
      x: x.toFixed(1),
      y: y.toFixed(1),
      zoom: +zoom.toFixed(2),
    });
    history.replaceState(null, '', `#${params}`);
  }, 150);
}
