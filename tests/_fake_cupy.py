"""A CPU stand-in for CuPy's namespace, so the CuPy backend's code path runs without a GPU.

Register it as ``sys.modules['cupy']`` (``monkeypatch.setitem(sys.modules, 'cupy', fake)``, or
`installed()` as a context manager) and the registry sends its arrays to
``contractions/backends/cupy_backend.py``, which runs exactly as on CuPy.  The arrays are a
wrapper type (``cupy.ndarray``) holding a numpy array, and behave like CuPy's where it matters
for the backend: every namespace function refuses a numpy array argument (CuPy raises
``TypeError`` for one: nothing may cross from the host silently), ``np.asarray`` of a device
array raises (CuPy forbids implicit conversion; ``.get()`` / ``asnumpy`` copy back), numpy
scalars and Python numbers are accepted, a 0-d result is a 0-d array, ``flags`` has no
``writeable``.  ``calls`` counts the namespace functions called (a test can see which ran).

>>> import numpy as np
>>> x = asarray(np.ones((2, 3)))
>>> type(x).__module__, type(x).__name__, matmul(x, x.T).get().tolist()
('cupy', 'ndarray', [[3.0, 3.0], [3.0, 3.0]])
>>> matmul(x, np.ones((3, 2)))
Traceback (most recent call last):
...
TypeError: Unsupported type <class 'numpy.ndarray'>
"""

from __future__ import annotations

import collections
import contextlib
import sys
import types
from collections.abc import Iterator
from typing import Any

import numpy as np

__version__ = "0.0-fake"
calls: collections.Counter[str] = collections.Counter()


class _Flags:
    def __init__(self, a: np.ndarray) -> None:
        self.c_contiguous = bool(a.flags.c_contiguous)
        self.f_contiguous = bool(a.flags.f_contiguous)
        self.owndata = bool(a.flags.owndata)


class ndarray:  # noqa: N801 - CuPy's name
    """A device array of the stand-in: a numpy array the host cannot read implicitly."""

    __array_priority__ = 100   # numpy defers its binary operators to this type

    def __init__(self, a: np.ndarray) -> None:
        self._a = a

    # attributes
    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)
    strides = property(lambda self: self._a.strides)
    itemsize = property(lambda self: self._a.itemsize)
    nbytes = property(lambda self: self._a.nbytes)
    flags = property(lambda self: _Flags(self._a))
    T = property(lambda self: ndarray(self._a.T))

    def __array__(self, *args: Any, **kwargs: Any) -> np.ndarray:
        raise TypeError("Implicit conversion to a NumPy array is not allowed. Please use "
                        "`.get()` to construct a NumPy array explicitly.")

    def get(self) -> np.ndarray:
        return self._a.copy()

    def item(self) -> Any:
        return self._a.item()

    def __float__(self) -> float:
        return float(self._a)

    def __len__(self) -> int:
        return len(self._a)

    def __repr__(self) -> str:
        return f"array({self._a.tolist()!r}, dtype={self._a.dtype})"

    # views and methods (CuPy's return views where numpy's do)
    def transpose(self, *axes: Any) -> ndarray:
        return ndarray(self._a.transpose(*axes))

    def reshape(self, *shape: Any) -> ndarray:
        return ndarray(self._a.reshape(*shape))

    def swapaxes(self, a: int, b: int) -> ndarray:
        return ndarray(self._a.swapaxes(a, b))

    def diagonal(self, offset: int = 0, axis1: int = 0, axis2: int = 1) -> ndarray:
        return ndarray(self._a.diagonal(offset, axis1, axis2))

    def sum(self, axis: Any = None, dtype: Any = None) -> ndarray:
        calls["sum"] += 1
        return ndarray(np.asarray(self._a.sum(axis=axis, dtype=dtype)))

    def astype(self, dtype: Any, copy: bool = True) -> ndarray:
        return ndarray(self._a.astype(dtype, copy=copy))

    def copy(self) -> ndarray:
        return ndarray(self._a.copy())

    def __getitem__(self, index: Any) -> ndarray:
        return ndarray(np.asarray(self._a[index]))

    def __setitem__(self, index: Any, value: Any) -> None:
        self._a[index] = _unwrap(value)

    def __iadd__(self, other: Any) -> ndarray:
        self._a += _unwrap(other)
        return self

    def __add__(self, other: Any) -> ndarray:
        return ndarray(np.asarray(self._a + _unwrap(other)))

    def __mul__(self, other: Any) -> ndarray:
        return ndarray(np.asarray(self._a * _unwrap(other)))

    __radd__ = __add__
    __rmul__ = __mul__


