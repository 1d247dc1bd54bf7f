"""Configurations kept: every config hash a chunk carries resolves to its values in the
``configs`` table, after the settings changed too, and ``inspect --chunk`` shows them."""

import json
import subprocess
import sys
from pathlib import Path

from ingest_pipeline_tests.conftest import write

CLI = str(Path(sys.executable).parent / "ingest-pipeline")


def cli(data: Path, *args: str) -> str:
    out = subprocess.run([CLI, "--data", str(data), *args], capture_output=True, text=True, timeout=900)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr[-3000:]
    return out.stdout


def _settings(data: Path, target: int) -> None:
    write(
        data / "ingest_pipeline.toml",
        f'[profiles.retrieval]\nchunkers = ["markdown@1"]\n\n[chunkers."markdown@1"]\n'
        f"min_chars = 20\ntarget_chars = {target}\nmax_chars = 1200\n",
    )


def test_a_chunks_config_hash_reads_back_as_its_values_after_the_settings_change(data_dir):
    body = "\n\n".join(f"Paragraph {i} says something about the harvest and the weather." for i in range(20))
    write(data_dir / "sources" / "notes.md", f"# Harvest\n\n{body}\n")
    _settings(data_dir, 300)
    cli(data_dir, "ingest", "--json")
    (first,) = json.loads(
        cli(
            data_dir, "query", "select distinct config_hash from chunks where profile = 'retrieval'", "--json"
        )
    )
    _settings(data_dir, 500)
    cli(data_dir, "ingest", "--json")
    (second,) = json.loads(
        cli(
            data_dir, "query", "select distinct config_hash from chunks where profile = 'retrieval'", "--json"
        )
    )
    assert first["config_hash"] != second["config_hash"]
    kept = json.loads(
        cli(data_dir, "query", "select config_hash, owner, config, code_version from configs", "--json")
    )
    values = {row["config_hash"]: json.loads(row["config"]) for row in kept}
    owners = {row["config_hash"]: row["owner"] for row in kept}
    # The old hash still says what cut last month's chunks; the new one what cuts today's.
    assert values[first["config_hash"]]["config"]["target_chars"] == 300
    assert values[second["config_hash"]]["config"]["target_chars"] == 500
    assert owners[first["config_hash"]] == owners[second["config_hash"]] == "markdown@1"
    assert all(row["code_version"].startswith("ingest") for row in kept)

    (chunk,) = json.loads(
        cli(data_dir, "query", "select chunk_id from chunks where profile = 'retrieval' limit 1", "--json")
    )
    (chain,) = json.loads(
        cli(data_dir, "inspect", "--chunk", chunk["chunk_id"], "--profile", "retrieval", "--json")
    )
    assert chain["config"]["values"]["config"]["target_chars"] == 500
    shown = cli(data_dir, "inspect", "--chunk", chunk["chunk_id"], "--profile", "retrieval")
    assert '"target_chars": 500' in shown
