"""Several threads calling shared strings at once, while their shapes change and repeat.

Between them the threads take every route a call's life has: a structure's first call
(unplanned), new shapes of known structures (their compiled programs), repeated shapes
upgrading to the full search, blocked schedules (the default bound made small here) and their
new shapes following the blocks, mixed dtypes.  Every result is checked against
``np.einsum`` on a string expanded by hand.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from contractions import contract
from contractions.calls import remembered, tiers
from contractions.schedule import memory

pytestmark = pytest.mark.usefixtures("nothing_planned")

THREADS = 8
ROUNDS = 40


def _cases() -> list[tuple[str, str, list[np.ndarray], dict[str, int]]]:
    rng = np.random.default_rng(46)
    cases = []
    for w in (2, 3, 5):
        for b in (3, 4):
            ops = [rng.random((w, 2, 2, 4)), rng.random((2, 2, 4, 5, b)), rng.random((w, 2, 2, 5))]
            cases.append(("WCa,Caib,WCi->WCb", "xCDa,CDaib,xCDi->xCDb", ops, {"len_C": 2}))
    for n in (6, 9, 14):
        ops = [rng.random((n, 7)), rng.random((7, 8)), rng.random((8, n))]
        cases.append(("ab,bc,cd->ad", "ab,bc,cd->ad", ops, {}))
    for n in (30, 36, 44):
        # blocked under the small default bound below: an intermediate of n * 20 * 5 elements
        ops = [rng.random((n, 20)), rng.random((n, 20)), rng.random((20, 20, 5))]
        cases.append(("Ia,Ib,abc->Ic", "ia,ib,abc->ic", ops, {"len_I": 1}))
    for n in (6, 9, 14):
        # mixed dtypes: a narrow pair first, whose sums need the wider result type
        ops = [np.full((n, 3), 100, np.int8), np.full((3, 2), 100, np.int8), np.ones((2, 2 * n), np.int64)]
        cases.append(("Ij,jK,Kl->Il", "ij,jk,kl->il", ops, {"len_I": 1, "len_K": 1}))
        ops = [rng.random((n, 3)) < 0.5, rng.random((3, 4)) < 0.5, rng.random((4, n))]
        cases.append(("Ij,jK,Kl->Il", "ij,jk,kl->il", ops, {"len_I": 1, "len_K": 1}))
    return cases


def test_threads_sharing_strings_whose_shapes_change_get_right_answers(monkeypatch):
    # Upgrades after a few calls of a shape, and blocks on small operands.
    monkeypatch.setattr(tiers, "SEARCH_FRACTION", 5.0)
    monkeypatch.setattr(memory, "DEFAULT_LIMIT_FLOOR", 64)
    cases = _cases()
    wants = [np.einsum(expanded, *ops) for _, expanded, ops, _ in cases]
    failures: list[str] = []
    start = threading.Barrier(THREADS)

    def work(seed: int) -> None:
        order = np.random.default_rng(seed)
        start.wait()
        try:
            for _ in range(ROUNDS):
                k = int(order.integers(len(cases)))
                subscripts, _, ops, supplements = cases[k]
                got = contract(subscripts, *ops, **supplements)
                want = wants[k]
                if got.dtype != want.dtype or got.shape != want.shape or not np.allclose(got, want):
                    failures.append(f"{subscripts} at {[op.shape for op in ops]}")
        except Exception as exc:   # reported below, with the others
            failures.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures[:5]
    # the routes were taken: the full search planned structures, some of them blocked
    planned = [kept for entry in remembered._TEMPLATES.values() for kept in entry.values()]
    assert any(schedule.blocking is not None and tier == "full" for schedule, tier in planned)
