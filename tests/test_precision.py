"""The matrix-product precision policy (pfd_jax.ops.precision) and the suite's TF32 emulation (tests/tf32.py)."""
import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tf32
from conftest import emulating_tf32
from pfd_jax import config
from pfd_jax.ops import precision
from pfd_jax.ops.models import Arch
from pfd_jax.serving import model as serving_model
from pfd_jax.training import TrainConfig

pytestmark = pytest.mark.numeric
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.skipif(jax.default_backend() != "cpu" or emulating_tf32(), reason="a fact of XLA:CPU (unemulated)")
def test_xla_cpu_computes_float32_products_in_float32_whatever_is_asked():
  """Why the policy moves no CPU bit (the main job's table and every canary kept theirs): an MLP layer's product
  and its gradients at DEFAULT, HIGH (tf32) and HIGHEST give the same bits on XLA:CPU."""
  x = jax.random.normal(jax.random.PRNGKey(0), (32, 123, 136))
  w = jax.random.normal(jax.random.PRNGKey(1), (136, 100))
  got = []
  for p in (None, jax.lax.Precision.HIGH, jax.lax.Precision.HIGHEST):
    f = jax.jit(jax.value_and_grad(lambda w, p=p: jnp.sum(jnp.tanh(jnp.dot(x, w, precision=p)))))
    v, g = f(w)
    got.append(np.asarray(v).tobytes() + np.asarray(g).tobytes())
  assert got[0] == got[1] == got[2]


def test_each_setting_asks_xla_for_its_precision():
  assert precision.lax_precision("highest") == jax.lax.Precision.HIGHEST
  assert precision.lax_precision("tf32") == jax.lax.Precision.HIGH
  assert precision.lax_precision("default") is None
  assert jax.lax.Precision(precision.config_value("tf32")) == jax.lax.Precision.HIGH
  with pytest.raises(ValueError, match="one of highest, tf32, default"):
    precision.lax_precision("fp16")


def test_the_operand_roundoff_of_each_setting_and_platform():
  assert precision.operand_roundoff("highest", "gpu") == 0.0
  assert precision.operand_roundoff("tf32", "gpu") == precision.operand_roundoff("default", "gpu") == 2.0 ** -11
  assert precision.operand_roundoff("tf32", "cpu") == 0.0
  assert precision.operand_roundoff("tf32", "cpu", emulated_tf32=True) == 2.0 ** -11
  assert precision.operand_roundoff("default", "tpu") == 2.0 ** -8
  with jax.default_matmul_precision("highest"):  # 'default' is the config in force
    assert precision.operand_roundoff("default", "gpu") == 0.0


def _dots(arch: Arch) -> list:
  """The precision of every dot_general in the model's scoring and its training gradient (sub-programs too)."""
  model = arch.module()
  params = model.init(jax.random.PRNGKey(0), jnp.zeros((1, 3, 4)))
  loss = lambda p: jnp.sum(model.apply(p, jnp.ones((2, 3, 4))))
  found = []

  def walk(jaxpr):
    for eqn in jaxpr.eqns:
      if eqn.primitive.name == "dot_general":
        found.append(eqn.params["precision"])
      for sub in jax.core.subjaxprs(eqn) if hasattr(jax.core, "subjaxprs") else ():
        walk(sub)
      for v in eqn.params.values():
        if hasattr(v, "jaxpr") or hasattr(v, "eqns"):
          walk(getattr(v, "jaxpr", v))
  walk(jax.make_jaxpr(jax.grad(loss))(params).jaxpr)
  return found


@pytest.mark.parametrize("name, asked", [("highest", (jax.lax.Precision.HIGHEST,) * 2),
                                         ("tf32", (jax.lax.Precision.HIGH,) * 2), ("default", None)])
def test_every_product_of_the_model_and_its_gradient_takes_the_setting(name, asked):
  found = _dots(Arch(hidden=8, layers=3, norm="batch", tower=1, matmul_precision=name))
  # 5 Dense layers (3 of the stack, 2 of the tower): 5 products forward, 5 weight gradients, 4 input gradients (the
  # inputs' own is never needed)
  assert len(found) == 14 and set(found) == {asked}, found


def test_the_setting_is_a_flag_a_field_and_a_saved_models_recipe():
  """--matmul_precision: TrainConfig's field (out of the configuration hash at its default, so every run made before
  it keeps its folder), the architecture's, and model.json's when not the default; a bad value is refused."""
  assert "matmul_precision" not in config.to_dict(TrainConfig())
  cfg = TrainConfig(matmul_precision="tf32")
  assert config.to_dict(cfg)["matmul_precision"] == "tf32" and cfg.arch.matmul_precision == "tf32"
  with pytest.raises(config.ConfigError, match="matmul_precision"):
    TrainConfig(matmul_precision="fp8")
  assert Arch.from_json(dict(kind="mlp", hidden=4, layers=2)).matmul_precision == "highest"
  assert Arch.from_json(dict(kind="mlp", hidden=4, layers=2, matmul_precision="tf32")).matmul_precision == "tf32"
  with pytest.raises(serving_model.ModelError, match="model.matmul_precision = 'fp8' is not a valid setting"):
    serving_model._check_arch(dict(matmul_precision="fp8"), "model.json")


