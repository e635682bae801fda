"""Scoring models: the paper's fully connected ranker (appendix A.3) and its modern options.

One module, :class:`MLP`, whose defaults are the paper's model bit for bit, and whose options are those that
close the gap between neural rankers and gradient-boosted trees (Qin et al., ICLR 2021, "Are Neural Rankers
still Outperformed by Gradient Boosted Decision Trees?", DASALC; allRank's MLP): input clipping, normalisation
of the input and of every hidden layer (batch norm with running statistics, or layer norm), Gaussian input
noise and dropout. :class:`Arch` names a model's shape and options, hashable, so compiled scoring functions
are shared per architecture and a saved model's ``model.json`` holds it whole.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Mapping, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp

NORMS = ("none", "batch", "layer")
# The matrix products' precision settings (pfd_jax.ops.precision says what each does on each platform) and the lax
# precision each asks for ('default': None, JAX's jax_default_matmul_precision in force).
MATMUL_PRECISIONS = ("highest", "tf32", "default")
DEFAULT_PRECISION = "highest"
_LAX_PRECISION = {"highest": jax.lax.Precision.HIGHEST, "tf32": jax.lax.Precision.HIGH, "default": None}


def lax_precision(name: str):
  """The ``precision=`` of a product under setting `name` (jax.lax.Precision, or None for 'default')."""
  if name not in _LAX_PRECISION:
    raise ValueError(f"matmul precision {name!r}: one of {', '.join(MATMUL_PRECISIONS)}")
  return _LAX_PRECISION[name]
TOWER_HIDDEN = 16  # the additive tower's hidden width (MLP.tower)


class MaskedBatchNorm(nn.Module):
  """Batch normalisation over the real documents of a padded batch.

  In training (``train=True``) the mean and variance of each feature are taken over the documents where
  `mask` is True (every leading axis pooled), so padding never moves them, and the running statistics
  (collection ``batch_stats``: ``mean``, ``var``) move by ``momentum`` towards them. At scoring time the
  running statistics are used, so a document's score depends on that document only. `affine`: a trainable
  scale and bias after the normalisation (params ``scale``, ``bias``); without them nothing here trains.
  """
  momentum: float = 0.9
  eps: float = 1e-5
  affine: bool = True

  @nn.compact
  def __call__(self, x, mask=None, train: bool = False):
    d = x.shape[-1]
    mean = self.variable("batch_stats", "mean", jnp.zeros, (d,), jnp.float32)
    var = self.variable("batch_stats", "var", jnp.ones, (d,), jnp.float32)
    if train:
      y, mu, v = normalise(x, _weights(x, mask), self.eps)
      if not self.is_initializing():
        mean.value = self.momentum * mean.value + (1 - self.momentum) * mu
        var.value = self.momentum * var.value + (1 - self.momentum) * v
    else:
      y = (x - mean.value) * jax.lax.rsqrt(var.value + self.eps)
    if self.affine:
      y = y * self.param("scale", nn.initializers.ones, (d,)) + self.param("bias", nn.initializers.zeros, (d,))
    return y


def masked_moments(x, mask=None):
  """(mean [D], biased variance [D]) of ``x [..., D]`` over the entries where ``mask [...]`` is True."""
  return _moments(x, _weights(x, mask)[..., None])[:2]


def _weights(x, mask):
  """Each entry's weight in the moments of ``x [..., D]``: 1 for a real document, 0 for padding (no mask: all 1)."""
  return jnp.ones(x.shape[:-1], x.dtype) if mask is None else mask.astype(x.dtype)


