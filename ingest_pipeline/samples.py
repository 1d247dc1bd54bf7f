"""The bundled sample documents: written by code, so the repository holds no binary it
did not make. ``python -m ingest_pipeline.samples DIR`` (re)writes them."""

from __future__ import annotations

import os
import sys

REPORT_PAGES = [
    [
        "Greenhouse Operations Report 2026",
        "Prepared by the facilities team for the spring planning meeting.",
        "",
        "1. Irrigation",
        "The drip irrigation system delivered 41,200 litres in March, a drop of",
        "12 percent against February after the leak in zone C was repaired.",
        "Moisture sensors in zones A and B are due for calibration in May.",
        "",
        "2. Heating",
        "Night temperatures were held at 14 degrees Celsius. The biomass boiler",
        "ran for 312 hours; wood pellet stock will last until the end of April.",
    ],
    [
        "3. Crops and yields",
        "Tomato yield reached 4.8 kilograms per square metre, the best spring so far.",
        "Basil suffered from downy mildew in bench 7; affected plants were removed",
        "and the bench was disinfected before replanting.",
        "",
        "4. Staffing",
        "Two seasonal workers start on 2 May. Safety training on the pesticide",
        "store is mandatory before anyone handles crop protection products.",
    ],
]

GUIDE_MD = """\
# Greenhouse handbook

A short handbook for people who work in the greenhouse.

## Opening checklist

1. Check the overnight minimum temperature on the control panel.
2. Open the roof vents when the inside temperature passes 24 degrees.
3. Walk every bench and note pests or disease in the logbook.

## Watering

Water seedlings before 10 in the morning so leaves dry before night.
Mature tomato plants need about two litres per plant per day in summer.

```text
# this line is inside a code fence, not a heading
valve zone-a open 15min
```

## Pest control

| Pest | Sign | First response |
|------|------|----------------|
| Whitefly | sticky leaves | yellow sticky traps |
| Aphids | curled shoots | release ladybirds |
| Red spider mite | fine webbing | raise humidity |
"""

PRICES_CSV = """\
product,unit,price_eur,supplier
Tomato seedlings,tray of 40,18.50,Van Dijk Plants
Basil seeds,packet,2.40,Herbia
Wood pellets,tonne,265.00,Forest Energy
Yellow sticky traps,pack of 25,11.90,BioControl Ltd
Ladybird larvae,box of 100,24.00,BioControl Ltd
"""

NOTES_TXT = """\
Maintenance notes

The north door hinge squeaks and needs oil. The spare key for the pesticide store
hangs in the office, on the hook left of the window. Rain water tank two is cracked;
a replacement has been ordered and should arrive within three weeks.
"""


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def simple_pdf(pages: list[list[str]], width: int = 612, height: int = 792) -> bytes:
    """A small PDF with one Helvetica text line per entry, top to bottom."""
    objects: list[bytes] = []
    page_ids = []
    font_id = 3
    first_page_id = 4
    for i, lines in enumerate(pages):
        page_id = first_page_id + 2 * i
        page_ids.append(page_id)
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    kids = " ".join(f"{pid} 0 R" for pid in page_ids)
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>".encode())
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
    for i, lines in enumerate(pages):
        content_id = page_ids[i] + 1
        ops = ["BT", "/F1 11 Tf", "14 TL", f"72 {height - 72} Td"]
        for n, line in enumerate(lines):
            size = 16 if n == 0 and i == 0 else 11
            ops.append(f"/F1 {size} Tf ({_escape(line)}) Tj T*")
        ops.append("ET")
        stream = "\n".join(ops).encode("latin-1")
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 {width} {height}] "
            f"/Resources << /Font << /F1 {font_id} 0 R >> >> /Contents {content_id} 0 R >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


def write_samples(folder: str) -> list[str]:
    """Write the sample documents into ``folder`` (unchanged files are left alone)."""
    os.makedirs(folder, exist_ok=True)
    files = {
        "greenhouse_report.pdf": simple_pdf(REPORT_PAGES),
        "greenhouse_handbook.md": GUIDE_MD.encode("utf-8"),
        "supplier_prices.csv": PRICES_CSV.encode("utf-8"),
        "maintenance_notes.txt": NOTES_TXT.encode("utf-8"),
    }
    written = []
    for name, content in files.items():
        path = os.path.join(folder, name)
        if os.path.exists(path) and open(path, "rb").read() == content:
            continue
        with open(path, "wb") as handle:
            handle.write(content)
        written.append(path)
    return written


if __name__ == "__main__":
    target = sys.argv[1] if len(sys.argv) > 1 else os.path.join("data", "sources")
    for path in write_samples(target):
        print(f"wrote {path}")
