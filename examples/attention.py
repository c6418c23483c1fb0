"""Attention with a multi-axis batch group ``B`` and a multi-axis head group ``H``.

``B`` is any number of batch axes (e.g. ``(batch, beam)``), ``H`` any number of head axes
(e.g. ``(kv_group, heads_per_group)``); ``q``/``k`` index queries/keys, ``d`` the head
dimension, ``e`` the model dimension. Queries laid out on a grid use a group ``Q``.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script (python examples/NAME.py): import from this checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from contractions import contract
from examples._arrays import namespace


def softmax(x, axis=-1):
    """Numerically stable softmax along ``axis`` (any shape)."""
    xp = namespace(x)
    shifted = x - xp.max(x, axis=axis, keepdims=True)
    e = xp.exp(shifted)
    return e / xp.sum(e, axis=axis, keepdims=True)


def attention(q, k, v, bias=None):
    """Scaled dot-product attention.

    q: ``B + H + (n_q, d)``; k, v: ``B + H + (n_k, d)``; bias: broadcastable to the scores
    ->  (output ``B + H + (n_q, d)``, weights ``B + H + (n_q, n_k)``).
    """
    scores = contract("BHqd,BHkd->BHqk", q, k) / math.sqrt(q.shape[-1])
    if bias is not None:
        scores = scores + bias
    weights = softmax(scores)
    return contract("BHqk,BHkd->BHqd", weights, v), weights


def multi_query_attention(q, k, v):
    """Attention where all heads share one key/value projection (MQA).

    q: ``B + H + (n_q, d)``; k, v: ``B + (n_k, d)``  ->  ``B + H + (n_q, d)``.
    """
    scores = contract("BHqd,Bkd->BHqk", q, k) / math.sqrt(q.shape[-1])
    return contract("BHqk,Bkd->BHqd", softmax(scores), v)


def grid_attention(q, k, v):
    """Attention whose queries lie on a grid ``Q`` (e.g. image patches ``(rows, cols)``).

    q: ``B + H + Q + (d,)``; k, v: ``B + H + (n_k, d)``  ->  ``B + H + Q + (d,)``.
    """
    scores = contract("BHQd,BHkd->BHQk", q, k) / math.sqrt(q.shape[-1])
    return contract("BHQk,BHkd->BHQd", softmax(scores), v)


def split_heads(x, weight):
    """Per-head input projection.

    x: ``B + (n, e)``; weight: ``H + (e, d)``  ->  ``B + H + (n, d)``.
    """
    return contract("Bqe,Hed->BHqd", x, weight)


def merge_heads(o, weight):
    """Output projection summing over all head axes.

    o: ``B + H + (n, d)``; weight: ``H + (d, e)``  ->  ``B + (n, e)``.
    """
    return contract("BHqd,Hde->Bqe", o, weight)


def multi_head_self_attention(x, wq, wk, wv, wo):
    """Multi-head self-attention block.

    x: ``B + (n, e)``; wq, wk, wv: ``H + (e, d)``; wo: ``H + (d, e)``  ->  ``B + (n, e)``.
    """
    out, _ = attention(split_heads(x, wq), split_heads(x, wk), split_heads(x, wv))
    return merge_heads(out, wo)


def relative_position_scores(q, rel):
    """Relative-position logits (Shaw et al.): ``s[.., q, k] = q[.., q, :] . rel[q, k, :]``.

    q: ``B + H + (n_q, d)``; rel: ``H + (n_q, n_k, d)``  ->  ``B + H + (n_q, n_k)``.
    """
    return contract("BHqd,Hqkd->BHqk", q, rel)


def memory_attention(q, mem_k, mem_v):
    """Attend every query batch to every memory bank of a stack ``M`` (no heads).

    q: ``B + (n_q, d)``; mem_k, mem_v: ``M + (n_k, d)``  ->  ``B + M + (n_q, d)``.
    """
    scores = contract("Bqd,Mkd->BMqk", q, mem_k) / math.sqrt(q.shape[-1])
    return contract("BMqk,Mkd->BMqd", softmax(scores), mem_v)


def head_average(weights, head_ndim):
    """Average attention weights over all head axes (for attention maps / rollout).

    weights: ``B + H + (n_q, n_k)`` with ``len(H) == head_ndim``  ->  ``B + (n_q, n_k)``.
    """
    n_heads = math.prod(weights.shape[weights.ndim - 2 - head_ndim : weights.ndim - 2])
    return contract("BHqk->Bqk", weights, len_H=head_ndim) / n_heads


if __name__ == "__main__":
    # python -m examples.attention: two batch axes and two head axes, checked against
    # np.einsum on hand-expanded strings.
    import numpy as np

    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 3, 2, 2, 5, 4)) for _ in range(3))  # B=(2,3), H=(2,2)
    out, weights = attention(q, k, v)
    scores = np.einsum("bcghqd,bcghkd->bcghqk", q, k) / math.sqrt(4)
    expected = np.exp(scores - scores.max(axis=-1, keepdims=True))
    expected /= expected.sum(axis=-1, keepdims=True)
    np.testing.assert_allclose(weights, expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(out, np.einsum("bcghqk,bcghkd->bcghqd", expected, v),
                               rtol=1e-12, atol=1e-12)
    print(f"attention: batch (2, 3) x heads (2, 2), output {out.shape}: matches np.einsum")
    avg = head_average(weights, head_ndim=2)
    np.testing.assert_allclose(avg, expected.mean(axis=(2, 3)), rtol=1e-12, atol=1e-12)
    print(f"head_average over 2 head axes, shape {avg.shape}: matches a mean over those axes")
