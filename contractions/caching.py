"""Caches bounded by bytes as well as by entries, for the pipeline's pure functions.

`functools.lru_cache` bounds the number of entries only, so a cache of 4096 entries keyed on
subscripts strings of a megabyte each keeps gigabytes alive.  `byte_bounded_cache` is a
drop-in replacement (same call, ``cache_info()`` and ``cache_clear()``) that also bounds the
approximate bytes its keys and values hold, evicting least recently used entries past either
bound; an entry heavier than a fraction of the byte bound is computed but never stored, so one
huge argument cannot flush a warm cache.  It sits at the bottom of the pipeline (it imports only
the standard library), so every stage can use it.

>>> @byte_bounded_cache(maxsize=2, maxbytes=10_000)
... def shout(text):
...     return text.upper()
>>> shout('abc'), shout('abc'), shout.cache_info().hits
('ABC', 'ABC', 1)
>>> _ = shout('x' * 100_000)          # too heavy to keep: computed, not stored
>>> shout.cache_info().currsize
1
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Generic, NamedTuple, TypeVar

__all__ = ["CacheInfo", "ByteBoundedCache", "byte_bounded_cache", "weight", "ENTRY_FRACTION"]

R = TypeVar("R")

ENTRY_FRACTION = 8
"""An entry heavier than ``maxbytes / ENTRY_FRACTION`` is not stored."""

_WEIGH_DEPTH = 4  # containers nested deeper are counted by their own size only


class CacheInfo(NamedTuple):
    """`functools.lru_cache`'s four fields, plus the bytes held and their bound."""

    hits: int
    misses: int
    maxsize: int
    currsize: int
    currbytes: int = 0
    maxbytes: int = 0


_NUMBERS = frozenset({int, float, bool, complex, type(None)})
_CONTAINERS = frozenset({tuple, list, frozenset, set})


def _text(chars: int, ascii: bool, count: int = 1) -> int:
    # CPython's compact str: 49 bytes of header and a byte per ASCII character, more (and up
    # to 4 bytes per character) otherwise; counted by length, as sys.getsizeof is slow.
    return (49 * count + chars) if ascii else (76 * count + 4 * chars)


def weight(obj: Any, depth: int = _WEIGH_DEPTH) -> int:
    """Approximate bytes ``obj`` holds: strings and bytes by their length, tuples, lists,
    frozensets and dicts with their items, dataclass instances by their fields (a shared object
    is counted each time it is met, which errs on the heavy side).  Linear in the number of
    items, at C speed for flat containers of strings or numbers.

    >>> weight('a' * 1000) > 1000
    True
    """
    kind = type(obj)
    if kind is str:
        return _text(len(obj), obj.isascii())
    if kind is bytes:
        return 33 + len(obj)
    if kind in _NUMBERS:
        return 32
    size = sys.getsizeof(obj)
    if depth <= 0:
        return size
    if kind in _CONTAINERS:
        kinds = set(map(type, obj))
        if kinds <= {str}:
            joined = "".join(obj)
            return size + _text(len(joined), joined.isascii(), len(obj))
        if kinds <= _NUMBERS:
            return size + 32 * len(obj)
        return size + sum(weight(item, depth - 1) for item in obj)
    if kind is dict:
        return size + sum(weight(k, depth - 1) + weight(v, depth - 1) for k, v in obj.items())
    names = _FIELD_NAMES.get(kind)
    if names is None:
        names = _FIELD_NAMES[kind] = (
            tuple(f.name for f in dataclasses.fields(obj))
            if dataclasses.is_dataclass(obj) and not isinstance(obj, type) else ())
    if names:
        return size + sum(weight(getattr(obj, name), depth - 1) for name in names)
    return size


# Each type's dataclass field names (empty: not a dataclass), found once per type:
# `dataclasses.fields` and `is_dataclass` cost more than weighing a small instance.
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def shapes_key_weight(args: tuple[Any, ...]) -> int:
    """`weight` of a key of strings, shapes (tuples of ints) and tuples of those, counted flat
    and at a fraction of `weight`'s cost: for the caches keyed on a call's shapes, which miss on
    every new shape (a string still counts by its length, which is what the byte bound guards
    against; anything else is weighed by `weight`).

    >>> shapes_key_weight(('ab,bc->ac', ((2, 3), (3, 4)), ())) > len('ab,bc->ac')
    True
    """
    total = sys.getsizeof(args)
    for item in args:
        kind = type(item)
        if kind is str:
            total += _text(len(item), item.isascii())
        elif kind is tuple:
            total += 56 + 8 * len(item)
            for part in item:
                total += 56 + 40 * len(part) if type(part) is tuple else weight(part, 1)
        else:
            total += weight(item, 2)
    return total


