"""Re-fit the torch time model's prices (the profile's ``torch_*`` fields) on this machine.

    python bench/refit_torch_model.py            # the vocabulary at tiny and mid size, scaled
    python bench/refit_torch_model.py --quick    # a dozen strings, tiny and mid only

Prints the fitted ``torch_*`` prices of the profile (the fit is the library's,
``contractions.calibrate.fit_torch_prices``), the fit's median relative error, the same error
for the profile in use, and how often each picks the faster route (with the worst slowdown a
wrong pick costs).  ``--output FILE`` writes the profile in use with the fitted torch prices, to
select with ``CONTRACTIONS_PROFILE=FILE``.

What is timed: for each string and size, the schedule ``contract`` makes for torch
(``make_schedule(plan)``, no memory limit) run two ways on float64 CPU tensors, exactly as the
torch backend would run them:

- **steps**: the schedule's pairwise steps on torch operations (``compile_schedule``);
- **einsum**: one torch einsum call on the schedule's local letters along its path.

Each time is the best of several batches of repeated calls (a shared machine only ever adds
time).  Both routes are linear in the constants given the model's features
(``steps_features``, ``einsum_features``), so the fit is one least-squares solve on relative
error over both routes together, constrained to non-negative values.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import torch  # noqa: E402
from timing import best_seconds  # noqa: E402
from vocabulary import make_case, vocabulary  # noqa: E402

from contractions import make_plan, make_schedule  # noqa: E402
from contractions.backends.compile import compile_schedule  # noqa: E402
from contractions.backends.torch_backend import TORCH_OPS, _einsum_along_path  # noqa: E402
from contractions.calibrate import fit_torch_prices  # noqa: E402
from contractions.model.profile import save_profile  # noqa: E402
from contractions.model.torch_prices import TORCH_MODEL, TorchCostModel  # noqa: E402

FIELDS = ("torch_ns_per_op", "torch_ns_per_matmul_call", "torch_ns_per_einsum_call",
          "torch_ns_per_einsum_pair", "torch_ns_per_mac", "torch_ns_per_copied_element",
          "torch_einsum_copy_share")




def measurements(strings: list[str], sizes: list[str]) -> list[tuple[object, float, float]]:
    """(schedule, steps seconds, einsum seconds) per string and size with a pairwise schedule."""
    rows = []
    for subscripts in strings:
        for size in sizes:
            case = make_case(subscripts, size)
            plan = make_plan(subscripts, case.shapes, case.supplements)
            schedule = make_schedule(plan)
            if schedule.strategy != "pairwise" or schedule.einsum is None or len(case.shapes) < 2:
                continue
            tensors = [torch.from_numpy(a) for a in case.arrays()]
            steps = compile_schedule(schedule, TORCH_OPS)
            einsum = _einsum_along_path(schedule)
            rows.append((schedule, best_seconds(functools.partial(steps, *tensors)),
                         best_seconds(functools.partial(einsum, *tensors))))
    return rows


def report(name: str, model: TorchCostModel, rows) -> None:
    errors, right, worst = [], 0, 1.0
    for schedule, steps_s, einsum_s in rows:
        for modelled, measured in ((model.steps_ns(schedule), steps_s),
                                   (model.one_einsum_ns(schedule), einsum_s)):
            errors.append(abs(modelled / (measured * 1e9) - 1))
        picked = einsum_s if model.one_einsum_ns(schedule) < model.steps_ns(schedule) else steps_s
        right += picked == min(steps_s, einsum_s)
        worst = max(worst, picked / min(steps_s, einsum_s))
    print(f"{name}: median relative error {statistics.median(errors):.2f}; picks the faster "
          f"route in {right}/{len(rows)}; worst wrong pick {worst:.2f}x slower")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a dozen strings, tiny and mid")
    parser.add_argument("--output", metavar="FILE", default=None,
                        help="write the profile in use with the fitted torch prices to FILE")
    args = parser.parse_args()
    strings = vocabulary()
    sizes = ["tiny", "mid"]
    if args.quick:
        strings = strings[:: max(1, len(strings) // 12)][:12]
    torch.set_num_threads(torch.get_num_threads())
    rows = measurements(strings, sizes)
    fitted = TorchCostModel(fit_torch_prices(rows, TORCH_MODEL.profile))
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {len(rows)} schedules")
    report("the profile's", TORCH_MODEL, rows)
    report("fitted       ", fitted, rows)
    print("fitted: " + ", ".join(f"{f}={getattr(fitted.profile, f):.4g}" for f in FIELDS))
    if args.output:
        print(f"wrote {save_profile(fitted.profile, args.output)}")


if __name__ == "__main__":
    main()
