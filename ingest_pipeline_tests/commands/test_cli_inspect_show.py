"""``inspect`` and ``show`` on corpus documents: JSON Lines that round-trip every chunk
complete with its cache status, and page pictures whose box colours lie on the chunks'
boxes."""

import base64
import json
import subprocess
import sys
from pathlib import Path

import pytest

from ingest_pipeline.commands.inspection import records_from_jsonl
from ingest_pipeline.settings import load_settings
from ingest_pipeline.storage.catalog import query
from ingest_pipeline.storage.lake import Lake
from ingest_pipeline_tests.conftest import CORPUS, requires_corpus

CLI = str(Path(sys.executable).parent / "ingest-pipeline")
PDF = CORPUS / "files" / "pdf" / "pypdf-samples__multicolumn.pdf"
SLIDES = CORPUS / "files" / "pptx" / "python-pptx__shp-shapes.pptx"
DOCX = CORPUS / "files" / "docx" / "docling__word_tables.docx"

pytestmark = requires_corpus


def run(data: Path, *args: str, ok: bool = True) -> subprocess.CompletedProcess:
    out = subprocess.run([CLI, "--data", str(data), *args], capture_output=True, text=True, timeout=900)
    assert "Traceback" not in out.stderr, out.stderr[-3000:]
    if ok:
        assert out.returncode == 0, out.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("inspect") / "data"
    report = json.loads(run(root, "ingest", str(PDF), str(SLIDES), str(DOCX), "--json").stdout)
    assert report["failed"] == 0, report["failures"]
    return root


def lake_of(data: Path) -> Lake:
    return Lake(load_settings(str(data)).lake_root)


def test_inspect_jsonl_round_trips_every_chunk_with_its_cache_status(data):
    out = run(data, "inspect", SLIDES.name, "--format", "jsonl").stdout
    records = records_from_jsonl(out)
    source = records[0]
    assert source["record"] == "source" and source["content"] == SLIDES.read_bytes()
    assert json.loads(out.splitlines()[0])["content_base64"] == base64.b64encode(SLIDES.read_bytes()).decode()
    chunks = [r for r in records if r["record"] == "chunk"]
    lake = lake_of(data)
    did = source["document_id"]
    rows = query(
        lake,
        'SELECT * FROM chunks WHERE document_id = ? AND profile = ? ORDER BY page, "index"',
        [did, "retrieval"],
    ).to_pylist()
    vectors = {
        r["chunk_id"]: r
        for r in query(
            lake, "SELECT * FROM embeddings WHERE document_id = ? AND profile = ?", [did, "retrieval"]
        ).to_pylist()
    }
    assert len(rows) == len(chunks) > 3
    for row, record in zip(rows, chunks):
        assert {k: record[k] for k in row} == row  # every column, complete and typed as stored
        emb = vectors.get(row["chunk_id"])
        if row["text"]:
            assert record["vector"] == emb["vector"] and len(record["vector"]) == 384
            assert record["cache"] == emb["cache"] and record["cache"] in ("embedded", "cached")
            assert record["cache_run_id"] == emb["run_id"]
        assert record["parent_document"] == did and record["of"] == len(rows)
    assert [r["position"] for r in chunks] == list(range(1, len(rows) + 1))
    assert any(r["cache"] == "embedded" for r in chunks)  # the first ingest embedded them
    summary = records[-1]
    tokens = [r["tokens"] for r in rows if r["tokens"] is not None]
    assert summary["record"] == "summary" and summary["items"] == len(rows)
    assert (summary["tokens"]["min"], summary["tokens"]["max"]) == (min(tokens), max(tokens))
    assert summary["over_token_limit"] == sum(1 for t in tokens if t > 256)


def test_inspect_shows_a_utf8_source_as_text_and_a_binary_one_as_base64(tmp_path):
    """SPEC E28: a UTF-8 source is shown as its text, anything else as a pointer to its
    bytes, which the JSON Lines record carries as content_base64 for exact recovery."""
    root, note = tmp_path / "data", tmp_path / "sowing.txt"
    note.write_text("Sow after the last frost: 12 May.\nTomato seedlings € 18,50 a tray.\n", encoding="utf-8")
    report = json.loads(run(root, "ingest", str(note), str(PDF), "--json").stdout)
    assert report["failed"] == 0, report["failures"]
    shown = run(root, "inspect", note.name, "--stage", "sources", "--no-color").stdout
    assert "content (UTF-8)" in shown and "Tomato seedlings € 18,50 a tray." in shown, shown
    binary = run(root, "inspect", PDF.name, "--stage", "sources", "--no-color").stdout
    assert "content (UTF-8)" not in binary and "as content_base64" in binary, binary
    for path in (note, PDF):
        out = run(root, "inspect", path.name, "--stage", "sources", "--format", "jsonl").stdout
        assert base64.b64decode(json.loads(out.splitlines()[0])["content_base64"]) == path.read_bytes()


