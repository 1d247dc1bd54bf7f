"""Display space for one PDF page: the frame that maps PDF user space (crop box,
``/Rotate``) to points from the top-left of the page as shown, y down; the chunk DPI."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

DPI_ENV = "INGEST_CHUNK_DPI"
DEFAULT_DPI = 120.0


@dataclass(frozen=True)
class PageFrame:
    """Maps PDF user space to display space for one page."""

    cx0: float
    cy0: float
    cx1: float
    cy1: float
    rotation: int  # clockwise degrees: 0, 90, 180 or 270

    @property
    def crop_width(self) -> float:
        return self.cx1 - self.cx0

    @property
    def crop_height(self) -> float:
        return self.cy1 - self.cy0

    @property
    def width(self) -> float:
        return self.crop_height if self.rotation in (90, 270) else self.crop_width

    @property
    def height(self) -> float:
        return self.crop_width if self.rotation in (90, 270) else self.crop_height

    def point(self, x: float, y: float) -> tuple[float, float]:
        u, v = x - self.cx0, self.cy1 - y
        r = self.rotation
        if r == 90:
            return self.crop_height - v, u
        if r == 180:
            return self.crop_width - u, self.crop_height - v
        if r == 270:
            return v, self.crop_width - u
        return u, v

    def box(self, left: float, bottom: float, right: float, top: float) -> tuple[float, float, float, float]:
        """A user-space box (l, b, r, t) as a display box (x0, y0, x1, y1)."""
        if self.rotation == 0:
            return (left - self.cx0, self.cy1 - top, right - self.cx0, self.cy1 - bottom)
        ax, ay = self.point(left, bottom)
        bx, by = self.point(right, top)
        return (min(ax, bx), min(ay, by), max(ax, bx), max(ay, by))

    def normalize(self, box: Sequence[float]):
        """A display box as a normalized bbox, or None if nothing is left."""
        w, h = self.width, self.height
        x0, y0, x1, y1 = box[0] / w, box[1] / h, box[2] / w, box[3] / h
        x0 = 0.0 if x0 < 0.0 else (1.0 if x0 > 1.0 else x0)
        y0 = 0.0 if y0 < 0.0 else (1.0 if y0 > 1.0 else y0)
        x1 = 0.0 if x1 < 0.0 else (1.0 if x1 > 1.0 else x1)
        y1 = 0.0 if y1 < 0.0 else (1.0 if y1 > 1.0 else y1)
        if x1 <= x0 or y1 <= y0:
            return None
        return (x0, y0, x1, y1)  # in range by construction; ChunkPiece validates it

    def visible_share(self, box: Sequence[float]) -> float:
        area = (box[2] - box[0]) * (box[3] - box[1])
        if area <= 0:
            inside = 0.0 <= box[0] <= self.width and 0.0 <= box[1] <= self.height
            return 1.0 if inside else 0.0
        ix = min(box[2], self.width) - max(box[0], 0.0)
        iy = min(box[3], self.height) - max(box[1], 0.0)
        return max(ix, 0.0) * max(iy, 0.0) / area

    def clamp(self, box: Sequence[float]) -> tuple[float, float, float, float]:
        return (
            max(box[0], 0.0),
            max(box[1], 0.0),
            min(box[2], self.width),
            min(box[3], self.height),
        )


def page_frame(page) -> PageFrame:
    """The frame of a pypdfium2 page: its crop box (within the media box) and /Rotate."""
    ml, mb, mr, mt = page.get_mediabox()
    try:
        cl, cb, cr, ct = page.get_cropbox()
    except Exception:  # noqa: BLE001 - a page without a usable crop box shows its media box
        cl, cb, cr, ct = ml, mb, mr, mt
    ml, mr = sorted((ml, mr))
    mb, mt = sorted((mb, mt))
    cl, cr = sorted((cl, cr))
    cb, ct = sorted((cb, ct))
    x0, y0, x1, y1 = max(cl, ml), max(cb, mb), min(cr, mr), min(ct, mt)
    if x1 - x0 < 1 or y1 - y0 < 1:
        x0, y0, x1, y1 = ml, mb, mr, mt
    rotation = int(page.get_rotation() or 0) % 360
    return PageFrame(x0, y0, x1, y1, rotation)
