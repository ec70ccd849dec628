// The names of the colours of pgplace's default palettes (r/Place 2017's sixteen, the
// greys of 1- and 2-bit boards), so that a swatch says "red", not "#e50000". A colour of
// another palette is named by its hex code.

const NAMES = new Map([
  ['#ffffff', 'white'], ['#e4e4e4', 'light grey'], ['#888888', 'grey'], ['#222222', 'black'],
  ['#ffa7d1', 'pink'], ['#e50000', 'red'], ['#e59500', 'orange'], ['#a06a42', 'brown'],
  ['#e5d900', 'yellow'], ['#94e044', 'light green'], ['#02be01', 'green'], ['#00d3dd', 'cyan'],
  ['#0083c7', 'blue'], ['#0000ea', 'dark blue'], ['#cf6ee4', 'magenta'], ['#820080', 'purple'],
  ['#aaaaaa', 'light grey'], ['#555555', 'dark grey'], ['#000000', 'black'],
]);

/** A person's name for palette colour `hex` ('#rrggbb'): its name, else the code itself. */
export function colourName(hex) {
  return NAMES.get(hex.toLowerCase()) ?? hex;
}
