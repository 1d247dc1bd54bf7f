"""The Dagster instance of a storage root, its stale runs, and what a run asks its launcher for.

A ``dagster.yaml`` written before the instance code became this package names the event log
storage's module ``ingest_pipeline.instance``; that name still resolves, on first use."""


def __getattr__(name: str):
    if name == "KeptOpenSqliteEventLogStorage":
        from ingest_pipeline.instance.home import KeptOpenSqliteEventLogStorage

        return KeptOpenSqliteEventLogStorage
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
