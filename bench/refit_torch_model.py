"""Re-fit the torch time model's constants (contractions/torch_model.py) on this machine.

    python bench/refit_torch_model.py            # the vocabulary at tiny and mid size, scaled
    python bench/refit_torch_model.py --quick    # a dozen strings, tiny and mid only

Prints the fitted ``TorchCostModel`` fields, the fit's median relative error, the same error
for the constants in the source, and how often each set of constants picks the faster route
(with the worst slowdown a wrong pick costs).  It edits nothing: paste the printed line into
contractions/torch_model.py by hand if you adopt it.

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

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import torch  # noqa: E402
from timing import best_seconds  # noqa: E402
from vocabulary import make_case, vocabulary  # noqa: E402

from contractions import make_plan, make_schedule  # noqa: E402
from contractions.backends.compile import compile_schedule  # noqa: E402
from contractions.backends.torch_backend import TORCH_OPS, _einsum_along_path  # noqa: E402
from contractions.torch_model import TORCH_MODEL, TorchCostModel  # noqa: E402

FIELDS = ("ns_per_op", "ns_per_matmul_call", "ns_per_einsum_call", "ns_per_einsum_pair",
          "ns_per_mac", "ns_per_copied_element", "einsum_copy_share")




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


def fit(rows) -> TorchCostModel:
    """Non-negative least squares on relative error over both routes."""
    design, target = [], []
    for schedule, steps_s, einsum_s in rows:
        ops, calls, copied, macs = TORCH_MODEL.steps_features(schedule)
        design.append([ops, calls, 0.0, 0.0, macs, copied, 0.0])
        target.append(steps_s * 1e9)
        pairs, calls, pair_elements, macs = TORCH_MODEL.einsum_features(schedule)
        design.append([0.0, calls, 1.0, pairs, macs, 0.0, pair_elements])
        target.append(einsum_s * 1e9)
    a = np.asarray(design)
    b = np.asarray(target)
    weights = 1.0 / b
    coef = _nnls(a * weights[:, None], b * weights)
    copy = max(coef[5], 1e-6)
    return TorchCostModel(ns_per_op=coef[0], ns_per_matmul_call=coef[1],
                          ns_per_einsum_call=coef[2], ns_per_einsum_pair=coef[3],
                          ns_per_mac=coef[4], ns_per_copied_element=coef[5],
                          einsum_copy_share=min(coef[6] / copy, 4.0))


def _nnls(a: np.ndarray, b: np.ndarray, rounds: int = 50) -> np.ndarray:
    """Least squares with non-negative coefficients (active-set, small problems only)."""
    free = list(range(a.shape[1]))
    coef = np.zeros(a.shape[1])
    for _ in range(rounds):
        sol = np.linalg.lstsq(a[:, free], b, rcond=None)[0]
        if (sol >= 0).all():
            coef[:] = 0
            coef[free] = sol
            return coef
        free = [f for f, v in zip(free, sol) if v >= 0]
    coef[:] = 0
    coef[free] = np.clip(np.linalg.lstsq(a[:, free], b, rcond=None)[0], 0, None)
    return coef


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
    args = parser.parse_args()
    strings = vocabulary()
    sizes = ["tiny", "mid"]
    if args.quick:
        strings = strings[:: max(1, len(strings) // 12)][:12]
    torch.set_num_threads(torch.get_num_threads())
    rows = measurements(strings, sizes)
    fitted = fit(rows)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {len(rows)} schedules")
    report("in the source", TORCH_MODEL, rows)
    report("fitted       ", fitted, rows)
    fields = ", ".join(f"{f}={getattr(fitted, f):.4g}" for f in FIELDS)
    print(f"TORCH_MODEL = TorchCostModel({fields})")


if __name__ == "__main__":
    main()
