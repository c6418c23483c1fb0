"""Helpers shared by the first-call benchmarks (bench/first_call.py, bench/tt_loop.py).

- `clear_engine_caches`: forget every string and shape ``contract`` has planned, through the
  caches' own ``cache_clear`` (as bench/cold_plan.py does), found by walking the loaded
  ``contractions`` modules rather than by naming them (and calling the modules' own
  ``clear_*`` functions), so the scripts keep working when the engine's caches move.  The cost models' host measurements are kept: a program
  that meets a new string has measured its host long before.
- `renamed`: the same contraction under fresh letters, so that a "new string" is new to every
  cache, whatever it is keyed on.
- `write_section`: the page docs/benchmarks_first_call.md is written section by section, one
  section per script, each rewriting only its own.

    >>> renamed('WCa,Caib,WCi->WCb', 1, {'len_W': 2})
    ('XDb,Dbjc,XDj->XDc', {'len_X': 2})
"""

from __future__ import annotations

import inspect
import statistics
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

PAGE = Path(__file__).resolve().parent.parent / "docs" / "benchmarks_first_call.md"
PAGE_TITLE = "# First calls: new shapes, new strings and a loop that keeps changing shape"
PAGE_INTRO = (
    "Warm calls are what the main benchmark measures; these measure the calls before that: the "
    "first call of a shape `contract` has not seen (planning included), the first call of a "
    "string it has never seen, and a numerical loop whose shapes change on almost every call. "
    "Each section is written by its own script (`bench/README.md`)."
)
# Kept across clears: measurements of this host that any earlier call has already paid for.
KEPT_MODULES = frozenset({"contractions.model.torch_prices", "contractions.caching"})


def clear_engine_caches() -> int:
    """Clear every cache of the loaded ``contractions`` modules: lru and byte-bounded caches,
    the module-level ``*_HOT*`` dicts of compiled callables, and whatever a module's own
    argument-free ``clear_*`` function forgets (planned structures, scratch buffers); returns
    how many were cleared."""
    cleared = 0
    called: set[int] = set()
    for name, module in list(sys.modules.items()):
        if module is None or name in KEPT_MODULES:
            continue
        if name != "contractions" and not name.startswith("contractions."):
            continue
        for attr, value in list(vars(module).items()):
            if isinstance(value, type):
                continue
            clear = getattr(value, "cache_clear", None)
            if callable(clear):
                clear()
                cleared += 1
            elif isinstance(value, dict) and "HOT" in attr:
                value.clear()
                cleared += 1
            elif attr.startswith("clear_") and inspect.isfunction(value) and id(value) not in called \
                    and _argument_free(value):
                called.add(id(value))
                value()
                cleared += 1
    return cleared


def _argument_free(func) -> bool:
    try:
        parameters = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return False
    return all(p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters)


def renamed(subscripts: str, k: int, kwargs: Mapping[str, int] | None = None) -> tuple[str, dict[str, int]]:
    """``subscripts`` with every letter moved ``k`` places along its alphabet (case kept), and the
    ``len_*`` keywords renamed alike: the same contraction, a string never seen before."""
    if not 0 < k % 26:
        raise ValueError(f"k={k}: a multiple of 26 gives back the same string")

    def move(c: str) -> str:
        if "a" <= c <= "z":
            return chr((ord(c) - 97 + k) % 26 + 97)
        if "A" <= c <= "Z":
            return chr((ord(c) - 65 + k) % 26 + 65)
        return c

    new = "".join(move(c) for c in subscripts)
    return new, {f"len_{move(key[4:])}": n for key, n in (kwargs or {}).items()}


def median(values: Iterable[float]) -> float:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else float("nan")


def write_section(heading: str, body: str, page: Path = PAGE) -> None:
    """Replace the section ``## heading`` of ``page`` with ``body`` (appended if absent); the
    page's title, introduction and other sections are kept."""
    text = page.read_text(encoding="utf-8") if page.exists() else f"{PAGE_TITLE}\n\n{PAGE_INTRO}\n"
    marker = f"## {heading}"
    lines = text.rstrip("\n").splitlines()
    start = next((k for k, line in enumerate(lines) if line.strip() == marker), None)
    block = [marker, "", *body.strip("\n").splitlines()]
    if start is None:
        lines += ["", *block]
    else:
        end = next((k for k in range(start + 1, len(lines)) if lines[k].startswith("## ")), len(lines))
        lines[start:end] = block + ([""] if end < len(lines) else [])
    page.write_text("\n".join(lines) + "\n", encoding="utf-8")
