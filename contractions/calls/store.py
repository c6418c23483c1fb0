"""Plans that outlive the process: what the full search decided, kept on disk.

As FFTW keeps "wisdom", the decisions of every full search (`schedule.decisions`) are kept in
a store, and a later process that meets the same structure at the same extents lowers them at
once, checked against the call (dev/decisions.md 56).  Where: ``plans.sqlite`` in the
per-user cache directory; ``CONTRACTIONS_PLANS=PATH`` names another file, ``=off`` turns it
off.  It is opened on the first full search, never on import.

Data only (SQLite rows of JSON text); keyed by structure, extents and memory limit under a
header of the library version and the profile's fingerprint (a header that does not match
makes the store ignored, with one warning); an entry that does not parse or fit is dropped
with one warning; writes are batched transactions (`FLUSH_EVERY`); past `max_bytes` the
least recently used entries are evicted.

>>> import tempfile, pathlib
>>> store = PlanStore(pathlib.Path(tempfile.mkdtemp()) / 'plans.sqlite')
>>> store.put('k', {'strategy': 'pairwise', 'path': [[0, 1]]}); store.flush()
>>> store.get('k')
{'strategy': 'pairwise', 'path': [[0, 1]]}
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._version import __version__
from ..backends import measured

if TYPE_CHECKING:
    import sqlite3

# (sqlite3, zlib and dataclasses are imported where they are used: importing contractions
# must not pay for a store it may never open)

__all__ = ["ENVIRONMENT_VARIABLE", "FLUSH_EVERY", "MAX_BYTES", "PlanStore", "active_store",
           "default_path", "profile_fingerprint", "reset_active_store", "switched_off"]

ENVIRONMENT_VARIABLE = "CONTRACTIONS_PLANS"
#: The store's bound on its entries' bytes (keys and values); the least recently used go first.
MAX_BYTES = 16 * 2**20
#: Pending entries written in one transaction; the rest are written when the process exits.
FLUSH_EVERY = 32
#: The store's format; a store of another format is ignored like one of another version.
FORMAT = "1"


class StoreWarning(UserWarning):
    """The plan store was ignored or an entry dropped (the calls plan afresh: only speed)."""


def default_path() -> Path:
    """``plans.sqlite`` in the per-user cache directory (beside the calibrated profile)."""
    import platformdirs

    return Path(platformdirs.user_cache_dir("grouped-einsum")) / "plans.sqlite"


def profile_fingerprint() -> str:
    """A short checksum of the active profile's prices: plans priced by other prices are not
    this machine's decisions."""
    # (a checksum, not a signature: it tells prices apart; hashlib costs ms to import)
    import dataclasses
    import zlib

    from ..model.profile import active_profile

    fields = dataclasses.asdict(active_profile())
    fields.pop("source", None)   # (where it was read from is not what it prices)
    text = json.dumps(fields, sort_keys=True, default=str).encode()
    return f"{zlib.crc32(text):08x}{zlib.adler32(text):08x}"


