"""Checks at the public boundary: every argument of the verbs is validated here, before any
stage runs, so a bad argument fails with a documented error that names it and says what to pass
(docs/api.md, "Errors").  Used by `api`, `expressions` and `explaining`; imports no later stage.

>>> normalise_memory_limit('1MiB'), normalise_memory_limit(None)
(131072, None)
>>> as_operands([[1.0, 2.0]], backend_named('numpy'))[0].shape
(2,)
"""

from __future__ import annotations

import decimal
import inspect
import math
import operator
import types
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .backends import Backend, BackendOptions, backend_named
from .compat import not_subscripts_message
from .errors import ContractionError, OperandCountError, OptionError, quoted
from .parser import parse
from .schedule import CONVERTED, FORTRAN, STRIDED, _checked_path, normalise_optimize
from .solver import solve_call

_ndarray = np.ndarray


# ------------------------------------------------------------------------------ operands
_REFUSED = (str, bytes, dict, set, frozenset, types.GeneratorType)


def as_operands(operands: Sequence[Any], backend: Backend, subscripts: Any = None) -> tuple[Any, ...]:
    """Operands the backend can take: lists, tuples and scalars become numpy arrays.

    Anything else that is not an array (``None``, strings, dicts, generators, arbitrary
    objects) is a `TypeError` naming its position, raised before any arithmetic.  A list of
    arrays where ``subscripts`` names more operands than were passed is an
    `OperandCountError` saying to pass them as separate arguments.
    """
    out = []
    for k, op in enumerate(operands):
        if type(op) is _ndarray or (backend.name != "numpy" and backend.owns(op)):
            out.append(op)
            continue
        if isinstance(op, (list, tuple)) and isinstance(subscripts, str):
            _check_not_packed(subscripts, operands, k)
        if op is None or isinstance(op, _REFUSED) or not (
                isinstance(op, (list, tuple, int, float, complex, np.generic, np.ndarray))
                or hasattr(op, "__array__") or hasattr(op, "__array_interface__")):
            raise TypeError(
                f"operand {k} is {type(op).__name__} ({short_repr(op)}), not an array; pass "
                "arrays (numpy, JAX, torch, dask or an Array API library) or nested lists/tuples "
                "of numbers")
        try:
            out.append(np.asarray(op))
        except ValueError as exc:  # ragged nesting, among others
            raise ContractionError(
                f"operand {k} cannot be made an array ({exc}); nested lists must be "
                "rectangular (every row the same length)") from None
    return tuple(out)


def _check_not_packed(subscripts: str, operands: Sequence[Any], k: int) -> None:
    """An `OperandCountError` when operand ``k`` is a list or tuple of arrays and the string
    names more operands than were passed: ``contract(s, [a, b])`` for ``contract(s, a, b)``
    (numpy would stack the arrays, or fail on their shapes, and say neither)."""
    op = operands[k]
    if not op or not all(hasattr(item, "shape") and hasattr(item, "ndim") for item in op):
        return
    try:
        terms = len(parse(subscripts).inputs)
    except ContractionError:
        return  # the call reports the string's own error
    if terms > len(operands):
        q = quoted(subscripts)
        given = f"{len(operands)} operand{' was' if len(operands) == 1 else 's were'}"
        raise OperandCountError(
            f"{q} has {terms} input terms but {given} given, and operand {k} is a "
            f"{type(op).__name__} of {len(op)} arrays: operands go as separate arguments: "
            f"contract({q}, *ops), not contract({q}, ops)")


def short_repr(op: Any) -> str:
    text = repr(op)
    return text if len(text) <= 40 else text[:37] + "..."


