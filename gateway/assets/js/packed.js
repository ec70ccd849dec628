// The packed board layout (extension/README.md, "The packed layout"; extension/core/src/bits.rs):
// tile n = x + width*y occupies bits [n*k, (n+1)*k) counted from the most significant bit
// of byte 0, like Redis BITFIELD u<k>; with k in {1, 2, 4, 8} a tile never spans two bytes.

/** Base64 text → bytes. */
export function fromBase64(text) {
  if (typeof Uint8Array.fromBase64 === 'function') return Uint8Array.fromBase64(text);
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

/** Bytes → base64 text. */
export function toBase64(bytes) {
  if (typeof bytes.toBase64 === 'function') return bytes.toBase64();
  let binary = '';
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  }
  return btoa(binary);
}

/** The packed bits of palette indexes (one byte each): `unpack`'s inverse. */
export function pack(indexes, bitsPerTile) {
  if (bitsPerTile === 8) return Uint8Array.from(indexes);
  const perByte = 8 / bitsPerTile;
  const out = new Uint8Array(Math.ceil(indexes.length / perByte));
  for (let n = 0; n < indexes.length; n++) {
    const shift = 8 - bitsPerTile * ((n % perByte) + 1);
    out[(n / perByte) | 0] |= indexes[n] << shift;
  }
  return out;
}

/** Palette index of every tile (one byte each) from the packed bits. */
export function unpack(bits, bitsPerTile, tiles) {
  const out = new Uint8Array(tiles);
  if (bitsPerTile === 8) {
    out.set(bits.subarray(0, tiles));
    return out;
  }
  const perByte = 8 / bitsPerTile;
  const mask = (1 << bitsPerTile) - 1;
  let n = 0;
  for (let i = 0; i < bits.length && n < tiles; i++) {
    const byte = bits[i];
    for (let j = 0; j < perByte && n < tiles; j++, n++) {
      out[n] = (byte >> (8 - bitsPerTile * (j + 1))) & mask;
    }
  }
  return out;
}

const littleEndian = new Uint8Array(new Uint32Array([0x01020304]).buffer)[0] === 0x04;

/** "#rrggbb" → one opaque RGBA pixel as a Uint32 in this machine's byte order. */
export function packColor(hex) {
  const v = parseInt(hex.slice(1, 7), 16);
  const r = (v >> 16) & 255, g = (v >> 8) & 255, b = v & 255;
  return littleEndian
    ? ((255 << 24) | (b << 16) | (g << 8) | r) >>> 0
    : ((r << 24) | (g << 16) | (b << 8) | 255) >>> 0;
}
