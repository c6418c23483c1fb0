"""Plans that outlive the process: what the full search decided, kept on disk.

As FFTW keeps "wisdom", the decisions of every full search (`schedule.decisions`) are kept in
a store, and a later process that meets the same structure at the same extents lowers them at
once, checked against the call (dev/decisions.md 56, 59).  Where: the directory ``plans`` in the
per-user cache directory; ``CONTRACTIONS_PLANS=PATH`` names another directory, ``=off`` turns
it off.  It is opened on the first call that could use it, never on import.

A directory of small JSON files, data only: ``header.json`` (the library version, the
profile's fingerprint, the format: a header that does not match makes the store ignored, with
one warning) and one file per entry, named by a checksum of its key and holding the key and the
decisions (a file whose key differs is not that entry).  Each file is written whole and moved
into place (`os.replace`), so processes writing at once lose nothing and never leave a torn
entry; an entry that does not parse or fit is dropped with one warning.  Writes are batched
(`FLUSH_EVERY`); past `max_bytes` (each entry counted in whole `BLOCK` bytes, what a small
file takes on disk) the least recently used entries are evicted.  Opening it reads one small
file and a lookup opens one: no database to import (SQLite's import alone took ~1.5 ms).

>>> import tempfile, pathlib
>>> store = PlanStore(pathlib.Path(tempfile.mkdtemp()) / 'plans')
>>> store.put('k', {'strategy': 'pairwise', 'path': [[0, 1]]}); store.flush()
>>> store.get('k')
{'strategy': 'pairwise', 'path': [[0, 1]]}
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import json
import os
import stat
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .._version import __version__
from ..backends import measured

# (zlib and dataclasses are imported where they are used: importing contractions must not
# pay for a store it may never open)

__all__ = ["BLOCK", "ENVIRONMENT_VARIABLE", "FLUSH_EVERY", "MAX_BYTES", "PlanStore", "active_store",
           "default_path", "profile_fingerprint", "reset_active_store", "switched_off"]

ENVIRONMENT_VARIABLE = "CONTRACTIONS_PLANS"
#: The store's bound on its entries' bytes; the least recently used go first.
MAX_BYTES = 64 * 2**20
#: An entry's bytes are counted in whole blocks of this size (a small file's share of a disk).
BLOCK = 4096
#: A store file larger than this is not read (a plan takes a few hundred bytes).
MAX_ENTRY_BYTES = 2**20
#: Pending entries written at once; the rest are written when the process exits.
FLUSH_EVERY = 32
#: The store's format; a store of another format is ignored like one of another version.
FORMAT = "2"
HEADER = "header.json"


class StoreWarning(UserWarning):
    """The plan store was ignored or an entry dropped (the calls plan afresh: only speed)."""


def default_path() -> Path:
    """The directory ``plans`` in the per-user cache directory (beside the calibrated profile)."""
    import platformdirs

    return Path(platformdirs.user_cache_dir("grouped-einsum")) / "plans"


def checksum(text: str) -> str:
    """16 hex digits telling texts apart (a checksum, not a signature: hashlib costs ms to
    import, zlib nothing).

    >>> checksum('ab') == checksum('ab') != checksum('ba')
    True
    """
    import zlib

    data = text.encode()
    return f"{zlib.crc32(data):08x}{zlib.adler32(data):08x}"


def profile_fingerprint() -> str:
    """A checksum of the active profile's prices: plans priced by other prices are not
    this machine's decisions."""
    import dataclasses

    from ..model.profile import active_profile

    fields = dataclasses.asdict(active_profile())
    fields.pop("source", None)   # (where it was read from is not what it prices)
    return checksum(json.dumps(fields, sort_keys=True, default=str))


