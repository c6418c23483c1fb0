"""Re-fit numpy's prices on this machine: a thin caller of the library's calibration.

    python bench/refit_model.py                  # the full calibration (a few minutes)
    python bench/refit_model.py --quick          # under a minute
    python bench/refit_model.py --output FILE    # also write the profile (CONTRACTIONS_PROFILE=FILE)

Runs ``contractions.calibrate.calibrate`` (what ``contractions calibrate`` runs: stacks of
in-cache matmul products, threaded products, gathers and fresh pages, einsum's loop, the
per-call and per-step Python; see its docstring for what each measures and how it is fitted)
and prints each measured price beside the profile in use and the built-in defaults.  It edits
nothing in the source: the built-in defaults in contractions/model/profile.py change only by
hand, after an A/B run (bench/model_ab.py) says the new prices plan faster.  Run it on a quiet
machine, with the BLAS thread count of the benchmark.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from contractions.calibrate import FULL, QUICK, calibrate  # noqa: E402
from contractions.model import NUMPY_MODEL, Profile, save_profile  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the quick calibration (under a minute)")
    parser.add_argument("--output", metavar="FILE", default=None, help="write the measured profile here")
    args = parser.parse_args(argv)
    measured = calibrate(QUICK if args.quick else FULL, log=lambda line: print(line, flush=True))
    in_use, builtin = NUMPY_MODEL.profile, Profile()
    print(f"\n{'price':40s} {'measured':>12s} {'in use':>12s} {'built-in':>12s}")
    for name, value in measured.prices().items():
        if value != builtin.prices()[name] or value != in_use.prices()[name]:
            print(f"{name:40s} {value:12.4g} {in_use.prices()[name]:12.4g} {builtin.prices()[name]:12.4g}")
    print(f"(in use: {in_use.describe()})")
    if args.output:
        print(f"wrote {save_profile(measured, args.output)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