class ByteBoundedCache(Generic[R]):
    """A thread-safe least-recently-used cache of ``function``'s results by positional
    arguments, bounded by ``maxsize`` entries and ``maxbytes`` (arguments plus result, as
    `weight` counts them).  Exceptions are not cached.  Unhashable arguments raise
    `TypeError`, as with `functools.lru_cache`."""

    def __init__(self, function: Callable[..., R], maxsize: int, maxbytes: int,
                 weigh_results: bool = True,
                 weigh_args: Callable[[tuple[Any, ...]], int] | None = None) -> None:
        self.__wrapped__ = function
        self.weigh_results = weigh_results
        self.weigh_args = weigh_args or weight
        functools.update_wrapper(self, function)
        self.maxsize, self.maxbytes = maxsize, maxbytes
        self._entries: OrderedDict[tuple[Any, ...], tuple[R, int]] = OrderedDict()
        self._lock = threading.Lock()
        self._hits = self._misses = self._bytes = 0

    def __call__(self, *args: Any) -> R:
        found = self._hit(args)
        if found is not None:
            return found[0]
        return self._keep(args, self.__wrapped__(*args))

    def get(self, key: tuple[Any, ...], make: Callable[[], R]) -> R:
        """The entry for ``key``, made by ``make()`` on a miss: for a caller that holds more
        than the key names (a plan, keyed by its string, shapes and lengths).

        >>> cache = ByteBoundedCache(len, maxsize=4, maxbytes=2**20)
        >>> cache.get(('ab',), lambda: 2), cache.get(('ab',), lambda: 3)
        (2, 2)
        """
        found = self._hit(key)
        if found is not None:
            return found[0]
        return self._keep(key, make())

    def _hit(self, key: tuple[Any, ...]) -> tuple[R, int] | None:
        # (a hit is one lookup: no closure is made for the miss that did not happen)
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
                self._hits += 1
            else:
                self._misses += 1
        return found

    def _keep(self, key: tuple[Any, ...], result: R) -> R:
        # A result derived from its arguments (a plan from a string and shapes) may be counted
        # as twice their weight: weighing a deep result costs more than computing some of them.
        weighed = self.weigh_args(key)
        cost = weighed + weight(result) if self.weigh_results else 2 * weighed
        if cost * ENTRY_FRACTION > self.maxbytes:
            return result
        with self._lock:
            if key not in self._entries:
                self._entries[key] = (result, cost)
                self._bytes += cost
                while len(self._entries) > self.maxsize or self._bytes > self.maxbytes:
                    _, (_, dropped) = self._entries.popitem(last=False)
                    self._bytes -= dropped
        return result

    def cache_info(self) -> CacheInfo:
        with self._lock:
            return CacheInfo(self._hits, self._misses, self.maxsize, len(self._entries),
                             self._bytes, self.maxbytes)

    def cache_clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._hits = self._misses = self._bytes = 0


def byte_bounded_cache(maxsize: int, maxbytes: int, weigh_results: bool = True,
                       weigh_args: Callable[[tuple[Any, ...]], int] | None = None,
                       ) -> Callable[[Callable[..., R]], ByteBoundedCache[R]]:
    """Decorate a pure function with a `ByteBoundedCache` (positional arguments only).

    ``weigh_results=False`` counts each entry as twice its arguments' weight, for results whose
    size follows from their arguments and that are too deep to weigh on every miss.
    ``weigh_args`` weighs the arguments instead of `weight` (for arguments some of which are
    shared singletons, such as a backend entry, that no entry holds alone)."""
    def decorate(function: Callable[..., R]) -> ByteBoundedCache[R]:
        return ByteBoundedCache(function, maxsize, maxbytes, weigh_results, weigh_args)
    return decorate