class PlanStore:
    """One store directory: `get` and `put` decisions by key, `flush` pending writes, and the
    maintenance the ``contractions plans`` command offers (`entries`, `clear`, `export`,
    `import_from`).  ``header`` is what the directory must say of itself to be used (the
    library version, the profile fingerprint, the format); one that says otherwise is ignored."""

    def __init__(self, path: str | os.PathLike[str], max_bytes: int = MAX_BYTES,
                 header: dict[str, str] | None = None) -> None:
        self.path = Path(path)
        self._directory = os.path.join(str(self.path), "")
        self.max_bytes = max_bytes
        self.header = header if header is not None else {
            "format": FORMAT, "version": __version__, "profile": profile_fingerprint()}
        self._pending: dict[str, str] = {}
        self._touched: set[str] = set()   # entries read since the last flush (their use is kept then)
        self._lock = threading.Lock()
        self._usable: bool | None = None   # None: not opened yet
        self._warned: set[str] = set()
        self._names = itertools.count()

    # ------------------------------------------------------------------ reading, writing
    def entry_path(self, key: str) -> Path:
        """The file that holds ``key``'s entry."""
        return Path(self._entry_file(key))

    def _entry_file(self, key: str) -> str:
        # (a string, not a Path: a lookup is on a first call's path)
        return f"{self._directory}{checksum(key)}.json"

    def get(self, key: str) -> Any:
        """The decisions stored under ``key``, or None."""
        with self._lock:
            pending = self._pending.get(key)
        if pending is not None:
            return json.loads(pending)["value"]
        if not self._readable():
            return None
        try:
            text = _read_small(self._entry_file(key))
        except FileNotFoundError:    # (none stored; or evicted by another process meanwhile)
            return None
        except OSError:              # (not a file, unreadable, too large)
            self.drop(key, "could not be read")
            return None
        try:
            entry = json.loads(text)
        except (TypeError, ValueError, RecursionError):   # (cut short, or nested too deep)
            self.drop(key, "does not parse")
            return None
        if not isinstance(entry, dict) or entry.get("key") != key:
            return None     # (another key of the same checksum: not this entry)
        with self._lock:
            self._touched.add(key)
        return entry.get("value")

    def put(self, key: str, decisions: Any) -> None:
        """Keep ``decisions`` under ``key`` (written with the next flush)."""
        if self._usable is False:
            return
        text = json.dumps({"key": key, "value": decisions}, separators=(",", ":"))
        with self._lock:
            self._pending[key] = text
            full = len(self._pending) >= FLUSH_EVERY
        if full:
            self.flush()

    def drop(self, key: str, why: str) -> None:
        """Remove an entry that failed its checks, with one warning per process."""
        self._warn(f"a stored plan in {self.path} {why}; it was dropped and the call planned "
                   "afresh", "drop")
        with contextlib.suppress(OSError):
            os.remove(self._entry_file(key))

    def flush(self) -> None:
        """Write the pending entries (and when the entries read were last used), then evict
        past ``max_bytes``."""
        with self._lock:
            pending, self._pending = self._pending, {}
            touched, self._touched = self._touched, set()
        if not (pending or touched) or not self._open():
            return
        for key in touched - pending.keys():
            with contextlib.suppress(OSError):   # (evicted meanwhile by another process)
                os.utime(self._entry_file(key))
        try:
            for key, text in pending.items():
                self._write(Path(self._entry_file(key)), text)
            if pending:
                self._evict()
        except OSError as exc:
            self._give_up(f"could not be written ({exc})")

    @property
    def ignored(self) -> bool:
        """Did this process find the store unusable (another setup's header, unreadable)?"""
        return self._usable is False

    # --------------------------------------------------------------------- maintenance
    def entries(self) -> list[tuple[str, Any]]:
        """Every stored (key, decisions), least recently used first (an entry that does not
        parse is left out)."""
        self.flush()
        if not self._readable():
            return []
        found = []
        for _, _, name in sorted(self._files()):
            try:
                entry = json.loads(_read_small(self.path / name))
            except (OSError, ValueError, RecursionError):
                continue
            if isinstance(entry, dict) and isinstance(entry.get("key"), str):
                found.append((entry["key"], entry.get("value")))
        return found

    def size(self) -> int:
        """The bytes the stored entries count against ``max_bytes`` (whole `BLOCK` s)."""
        if not self._readable():
            return 0
        return sum(size for _, size, _ in self._files())

    def clear(self) -> None:
        """Remove the store (the next call that uses it starts it afresh, with this header)."""
        with self._lock:
            self._pending.clear()
            self._touched.clear()
        with contextlib.suppress(OSError):
            for name in os.listdir(self.path):
                if name.endswith((".json", ".tmp")):
                    with contextlib.suppress(OSError):
                        os.remove(self.path / name)
            os.rmdir(self.path)   # (only if nothing of anyone else's is left in it)
        self._usable = None

    def export(self, target: str | os.PathLike[str]) -> int:
        """Write every entry, with this store's header, to a JSON file; the number written."""
        found = self.entries()
        data = {"header": self.header, "plans": {k: v for k, v in found}}
        Path(target).write_text(json.dumps(data, indent=1, sort_keys=True))
        return len(found)

    def import_from(self, source: str | os.PathLike[str]) -> int:
        """Add the entries of an exported file whose header matches this store's (a file
        from another version or profile is refused with a `ValueError`); the number added."""
        data = json.loads(Path(source).read_text())
        if not isinstance(data, dict) or data.get("header") != self.header:
            raise ValueError(f"{source} was exported by another version of grouped-einsum or "
                             f"with another profile (its header: {data.get('header') if isinstance(data, dict) else None!r}, "
                             f"this store's: {self.header!r}); export it again on this setup")
        plans = data.get("plans")
        if not isinstance(plans, dict):
            raise ValueError(f"{source} holds no plans")
        for key, decisions in plans.items():
            if isinstance(key, str):
                self.put(key, decisions)
        self.flush()
        return len(plans)

    # --------------------------------------------------------------------------- inside
    def _write(self, target: Path, text: str) -> None:
        """``text`` into ``target`` whole: written beside it, then moved into place (a reader
        sees the old file or the new one, never a part)."""
        temporary = self._temporary(target)
        try:
            with open(temporary, "w") as file:
                file.write(text)
            os.replace(temporary, target)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.remove(temporary)

    def _temporary(self, target: Path) -> Path:
        """A name beside ``target`` no other writer (process, thread, write) uses, hidden
        from the entries (a leading dot)."""
        return self.path / f".{target.stem}.{os.getpid()}.{threading.get_ident()}.{next(self._names)}.tmp"

    def _files(self) -> list[tuple[float, int, str]]:
        """(last used, bytes counted, name) of each entry file."""
        found = []
        with os.scandir(self.path) as listing:
            for item in listing:
                if item.name.endswith(".json") and item.name != HEADER and not item.name.startswith("."):
                    try:
                        stat = item.stat()
                    except OSError:   # (evicted meanwhile)
                        continue
                    found.append((stat.st_mtime, -(-max(stat.st_size, 1) // BLOCK) * BLOCK, item.name))
        return found

    def _evict(self) -> None:
        files = self._files()
        excess = sum(size for _, size, _ in files) - self.max_bytes
        for _, size, name in sorted(files):
            if excess <= 0:
                break
            with contextlib.suppress(FileNotFoundError):   # (another process evicted it first)
                os.remove(self.path / name)
            excess -= size

    def _readable(self) -> bool:
        """Is there a usable store to read (reading creates nothing)?"""
        if self._usable is None and not self.path.exists():
            return False
        return self._open()

    def _open(self) -> bool:
        """Is the store usable (made with this header if new)?  Decided once per process."""
        if self._usable is not None:
            return self._usable
        header = self.path / HEADER
        try:
            if self.path.exists() and not self.path.is_dir():
                raise OSError("it is not a directory")
            self.path.mkdir(parents=True, exist_ok=True)
            if not header.exists():
                self._create(header)
            found = json.loads(_read_small(header))
        except (OSError, ValueError, RecursionError) as exc:
            self._give_up(f"could not be opened ({exc})")
            return False
        if found != self.header:
            differences = (_differences(found, self.header) if isinstance(found, dict)
                           else f"its header is {found!r}")
            self._give_up(f"was written by another setup ({differences}); it is ignored by this "
                          "process (`contractions plans --clear` starts it afresh)")
            return False
        self._usable = True
        return True

    def _create(self, header: Path) -> None:
        """Write this store's header, unless another process wrote one first (it is then read
        and compared like any other)."""
        temporary = self._temporary(header)
        try:
            temporary.write_text(json.dumps(self.header, sort_keys=True))
            try:
                os.link(temporary, header)          # (fails where one exists: the first wins)
            except FileExistsError:
                pass
            except OSError:                         # (a file system without links)
                if not header.exists():
                    os.replace(temporary, header)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.remove(temporary)

    def _give_up(self, why: str) -> None:
        self._usable = False
        with self._lock:
            self._pending.clear()
        self._warn(f"the plan store {self.path} {why}", "ignored")

    def _warn(self, message: str, kind: str) -> None:
        if kind not in self._warned:
            self._warned.add(kind)
            warnings.warn(message, StoreWarning, stacklevel=4)


def _read_small(path: str | os.PathLike[str]) -> bytes:
    """A store file's bytes: a regular file of at most `MAX_ENTRY_BYTES`, else an `OSError`
    (a crafted store may hold a pipe, a device or a huge file: reading one must not hang)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as file:
            data = file.read(MAX_ENTRY_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_ENTRY_BYTES:
        raise OSError(f"{path} is larger than {MAX_ENTRY_BYTES} bytes")
    return data


def _differences(found: dict[str, str], wanted: dict[str, str]) -> str:
    names = sorted(set(found) | set(wanted))
    return ", ".join(f"{n} {found.get(n)!r} where this process has {wanted.get(n)!r}"
                     for n in names if found.get(n) != wanted.get(n))


# ------------------------------------------------------------------ the process's store
_ACTIVE: list[PlanStore | None] = []
_ACTIVE_LOCK = threading.Lock()


def active_store() -> PlanStore | None:
    """The store this process uses (``CONTRACTIONS_PLANS``), made on first use; None: off."""
    if _ACTIVE:
        return _ACTIVE[0]
    with _ACTIVE_LOCK:
        if not _ACTIVE:
            named = os.environ.get(ENVIRONMENT_VARIABLE, "")
            store = None
            if named.strip().lower() not in ("off", "0", "false", "no", "none"):
                store = PlanStore(Path(named) if named else default_path())
                atexit.register(store.flush)
            _ACTIVE.append(store)
    return _ACTIVE[0]


def _recall_route(key: Any) -> str | None:
    store = active_store()
    found = None if store is None else store.get("route:" + json.dumps(key))
    return found if isinstance(found, str) else None


def _keep_route(key: Any, name: str) -> None:
    store = active_store()
    if store is not None:
        store.put("route:" + json.dumps(key), name)


# The CUDA routes measured on a shape's first calls are kept beside the plans.
measured.persistence = (_recall_route, _keep_route)


@contextlib.contextmanager
def switched_off() -> Iterator[None]:
    """No store within (``contractions calibrate`` times the engine's Python: a stored plan, or
    a store written under another profile, is not what it measures); the process's store after."""
    with _ACTIVE_LOCK:
        saved = list(_ACTIVE)
        _ACTIVE[:] = [None]
    try:
        yield
    finally:
        with _ACTIVE_LOCK:
            _ACTIVE[:] = saved


def reset_active_store() -> None:
    """Forget the process's store (pending writes flushed): the next use reads
    ``CONTRACTIONS_PLANS`` again (for tests and for the ``contractions plans`` command)."""
    with _ACTIVE_LOCK:
        if _ACTIVE and _ACTIVE[0] is not None:
            _ACTIVE[0].flush()
        _ACTIVE.clear()
