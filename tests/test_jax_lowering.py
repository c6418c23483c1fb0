"""Every vocabulary string, jitted with default options, lowers to the program of the jitted
hand-expanded ``jnp.einsum`` (same StableHLO up to the module name), and lowers for GPU/TPU
targets from abstract shapes with no host callback in it.

The hand expansion is written here (fresh letters per group sub-axis, from the test's own group
lengths), so neither the library's solver nor its expansion is the reference.
"""

from __future__ import annotations

import re
import string

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp

from contractions import contract, expand_subscripts

from ._vocabulary import vocabulary

VOCABULARY = vocabulary()


def hand_problem(subscripts: str, seed: int):
    """(hand-expanded einsum, operand shapes, len_* keywords) with random group lengths 0..2."""
    rng = np.random.default_rng(seed)
    lhs, out = subscripts.split("->")
    used = set(subscripts)
    fresh = iter(c for c in string.ascii_letters if c not in used and c.isupper())
    groups = sorted({c for c in subscripts if c.isupper()})
    lengths = {g: int(rng.integers(0, 3)) for g in groups}
    letters = {g: "".join(next(fresh) for _ in range(lengths[g])) for g in groups}
    extents: dict[str, int] = {}

    def term_letters(term: str) -> str:
        return "".join(letters[c] if c.isupper() else c for c in term)

    hand_terms = [term_letters(t) for t in lhs.split(",")]
    for c in "".join(hand_terms):
        extents.setdefault(c, int(rng.integers(2, 9)))
    shapes = [tuple(extents[c] for c in t) for t in hand_terms]
    return ",".join(hand_terms) + "->" + term_letters(out), shapes, lengths


def lowered(fn, specs) -> str:
    """The jitted program's StableHLO without its source locations (which name files and
    lines) and with the module name normalised (``as_text(debug_info=False)`` is newer than the
    jax floor)."""
    text = jax.jit(fn).lower(*specs).as_text()
    text = "\n".join(line for line in text.splitlines() if not line.startswith("#loc"))
    text = re.sub(r"module @\S+", "module @m", text)
    return re.sub(r"loc\([^)]*\)", "loc()", text)


@pytest.mark.parametrize(("subscripts", "pins"), VOCABULARY, ids=[s for s, _ in VOCABULARY])
def test_jitted_contract_lowers_to_the_hand_expanded_einsum(subscripts, pins):
    hand, shapes, lengths = hand_problem(subscripts, seed=len(subscripts) * 7919 + sum(map(ord, subscripts)))
    supplements = {f"len_{g}": lengths[g] for g in pins}
    specs = [jax.ShapeDtypeStruct(s, jnp.float32) for s in shapes]

    def f(*xs):
        return contract(subscripts, *xs, **supplements)

    ours = lowered(f, specs)

    def f(*xs):  # same name, so the module names agree
        return jnp.einsum(hand, *xs)

    theirs = lowered(f, specs)
    if ours != theirs:
        # Only acceptable where opt_einsum's search met a tie and broke it by symbol names
        # (seen with 5 operands on older jax): both orders must cost exactly the same.
        import opt_einsum

        mine = expand_subscripts(subscripts, *shapes, **supplements)
        costs = {opt_einsum.contract_path(e, *shapes, shapes=True, optimize="auto")[1].opt_cost
                 for e in (mine, hand)}
        assert len(costs) == 1, (hand, mine, costs)


HOST_CALLBACK = re.compile(r"callback|host_compute|xla_python|SendToHost|RecvFromHost", re.IGNORECASE)


@pytest.mark.parametrize(("subscripts", "pins"), VOCABULARY[::4], ids=[s for s, _ in VOCABULARY[::4]])
def test_lowers_for_accelerators_without_host_callbacks(subscripts, pins):
    hand, shapes, lengths = hand_problem(subscripts, seed=3)
    supplements = {f"len_{g}": lengths[g] for g in pins}
    specs = [jax.ShapeDtypeStruct(s, jnp.float32) for s in shapes]
    fn = jax.jit(lambda *xs: contract(subscripts, *xs, **supplements))
    # jax.export needs absl on older jax releases (the tested floor lacks it)
    export = pytest.importorskip("jax.export", reason="jax.export cannot be imported here")
    for platform in ("cuda", "tpu"):
        exported = export.export(fn, platforms=[platform])(*specs)
        # the program's operations only: location lines name source files, not ops
        text = "\n".join(line for line in exported.mlir_module().splitlines()
                         if not line.startswith("#loc"))
        text = re.sub(r"loc\([^)]*\)", "", text)
        assert "func.func public @main" in text
        assert exported.platforms == (platform,)
        assert not HOST_CALLBACK.search(text), platform
        assert "custom_call" not in text, platform
