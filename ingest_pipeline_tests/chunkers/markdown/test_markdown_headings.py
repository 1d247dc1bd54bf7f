"""headings@1 (SPEC C65–C68) and how both Markdown chunkers are registered."""

from __future__ import annotations

from ingest_pipeline.chunkers.headings import HeadingsChunker
from ingest_pipeline.contract import PageOutput
from ingest_pipeline.registry import ChunkerRegistry


def pieces(text: str):
    pages = (PageOutput(page=1, status="read", reader="text@1", text=text),)
    answer = HeadingsChunker().chunk(text.encode(), "text/markdown", pages)
    assert len(answer) == 1
    return answer[0].pieces


DOC = """Preface before any heading.

Title
=====

Intro of the title.

## Setup ##

```sh
# a comment, not a heading
   ## nor this
```

| a | b |
|---|---|
| 1 | 2 |

- one
- two

# Part

## Chapter

### Section

Section body.

## Other
"""


def test_identity():
    c = HeadingsChunker()
    assert (c.id, c.version, c.opt_in, c.builtin) == ("headings", 1, True, True)
    assert c.chunk(b"# x", "text/plain", (PageOutput(1, "read", "text@1", "# x"),)) == ()


def test_one_chunk_per_section_with_whole_blocks():
    ps = pieces(DOC)
    assert [p.header_path for p in ps] == [
        (),
        ("Title",),
        ("Title", "Setup"),
        ("Part", "Chapter", "Section"),
        ("Part", "Other"),
    ]
    setup = ps[2]
    assert "# a comment, not a heading" in setup.text and "| 1 | 2 |" in setup.text
    assert setup.text.endswith("- two")
    assert setup.meta["headings"] == ["Title", "Setup"]  # closing #s stripped, outermost first


def test_pre_heading_text_has_an_empty_path():
    first = pieces(DOC)[0]
    assert first.header_path == () and first.text == "Preface before any heading."
    assert first.embed_text == first.text


def test_heading_with_only_subheadings_travels_with_them():
    part = pieces(DOC)[3]
    assert part.text.startswith("# Part\n\n## Chapter\n\n### Section\n\nSection body.")
    assert part.embed_text.startswith("Part > Chapter > Section\n\n# Part")


def test_no_size_limit():
    body = "\n\n".join("word " * 200 for _ in range(30))
    (p,) = pieces("# Big\n\n" + body)
    assert len(p.text) > 20_000
    assert p.meta["start_line"] == 1 and p.meta["end_line"] == 61


def test_atx_rules():
    text = "#NoSpace\n\n    # indented code\n\n   ### Three spaces ###\n\nbody\n"
    ps = pieces(text)
    assert [p.header_path for p in ps] == [(), ("Three spaces",)]
    assert "#NoSpace" in ps[0].text and "# indented code" in ps[0].text


def test_registry_discovers_both_markdown_chunkers():
    registry = ChunkerRegistry.discover()
    assert "markdown@1" in registry and "headings@1" in registry
    defaults = [f"{c.id}@{c.version}" for c in registry.default_order()]
    assert "markdown@1" in defaults and "headings@1" not in defaults
    assert defaults.index("markdown@1") < defaults.index("page@1")
    led = [f"{c.id}@{c.version}" for c in registry.order_for(["headings@1"])]
    assert led[0] == "headings@1" and "markdown@1" in led
    info = registry.info(registry.get("markdown@1"))
    assert info.media_types == ("text/markdown",) and len(info.config_hash) == 16
    tuned = registry.configured({"markdown@1": {"max_chars": 600, "target_chars": 400}})
    assert tuned.info(tuned.get("markdown@1")).config_hash != info.config_hash