def layouts_of(arrays: Sequence[Any], options: BackendOptions) -> tuple[int, ...] | None:
    """`Schedule.layouts` for numpy operands: which are strided, which are converted."""
    if not arrays or not all(type(a) is _ndarray for a in arrays):
        return None
    target = options.preferred_element_type
    dtype = np.dtype(target) if target is not None else np.result_type(*arrays)
    codes = tuple((0 if a.flags.c_contiguous else FORTRAN if a.flags.f_contiguous else STRIDED)
                  | (CONVERTED if a.dtype != dtype else 0) for a in arrays)
    return codes if any(codes) else None


_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30}


def normalise_memory_limit(memory_limit: Any, itemsize: int = 8) -> Any:
    """``memory_limit=`` as the schedule takes it: None, ``'default'``, ``'max_input'`` or a
    number of elements.  Strings with a byte unit (``'64MB'``, ``'1.5GiB'``) are divided by
    ``itemsize`` (the result dtype's; 8 when shapes alone are known).  A value of the wrong
    type is a `TypeError`; a number that is not a positive finite whole number of elements (or
    a string that is not a size) an `OptionError`.

    >>> normalise_memory_limit('1MiB'), normalise_memory_limit(10**6), normalise_memory_limit(None)
    (131072, 1000000, None)
    """
    if memory_limit is None or (isinstance(memory_limit, str) and memory_limit in ("default", "max_input")):
        return memory_limit
    hint = "write a number of elements, a size such as '64MB' or '1GiB', 'default', 'max_input' or None"
    if isinstance(memory_limit, bool) or type(memory_limit).__name__ == "bool_":
        raise TypeError(f"memory_limit must be a number of elements, a size like '64MB', "
                        f"'default', 'max_input' or None, not a bool ({memory_limit!r})")
    if isinstance(memory_limit, str):
        import re

        found = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*([kmg]i?b|b)\s*", memory_limit.lower())
        if not found:
            raise OptionError(f"memory_limit={short_repr(memory_limit)}: {hint}")
        size = float(found.group(1)) * _UNITS[found.group(2)] / itemsize
        if not math.isfinite(size):
            raise OptionError(f"memory_limit={short_repr(memory_limit)} is too large to be a size; {hint}")
        elements = int(size)
    else:
        try:
            elements = operator.index(memory_limit)
        except TypeError:
            if not isinstance(memory_limit, (float, np.floating, decimal.Decimal)):  # PathInfo's sizes
                raise TypeError(f"memory_limit must be a number of elements or a size string, not "
                                f"{type(memory_limit).__name__}; {hint}") from None
            if not math.isfinite(memory_limit):
                raise OptionError(f"memory_limit={memory_limit!r} is not a finite number of elements; "
                                  "pass None for no limit") from None
            if memory_limit != int(memory_limit):
                raise OptionError(f"memory_limit={memory_limit!r} is not a whole number of elements; "
                                  f"{hint} (None for no limit)") from None
            elements = int(memory_limit)
    if elements < 1:
        raise OptionError(f"memory_limit={short_repr(memory_limit)} must be at least one element; "
                          "pass None for no limit")
    return elements


def check_subscripts(subscripts: Any, verb: str = "contract") -> None:
    """A `TypeError` unless ``subscripts`` is a str (they come first: ``verb('ij->i', x)``)."""
    if not isinstance(subscripts, str):
        raise TypeError(not_subscripts_message(subscripts, (), verb))


