"""A small PDF writer for test fixtures, byte by byte.

Pages hold a content stream built from a few drawing calls (text runs, per-glyph runs,
rotated runs, rules, rectangles, raster images). The one font is Helvetica with explicit
/Widths, so glyph positions computed here match what PDFium lays out.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

# Helvetica advance widths (1/1000 em) for ASCII 32..126, declared in the font dict.
_WIDTHS = [
    278,
    278,
    355,
    556,
    556,
    889,
    667,
    191,
    333,
    333,
    389,
    584,
    278,
    333,
    278,
    278,
    556,
    556,
    556,
    556,
    556,
    556,
    556,
    556,
    556,
    556,
    278,
    278,
    584,
    584,
    584,
    556,
    1015,
    667,
    667,
    722,
    722,
    667,
    611,
    778,
    722,
    278,
    500,
    667,
    556,
    833,
    722,
    778,
    667,
    778,
    722,
    667,
    611,
    722,
    667,
    944,
    667,
    667,
    611,
    278,
    278,
    278,
    469,
    556,
    333,
    556,
    556,
    500,
    556,
    556,
    278,
    556,
    556,
    222,
    222,
    500,
    222,
    833,
    556,
    556,
    556,
    556,
    333,
    500,
    278,
    556,
    500,
    722,
    500,
    500,
    500,
    334,
    260,
    334,
    584,
]


def text_width(text: str, size: float) -> float:
    """The advance of ``text`` in points at ``size`` with the writer's font."""
    return sum(_WIDTHS[ord(c) - 32] if 32 <= ord(c) <= 126 else 556 for c in text) * size / 1000.0


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


@dataclass
class Page:
    width: float = 612.0
    height: float = 792.0
    rotate: int = 0
    cropbox: tuple[float, float, float, float] | None = None
    ops: list[str] = field(default_factory=list)
    images: list[tuple[int, int, bytes, str]] = field(default_factory=list)  # w, h, data, colorspace

    def text(self, x: float, y: float, text: str, size: float = 12.0) -> Page:
        """One text run with its baseline starting at (x, y)."""
        self.ops.append(f"BT /F1 {size:g} Tf {x:g} {y:g} Td ({_escape(text)}) Tj ET")
        return self

    def glyphs(self, x: float, y: float, text: str, size: float = 12.0, order=None) -> Page:
        """Every glyph in its own BT..ET run (spaces only advance), optionally drawn in
        the order of the indices ``order``."""
        positions = []
        cursor = x
        for c in text:
            positions.append((cursor, c))
            cursor += text_width(c, size)
        indices = list(order) if order is not None else range(len(positions))
        for i in indices:
            gx, c = positions[i]
            if c != " ":
                self.ops.append(f"BT /F1 {size:g} Tf {gx:.3f} {y:g} Td ({_escape(c)}) Tj ET")
        return self

    def rotated_text(self, x: float, y: float, text: str, matrix=(0, 1, -1, 0), size: float = 12.0) -> Page:
        """A run set with a text matrix (default: rotated 90 degrees, reading upward)."""
        a, b, c, d = matrix
        self.ops.append(f"BT /F1 {size:g} Tf {a:g} {b:g} {c:g} {d:g} {x:g} {y:g} Tm ({_escape(text)}) Tj ET")
        return self

    def line(self, x0: float, y0: float, x1: float, y1: float, width: float = 0.5) -> Page:
        self.ops.append(f"q {width:g} w {x0:g} {y0:g} m {x1:g} {y1:g} l S Q")
        return self

    def rect(self, x: float, y: float, w: float, h: float, width: float = 0.5, fill: bool = False) -> Page:
        self.ops.append(f"q {width:g} w {x:g} {y:g} {w:g} {h:g} re {'f' if fill else 'S'} Q")
        return self

    def grid(self, xs, ys, width: float = 0.5, skip=()) -> Page:
        """Rules at every x in ``xs`` (vertical) and y in ``ys`` (horizontal); ``skip``
        lists vertical segments (x_index, row_index) left out, making merged cells."""
        xs, ys = sorted(xs), sorted(ys, reverse=True)
        for y in ys:
            self.line(xs[0], y, xs[-1], y, width)
        for i, x in enumerate(xs):
            for r in range(len(ys) - 1):
                if (i, r) not in skip:
                    self.line(x, ys[r], x, ys[r + 1], width)
        return self

    def image(
        self, x: float, y: float, w: float, h: float, px_w: int, px_h: int, data: bytes, gray: bool = True
    ) -> Page:
        """A raster image (8-bit gray or RGB samples) drawn at (x, y) with size w x h."""
        self.images.append((px_w, px_h, data, "/DeviceGray" if gray else "/DeviceRGB"))
        self.ops.append(f"q {w:g} 0 0 {h:g} {x:g} {y:g} cm /Im{len(self.images)} Do Q")
        return self