ndarray.__module__ = "cupy"


def _unwrap(x: Any) -> Any:
    if isinstance(x, ndarray):
        return x._a
    if isinstance(x, np.ndarray) or isinstance(x, (list, tuple)):
        raise TypeError(f"Unsupported type {type(x)}")
    return x   # numpy scalars and Python numbers


def _wrapped(name: str, fn: Any) -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        calls[name] += 1
        return ndarray(np.asarray(fn(*[_unwrap(a) for a in args], **kwargs)))

    call.__name__ = name
    return call


matmul = _wrapped("matmul", np.matmul)
multiply = _wrapped("multiply", np.multiply)
ascontiguousarray = _wrapped("ascontiguousarray", np.ascontiguousarray)
transpose = _wrapped("transpose", np.transpose)


def einsum(subscripts: str, *operands: Any, optimize: Any = False, dtype: Any = None) -> ndarray:
    calls["einsum"] += 1
    return ndarray(np.asarray(np.einsum(subscripts, *[_unwrap(a) for a in operands],
                                        optimize=optimize, dtype=dtype)))


def asarray(x: Any, dtype: Any = None) -> ndarray:
    """Host to device (an explicit copy), or the device array itself."""
    if isinstance(x, ndarray):
        return x if dtype is None else x.astype(dtype)
    return ndarray(np.array(x, dtype=dtype))


array = asarray


def asnumpy(x: Any) -> np.ndarray:
    return x.get() if isinstance(x, ndarray) else np.asarray(x)


def result_type(*arrays_and_dtypes: Any) -> np.dtype:
    return np.result_type(*[a._a if isinstance(a, ndarray) else a for a in arrays_and_dtypes])


def zeros(shape: Any, dtype: Any = float) -> ndarray:
    return ndarray(np.zeros(shape, dtype))


def empty(shape: Any, dtype: Any = float) -> ndarray:
    return ndarray(np.empty(shape, dtype))


def copyto(dst: ndarray, src: Any, casting: str = "same_kind") -> None:
    calls["copyto"] += 1
    if not isinstance(dst, ndarray):
        raise TypeError(f"Unsupported type {type(dst)}")
    np.copyto(dst._a, _unwrap(src), casting=casting)


def allclose(a: Any, b: Any, rtol: float = 1e-5, atol: float = 1e-8) -> bool:
    return bool(np.allclose(_unwrap(a), _unwrap(b), rtol=rtol, atol=atol))


float32, float64, complex128, int64 = np.float32, np.float64, np.complex128, np.int64


class _Device:
    def __init__(self, index: int = 0) -> None:
        self.id = index

    def synchronize(self) -> None:
        pass


cuda = types.SimpleNamespace(Device=_Device)


@contextlib.contextmanager
def installed() -> Iterator[types.ModuleType]:
    """This module as ``sys.modules['cupy']`` for the duration (restoring what was there)."""
    module = sys.modules[__name__]
    missing = object()
    before = sys.modules.get("cupy", missing)
    sys.modules["cupy"] = module
    try:
        yield module
    finally:
        if before is missing:
            del sys.modules["cupy"]
        else:
            sys.modules["cupy"] = before  # type: ignore[assignment]
