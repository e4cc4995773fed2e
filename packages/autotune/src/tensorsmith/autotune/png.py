"""A tiny raster canvas and PNG writer (NumPy + zlib), for plots without matplotlib.

Enough for line charts: filled rectangles, straight lines, and text in a 3x5 pixel
font (upper case, digits and a little punctuation), scaled up. Not a graphics library:
it exists so ``tensorsmith tune`` can always leave a picture of its tuning curves
without adding a plotting dependency.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np

Color = tuple[int, int, int]

_GLYPHS = {
    "0": "111101101101111", "1": "010110010010111", "2": "111001111100111",
    "3": "111001111001111", "4": "101101111001001", "5": "111100111001111",
    "6": "111100111101111", "7": "111001001001001", "8": "111101111101111",
    "9": "111101111001111", "A": "010101111101101", "B": "110101110101110",
    "C": "011100100100011", "D": "110101101101110", "E": "111100110100111",
    "F": "111100110100100", "G": "011100101101011", "H": "101101111101101",
    "I": "111010010010111", "J": "001001001101010", "K": "101101110101101",
    "L": "100100100100111", "M": "101111111101101", "N": "110101101101101",
    "O": "010101101101010", "P": "110101110100100", "Q": "010101101110011",
    "R": "110101110101101", "S": "011100010001110", "T": "111010010010010",
    "U": "101101101101111", "V": "101101101101010", "W": "101101111111101",
    "X": "101101010101101", "Y": "101101010010010", "Z": "111001010100111",
    ".": "000000000000010", "-": "000000111000000", ":": "000010000010000",
    "/": "001001010100100", "#": "101111101111101", "_": "000000000000111",
    "(": "010100100100010", ")": "010001001001010", "%": "101001010100101",
    "=": "000111000111000", "+": "000010111010000", " ": "000000000000000",
}


class Canvas:
    """An RGB image, white to start with; (x, y) with y growing downwards."""

    def __init__(self, width: int, height: int) -> None:
        self.pixels = np.full((height, width, 3), 255, dtype=np.uint8)

    @property
    def width(self) -> int:
        return int(self.pixels.shape[1])

    @property
    def height(self) -> int:
        return int(self.pixels.shape[0])

    def rect(self, x0: int, y0: int, x1: int, y1: int, color: Color) -> None:
        x0, x1 = sorted((max(0, x0), min(self.width, x1)))
        y0, y1 = sorted((max(0, y0), min(self.height, y1)))
        self.pixels[y0:y1, x0:x1] = color

    def line(self, x0: float, y0: float, x1: float, y1: float, color: Color,
             width: int = 1) -> None:
        steps = int(max(abs(x1 - x0), abs(y1 - y0))) + 1
        xs = np.rint(np.linspace(x0, x1, steps)).astype(int)
        ys = np.rint(np.linspace(y0, y1, steps)).astype(int)
        half = width // 2
        for dx in range(-half, width - half):
            for dy in range(-half, width - half):
                px, py = xs + dx, ys + dy
                ok = (px >= 0) & (px < self.width) & (py >= 0) & (py < self.height)
                self.pixels[py[ok], px[ok]] = color

    def text(self, x: int, y: int, text: str, color: Color = (0, 0, 0), scale: int = 2) -> int:
        """Draw ``text`` with its top-left at (x, y); returns the x after the last glyph."""
        for ch in text.upper():
            glyph = _GLYPHS.get(ch, _GLYPHS[" "])
            for i, bit in enumerate(glyph):
                if bit == "1":
                    r, c = divmod(i, 3)
                    self.rect(x + c * scale, y + r * scale, x + (c + 1) * scale,
                              y + (r + 1) * scale, color)
            x += 4 * scale
        return x

    @staticmethod
    def text_width(text: str, scale: int = 2) -> int:
        return len(text) * 4 * scale

    def save(self, path: str | Path) -> None:
        Path(path).write_bytes(encode_png(self.pixels))


def encode_png(pixels: np.ndarray) -> bytes:
    """An 8-bit RGB PNG of an (height, width, 3) uint8 array."""
    height, width, _ = pixels.shape
    raw = np.concatenate([np.zeros((height, 1), np.uint8),
                          pixels.reshape(height, width * 3)], axis=1).tobytes()

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))
