"""Draw docs/explain_plot.png, the picture of `explain(...).plot()` that docs/api.md shows: a
blocked call with a hoisted step.  Its modelled times are the active profile's (the built-in
prices with this machine's caches and threads, unless a calibrated profile is in use: the
script says which), so they differ a little from machine to machine.

    python dev/explain_plot.py              # writes docs/explain_plot.png
    python dev/explain_plot.py out.png      # or another file
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str]) -> int:
    target = Path(argv[0]) if argv else ROOT / "docs" / "explain_plot.png"
    sys.path.insert(0, str(ROOT))
    import matplotlib

    matplotlib.use("Agg")
    from contractions import explain
    from contractions.model.profile import active_profile

    text = explain("ab,bc,Wc,Wd->Wad", (60, 60), (60, 60), (1000, 60), (1000, 50), memory_limit=20000)
    text.plot().savefig(target, dpi=90)
    print(f"wrote {target} (priced by {active_profile().describe()})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