class PdfWriter:
    """Collects pages and writes a complete PDF (objects, xref table, trailer)."""

    def __init__(self) -> None:
        self.pages: list[Page] = []

    def page(self, width: float = 612.0, height: float = 792.0, rotate: int = 0, cropbox=None) -> Page:
        page = Page(width=width, height=height, rotate=rotate, cropbox=cropbox)
        self.pages.append(page)
        return page

    def to_bytes(self) -> bytes:
        objects: list[bytes] = []

        def add(body: bytes) -> int:
            objects.append(body)
            return len(objects)

        catalog = add(b"")
        pages_id = add(b"")
        widths = " ".join(str(w) for w in _WIDTHS)
        font = add(
            (
                "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding "
                f"/FirstChar 32 /LastChar 126 /Widths [{widths}] >>"
            ).encode()
        )
        kids = []
        for page in self.pages:
            xobjects = []
            for n, (w, h, data, cs) in enumerate(page.images, start=1):
                packed = zlib.compress(data)
                img = add(
                    f"<< /Type /XObject /Subtype /Image /Width {w} /Height {h} /ColorSpace {cs} "
                    f"/BitsPerComponent 8 /Filter /FlateDecode /Length {len(packed)} >>\nstream\n".encode()
                    + packed
                    + b"\nendstream"
                )
                xobjects.append(f"/Im{n} {img} 0 R")
            stream = "\n".join(page.ops).encode("latin-1")
            content = add(f"<< /Length {len(stream)} >>\nstream\n".encode() + stream + b"\nendstream")
            extra = ""
            if page.rotate:
                extra += f" /Rotate {page.rotate}"
            if page.cropbox:
                extra += " /CropBox [{} {} {} {}]".format(*(f"{v:g}" for v in page.cropbox))
            resources = f"/Font << /F1 {font} 0 R >>"
            if xobjects:
                resources += " /XObject << " + " ".join(xobjects) + " >>"
            kids.append(
                add(
                    (
                        f"<< /Type /Page /Parent {pages_id} 0 R "
                        f"/MediaBox [0 0 {page.width:g} {page.height:g}]"
                        f"{extra} /Resources << {resources} >> /Contents {content} 0 R >>"
                    ).encode()
                )
            )
        objects[catalog - 1] = f"<< /Type /Catalog /Pages {pages_id} 0 R >>".encode()
        objects[pages_id - 1] = (
            f"<< /Type /Pages /Kids [{' '.join(f'{k} 0 R' for k in kids)}] /Count {len(kids)} >>".encode()
        )

        out = bytearray(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
        offsets = []
        for number, body in enumerate(objects, start=1):
            offsets.append(len(out))
            out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
        xref = len(out)
        out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
        for offset in offsets:
            out += f"{offset:010d} 00000 n \n".encode()
        out += f"trailer\n<< /Size {len(objects) + 1} /Root {catalog} 0 R >>\n".encode()
        out += f"startxref\n{xref}\n%%EOF\n".encode()
        return bytes(out)


def invoice_pdf() -> bytes:
    """The 'fixture invoice': three lines, every glyph drawn as its own text run."""
    w = PdfWriter()
    p = w.page()
    p.glyphs(72, 740, "INVOICE No. 2024-001", size=14)
    p.glyphs(72, 700, "Bill to: Acme Corp, 1 Main Street")
    p.glyphs(72, 660, "Total due: 1,250.00 EUR")
    return w.to_bytes()


def gray_image(width: int, height: int, draw=None) -> bytes:
    """8-bit gray samples, white, with ``draw(x, y) -> bool`` pixels black."""
    rows = []
    for y in range(height):
        rows.append(bytes(0 if draw and draw(x, y) else 255 for x in range(width)))
    return b"".join(rows)


REPORT_BODY = (
    "Capital expenditure on greenhouses and irrigation rose during the fiscal year.",
    "Revenue from tomato sales grew because the new rows of plants came into harvest.",
    "The board approved a dividend and the purchase of two new harvest machines.",
)


def annual_report_pdf(organisation: str, year: int, body=REPORT_BODY) -> bytes:
    """A small annual report: a cover naming its organisation and fiscal year, then one page
    per line of ``body``."""
    w = PdfWriter()
    cover = w.page()
    cover.text(72, 740, f"Annual Report {year}", size=20)
    cover.text(72, 700, organisation, size=16)
    cover.text(72, 660, f"For the fiscal year ended December 31, {year}")
    for number, line in enumerate(body, start=2):
        page = w.page()
        page.text(72, 740, f"Page {number} of the {year} report")
        page.text(72, 700, line)
    return w.to_bytes()
