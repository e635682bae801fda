"""Unbiased learning-to-rank from position-biased logs: propensities, inverse-propensity weighting, and the
served forms of the position-aware models. The debiasing rows (:func:`pfd_jax.methods.distill.run_debias_methods`;
``experiments/related/debias.py``, ``experiments/paper/table2.py --position``) are built from these.

The examination hypothesis (Richardson et al. 2007; Joachims et al., WSDM 2017): an item at position k is
examined with probability ``theta_k`` (its *propensity*) and, if examined, acted on with probability
``gamma`` that depends on the item alone; the logged label is ``y = e * r`` with ``e ~ Bernoulli(theta_k)``.

* **Inverse-propensity weighting** (:func:`ips_labels`): every loss of this project that is affine in its
  labels (RankBCE: ``softplus(s) - y s``; the listwise softmax: ``-sum y log p``) has, with the labels
  ``y / theta_k``, the expected value of the same loss on the full-information labels ``r``: the unbiased
  estimator of Joachims et al. applied to the label. Labels above 1 are fine for both (RankBCE's population
  optimum is sigmoid(s) = E[y / theta | x] = r). Propensities are clipped from below at ``clip`` (the usual
  clipped IPS: bias for variance where items are rarely examined). Pairwise and rank-based losses (RankNet,
  ListMLE, ApproxNDCG, LambdaLoss) compare labels instead of weighting them: not in :data:`IPS_LOSSES`
  (``experiments.related.debias`` refuses them; ``table2 --position`` trains its IPS rows with RankBCE then).
* **Propensities** (relative to the top position, ``theta_1 = 1``): (a) known (the simulator's ``k^-eta``);
  (b) from randomised sessions (:func:`randomized_propensities`): where the order is random, relevance is
  independent of position and the click-through rate at k is ``theta_k E[gamma]``, so ``CTR_k / CTR_1``;
  (c) by regression-EM (:func:`em_propensities`; Wang et al., WSDM 2018) from every logged session.
* **Position-aware learning**: the position as an input in training, set to the top position's value for
  every item at serving (:func:`serve_at`); with an additive model (``TrainConfig.tower``; the two-tower /
  PAL family) the position's part is then a constant shift and the ranking is the item tower's alone.

Positions are 1-based integers; the helpers take and return NumPy arrays (file-side data, like
:mod:`pfd_jax.data.preprocess`).
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

if TYPE_CHECKING:  # annotations only: a variant is a copy of the dataset it is given
  from pfd_jax.data.datasets import Dataset

IPS_LOSSES = ("rankbce", "softmax")  # the losses affine in their labels (see the module docstring)


def examination(max_position: int, eta: float) -> np.ndarray:
  """f64[max_position + 1] the known propensities ``k^-eta`` (index k; entry 0 unused, 1)."""
  k = np.arange(max_position + 1, dtype=np.float64)
  k[0] = 1.0
  return k ** -eta


def ips_labels(y: np.ndarray, positions: np.ndarray, propensity: np.ndarray, clip: float) -> np.ndarray:
  """f32[N] the inverse-propensity-weighted labels ``y / max(propensity[position], clip)``."""
  if not 0 < clip <= 1:
    raise ValueError(f"the propensity clip must be in (0, 1], got {clip}")
  positions = np.asarray(positions)
  if positions.min(initial=1) < 1 or positions.max(initial=1) >= len(propensity):
    raise ValueError(f"positions must lie in 1..{len(propensity) - 1}, got {positions.min()}..{positions.max()}")
  return (np.asarray(y, np.float64) / np.maximum(propensity[positions], clip)).astype(np.float32)


def _fill(ratio: np.ndarray, seen: np.ndarray) -> np.ndarray:
  """Positions without data take the nearest estimated position above them (the top one is 1)."""
  out = ratio.copy()
  out[0] = 1.0
  for k in range(1, len(out)):
    if not seen[k]:
      out[k] = out[k - 1]
  return out


def randomized_propensities(clicks: np.ndarray, positions: np.ndarray, randomized: np.ndarray,
                            max_position: int) -> np.ndarray:
  """f64[max_position + 1] ``CTR_k / CTR_1`` over the items of randomised sessions (`randomized` True).

  Positions no randomised item was shown at take the estimate of the position above; an estimate of 0 (no
  click there) stays 0 and is clipped where it is used (:func:`ips_labels`). ValueError if the randomised
  sessions have no click at the top position (the ratio is undefined).
  """
  pos = np.asarray(positions)[np.asarray(randomized, bool)]
  c = np.asarray(clicks, np.float64)[np.asarray(randomized, bool)]
  shown = np.bincount(pos, minlength=max_position + 1)[:max_position + 1]
  clicked = np.bincount(pos, weights=c, minlength=max_position + 1)[:max_position + 1]
  if shown[1] == 0 or clicked[1] == 0:
    raise ValueError(f"the randomised sessions ({int(shown[1])} of them) have no click at position 1: "
                     "propensities cannot be estimated from them")
  ctr = np.divide(clicked, shown, out=np.zeros(max_position + 1), where=shown > 0)
  return _fill(ctr / ctr[1], shown > 0)


class EMResult(NamedTuple):
  propensity: np.ndarray  # f64[max_position + 1], propensity[1] = 1
  relevance: np.ndarray   # f64[N] gamma(x) of every item
  iterations: int


def em_propensities(clicks: np.ndarray, positions: np.ndarray, features: np.ndarray, max_position: int, *,
                    iterations: int = 300, tol: float = 1e-5, newton_steps: int = 2,
                    ridge: float = 1e-3) -> EMResult:
  """Regression-EM (Wang et al., WSDM 2018, section 4): ``P(click) = theta_k gamma(x)``, with gamma a
  logistic regression on the features.

  E-step: for an unclicked item, ``P(E=1 | c=0) = theta (1 - gamma) / (1 - theta gamma)`` and
  ``P(R=1 | c=0) = (1 - theta) gamma / (1 - theta gamma)``. M-step: ``theta_k`` = mean over items at k of
  ``P(E=1 | c, k)``; gamma by ``newton_steps`` Newton steps of ridge-regularised logistic regression on the
  soft labels ``P(R=1 | c, k)`` (the paper samples binary labels from these and fits a GBDT; the soft labels
  are their expectation, and the logistic model keeps this a closed-form, seedless step). Stops when theta
  moves by less than `tol`. theta is reported relative to position 1 (only ratios enter IPS).
  """
  c = np.asarray(clicks, np.float64)
  pos = np.asarray(positions)
  a = np.concatenate([np.asarray(features, np.float64), np.ones((len(c), 1))], 1)
  shown = np.bincount(pos, minlength=max_position + 1)[:max_position + 1]
  theta = np.full(max_position + 1, 0.5)
  w = np.zeros(a.shape[1])
  w[-1] = np.log(max(c.mean(), 1e-6) / 0.5)  # start: relevance at the click rate over the starting theta
  it = 0
  for it in range(1, iterations + 1):
    gamma = 1.0 / (1.0 + np.exp(-(a @ w)))
    t = theta[pos]
    none = np.maximum(1.0 - t * gamma, 1e-12)
    examined = c + (1 - c) * t * (1 - gamma) / none
    relevant = c + (1 - c) * (1 - t) * gamma / none
    new = np.divide(np.bincount(pos, weights=examined, minlength=max_position + 1)[:max_position + 1], shown,
                    out=theta.copy(), where=shown > 0)
    for _ in range(newton_steps):  # logistic regression on the soft labels `relevant`
      p = 1.0 / (1.0 + np.exp(-(a @ w)))
      grad = a.T @ (p - relevant) + ridge * w
      hess = (a * (p * (1 - p))[:, None]).T @ a + ridge * np.eye(a.shape[1])
      w = w - np.linalg.solve(hess, grad)
    done = np.max(np.abs(new - theta)) < tol
    theta = new
    if done:
      break
  gamma = 1.0 / (1.0 + np.exp(-(a @ w)))
  return EMResult(_fill(theta / theta[1], shown > 0), gamma, it)


def with_train_labels(ds: Dataset, y: np.ndarray, **config) -> Dataset:
  """`ds` with the training split's labels replaced by `y` (e.g. :func:`ips_labels`); every other split and
  the groups the data loss visits (those with a y > 0) unchanged. `config` is recorded in the recipe."""
  splits = dict(ds.splits, train=dataclasses.replace(ds["train"], y=np.asarray(y, np.float32)))
  return dataclasses.replace(ds, splits=splits, config=dict(ds.config, **config))


def serve_at(ds: Dataset, column: int, value: float) -> Dataset:
  """`ds` with privileged column `column` set to `value` on every split but train: a model trained with the
  position as an input, evaluated as it is served (every item at the top position's value)."""
  def at(g):
    z = g.z.copy()
    z[:, column] = value
    return dataclasses.replace(g, z=z)
  splits = {s: g if s == "train" else at(g) for s, g in ds.splits.items()}
  return dataclasses.replace(ds, splits=splits, config=dict(ds.config, served_at={str(column): value}))


def position_ids(values: np.ndarray, what: str = "the position column", log1p: bool = False) -> np.ndarray:
  """i64[N] display positions 1..L from a position feature: raw positions (positive integers) or
  log2(1 + position), as the simulated logs write it; log1p=True first undoes the recipe's sign(x) log1p|x|
  transform (pfd_jax.data.preprocess). ValueError (naming `what`) for anything else."""
  v = np.asarray(values, np.float64)
  if log1p:
    v = np.sign(v) * np.expm1(np.abs(v))
  fits = []
  for pos in (v, np.exp2(v) - 1):
    r = np.rint(pos)
    ok = (np.abs(pos - r) < 1e-3) & (r >= 1)
    if ok.all():
      return r.astype(np.int64)
    fits.append(ok)
  bad = v[np.flatnonzero(~(fits[0] | fits[1]))[:1]]
  raise ValueError(f"{what} holds {bad[0] if bad.size else v[0]:g}, which is neither a display position 1, 2, ... "
                   "nor log2(1 + position)")
