# The two commands that matter on a fresh machine: `make run` and `make test`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
DATA ?= data
QUESTION ?= how much water do tomato plants need

.PHONY: run test ui bench bench-suite benchmarks-page corpus clean-data

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

run: $(VENV)/.installed
	$(BIN)/python -m ingest_pipeline.samples $(DATA)/sources
	$(BIN)/ingest-pipeline --data $(DATA) ingest
	$(BIN)/ingest-pipeline --data $(DATA) search "$(QUESTION)" -k 3
	$(BIN)/ingest-pipeline --data $(DATA) query "select profile, count(*) as chunks, count(distinct path) as documents, round(avg(tokens)) as mean_tokens, string_agg(distinct chunker, ' ') as chunkers from chunks group by profile order by profile"

test: $(VENV)/.installed
	$(BIN)/python -m pytest -q -n 2 --dist loadfile --durations=25

ui: $(VENV)/.installed
	DAGSTER_HOME=$(abspath $(DATA))/dagster_home INGEST_DATA=$(abspath $(DATA)) $(BIN)/dagster dev -w workspace.yaml

bench: $(VENV)/.installed
	$(BIN)/python bench/ingest_bench.py

bench-suite: $(VENV)/.installed
	$(BIN)/python bench/suite.py

# docs/benchmarks.md from bench/results/*.json (the standard library only: no venv needed).
benchmarks-page:
	$(PYTHON) bench/benchmarks_page.py

corpus: $(VENV)/.installed
	$(BIN)/ingest-pipeline --data /tmp/ingest-corpus ingest ../shared/corpus/files

clean-data:
	rm -rf $(DATA)/lake $(DATA)/lancedb $(DATA)/catalog.duckdb
	find $(DATA)/dagster_home -mindepth 1 ! -name dagster.yaml -exec rm -rf {} +