def test_a_driver_sets_the_precision_of_every_other_product():
  from experiments.framework import lifecycle
  before = jax.config.jax_default_matmul_precision
  try:
    lifecycle.use_matmul_precision("tf32")
    assert jax.config.jax_default_matmul_precision == "tensorfloat32"
    lifecycle.use_matmul_precision("default")  # leaves it
    assert jax.config.jax_default_matmul_precision == "tensorfloat32"
    lifecycle.use_matmul_precision("highest")
    assert jax.config.jax_default_matmul_precision == "highest"
  finally:
    jax.config.update("jax_default_matmul_precision", before)


@pytest.mark.parametrize("lhs, rhs, dims, want", [
    ((64, 48), (48, 32), (((1,), (0,)), ((), ())), True),           # a GEMM: TF32
    ((4, 5), (5, 3), (((1,), (0,)), ((), ())), False),              # (4 + 3) * 5 = 35 < 100: float32
    ((7, 10), (10, 3), (((1,), (0,)), ((), ())), True),             # (7 + 3) * 10 = 100: TF32
    ((64, 48), (48,), (((1,), (0,)), ((), ())), False),             # a mat-vec below 1e7: multiply + reduce
    ((4000, 2500), (2500, 1), (((1,), (0,)), ((), ())), True),      # a mat-vec of (4000 + 1) * 2500 >= 1e7
    ((8, 78, 20), (20, 1), (((2,), (0,)), ((), ())), False),        # a Dense(1) output layer of 624 documents
    ((2, 5, 6), (2, 6, 7), (((2,), (1,)), ((0,), (0,))), False),    # batch dims are neither: (5 + 7) * 6 = 72
    ((3, 9, 6), (3, 6, 9), (((2,), (1,)), ((0,), (0,))), True),     # (9 + 9) * 6 = 108
])
def test_which_products_xla_gpu_computes_in_tf32(lhs, rhs, dims, want):
  assert tf32.uses_tf32(lhs, rhs, dims) is want
  assert tf32.uses_tf32(lhs, rhs, dims, precision=(jax.lax.Precision.HIGHEST,) * 2) is False
  assert tf32.uses_tf32(lhs, rhs, dims, dtypes=(np.float64, np.float64)) is False


def test_round_tf32_keeps_ten_mantissa_bits_to_nearest_even():
  one = np.float32(1.0)
  step = np.float32(2.0 ** -10)
  values = np.array([one, one + step, one + step / 2, one + 3 * step / 2, one + step / 2 + 2.0 ** -20, -3.0],
                    np.float32)
  np.testing.assert_array_equal(tf32.round_tf32(values),
                                np.array([1, 1 + step, 1, 1 + 2 * step, 1 + step, -3], np.float32))


# Run in a child process: the emulation is process-wide, and this worker's other tests run unemulated.
_CHILD = r"""
import json, sys
import jax, jax.numpy as jnp, numpy as np
sys.path.insert(0, "tests")
import tf32
rng = np.random.default_rng(0)
a, b = rng.normal(size=(64, 48)).astype(np.float32), rng.normal(size=(48, 32)).astype(np.float32)
small_a, small_b = a[:4, :5], b[:5, :3]
vec = b[:, 0]
plain = [np.asarray(jnp.dot(a, b)), np.asarray(jnp.dot(small_a, small_b)), np.asarray(jnp.dot(a, vec))]
tf32.install()
f = jax.jit(lambda x, y, p: jnp.dot(x, y, precision=p), static_argnums=2)
out = dict(gemm=np.asarray(f(a, b, None)).tolist(), highest=np.asarray(f(a, b, jax.lax.Precision.HIGHEST)).tolist(),
           small=np.asarray(f(small_a, small_b, None)).tolist(), matvec=np.asarray(f(a, vec, None)).tolist(),
           plain=[p.tolist() for p in plain])
print(json.dumps(out))
"""


def test_the_emulation_rounds_the_operands_of_exactly_the_products_xla_gpu_sends_to_tf32():
  env = dict(os.environ, JAX_PLATFORMS="cpu")  # the emulation is XLA:CPU's; a GPU host runs the child on its CPU
  p = subprocess.run([sys.executable, "-c", _CHILD], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
  assert p.returncode == 0, p.stderr[-1500:]
  out = {k: np.asarray(v, np.float32) if k != "plain" else [np.asarray(x, np.float32) for x in v]
         for k, v in json.loads(p.stdout.splitlines()[-1]).items()}
  rng = np.random.default_rng(0)
  a, b = rng.normal(size=(64, 48)).astype(np.float32), rng.normal(size=(48, 32)).astype(np.float32)
  # the GEMM: the float64 product of the TF32-rounded operands, up to float32 accumulation (gamma_48 of |a||b|)
  want = tf32.round_tf32(a).astype(np.float64) @ tf32.round_tf32(b).astype(np.float64)
  bound = 48 * 2.0 ** -24 / (1 - 48 * 2.0 ** -24) * (np.abs(a).astype(np.float64) @ np.abs(b))
  assert np.all(np.abs(out["gemm"] - want) <= bound)
  exact = a.astype(np.float64) @ b.astype(np.float64)
  assert np.max(np.abs(out["gemm"] - exact)) > 100 * np.max(np.abs(out["plain"][0] - exact))  # it did round
  # HIGHEST, the small product and the mat-vec: the unemulated bits
  np.testing.assert_array_equal(out["highest"], out["plain"][0])
  np.testing.assert_array_equal(out["small"], out["plain"][1])
  np.testing.assert_array_equal(out["matvec"], out["plain"][2])