def _moments(x, w):
  """(mean, variance, count) over every axis but the last, weights w [..., 1]: two passes (mean, then centred
  squares), which keep float32's precision when the mean is large against the spread (raw input features)."""
  axes = tuple(range(x.ndim - 1))
  n = jnp.maximum(jnp.sum(w, axes), 1.0)
  mu = jnp.sum(w * x, axes) / n
  return mu, jnp.sum(w * (x - mu) ** 2, axes) / n, n


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def normalise(x, w, eps):
  """Batch normalisation's training forward pass: ((x - mean) / sqrt(var + eps), mean, var) of ``x [..., D]``
  with the moments over the entries of weight ``w [...]`` (1 = real document, 0 = padding).

  Its VJP is the closed form (no autodiff through the two reductions): with xhat the output, r = (var + eps)^-1/2,
  g, c_m, c_v the cotangents of (xhat, mean, var), sums over every entry and n = sum(w),
  dx = r g + (w / n) (c_m - r sum(g) + 2 c_v (x - mean) - r xhat sum(g xhat)); w gets none (it is a mask)."""
  return _normalise_fwd(x, w, eps)[0]


def _normalise_fwd(x, w, eps):
  mu, v, n = _moments(x, w[..., None])
  r = jax.lax.rsqrt(v + eps)
  xhat = (x - mu) * r
  return (xhat, mu, v), (xhat, r, w, n)


def _normalise_bwd(eps, res, cot):
  xhat, r, w, n = res
  g, c_m, c_v = cot
  axes = tuple(range(xhat.ndim - 1))
  sum_g, sum_gx = jnp.sum(g, axes), jnp.sum(g * xhat, axes)
  dx = r * g + w[..., None] / n * (c_m - r * sum_g + (2 * c_v / r - r * sum_gx) * xhat)
  return dx, None


normalise.defvjp(_normalise_fwd, _normalise_bwd)


def dropout_level(rate: float) -> int:
  """:func:`dropout`'s rate in 256ths: round(256 rate), at least 1 for a rate above 0."""
  return max(1, round(256 * rate)) if rate > 0 else 0