class _Written:
    """An annotation help() prints as written, without quotes."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def public_signature(function: Callable[..., Any], returns: str) -> inspect.Signature:
    """``function``'s signature as help() shows it: its annotations as written, less the
    uninformative ``Any``, no default for a parameter whose default is a private sentinel,
    and ``returns`` as its return type.

    >>> def f(x: str = object(), *ops: Any, k: Any = 'auto', **len_groups: int) -> Any: ...
    >>> str(public_signature(f, 'array'))
    "(x: str, *ops, k='auto', **len_groups: int) -> array"
    """
    shown = []
    for p in inspect.signature(function).parameters.values():
        plain = p.default is None or isinstance(p.default, (str, int, float))
        annotation = p.annotation if not isinstance(p.annotation, str) else (
            p.empty if p.annotation == "Any" else _Written(p.annotation))
        shown.append(p.replace(default=p.default if plain else p.empty, annotation=annotation))
    return inspect.Signature(shown, return_annotation=_Written(returns))


def shapes_of(arrays: Sequence[Any]) -> tuple[tuple[int, ...], ...]:
    shapes = []
    for k, a in enumerate(arrays):
        try:
            shapes.append(tuple(int(n) for n in a.shape))
        except (TypeError, ValueError):
            raise ContractionError(
                f"operand {k} has an unknown shape {tuple(a.shape)!r} (a lazy array whose chunk "
                "sizes are not known yet: for dask, call .compute_chunk_sizes() first)") from None
    return tuple(shapes)


def result_itemsize(arrays: Sequence[Any], options: BackendOptions) -> int:
    """Bytes per element of the result (for byte-valued memory limits); 8 when unknown."""
    try:
        if options.preferred_element_type is not None:
            return int(np.dtype(options.preferred_element_type).itemsize)
        return int(max((np.dtype(a.dtype).itemsize for a in arrays), default=8))
    except (TypeError, ValueError, AttributeError):
        itemsize = [getattr(getattr(a, "dtype", None), "itemsize", None) for a in arrays]
        return max((int(i) for i in itemsize if isinstance(i, int)), default=8)


# ------------------------------------------------------------------------- introspection
def checked_shapes(items: Sequence[Any], verb: str) -> tuple[tuple[int, ...], ...]:
    shapes = []
    for k, item in enumerate(items):
        raw = item.shape if hasattr(item, "shape") else item
        if isinstance(raw, (str, bytes)) or not isinstance(raw, Sequence) and not hasattr(raw, "__iter__"):
            raise TypeError(f"{verb}: shape {k} must be a tuple of ints, got {item!r}")
        shape = []
        for n in raw:
            if isinstance(n, bool):
                raise TypeError(f"{verb}: shape {k} {tuple(raw)!r} has a bool extent")
            try:
                n = operator.index(n)
            except TypeError:
                if hasattr(item, "shape") and (n is None or isinstance(n, float)):
                    raise ContractionError(
                        f"{verb}: operand {k} has an unknown shape {tuple(raw)!r} (a lazy array whose "
                        "chunk sizes are not known yet: for dask, call .compute_chunk_sizes() first)"
                    ) from None
                raise TypeError(f"{verb}: shape {k} {tuple(raw)!r} has a non-integer extent "
                                f"{n!r}") from None
            if n < 0:
                raise ContractionError(f"{verb}: shape {k} {tuple(raw)!r} has a negative extent")
            shape.append(n)
        shapes.append(tuple(shape))
    return tuple(shapes)


def split_shapes_or_ndims(items: Sequence[Any], verb: str
                     ) -> tuple[tuple[tuple[int, ...], ...] | None, tuple[int, ...]]:
    """Split explain/expand arguments into (shapes or None, ndims); never a mix."""
    is_ndim = []
    for item in items:
        if isinstance(item, bool):
            raise TypeError(f"{verb}: an ndim must be an int, not bool ({item!r})")
        # numpy integers have a .shape (of a 0-d array) but are ndims, as Python ints are
        is_ndim.append(isinstance(item, (int, np.integer))
                       or (not hasattr(item, "shape") and hasattr(item, "__index__")))
    if items and all(is_ndim):
        ndims = tuple(operator.index(i) for i in items)
        if any(n < 0 for n in ndims):
            raise ContractionError(f"{verb}: ndims must be >= 0, got {ndims}")
        return None, ndims
    if any(is_ndim):
        raise TypeError(f"{verb}: pass one shape (or array) per operand, or one ndim per operand, "
                        f"not a mix: {list(items)!r}")
    shapes = checked_shapes(items, verb)
    return shapes, tuple(len(s) for s in shapes)


#: Most distinct axes one expansion can name: 52 letters, then `expand.symbol_past_letters`
#: up to U+10FFFF (the surrogates skipped).
MAX_AXES = 0x110000 - 140 - (0xE000 - 0xD800)


# dtype kinds np.einsum cannot multiply: datetime, timedelta, bytes, str, structured/void.
_NOT_NUMERIC = {"M": "datetime64", "m": "timedelta64", "S": "bytes", "U": "str", "V": "structured"}


def check_dtypes(arrays: Sequence[Any]) -> None:
    """A `TypeError` naming the first operand whose numpy dtype holds no numbers."""
    for k, a in enumerate(arrays):
        dtype = getattr(a, "dtype", None)
        # (extension float types such as ml_dtypes' bfloat16 are kind 'V' too, but not np.void)
        if isinstance(dtype, np.dtype) and dtype.kind in _NOT_NUMERIC and (
                dtype.kind != "V" or dtype.type is np.void):
            raise TypeError(
                f"operand {k} has dtype {dtype} ({_NOT_NUMERIC[dtype.kind]}), which holds no numbers "
                "to multiply; contract takes bool, integer, float, complex (or object) arrays: "
                f"convert it first (e.g. .astype(float){', or view its fields' if dtype.kind == 'V' else ''})")


def checked_optimize(optimize: Any, subscripts: Any = None, n_operands: int | None = None) -> Any:
    """``optimize=`` normalised: an explicit path's positions must be ints (never truncated
    floats) within range for ``n_operands`` (checked once they match the string's terms, so a
    miscount is reported as such); an unknown preset is an `OptionError`."""
    if isinstance(optimize, (list, tuple)):
        for pair in optimize:
            if isinstance(pair, (list, tuple)):
                for k in pair:
                    if isinstance(k, bool) or not hasattr(type(k), "__index__"):
                        raise TypeError(f"optimize= path entries must be tuples of ints (operand "
                                        f"positions): {tuple(pair)!r} holds {k!r:.40}; write e.g. [(0, 1)]")
    try:
        normalised = normalise_optimize(optimize)
    except ContractionError:
        raise
    except ValueError as exc:
        raise OptionError(str(exc)) from None
    if isinstance(normalised, tuple) and n_operands is not None and isinstance(subscripts, str):
        try:
            terms = len(parse(subscripts).inputs)
        except ContractionError:
            return normalised  # the call reports the string's own error
        if terms == n_operands:
            _checked_path(normalised, n_operands)
    return normalised


def checked_backend(name: Any) -> Backend:
    """The backend named ``name``; an unknown name is an `OptionError`, a non-str a `TypeError`."""
    if not isinstance(name, str):
        raise TypeError(f"backend= must be a backend name such as 'numpy', 'jax' or 'torch', "
                        f"not {type(name).__name__}")
    try:
        return backend_named(name)
    except ValueError as exc:
        raise OptionError(f"backend={short_repr(name)}: {exc}") from None


def check_axis_count(subscripts: str, ndims: Sequence[int], supplements: tuple[tuple[str, int], ...],
                     what: str, verb: str) -> None:
    """An `OptionError` when the expansion would need more distinct axes than can be named
    (only ever reachable with bare ndims or huge shape tuples)."""
    if sum(ndims) <= MAX_AXES:
        return  # every distinct axis is an axis of some operand
    parsed, lengths = solve_call(subscripts, tuple(ndims), supplements, what=what)
    letters = {ch for term in parsed.terms for ch in term if not ch.isupper()}
    total = sum(lengths) + len(letters)
    if total > MAX_AXES:
        big = ", ".join(f"{g}={n:,}" for g, n in zip(parsed.groups, lengths) if n)
        raise OptionError(
            f"{verb}: {quoted(subscripts)} would expand to {total:,} distinct axes (group lengths "
            f"{big}), more than the {MAX_AXES:,} an einsum string can name; check the ndims or "
            "shapes passed")
