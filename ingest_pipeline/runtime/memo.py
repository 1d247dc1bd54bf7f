"""A per-process memo bounded by the estimated bytes of what it keeps."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections import OrderedDict
from typing import Any


class BoundedMemo(ABC):
    """Values by key, the least recently used out first once the kept values' estimated
    size (``_cost``) passes ``LIMIT``; a value over ``LIMIT // SHARE`` is not kept at all.
    ``LIMIT`` is read at each ``put``, so a subclass or a test sets it. Thread-safe."""

    LIMIT = 16 * 2**20
    SHARE = 8

    def __init__(self) -> None:
        self._kept: OrderedDict[Any, Any] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    @abstractmethod
    def _cost(self, key: Any, value: Any) -> int:
        """The estimated bytes ``value`` holds under ``key``: each kind of memo says its own."""

    def get(self, key: Any) -> Any | None:
        with self._lock:
            value = self._kept.get(key) if key is not None else None
            if value is None:
                self.misses += 1
                return None
            self._kept.move_to_end(key)
            self.hits += 1
            return value

    def put(self, key: Any, value: Any) -> None:
        if key is None:
            return
        cost = self._cost(key, value)
        with self._lock:
            if key in self._kept or cost > self.LIMIT // self.SHARE:
                return
            self._kept[key] = value
            self._bytes += cost
            while self._bytes > self.LIMIT:
                old_key, old_value = self._kept.popitem(last=False)
                self._bytes -= self._cost(old_key, old_value)

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()
            self._bytes = 0
