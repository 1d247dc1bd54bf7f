"""Parsing in a worker process with a time and a memory limit.

Readers and chunkers open untrusted bytes with native libraries (PDFium, lxml, ONNX OCR).
A hostile file may make one hang, exhaust memory or crash; in the worker that costs one
document a clear error instead of the whole run. One worker is kept per process and
reused; it is replaced after a timeout or a crash.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import threading
from collections.abc import Callable
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

T = TypeVar("T")


class ParseLimitExceeded(Exception):
    """The worker ran out of time or memory, or died, on this document."""


def _limit_memory(limit_bytes: int | None) -> None:
    if limit_bytes:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))


class ParseWorker:
    """Runs a picklable call in a spawned worker; ``timeout`` of 0 runs it in process."""

    def __init__(self, timeout: float, memory_bytes: int | None) -> None:
        self.timeout = timeout
        self.memory_bytes = memory_bytes
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None
        self._lock = threading.Lock()

    def _executor(self) -> concurrent.futures.ProcessPoolExecutor:
        if self._pool is None:
            self._pool = concurrent.futures.ProcessPoolExecutor(
                max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                initializer=_limit_memory, initargs=(self.memory_bytes,))
        return self._pool

    def _discard(self) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        for process in list(getattr(pool, "_processes", {}).values()):
            process.kill()
        pool.shutdown(wait=False, cancel_futures=True)

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        if self.timeout <= 0:
            return fn(*args)
        with self._lock:  # one document at a time per worker
            future = self._executor().submit(fn, *args)
            try:
                return future.result(timeout=self.timeout)
            except concurrent.futures.TimeoutError:
                self._discard()
                raise ParseLimitExceeded(f"parsing took longer than {self.timeout:.0f} s and was stopped") from None
            except BrokenProcessPool:
                self._discard()
                raise ParseLimitExceeded(
                    "the parser process died (a crash, or memory over the limit of "
                    f"{(self.memory_bytes or 0) // 2**20} MiB)") from None
            except MemoryError:
                raise ParseLimitExceeded(
                    f"parsing needed more memory than the limit of {(self.memory_bytes or 0) // 2**20} MiB") from None

    def close(self) -> None:
        self._discard()
