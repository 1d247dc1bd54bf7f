import subprocess
import sys

HEAVY = ("pypdfium2", "pptx", "docx", "openpyxl", "onnxruntime", "lancedb", "markdown_it")


def test_importing_every_chunker_imports_no_parser():  # T-B8
    code = (
        "import sys\n"
        "from importlib.metadata import entry_points\n"
        "eps = entry_points(group='ingest_pipeline.chunkers')\n"
        "assert len(eps) >= 1\n"
        "for ep in eps: ep.load()\n"
        f"loaded = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "print(','.join(loaded))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"chunker modules imported heavy parsers: {out.stdout}"


def test_loading_the_code_location_imports_no_parser_or_model():
    code = (
        "import sys\n"
        "import ingest_pipeline.definitions\n"
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
