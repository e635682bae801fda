"""NVIDIA TF32 matrix products emulated on XLA:CPU, for the test suite's ``--tf32`` switch (conftest.py).

XLA:CPU computes every float32 product in float32 whatever its precision asks, while XLA:GPU on Ampere and later
computes one in TF32: its operands rounded to 10 mantissa bits (round to nearest even), the products accumulated in
float32. :func:`install` replaces the CPU lowering of ``dot_general`` by one that rounds both operands with
``stablehlo.reduce_precision`` (8 exponent, 10 mantissa bits) wherever XLA:GPU would use TF32, then lowers the
product as before, so the numeric tests can be run on a CPU under the rounding a GPU applies:

  python -m pytest -m 'numeric and not slow' --tf32

Which products XLA:GPU computes in TF32 (:func:`uses_tf32`; the XLA of jax 0.10's CUDA plugin): a float32 x
float32 product whose precision is not HIGHEST for both operands (an algorithm preset is left as it asks), unless

* it has a vector operand (no free dimension above 1) and (M + N) K < 1e7: the algebraic simplifier rewrites it
  as an elementwise multiply and a reduction, in float32;
* (M + N) K < 100 (``xla_gpu_gemm_rewrite_size_threshold``): it stays a loop-emitted float32 dot.

M and N are the products of the two operands' free dimensions, K of the contracted ones (batch dimensions are
neither). The emulation uses JAX internals (the lowering rule and its signature): it is checked against the
pinned jax in tests/test_precision.py, and a jax whose rule moved fails those tests rather than emulating
nothing.
"""
from __future__ import annotations

import functools
import math

import numpy as np
from jax._src.interpreters import mlir
from jax._src.lax import lax as lax_internal
from jax._src.lib.mlir.dialects import hlo

MANTISSA_BITS = 10  # TF32
GEMM_REWRITE_THRESHOLD = 100
MATVEC_REWRITE_LIMIT = 10_000_000

_installed = []


def _free_sizes(shape, contracting, batch) -> list:
  return [n for d, n in enumerate(shape) if d not in contracting and d not in batch and n != 1]


def uses_tf32(lhs_shape, rhs_shape, dimension_numbers, dtypes=(np.float32, np.float32), precision=None) -> bool:
  """Whether XLA:GPU computes this dot_general in TF32 (module docstring)."""
  if any(np.dtype(d) != np.float32 for d in dtypes):
    return False
  if isinstance(precision, (tuple, list)):
    if all(p == lax_internal.Precision.HIGHEST for p in precision):
      return False
  elif precision is not None:  # a DotAlgorithm or preset: its own semantics
    return False
  (lc, rc), (lb, rb) = dimension_numbers
  lhs_free, rhs_free = _free_sizes(lhs_shape, lc, lb), _free_sizes(rhs_shape, rc, rb)
  try:
    m, n, k = math.prod(lhs_free), math.prod(rhs_free), math.prod(lhs_shape[d] for d in lc)
    work = (m + n) * k
  except TypeError:  # a symbolic dimension (jax.export): a GEMM of a query's rows, a mat-vec of its columns
    return bool(lhs_free and rhs_free)
  if not lhs_free or not rhs_free:
    return work >= MATVEC_REWRITE_LIMIT
  return work >= GEMM_REWRITE_THRESHOLD


def _round(x):
  return hlo.reduce_precision(x, mlir.i32_attr(8), mlir.i32_attr(MANTISSA_BITS))


def _lowering(ctx, lhs, rhs, *, dimension_numbers, precision, **kw):
  lhs_aval, rhs_aval = ctx.avals_in
  if uses_tf32(lhs_aval.shape, rhs_aval.shape, dimension_numbers, (lhs_aval.dtype, rhs_aval.dtype), precision):
    lhs, rhs = _round(lhs), _round(rhs)
  return _installed[0](ctx, lhs, rhs, dimension_numbers=dimension_numbers, precision=precision, **kw)


def install() -> None:
  """Every float32 product lowered for the CPU from now on in this process is rounded as XLA:GPU's TF32 rounds it
  (programs traced before keep their lowering). Idempotent."""
  if not _installed:
    _installed.append(functools.partial(lax_internal._dot_general_lower, platform="cpu"))
    mlir.register_lowering(lax_internal.dot_general_p, _lowering, platform="cpu")


def installed() -> bool:
  return bool(_installed)


def round_tf32(x: np.ndarray) -> np.ndarray:
  """float32 values rounded to TF32 (10 mantissa bits, nearest even) in NumPy, bit by bit: the reference the
  emulation is tested against."""
  bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
  drop = 23 - MANTISSA_BITS
  half = (1 << (drop - 1)) - 1 + ((bits >> drop) & 1)  # ties to even
  return ((bits + half) >> drop << drop).astype(np.uint32).view(np.float32)
