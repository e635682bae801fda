"""The matrix-product precision policy: one name per setting, what each asks of XLA, and the rounding it allows.

XLA computes a float32 ``dot_general`` at the precision its ``precision_config`` asks for, and the platforms
read that request differently:

* XLA:CPU ignores it: every float32 product is computed in float32, whatever is asked (same bits for DEFAULT,
  HIGH and HIGHEST; tested in ``tests/test_precision.py``), so the policy never moves a CPU run's numbers.
* XLA:GPU on NVIDIA Ampere and later computes a float32 product in **TF32** (operands rounded to 10 mantissa
  bits, products accumulated in float32) unless the product asks for HIGHEST, except products it keeps in
  float32 itself: those below ``xla_gpu_gemm_rewrite_size_threshold`` ((M + N) K < 100) and matrix-vector
  products it rewrites as a multiply and a reduction ((M + N) K < 1e7). So at DEFAULT one score can depend on
  the shape of the bucket its list was padded into (one layer's product is float32 in a small bucket, TF32 in
  a large one), and a graph exported from it scores differently in a float32 runtime (ONNX Runtime on CPU).
* TPU: DEFAULT is one bfloat16 pass, HIGH three (about float32's accuracy less a few bits), HIGHEST six.

The settings (``--matmul_precision``; :class:`pfd_jax.training.TrainConfig` and
:class:`pfd_jax.ops.models.Arch` field ``matmul_precision``):

* ``highest`` (the default): float32 products everywhere. A reproduction codebase's numbers should not depend
  on the accelerator's fastest mode: at ``highest`` a GPU run differs from a CPU run only by summation order,
  a score does not depend on its bucket, and an exported graph scores as the ranker does in any float32
  runtime. Its cost is the accelerator's float32 throughput against its TF32 throughput, for this project's
  small products (a 100-wide MLP) a fraction of a step's time at most; not measured yet (a driver's wall time with
  ``--matmul_precision=tf32`` against the same run at ``highest`` on one GPU measures it).
* ``tf32``: TF32 on NVIDIA GPUs (``Precision.HIGH``; three bfloat16 passes on TPU), a speed option.
* ``default``: whatever JAX's ``jax_default_matmul_precision`` is in force (the platform's fastest unless the
  user set it): the library as a user's own program configures it.
"""
from __future__ import annotations

import jax

# The settings and the lax precision each asks for live beside the model that takes them (pfd_jax.ops.models).
from pfd_jax.ops.models import DEFAULT_PRECISION as DEFAULT, MATMUL_PRECISIONS, lax_precision

__all__ = ["DEFAULT", "MATMUL_PRECISIONS", "lax_precision", "config_value", "operand_roundoff", "F32_ROUNDOFF",
           "TF32_ROUNDOFF", "BF16_ROUNDOFF"]

# float32's unit roundoff, and that of operands rounded to TF32 (10 mantissa bits) or bfloat16 (7).
F32_ROUNDOFF = 2.0 ** -24
TF32_ROUNDOFF = 2.0 ** -11
BF16_ROUNDOFF = 2.0 ** -8

# The string jax_default_matmul_precision takes for each setting.
_CONFIG = {"highest": "highest", "tf32": "tensorfloat32", "default": None}


def _checked(name: str) -> str:
  lax_precision(name)  # a ValueError naming the settings for any other name
  return name


def config_value(name: str):
  """The value of ``jax_default_matmul_precision`` for setting `name` (None: leave it as it is)."""
  return _CONFIG[_checked(name)]


def operand_roundoff(name: str, platform: str, emulated_tf32: bool = False) -> float:
  """The unit roundoff of a float32 product's operands under setting `name` on `platform` ('cpu', 'gpu', 'tpu'):
  0 where the operands enter the product unrounded (float32 products), TF32's 2^-11 on an NVIDIA GPU below
  'highest', bfloat16's 2^-8 for a one-pass TPU product. `emulated_tf32`: a CPU whose products are rounded as an
  NVIDIA GPU's are (the test suite's --tf32). 'default' is read as the platform's default (JAX's own)."""
  name = _checked(name)
  if name == "default" and jax.config.jax_default_matmul_precision in ("highest", "float32"):
    name = "highest"
  if name == "highest":
    return 0.0
  if platform == "gpu" or (platform == "cpu" and emulated_tf32):
    return TF32_ROUNDOFF
  if platform == "tpu":
    return BF16_ROUNDOFF if name == "default" else BF16_ROUNDOFF ** 2
  return 0.0