def test_inspect_limits_long_texts_and_shows_cache_status_and_sizes(data):
    lines = records_from_jsonl(
        run(data, "inspect", PDF.name, "--stage", "pages", "--format", "jsonl", "--content-lines", "1").stdout
    )
    page = next(r for r in lines if r["record"] == "page")
    full = query(
        lake_of(data), "SELECT text FROM pages WHERE document_id = ? AND page = 1", [page["document_id"]]
    ).to_pylist()[0]["text"]
    kept = full.split("\n")
    assert page["text"].split("\n") == [kept[0], f"… {len(kept) - 2} lines omitted …", kept[-1]]
    assert page["text_omitted_lines"] == len(kept) - 2
    shown = run(data, "inspect", SLIDES.name, "--content-lines", "2").stdout
    assert "embedded now" in shown or "from cache" in shown
    assert "chunks · characters min" in shown and "over the 256-token limit" in shown
    assert run(data, "inspect", SLIDES.name, "--chunker", "nope@9", ok=False).returncode == 1


def _pixels_check(png: Path, drawn: dict, boxes: list[list[tuple[str, dict]]]) -> None:
    """Each box's top and bottom edges carry its role's colour, and the role colours
    appear nowhere on the page but on (or next to the number tags of) such boxes."""
    from PIL import Image

    image = Image.open(png).convert("RGB")
    px = image.load()
    w, h = drawn["page_width"], drawn["page_height"]
    for (ox, oy), panel in zip(drawn["origins"], boxes):
        near: dict[tuple, list[tuple[int, int, int, int]]] = {}
        for role, b in panel:
            colour = tuple(drawn["roles"][role])
            left, right = ox + b["x0"] * w, ox + b["x1"] * w
            top, bottom = oy + b["y0"] * h, oy + b["y1"] * h
            columns = range(int(left + (right - left) * 0.3), int(right - (right - left) * 0.3) + 1)
            for edge in (top, bottom):
                hit = sum(
                    any(px[x, y] == colour for y in range(int(edge) - 3, int(edge) + 4)) for x in columns
                )
                assert hit >= 0.6 * len(columns), (role, b, edge)
            near.setdefault(colour, []).append(
                (int(left) - 45, int(top) - 30, int(right) + 4, int(bottom) + 4)
            )
        for colour, rects in near.items():
            found = inside = 0
            for y in range(oy, oy + h):
                for x in range(ox, ox + w):
                    if px[x, y] == colour:
                        found += 1
                        inside += any(x0 <= x <= x1 and y0 <= y <= y1 for x0, y0, x1, y1 in rects)
            assert found and inside / found > 0.99, (colour, found, inside)


def _page_boxes(data: Path, path: str, page: int, profile: str) -> list[tuple[str, dict]]:
    rows = query(
        lake_of(data),
        "SELECT role, bbox FROM chunks WHERE path = ? AND profile = ? AND page = ? "
        'AND bbox IS NOT NULL ORDER BY "index"',
        [path, profile, page],
    ).to_pylist()
    return [(r["role"] or "none", r["bbox"]) for r in rows]


@pytest.mark.parametrize("doc, profile", [(PDF, "default"), (SLIDES, "retrieval")], ids=["pdf", "slide"])
def test_show_draws_a_page_with_boxes_in_their_role_colours(data, tmp_path, doc, profile):
    out = tmp_path / "page.png"
    drawn = json.loads(
        run(data, "show", doc.name, "--page", "1", "--profile", profile, "--out", str(out), "--json").stdout
    )
    assert out.read_bytes().startswith(b"\x89PNG") and 2_000 < out.stat().st_size < 400_000
    from PIL import Image

    width, height = Image.open(out).size
    assert drawn["page_width"] == width and 850 <= width <= 950
    assert height > drawn["page_height"]  # the page, its title and the legend below it
    boxes = _page_boxes(data, doc.name, 1, profile)
    assert len(boxes) >= 2 and drawn["panels"][0]["boxes"] == len(boxes)
    _pixels_check(out, drawn, [boxes])
    if doc == SLIDES:  # a slide is not rendered: its chunks' text is written in their boxes
        image = Image.open(out).convert("RGB")
        left, top = drawn["origins"][0]
        page = image.crop((left, top, left + drawn["page_width"], top + drawn["page_height"]))
        assert sum(max(p) < 120 for p in page.getdata()) > 200


def test_show_compares_two_chunker_versions_and_refuses_formats_without_geometry(data, tmp_path):
    out = tmp_path / "compare.png"
    drawn = json.loads(
        run(data, "show", PDF.name, "--compare", "pdf@1", "page@1", "--out", str(out), "--json").stdout
    )
    from PIL import Image

    assert Image.open(out).size[0] == 2 * drawn["page_width"] + drawn["origins"][1][0] - drawn["page_width"]
    assert [p["title"].split(":")[0] for p in drawn["panels"]] == ["pdf@1", "page@1"]
    assert drawn["panels"][0]["boxes"] > drawn["panels"][1]["boxes"]
    refused = run(data, "show", DOCX.name, "--out", str(tmp_path / "no.png"), ok=False)
    assert refused.returncode == 1 and "no page geometry" in refused.stderr
    assert not (tmp_path / "no.png").exists()
