"""Parsing in a worker process with a time and a memory limit.

Readers and chunkers open untrusted bytes with native libraries (PDFium, lxml, ONNX OCR).
A hostile file may make one hang, exhaust memory or crash; in the worker that costs one
document a clear error instead of the whole run. One worker is kept per process and
reused; it is replaced after a timeout or a crash. Its owner closes it when its work is done
(the Dagster resource ``ParseWorkerResource`` at the end of each step, the CLI at exit), and
the kernel ends it if its parent dies first, so no worker outlives the process it serves.
A process that executes many runs itself (the CLI's batches) keeps one worker for all of
them (``kept_worker``) rather than starting a fresh interpreter for each run.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")


STARTUP_TIMEOUT = 120.0


def _ready() -> bool:
    return True


def _within(memory_bytes: int | None, fn: Callable[..., T], *args: Any) -> T:
    """In the worker: ``fn(*args)`` under an address-space limit of its own, then the
    worker's limit again."""
    import errno
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = memory_bytes or resource.RLIM_INFINITY
    if hard != resource.RLIM_INFINITY:
        limit = hard if limit == resource.RLIM_INFINITY else min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        return fn(*args)
    except OSError as exc:
        # A library the call loads first (a reader's shared object) cannot be mapped under
        # the limit: that is the limit's doing, not the document's.
        if exc.errno == errno.ENOMEM or "map segment" in str(exc) or "allocate memory" in str(exc):
            raise MemoryError(str(exc)) from None
        raise
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


class ParseLimitExceeded(Exception):
    """The worker ran out of time or memory, or died, on this document."""


def _start_worker(limit_bytes: int | None, parent_pid: int) -> None:
    """In the worker: die with the parent, and cap the address space."""
    import os
    import signal
    import sys

    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent_pid:  # the parent died before the signal was armed
            os._exit(1)
    if limit_bytes:
        import resource

        # the soft limit only: a call with a route's own limit moves it (``_within``)
        resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, resource.getrlimit(resource.RLIMIT_AS)[1]))
    # The tokenizer's own thread pool gains nothing here (the worker runs beside the model,
    # which keeps the cores busy) and costs the time its threads spend waiting for work:
    # pdf@4 counts tokens page by page, thousands of small calls an ingest
    # (bench/token_count_bench.py, bench/results/token_count_one_thread.json).
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from ingest_pipeline.runtime.collector import fewer_collections

    fewer_collections()


class ParseWorker:
    """Runs a picklable call in a spawned worker; ``timeout`` of 0 runs it in process."""

    def __init__(self, timeout: float, memory_bytes: int | None) -> None:
        self.timeout = timeout
        self.memory_bytes = memory_bytes
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None
        self._owner: threading.Thread | None = None  # the thread that started the worker
        self._lock = threading.Lock()

    def start(self) -> None:
        """Start the worker now, from this thread (a step starts its workers before handing
        them to threads of its own: the worker dies with the thread that started it)."""
        if self.timeout > 0:
            with self._lock:
                self._executor()

    def _executor(self) -> concurrent.futures.ProcessPoolExecutor:
        if self._pool is not None and self._owner is not None and not self._owner.is_alive():
            # PR_SET_PDEATHSIG fires when the starting *thread* ends: that worker is gone
            self._discard()
        if self._pool is None:
            pool = concurrent.futures.ProcessPoolExecutor(
                max_workers=1,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_start_worker,
                initargs=(self.memory_bytes, os.getpid()),
            )
            # Start the worker before any document's clock runs: its start-up (a fresh
            # interpreter) is not parsing time, and can take seconds on a busy machine.
            pool.submit(_ready).result(timeout=STARTUP_TIMEOUT)
            self._pool, self._owner = pool, threading.current_thread()
        return self._pool

    def _discard(self) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        processes = list((getattr(pool, "_processes", None) or {}).values())
        for process in processes:
            process.kill()
        pool.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            process.join(timeout=5)

    def call(
        self, fn: Callable[..., T], *args: Any, timeout: float | None = None, memory_bytes: int | None = None
    ) -> T:
        """``fn(*args)`` in the worker; ``timeout`` and ``memory_bytes`` replace the worker's
        own limits for this call (a route's limits). In process (timeout 0) there are none."""
        if self.timeout <= 0:
            return fn(*args)
        seconds = timeout or self.timeout
        memory = memory_bytes or self.memory_bytes
        with self._lock:  # one document at a time per worker
            if memory != self.memory_bytes:
                future = self._executor().submit(_within, memory, fn, *args)
            else:
                future = self._executor().submit(fn, *args)
            try:
                return future.result(timeout=seconds)
            except concurrent.futures.TimeoutError:
                self._discard()
                stopped = f"parsing took longer than {seconds:g} s and was stopped"
                raise ParseLimitExceeded(stopped) from None
            except BrokenProcessPool:
                self._discard()
                raise ParseLimitExceeded(
                    "the parser process died (a crash, or memory over the limit of "
                    f"{(memory or 0) // 2**20} MiB)"
                ) from None
            except MemoryError:
                raise ParseLimitExceeded(
                    f"parsing needed more memory than the limit of {(memory or 0) // 2**20} MiB"
                ) from None

    @property
    def started(self) -> bool:
        return self._pool is not None

    def pids(self) -> list[int]:
        """Process ids of the live worker (for tests and diagnostics)."""
        pool = self._pool
        return [p.pid for p in (getattr(pool, "_processes", None) or {}).values()] if pool else []

    def close(self) -> None:
        """Stop the worker now (a call in flight fails); a later call starts a new one."""
        self._discard()


_KEPT: list[ParseWorker] = []


@contextmanager
def kept_worker(timeout: float, memory_bytes: int | None) -> Iterator[ParseWorker]:
    """One worker for every run this process executes while the block lasts: each run's
    ``ParseWorkerResource`` borrows it (``kept``) instead of starting, warming and stopping
    its own. It stops when the block ends."""
    worker = ParseWorker(timeout, memory_bytes)
    _KEPT.append(worker)
    try:
        yield worker
    finally:
        _KEPT.remove(worker)
        worker.close()


def kept(timeout: float, memory_bytes: int | None) -> ParseWorker | None:
    """The kept worker of this process with these limits, if a ``kept_worker`` block is open."""
    for worker in reversed(_KEPT):
        if worker.timeout == timeout and worker.memory_bytes == memory_bytes:
            return worker
    return None
