"""The ``ingest-pipeline`` command line and what each command prints."""
