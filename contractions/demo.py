"""``contractions demo``: the library's main demonstration, checked as it runs.

Every printed claim is verified against plain ``np.einsum`` on a hand-written string;
the demo exits non-zero if any check fails.
"""

from __future__ import annotations

import numpy as np

from . import contract, explain, identifiability
from .errors import ContractionError


def run_demo() -> int:
    rng = np.random.default_rng(0)
    ok = True

    def check(label: str, got: np.ndarray, want: np.ndarray) -> None:
        nonlocal ok
        good = got.shape == want.shape and np.allclose(got, want)
        ok &= good
        print(f"  [{'ok' if good else 'FAILED'}] {label}: shape {got.shape}")

    print("1. Apply stacked tensor-train cores to stacked probes.  W = probe stack (2 axes),")
    print("   C = core stack (1 axis); one call, no reshapes:")
    x, cores, z = rng.standard_normal((4, 4, 2, 3)), rng.standard_normal((2, 3, 5, 6)), rng.standard_normal((4, 4, 2, 5))
    print("   contract('WCa,Caib,WCi->WCb', x, cores, z)")
    check("equals np.einsum('pqca,caib,pqci->pqcb')", contract("WCa,Caib,WCi->WCb", x, cores, z),
          np.einsum("pqca,caib,pqci->pqcb", x, cores, z))

    print("\n2. The same string on other stacks: W empty, C two axes.")
    x2, cores2, z2 = rng.standard_normal((2, 2, 3)), rng.standard_normal((2, 2, 3, 5, 6)), rng.standard_normal((2, 2, 5))
    check("equals np.einsum('cda,cdaib,cdi->cdb')", contract("WCa,Caib,WCi->WCb", x2, cores2, z2),
          np.einsum("cda,cdaib,cdi->cdb", x2, cores2, z2))

    print("\n3. Some strings cannot decide a group's length from ndims alone; the string says so:")
    info = identifiability("WCo,WCa->Cao")
    print(f"   identifiability('WCo,WCa->Cao'): {info.describe()}")
    zo, za = rng.standard_normal((3, 2, 5)), rng.standard_normal((3, 2, 4))
    needs_len_w = "WCo,WCa->Cao"  # a variable: call-site linting skips this deliberate error
    try:
        contract(needs_len_w, zo, za)
        ok = False
        print("  [FAILED] expected an UnderdeterminedError")
    except ContractionError as exc:
        print(f"   without it: {type(exc).__name__}: {str(exc)[:110]}...")
    check("with len_W=1 equals np.einsum('wco,wca->cao')", contract("WCo,WCa->Cao", zo, za, len_W=1),
          np.einsum("wco,wca->cao", zo, za))

    print("\n4. explain() shows the solve, the expansion and the contraction path:")
    print("   " + explain("WCa,Caib,WCi->WCb", x.shape, cores.shape, z.shape).replace("\n", "\n   "))
    print("\nall checks passed" if ok else "\nSOME CHECKS FAILED")
    return 0 if ok else 1