class PlanStore:
    """One store file: `get` and `put` decisions by key, `flush` pending writes, and the
    maintenance the ``contractions plans`` command offers (`entries`, `clear`, `export`,
    `import_from`).  ``header`` is what the file must say of itself to be used (the library
    version, the profile fingerprint, the format); a file that says otherwise is ignored."""

    def __init__(self, path: str | os.PathLike[str], max_bytes: int = MAX_BYTES,
                 header: dict[str, str] | None = None) -> None:
        self.path = Path(path)
        self.max_bytes = max_bytes
        self.header = header if header is not None else {
            "format": FORMAT, "version": __version__, "profile": profile_fingerprint()}
        self._pending: dict[str, str] = {}
        self._touched: set[str] = set()   # entries read since the last flush (their use is kept then)
        self._lock = threading.Lock()
        self._usable: bool | None = None   # None: not opened yet
        self._local = threading.local()     # each thread's connection (and the process it is of)
        self._warned: set[str] = set()

    # ------------------------------------------------------------------ reading, writing
    def get(self, key: str) -> Any:
        """The decisions stored under ``key``, or None."""
        import sqlite3

        with self._lock:
            pending = self._pending.get(key)
        if pending is not None:
            return json.loads(pending)
        if not self._open():
            return None
        try:
            with self._connect() as db:   # (a read: no write, no sync, on the call's path)
                row = db.execute("SELECT value FROM plans WHERE key = ?", (key,)).fetchone()
        except sqlite3.Error as exc:
            self._give_up(f"could not be read ({exc})")
            return None
        if row is None:
            return None
        with self._lock:
            self._touched.add(key)
        try:
            return json.loads(row[0])
        except (TypeError, ValueError, RecursionError):   # (a crafted entry nested too deep)
            self.drop(key, "does not parse")
            return None

    def put(self, key: str, decisions: Any) -> None:
        """Keep ``decisions`` under ``key`` (written with the next flush)."""
        if self._usable is False:
            return
        text = json.dumps(decisions, separators=(",", ":"))
        with self._lock:
            self._pending[key] = text
            full = len(self._pending) >= FLUSH_EVERY
        if full:
            self.flush()

    def drop(self, key: str, why: str) -> None:
        """Remove an entry that failed its checks, with one warning per process."""
        import sqlite3

        self._warn(f"a stored plan in {self.path} {why}; it was dropped and the call planned "
                   "afresh", "drop")
        try:
            with self._connect() as db:
                db.execute("DELETE FROM plans WHERE key = ?", (key,))
        except sqlite3.Error:
            pass

    def flush(self) -> None:
        """Write the pending entries (and when the entries read were last used) in one
        transaction, then evict past ``max_bytes``."""
        import sqlite3

        with self._lock:
            pending, self._pending = self._pending, {}
            touched, self._touched = self._touched, set()
        if not (pending or touched) or not self._open():
            return
        now = time.time()
        try:
            with self._connect() as db:
                db.executemany("UPDATE plans SET used = ? WHERE key = ?", [(now, k) for k in touched])
                db.executemany(
                    "INSERT OR REPLACE INTO plans (key, value, used, size) VALUES (?, ?, ?, ?)",
                    [(k, v, now, len(k) + len(v)) for k, v in pending.items()])
                self._evict(db)
        except sqlite3.Error as exc:
            self._give_up(f"could not be written ({exc})")

    @property
    def ignored(self) -> bool:
        """Did this process find the file unusable (another setup's header, unreadable)?"""
        return self._usable is False

    # --------------------------------------------------------------------- maintenance
    def entries(self) -> list[tuple[str, Any]]:
        """Every stored (key, decisions), least recently used first."""
        self.flush()
        if not self._open():
            return []
        with self._connect() as db:
            rows = db.execute("SELECT key, value FROM plans ORDER BY used").fetchall()
        return [(k, _loads(v)) for k, v in rows]

    def size(self) -> int:
        """The bytes of the stored entries (keys and values)."""
        if not self._open():
            return 0
        with self._connect() as db:
            return int(db.execute("SELECT COALESCE(SUM(size), 0) FROM plans").fetchone()[0])

    def clear(self) -> None:
        """Remove the file (the next full search starts it afresh, with this header)."""
        with self._lock:
            self._pending.clear()
            self._touched.clear()
        db = getattr(self._local, "db", None)
        if db is not None and getattr(self._local, "pid", None) == os.getpid():
            db.close()
        self._local = threading.local()
        for suffix in ("", "-journal", "-wal", "-shm"):
            try:
                os.remove(str(self.path) + suffix)
            except FileNotFoundError:
                pass
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
    def _connect(self) -> sqlite3.Connection:
        # One connection per thread, kept (opening one costs ~0.2 ms, a lookup ~0.01 ms);
        # a forked child opens its own.
        import sqlite3

        local = self._local
        if getattr(local, "pid", None) != os.getpid():
            local.db, local.pid = sqlite3.connect(str(self.path), timeout=30.0), os.getpid()
        db: sqlite3.Connection = local.db
        return db

    def _open(self) -> bool:
        """Is the file usable (made with this header if new)?  Decided once per process."""
        import sqlite3

        if self._usable is not None:
            return self._usable
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self._connect() as db:
                db.execute("CREATE TABLE IF NOT EXISTS header (name TEXT PRIMARY KEY, value TEXT)")
                db.execute("CREATE TABLE IF NOT EXISTS plans (key TEXT PRIMARY KEY, value TEXT, "
                           "used REAL, size INTEGER)")
                db.execute("CREATE INDEX IF NOT EXISTS plans_used ON plans (used)")
                found = dict(db.execute("SELECT name, value FROM header").fetchall())
                if not found:
                    db.executemany("INSERT OR IGNORE INTO header VALUES (?, ?)", self.header.items())
                    found = dict(db.execute("SELECT name, value FROM header").fetchall())
        except (sqlite3.Error, OSError) as exc:
            self._give_up(f"could not be opened ({exc})")
            return False
        if found != self.header:
            self._give_up(f"was written by another setup ({_differences(found, self.header)}); "
                          "it is ignored by this process (`contractions plans --clear` starts "
                          "it afresh)")
            return False
        self._usable = True
        return True

    def _evict(self, db: sqlite3.Connection) -> None:
        total = db.execute("SELECT COALESCE(SUM(size), 0) FROM plans").fetchone()[0]
        if total <= self.max_bytes:
            return
        excess = total - self.max_bytes
        dropped = 0
        for key, size in db.execute("SELECT key, size FROM plans ORDER BY used").fetchall():
            if dropped >= excess:
                break
            db.execute("DELETE FROM plans WHERE key = ?", (key,))
            dropped += size

    def _give_up(self, why: str) -> None:
        self._usable = False
        with self._lock:
            self._pending.clear()
        self._warn(f"the plan store {self.path} {why}", "ignored")

    def _warn(self, message: str, kind: str) -> None:
        if kind not in self._warned:
            self._warned.add(kind)
            warnings.warn(message, StoreWarning, stacklevel=4)


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except (TypeError, ValueError, RecursionError):
        return None


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