def dropout(key, x, rate: float):
  """Inverted dropout of ``x [..., D]`` at rate q / 256, q = :func:`dropout_level` (0.3 -> 77 / 256 = 0.3008):
  each 32-bit word of ``jax.random.bits`` (one threefry hash) decides four entries by its four bytes (an entry
  is dropped when its byte is below q), and the kept ones are scaled by 256 / (256 - q), so the expectation is x
  exactly. A quarter of the hashes of flax's nn.Dropout (one hash per entry), which dominated the modern ranker's
  step; the streams differ from flax's, and the same key gives the same mask."""
  q = dropout_level(rate)
  if not q:
    return x
  d = x.shape[-1]
  words = jax.random.bits(key, x.shape[:-1] + (-(-d // 4),), jnp.uint32)
  octets = (words[..., None] >> jnp.arange(0, 32, 8, dtype=jnp.uint32)) & 0xFF
  keep = octets.reshape(x.shape[:-1] + (-1,))[..., :d] >= q
  return jnp.where(keep, x * (256 / (256 - q)), 0)


class MLP(nn.Module):
  """A `layers`-layer fully connected scorer: (layers - 1) hidden ReLU layers of width `hidden` and a
  linear output unit. ``[..., L, D] -> [..., L]`` logits; the paper's score in [0, 1] is sigmoid(logit), and
  a ranking by logit equals the ranking by score. The paper's model is layers=5, hidden=100 (appendix A.3;
  "5-layer" read as five Dense layers, PT-Ranking's convention) with none of the options below (the paper
  names none), and with them off this is that model bit for bit.

  Options (DASALC's recipe, each off by default):
    clip: inputs clipped to [-clip, clip] first (0 = off); the recipe's features are already
      sign(x) * log1p(|x|), DASALC's transform, so this bounds the rare huge values it leaves.
    norm: 'batch' (:class:`MaskedBatchNorm`) or 'layer' on the input and after every hidden Dense layer,
      before its ReLU. The Dense layer before a batch norm keeps its bias, which the normalisation subtracts
      again: dropping it made the step slower, not faster, on XLA's CPU backend (measured).
    input_affine: with batch norm, a trainable scale and bias on the normalised input (False: the input's batch
      norm has no parameters, and the step skips the first layer's input gradient).
    noise: std of Gaussian noise added to the (normalised) input in training.
    dropout: dropout rate after every hidden ReLU in training.
    matmul_precision: the precision of every Dense layer's product (:mod:`pfd_jax.ops.precision`): 'highest'
      (float32 on every platform; the default, so a score is the same on a GPU as on a CPU up to summation order,
      whatever bucket its list is padded into), 'tf32' (TF32 on NVIDIA GPUs) or 'default' (JAX's config in force).
      XLA:CPU computes float32 products in float32 whatever is asked, so on a CPU it changes no bit.
    tower: the last `tower` input columns skip the network and feed an additive shallow tower (one hidden
      ReLU layer of TOWER_HIDDEN units): score = f(other columns) + g(last columns), the two-tower / "PAL"
      position-bias model (Guo et al., RecSys 2019; Haldar et al., 2020) when those columns are the display
      position. Served with them set to a constant, g is a constant shift and the ranking is f's alone.
  `mask` ([..., L], True = real document) is read by batch norm's training statistics only; `train` turns
  on the statistics update, noise and dropout (rngs 'noise' and 'dropout').
  """
  hidden: int = 100
  layers: int = 5
  activation: Callable = nn.relu
  norm: str = "none"
  dropout: float = 0.0
  noise: float = 0.0
  clip: float = 0.0
  tower: int = 0
  input_affine: bool = True
  matmul_precision: str = DEFAULT_PRECISION

  def _dense(self, width: int) -> nn.Dense:
    return nn.Dense(width, precision=lax_precision(self.matmul_precision))

  def _norm(self, x, mask, train, affine=True):
    if self.norm == "batch":
      return MaskedBatchNorm(affine=affine)(x, mask, train)
    if self.norm == "layer":
      return nn.LayerNorm()(x)
    return x

  @nn.compact
  def __call__(self, x, mask=None, train: bool = False):
    if self.tower:
      x, side = x[..., :-self.tower], x[..., -self.tower:]
      return self.main(x, mask, train) + self._dense(1)(nn.relu(self._dense(TOWER_HIDDEN)(side)))[..., 0]
    return self.main(x, mask, train)

  def main(self, x, mask, train):
    if self.clip:
      x = jnp.clip(x, -self.clip, self.clip)
    x = self._norm(x, mask, train, self.input_affine)
    if train and self.noise:
      x = x + self.noise * jax.random.normal(self.make_rng("noise"), x.shape, x.dtype)
    for _ in range(self.layers - 1):
      x = self.activation(self._norm(self._dense(self.hidden)(x), mask, train))
      if train and self.dropout:
        x = dropout(self.make_rng("dropout"), x, self.dropout)
    return self._dense(1)(x)[..., 0]


class Arch(NamedTuple):
  """A scorer's architecture (hashable; saved in ``model.json`` as its fields): :class:`MLP`'s settings."""
  hidden: int = 100
  layers: int = 5
  norm: str = "none"
  dropout: float = 0.0
  noise: float = 0.0
  clip: float = 0.0
  tower: int = 0
  input_affine: bool = True
  matmul_precision: str = DEFAULT_PRECISION

  def module(self) -> MLP:
    return MLP(**self._asdict())

  @property
  def stateful(self) -> bool:
    """Whether training updates state besides the parameters (batch norm's running statistics)."""
    return self.norm == "batch"

  @property
  def stochastic(self) -> bool:
    """Whether a training forward pass draws random numbers (noise, dropout)."""
    return bool(self.noise or self.dropout)

  @classmethod
  def from_json(cls, model: Mapping[str, Any]) -> "Arch":
    """The architecture a saved ``model.json`` ``model`` entry records (absent options: their defaults)."""
    return cls(**{k: model[k] for k in cls._fields if k in model})


def num_params(params) -> int:
  """Trainable parameters (``params`` collection; batch norm's running statistics are not parameters)."""
  tree = params.get("params", params) if isinstance(params, dict) else params
  return int(sum(x.size for x in jax.tree_util.tree_leaves(tree)))
