"""Time a worker script in this tree and in another checkout, in fresh processes taking turns.

`bench/dtype_routes.py` and `bench/executor_ab.py` hand it a worker: Python source run after
`PREAMBLE` (``contractions`` imported from the checkout, checked, bench/'s ``timing`` importable),
printing one JSON object of seconds per case as its last line.  It returns, per case, the
median of each tree's processes.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


#: What every worker starts with: ``contractions`` from the checkout under test (sys.argv[1]),
#: asserted, and this bench directory (sys.argv[2]) on the path.
PREAMBLE = """
import json, statistics, sys, time
sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[2])
import numpy as np
from timing import interleaved_medians
import contractions
from contractions import contract, explain
assert contractions.__file__.startswith(sys.argv[1]), contractions.__file__
"""


def run_worker(worker: str, tree: Path) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH="", CONTRACTIONS_PLANS="off")
    found = subprocess.run([sys.executable, "-c", PREAMBLE + worker, str(tree), str(REPO / "bench")],
                           capture_output=True, text=True, env=env, check=True, cwd=str(tree))
    return json.loads(found.stdout.strip().splitlines()[-1])


def compare(worker: str, base: Path, rounds: int) -> dict[str, tuple[float, float]]:
    """Per case, (the base checkout's median seconds, this tree's)."""
    samples: dict[str, dict[str, list[float]]] = {"this tree": {}, "base": {}}
    for _ in range(rounds):
        for name, tree in (("base", base), ("this tree", REPO)):
            for case, seconds in run_worker(worker, tree).items():
                samples[name].setdefault(case, []).append(seconds)
    return {case: (statistics.median(samples["base"][case]), statistics.median(samples["this tree"][case]))
            for case in samples["base"]}
