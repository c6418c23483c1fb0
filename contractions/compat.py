"""np.einsum's and opt_einsum's call conventions, translated for `contract`.

Pure helpers below the public verbs (the api imports them, never the reverse): the sublist
(interleaved) call form, numpy's ``order=``/``casting=``/``dtype=`` rules, opt_einsum's
``optimize=`` and ``backend=`` spellings, and `path_info` (opt_einsum's `PathInfo` for the
path a schedule runs).

>>> import numpy as np
>>> from_sublists(np.ones((2, 3)), ([0, 1], np.ones(3), [1], [0]))[0]
'ab,b->a'
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, Literal, cast

import numpy as np

from .errors import ContractionError, KeywordError, OptionError, quoted

__all__ = [
    "from_sublists",
    "not_subscripts_message",
    "subscripts_first",
    "check_numpy_options",
    "apply_order",
    "out_casting",
    "numpy_optimize",
    "backend_name",
    "path_info",
    "check_expression_keywords",
    "evaluated_constants",
    "CASTING_RULES",
    "ORDERS",
]

CASTING_RULES = ("no", "equiv", "safe", "same_kind", "unsafe")
Casting = Literal["no", "equiv", "safe", "same_kind", "unsafe"]
ORDERS = ("C", "F", "A", "K")


# ------------------------------------------------------------------------------ sublists
def _axis_letters():
    """Single-axis labels for sublist symbols: a-z, then the non-ASCII letters in code-point
    order (never an ASCII uppercase letter, which would be a group)."""
    yield from "abcdefghijklmnopqrstuvwxyz"
    code = 0xC0
    while True:
        ch = chr(code)
        if ch.isalpha() and not (0xD800 <= code < 0xE000):
            yield ch
        code += 1


#: np.einsum's single call names its sublist symbols by these many letters (ints 0..51).
NUMPY_SUBLIST_SYMBOLS = 52


def from_sublists(first: Any, rest: Sequence[Any],
                  single_call: bool = False) -> tuple[str, tuple[Any, ...]]:
    """``contract(a, [0, 1], b, [1, 2], [0, 2])`` as a subscripts string and its operands.

    As in numpy, operands alternate with their sublists, an optional last sublist is the
    output and ``Ellipsis`` may appear once per sublist; as in opt_einsum, a symbol is any
    hashable, comparable object (ints in numpy), and a sublist may be a 1-d integer array.
    Symbols are sorted and written as single-axis letters in that order, so implicit output
    keeps their order.  With ``single_call`` (``optimize=False``: np.einsum's single C call) a
    symbol must be an int in 0..51, numpy's range there.

    >>> from_sublists(np.ones(2), ([Ellipsis, 0], np.ones(2), [0]))[0]
    '...a,a'
    """
    args = (first, *rest)
    operands = list(args[0::2])
    sublists = list(args[1::2])
    output = None
    if len(args) % 2:  # the last item is the output sublist
        output = operands.pop()
    if isinstance(first, (str, bytes, type(None))) or not any(
            _is_sublist(sub) for sub in [*sublists, *([] if output is None else [output])]):
        # not numpy's sublist form at all: most likely subscripts that are not first, or not a str
        raise TypeError(not_subscripts_message(first, rest))
    for k, sub in enumerate([*sublists, *([] if output is None else [output])]):
        if not _is_sublist(sub):
            raise TypeError(f"sublist {k} is {type(sub).__name__} ({sub!r}); in the sublist form each "
                            "operand is followed by a list of its axis symbols, e.g. "
                            "contract(a, [0, 1], b, [1, 2], [0, 2])")
    sublists = [_symbols(s) for s in sublists]
    out_list = None if output is None else _symbols(output)
    symbols = {s for sub in [*sublists, *([out_list] if out_list is not None else [])] for s in sub
               if s is not Ellipsis}
    for s in symbols:
        if isinstance(s, bool):
            raise TypeError(f"sublist symbol {s!r} is a bool; use ints (or other hashable objects)")
    try:
        ordered = sorted(symbols)
    except TypeError:
        raise TypeError("sublist symbols must be Ellipsis or hashable objects that compare with "
                        "one another (ints, as in numpy; or strings)") from None
    if single_call:
        # optimize=False is np.einsum's single C call, which takes ints 0..51 only (its
        # ValueError, numpy's test_subscript_range); any other optimize= takes any symbol.
        for s in ordered:
            if not isinstance(s, (int, np.integer)) or not 0 <= s < NUMPY_SUBLIST_SYMBOLS:
                raise OptionError(
                    f"sublist symbol {s!r} is outside np.einsum's range [0, "
                    f"{NUMPY_SUBLIST_SYMBOLS}) for one einsum call (optimize=False); other "
                    "optimize= values take any int or hashable symbol, as opt_einsum does")
    letters = _axis_letters()
    letter = {s: next(letters) for s in ordered}

    def term(sub: list[Any]) -> str:
        return "".join("..." if s is Ellipsis else letter[s] for s in sub)

    subscripts = ",".join(term(sub) for sub in sublists)
    if out_list is not None:
        subscripts += "->" + term(out_list)
    return subscripts, tuple(operands)


def not_subscripts_message(first: Any, rest: Sequence[Any] = (), verb: str = "contract") -> str:
    """What to say when ``verb``'s first argument is not the subscripts string and the call is
    not numpy's sublist form either: the subscripts come first, as a str.

    >>> not_subscripts_message(np.ones(2), ('i->',))
    "subscripts must be a str, got ndarray first; the subscripts come first, as a str: contract('i->', ...) with the operands after it"
    """
    text = next((item for item in rest if isinstance(item, str)), None)
    if isinstance(first, bytes):
        text = first.decode("utf-8", "replace")
        return (f"subscripts must be a str, not bytes ({_short(first)}); the subscripts come first, "
                f"as a str: decode them, {verb}({text!r}, ...)")
    got = f"subscripts must be a str, got {type(first).__name__}"
    if text is not None:
        return f"{got} first; {subscripts_first(text, verb)}"
    return (f"{got} ({_short(first)}); the subscripts come first, as a str, e.g. "
            f"{verb}('ij,jk->ik', a, b) (numpy's sublist form follows each operand by a list of "
            f"its axis numbers instead: {verb}(a, [0, 1], b, [1, 2], [0, 2]))")


def subscripts_first(subscripts: str, verb: str = "contract") -> str:
    """The fix for a call whose subscripts string is not its first argument (the runtime
    error's words and `contractions check`'s)."""
    return f"the subscripts come first, as a str: {verb}({quoted(subscripts)}, ...) with the operands after it"


def _short(value: Any) -> str:
    shape = getattr(value, "shape", None)
    if isinstance(shape, tuple) and shape:  # (an array's repr would fill the message)
        return f"of shape {shape}"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _is_sublist(sub: Any) -> bool:
    """Can ``sub`` be a sublist (a list, tuple or range of symbols, or a 1-d integer array)?"""
    return isinstance(sub, (list, tuple, range)) or _int_vector(sub)


def _int_vector(sub: Any) -> bool:
    """Is ``sub`` a 1-d integer array (numpy takes one as a sublist: ``np.array([0, 0])``)?"""
    return isinstance(sub, np.ndarray) and sub.ndim == 1 and sub.dtype.kind in "iu"


def _symbols(sub: Any) -> list[Any]:
    return [int(s) for s in sub] if isinstance(sub, np.ndarray) else list(sub)


# ---------------------------------------------------------------- order= casting= dtype=
def check_numpy_options(subscripts: str, arrays: Sequence[Any], dtype: Any, casting: Any,
                        order: Any) -> None:
    """numpy's checks of ``order=``, ``casting=`` and ``dtype=`` (a ValueError for a bad value,
    a TypeError when an operand cannot be cast by the rule), before any arithmetic.

    >>> check_numpy_options('i->', [np.array([0.5])], int, 'safe', 'K')
    Traceback (most recent call last):
    ...
    TypeError: 'i->': operand 0 cannot be cast from float64 to int64 by the rule 'safe' (np.einsum's default); pass casting='unsafe' to truncate
    """
    for name, value in (("order", order), ("casting", casting)):
        if not isinstance(value, str):
            raise TypeError(f"{name} must be str, not {type(value).__name__}")
    if order.upper() not in ORDERS:
        raise OptionError(f"order must be one of 'C', 'F', 'A', or 'K' (got {order!r})")
    if casting not in CASTING_RULES:
        raise OptionError(f"casting must be one of 'no', 'equiv', 'safe', 'same_kind', 'unsafe' "
                         f"(got {casting!r})")
    if dtype is None and casting in ("safe", "same_kind", "unsafe"):
        return  # promotion to the common type is always safe
    dtypes = [getattr(a, "dtype", None) for a in arrays]
    if any(d is None for d in dtypes):
        return
    try:
        np_dtypes = [np.dtype(d) for d in dtypes]
    except TypeError:
        return  # not numpy dtypes (torch, JAX): their library casts
    target = np.dtype(dtype) if dtype is not None else np.result_type(*np_dtypes)
    for k, d in enumerate(np_dtypes):
        if not np.can_cast(d, target, casting):
            default = " (np.einsum's default)" if casting == "safe" else ""
            raise TypeError(f"{subscripts!r}: operand {k} cannot be cast from {d} to {target} by "
                            f"the rule {casting!r}{default}; pass casting='unsafe' to truncate")


def out_casting(casting: str, optimize: Any, n_operands: int, out: Any) -> Casting:
    """The casting rule the result is written into ``out=`` under, as np.einsum writes it.

    ``casting=`` (numpy's default ``'safe'``), as np.einsum's single call (``optimize=False``)
    checks it; but numpy's optimized einsum assigns its last pairwise product into a 0-d
    ``out`` (``out[...] = result``), which takes any cast, so a 0-d ``out`` of a call with two or
    more operands and a pairwise ``optimize=`` does too.  (For a larger ``out`` numpy's
    optimized path casts by its kernel: the rule stays ``casting=``, never looser than numpy's
    single call; numpy 2.0's optimized einsum checks ``casting=`` on a 0-d ``out`` as well, and
    the rule follows the installed numpy.)

    >>> out_casting('safe', 'direct', 2, np.array(0)), out_casting('same_kind', 'auto', 2, np.ones(3))
    ('safe', 'same_kind')
    """
    if getattr(out, "ndim", None) == 0 and n_operands >= 2 and optimize is not False and not (
            isinstance(optimize, str) and optimize == "direct") and _optimized_0d_out_takes_any_cast():
        return "unsafe"
    return cast(Casting, casting)   # checked against CASTING_RULES by check_numpy_options


@functools.cache
def _optimized_0d_out_takes_any_cast() -> bool:
    """Does this numpy's optimized einsum take any cast into a 0-d ``out=``?  numpy 2.0 checks
    ``casting=`` there too; later releases assign the last product into it, which casts
    anything.  Asked of the installed numpy once, so `out_casting` follows it."""
    try:
        np.einsum("i,i->", np.full(2, 1.5), np.ones(2), out=np.array(0), optimize=True)
    except TypeError:
        return False
    return True


def apply_order(result: Any, order: str, arrays: Sequence[Any]) -> Any:
    """The result in numpy's ``order=`` layout (``'K'``, the default, keeps it as computed).

    >>> apply_order(np.ones((2, 3)), 'F', []).flags.f_contiguous
    True
    """
    order = order.upper()
    if order == "K" or not isinstance(result, np.ndarray) or result.ndim == 0:
        return result
    if order == "A":
        fortran = bool(arrays) and all(isinstance(a, np.ndarray) and a.flags.f_contiguous
                                       and not a.flags.c_contiguous for a in arrays)
        order = "F" if fortran else "C"
    return np.asfortranarray(result) if order == "F" else np.ascontiguousarray(result)


# --------------------------------------------------------------------- optimize= backend=
def numpy_optimize(optimize: Any) -> Any:
    """numpy's and opt_einsum's extra ``optimize=`` spellings, as the schedule takes them:
    ``None`` is opt_einsum's default (``'auto'``); numpy's ``('greedy', memory_limit)`` takes
    the named optimizer (its size bound only shapes numpy's own search, never the answer).

    >>> numpy_optimize(None), numpy_optimize(('greedy', 0)), numpy_optimize([(0, 1)])
    ('auto', 'greedy', [(0, 1)])
    """
    if optimize is None:
        return "auto"
    if (isinstance(optimize, (tuple, list)) and len(optimize) == 2 and isinstance(optimize[0], str)
            and optimize[0] != "einsum_path" and isinstance(optimize[1], (int, float))
            and not isinstance(optimize[1], bool)):
        return optimize[0]
    return optimize


#: opt_einsum's backend names (and their aliases) -> the names the registry uses, and
#: ``'object'`` (opt_einsum's backend for object arrays): numpy, whose every path keeps them.
_BACKEND_ALIASES = {
    "numpy": "numpy", "jax": "jax", "jax.numpy": "jax", "libjax": "jax", "torch": "torch",
    "pytorch": "torch", "dask": "dask", "dask.array": "dask", "array_api": "array_api",
    "object": "object",
}


def backend_name(backend: Any) -> str | None:
    """The registry name for opt_einsum's ``backend=`` (``None`` or ``'auto'``: the operands'
    own library).

    >>> backend_name('auto'), backend_name('jax'), backend_name('numpy')
    (None, 'jax', 'numpy')
    """
    if backend is None or backend == "auto":
        return None
    if not isinstance(backend, str):
        raise TypeError(f"backend= must be a library name such as 'numpy', 'jax', 'torch' or "
                        f"'dask', not {type(backend).__name__}")
    name = _BACKEND_ALIASES.get(backend.lower())
    if name is None:
        raise ContractionError(
            f"backend={backend!r} is not supported; use 'auto' (the operands' library), "
            f"{', '.join(repr(n) for n in sorted(set(_BACKEND_ALIASES.values())))}")
    return name


# ----------------------------------------------------------------------------- PathInfo
def path_info(einsum: str, shapes: Sequence[tuple[int, ...]], path: Sequence[tuple[int, ...]],
              use_blas: bool = True) -> Any:
    """opt_einsum's `PathInfo` for ``path`` on the expanded ``einsum`` (plain letters, one per
    axis) with these operand shapes: the very object ``opt_einsum.contract_path`` returns, so
    its attributes and printed table are opt_einsum's.

    >>> info = path_info('ij,jk->ik', [(2, 3), (3, 4)], [(0, 1)])
    >>> info.opt_cost, info.largest_intermediate
    (Decimal('48'), Decimal('8'))
    """
    import opt_einsum

    _, info = opt_einsum.contract_path(einsum, *shapes, shapes=True, optimize=[tuple(p) for p in path],
                                       use_blas=use_blas)
    return info


# ------------------------------------------------------------------ backend= conversion
def to_library(name: str, arrays: Sequence[np.ndarray]) -> list[Any]:
    """numpy arrays as arrays of the library ``name`` (for opt_einsum's ``backend=``)."""
    if name == "numpy":
        return list(arrays)
    if name == "object":   # numpy's own arithmetic on the operands as given (object or not)
        return list(arrays)
    if name == "jax":
        import jax.numpy as jnp

        return [jnp.asarray(a) for a in arrays]
    if name == "torch":
        import torch

        return [torch.as_tensor(a) for a in arrays]
    if name == "dask":
        import dask.array as da

        return [da.from_array(a) for a in arrays]
    raise ContractionError(f"backend={name!r} cannot take numpy operands; pass its own arrays")


def from_library(name: str, result: Any, scalar: bool = True) -> Any:
    """A result of the library ``name`` back as numpy: a numpy scalar when 0-d (np.einsum's
    convention, `contract`'s), or with ``scalar=False`` a 0-d array (opt_einsum's expressions).

    >>> from_library('object', np.array(3, dtype=object)), from_library('numpy', np.float64(2), False)
    (3, array(2.))
    """
    if name == "dask":
        result = result.compute()
    elif name == "torch":
        result = result.detach().cpu().numpy()
    # (a 0-d object result comes back from numpy as the bare object: keep it an object array)
    bare = name == "object" and not isinstance(result, (np.ndarray, np.generic))
    out = np.asarray(result, dtype=object if bare else None)
    return out[()] if out.ndim == 0 and scalar else out


# -------------------------------------------------------------- opt_einsum's expressions
def check_expression_keywords(subscripts: Any, keywords: dict[str, Any]) -> None:
    """opt_einsum's ``out=`` and ``backend=`` belong to an expression's call, not its build.

    >>> check_expression_keywords('ij->i', {'out': None, 'len_W': 1})
    >>> check_expression_keywords('ij->i', {'out': np.ones(2)})
    Traceback (most recent call last):
    ...
    contractions.errors.KeywordError: contract_expression('ij->i', ...) takes no out=: pass it to the expression's call, expr(*operands, out=...)
    """
    for name in ("out", "backend"):
        if keywords.get(name) is not None:
            what = quoted(subscripts) if isinstance(subscripts, str) else "..."
            raise KeywordError(f"contract_expression({what}, ...) takes no {name}=: pass it to the "
                               f"expression's call, expr(*operands, {name}=...)")
    for name in ("out", "backend"):
        keywords.pop(name, None)


def evaluated_constants(n: int, constants: dict[int, Any],
                        converted: dict[tuple[str, str], dict[int, Any]]) -> dict[str, list[Any]]:
    """opt_einsum's ``ContractExpression._evaluated_constants``: per library, the constants in
    their positions (None elsewhere), as the expression holds them for that library.

    >>> evaluated_constants(2, {1: np.ones(2)}, {})['numpy'][0] is None
    True
    """
    found = {name: [held.get(k) for k in range(n)] for (name, _), held in converted.items()}
    numpy_held = all(type(c) is np.ndarray for c in constants.values())
    if numpy_held:
        found.setdefault("numpy", [constants.get(k) for k in range(n)])
    return found
