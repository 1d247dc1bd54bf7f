"""Throughput of markdown@1 against LangChain's Markdown splitters and a bare markdown-it parse.

Chunks every file of ../shared/corpus/markdown-bench (or the folders given) with
markdown@1, with LangChain's MarkdownHeaderTextSplitter followed by
RecursiveCharacterTextSplitter(chunk_size=1000), and parses it with markdown-it-py
(tables, dollar math, front matter: markdown@1's plugins), in full and with its inline
rule off; prints MB/s of CPU time
(time.process_time) for each and the ratios. Best of ``--repeat`` runs per contestant.

    .venv/bin/python bench/markdown_bench.py [--repeat 5] [DIR ...]
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Callable
from pathlib import Path

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "markdown-bench"


def load(dirs: list[Path]) -> list[str]:
    files = sorted(p for d in dirs for p in d.rglob("*") if p.is_file() and p.suffix in (".md", ".mdx"))
    texts = []
    for p in files:
        raw = p.read_bytes()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = raw.decode("latin-1")
        texts.append(text.replace("\r\n", "\n").replace("\r", "\n"))
    return texts


def timed(fn: Callable[[list[str]], int], texts: list[str], repeat: int) -> tuple[float, int]:
    best = float("inf")
    count = 0
    for _ in range(repeat):
        gc.collect()
        t0 = time.process_time()
        count = fn(texts)
        best = min(best, time.process_time() - t0)
    return best, count


def run_markdown(texts: list[str]) -> int:
    from ingest_pipeline.chunkers.markdown import MarkdownChunker

    chunker = MarkdownChunker()
    return sum(len(chunker.pieces(t)) for t in texts if t.strip())


def run_langchain(texts: list[str]) -> int:
    from langchain_text_splitters import MarkdownHeaderTextSplitter, RecursiveCharacterTextSplitter

    headers = MarkdownHeaderTextSplitter(headers_to_split_on=[("#" * k, f"h{k}") for k in range(1, 7)])
    chars = RecursiveCharacterTextSplitter(chunk_size=1000, chunk_overlap=0)
    return sum(len(chars.split_documents(headers.split_text(t))) for t in texts)


def run_markdown_it(texts: list[str]) -> int:
    from markdown_it import MarkdownIt
    from mdit_py_plugins.dollarmath import dollarmath_plugin
    from mdit_py_plugins.front_matter import front_matter_plugin

    md = MarkdownIt("commonmark").enable("table").use(dollarmath_plugin).use(front_matter_plugin)
    return sum(len(md.parse(t)) for t in texts)


def run_markdown_it_blocks(texts: list[str]) -> int:
    from markdown_it import MarkdownIt
    from mdit_py_plugins.dollarmath import dollarmath_plugin
    from mdit_py_plugins.front_matter import front_matter_plugin

    md = MarkdownIt("commonmark").enable("table").use(dollarmath_plugin).use(front_matter_plugin)
    md.disable("inline")
    return sum(len(md.parse(t)) for t in texts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dirs", nargs="*", type=Path, default=[DEFAULT_CORPUS])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    texts = load(args.dirs)
    mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    # import everything once so no contestant pays for imports
    for fn in (run_markdown, run_langchain, run_markdown_it, run_markdown_it_blocks):
        fn(texts[:1])
    results = {}
    for name, fn in (
        ("markdown@1", run_markdown),
        ("langchain header+recursive(1000)", run_langchain),
        ("markdown-it-py full parse", run_markdown_it),
        ("markdown-it-py block parse only", run_markdown_it_blocks),
    ):
        seconds, count = timed(fn, texts, args.repeat)
        results[name] = mb / seconds
        print(f"{name:34s} {mb / seconds:7.2f} MB/s  ({seconds:.3f} s CPU, {count} chunks/tokens)")
    ours = results["markdown@1"]
    print(f"corpus: {len(texts)} files, {mb:.2f} MB")
    print(f"markdown@1 / langchain   = {ours / results['langchain header+recursive(1000)']:.2f}x")
    print(f"markdown@1 / markdown-it = {ours / results['markdown-it-py full parse']:.2f}x")
    print(f"markdown@1 / markdown-it blocks only = {ours / results['markdown-it-py block parse only']:.2f}x")


if __name__ == "__main__":
    main()
