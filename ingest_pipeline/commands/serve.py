"""``serve``: the HTTP service and web page over a storage root (ingest_pipeline.serving)."""

from __future__ import annotations

import argparse
import sys


def serve_arguments(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1: this machine only; 0.0.0.0 opens it to the network)",
    )
    cmd.add_argument("--port", type=int, default=8765)


def cmd_serve(args) -> int:
    import uvicorn

    from ingest_pipeline.resources import parts_for
    from ingest_pipeline.serving.app import build_app
    from ingest_pipeline.storage import object_store

    parts = parts_for(object_store.absolute(args.data))
    app = build_app(parts)
    print(f"serving {parts.settings.data} on http://{args.host}:{args.port}/ (read-only)", file=sys.stderr)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0
