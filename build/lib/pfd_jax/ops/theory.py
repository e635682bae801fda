r"""Section 5 of the paper: PFD in the linear-Gaussian model, closed forms (Theorems 1-2) and Monte-Carlo.

Model (Eq. 3): x ~ N(0, I_dx), u ~ N(0, I_du), y = x'w* + u'v* + eps, eps ~ N(0, sigma^2); the privileged
feature z is the first d_z coordinates of u. There are n labelled samples (X, Z, y) and m unlabelled ones
(X_u, Z_u); X_a = [X; X_u], Z_a = [Z; Z_u].

Estimators of w* (all least squares, solved with ``jnp.linalg.lstsq``, never an explicit inverse):

* ``regression``: w_reg = X^+ y.
* distillation with a teacher on ``pfd`` = [X, Z], ``self`` = X or ``gend`` = Z: theta = T^+ y on the
  labelled rows, teacher predictions yhat = T_a theta on all n + m rows, then the student minimises
  alpha ||y - X w||^2 + (1 - alpha) ||yhat - X_a w||^2 (alpha = 0 is the paper's Theorem 1-2 setting).
* ``placebo`` (pfd_jax's control, not in the paper): the PFD teacher with d_z pure-noise columns W ~ N(0, I),
  independent of everything, in place of Z: PFD's inputs and capacity without the privileged information
  (the linear counterpart of permuting z; :func:`theorem2_placebo`).

Every estimator is linear in y, which gives a variance-reduced Monte-Carlo: for a sampled design, the error
averaged over the label noise is exactly ||L y0 - w*||^2 + sigma^2 ||L||_F^2 with y0 = X w* + U v* the
noiseless labels and L the estimator's matrix.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

TEACHERS = ("pfd", "self", "gend", "placebo")
PLACEBO_STREAM = 0x9ACEB0
METHODS = ("regression",) + TEACHERS


# ---------------------------------------------------------------- closed forms

def _check(cond, msg):
  if not cond:
    raise ValueError(msg)


def inverse_wishart_trace(d: int, dof: int) -> float:
  """E tr((W)^-1) for W ~ Wishart(I_d, dof): d / (dof - d - 1), defined for dof > d + 1."""
  _check(dof > d + 1, f"E tr(W^-1) is undefined for dof={dof} <= d + 1 = {d + 1}")
  return d / (dof - d - 1)


def theorem1_regression(n: int, d_x: int, sigma: float, v_norm2: float) -> float:
  """E||w_reg - w*||^2 = d_x (sigma^2 + ||v*||^2) / (n - d_x - 1), exact (Theorem 1; needs n > d_x + 1)."""
  return (sigma ** 2 + v_norm2) * inverse_wishart_trace(d_x, n)


class PFDTerms(NamedTuple):
  """Theorem 2's terms: the labelled-data term, the all-data term, and their sum."""
  labelled: float   # d_x (sigma^2 + ||v*||^2 - ||v_z*||^2) / (n - d_x - d_z - 1)
  all_data: float   # d_x ||v_z*||^2 / (n + m - d_x - 1)
  total: float


def theorem2_pfd(n: int, m: int, d_x: int, d_z: int, sigma: float, v: np.ndarray) -> PFDTerms:
  """Theorem 2 for PFD with alpha = 0, up to the O(1/(n m)) term the paper drops.

  Each term is sigma_eff^2 times the trace of an inverse-Wishart mean: (X_perp' X_perp)^-1 with n - d_z
  degrees of freedom (X projected off Z) and (X_a' X_a)^-1 with n + m. Needs n > d_x + d_z + 1.
  """
  v = np.asarray(v, np.float64)
  _check(0 <= d_z <= v.size, f"d_z={d_z} must be in [0, d_u={v.size}]")
  _check(n > d_x + d_z + 1, f"Theorem 2 is undefined for n={n} <= d_x + d_z + 1 = {d_x + d_z + 1}")
  vz2 = float(np.sum(v[:d_z] ** 2))
  rest = sigma ** 2 + float(np.sum(v ** 2)) - vz2
  a = rest * inverse_wishart_trace(d_x, n - d_z)
  b = vz2 * inverse_wishart_trace(d_x, n + m)
  return PFDTerms(a, b, a + b)


def theorem2_placebo(n: int, m: int, d_x: int, d_z: int, sigma: float, v: np.ndarray) -> PFDTerms:
  """What Theorem 2's argument gives for the placebo teacher (d_z independent noise columns in place of z).

  The noise explains nothing, so the whole of sigma^2 + ||v*||^2 stays in the labelled term, which still
  pays for the d_z extra columns (X projected off the noise: n - d_z degrees of freedom), and the all-data
  term is 0: d_x (sigma^2 + ||v*||^2) / (n - d_x - d_z - 1), i.e. Theorem 2 with v_z* = 0. Above Theorem 1's
  regression error for every d_z >= 1: in the linear model distillation by itself brings nothing (the
  self-distilled student is exactly the regression) and the placebo costs d_z degrees of freedom. Dropped,
  as in Theorem 2: a term of order d_x d_z (sigma^2 + ||v*||^2) / (n (n + m)) from the student's projection
  of the teacher's noise weights.
  """
  _check(n > d_x + d_z + 1, f"the placebo bound is undefined for n={n} <= d_x + d_z + 1 = {d_x + d_z + 1}")
  a = (sigma ** 2 + float(np.sum(np.asarray(v, np.float64) ** 2))) * inverse_wishart_trace(d_x, n - d_z)
  return PFDTerms(a, 0.0, a)


class Predicted(NamedTuple):
  """Theorem 2's prediction for a team's own data (:func:`predicted_gain`)."""
  gain: float        # 1 - PFD's risk / regression's: the relative reduction of the student's estimation error
  regression: float  # Theorem 1's risk at the plug-in estimates
  pfd: float         # Theorem 2's
  explained: float   # ||v_z||^2 / (sigma^2 + ||v||^2): the share of what x leaves of y that the columns explain
  n: int             # labelled documents (the groups the teacher and the data-only models train on)
  m: int             # unlabelled documents (the student's other groups)


def predicted_gain(x, z, y, labelled, columns) -> Predicted:
  r"""Theorem 2's predicted gain of PFD over no distillation with the privileged `columns` of z, at plug-in estimates
  from a team's own training documents (float64 NumPy least squares).

  The mapping onto Section 5's model: the documents are the samples; the labelled ones (n) are those of the groups
  the teacher and the data-only models train on (`labelled`, bool per document: the groups with a positive), the
  unlabelled ones (m) the student's other groups; d_x the regular columns; z the chosen columns residualised on x
  over every document (the theorem's z is independent of x, and only what z adds beyond x can teach), d_z their
  count. sigma^2 + ||v*||^2 is the residual variance of y on x over the labelled documents (Theorem 1's noise),
  sigma^2 + ||v*||^2 - ||v_z*||^2 that of y on x and the residualised z: the risks are d_x times these over
  inverse-Wishart degrees of freedom exactly as in :func:`theorem1_regression` and :func:`theorem2_pfd`, and the
  predicted gain is their relative difference (the scale of w* cancels). A linear model's prediction for a neural
  ranker's NDCG: its order across columns and subsets is what the search reports against the measured gains."""
  x, z = np.asarray(x, np.float64), np.asarray(z, np.float64)[:, list(columns)]
  y, labelled = np.asarray(y, np.float64), np.asarray(labelled, bool)
  ones = np.ones((x.shape[0], 1))
  xa = np.concatenate([ones, x], 1)
  zr = z - xa @ np.linalg.lstsq(xa, z, rcond=None)[0]
  keep = zr.std(0) > 1e-9 * (1 + np.abs(z).max(0))  # a column x determines adds nothing
  zr = zr[:, keep]
  n, m, d_x, d_z = int(labelled.sum()), int((~labelled).sum()), x.shape[1], zr.shape[1]
  _check(n > d_x + d_z + 2, f"the prediction needs more labelled documents ({n}) than d_x + d_z + 2 = {d_x + d_z + 2}")
  # unbiased residual variances (the residual sum of squares over n - parameters)
  resid = lambda a: float(np.sum((y[labelled] - a @ np.linalg.lstsq(a, y[labelled], rcond=None)[0]) ** 2)) / (
      n - a.shape[1])
  noise = resid(xa[labelled])
  left = resid(np.concatenate([xa, zr], 1)[labelled]) if d_z else noise
  regression = noise * inverse_wishart_trace(d_x, n)
  pfd = left * inverse_wishart_trace(d_x, n - d_z) + (noise - left) * inverse_wishart_trace(d_x, n + m)
  return Predicted(1.0 - pfd / regression if regression else 0.0, regression, pfd,
                   (noise - left) / noise if noise else 0.0, n, m)


# ---------------------------------------------------------------- estimators (linear in the labels)

def _lstsq(a, b):
  return jnp.linalg.lstsq(a, b)[0]


def _lstsq_qr(a, b):
  """Least squares for a full-column-rank `a` by Householder QR and a triangular solve."""
  q, r = jnp.linalg.qr(a)
  return jax.scipy.linalg.solve_triangular(r, q.T @ b, lower=False)


def _teacher_design(method, x, z, xa, za):
  """The teacher's design; for the placebo, z holds the noise columns."""
  xz = (jnp.concatenate([x, z], 1), jnp.concatenate([xa, za], 1))
  return {"pfd": xz, "placebo": xz,
          "self": (x, xa), "gend": (z, za)}[method]


def _pinv_factor(a):
  """(V S^+) of a = U S V' (thin SVD), so that a^+ = (V S^+) U' and ||B a^+||_F = ||B V S^+||_F."""
  _, sv, vt = jnp.linalg.svd(a, full_matrices=False)
  keep = sv > jnp.finfo(a.dtype).eps * max(a.shape) * sv[0]
  return vt.T * jnp.where(keep, 1.0 / jnp.where(keep, sv, 1.0), 0.0)


def noise_frobenius(method: str, x, z, xa, za):
  """||L||_F^2 of the alpha = 0 estimator w = L y (the label-noise gain), from small matrices only.

  regression: ||X^+||_F^2; teacher methods: ||X_a^+ T_a T^+||_F^2 = ||X_a^+ T_a V S^+||_F^2 (T = U S V').
  """
  if method == "regression":
    return jnp.sum(_pinv_factor(x) ** 2)
  t, ta = _teacher_design(method, x, z, xa, za)
  return jnp.sum(_lstsq(xa, ta @ _pinv_factor(t)) ** 2)


def estimate(method: str, x, z, xa, za, y, *, alpha: float = 0.0):
  """The estimate of w* from labels `y` [n, r] (r right-hand sides at once): returns [d_x, r].

  x [n, dx], z [n, dz] labelled; xa [n+m, dx], za [n+m, dz] all rows (labelled first).
  """
  if method == "regression":
    return _lstsq(x, y)
  t, ta = _teacher_design(method, x, z, xa, za)
  yhat = ta @ _lstsq(t, y)  # teacher predictions on all n + m rows
  if alpha == 0.0:
    return _lstsq(xa, yhat)
  a, b = jnp.sqrt(alpha), jnp.sqrt(1.0 - alpha)
  # the stacked student design [sqrt(a) X; sqrt(1-a) X_a] always has full column rank: QR suffices
  return _lstsq_qr(jnp.concatenate([a * x, b * xa], 0), jnp.concatenate([a * y, b * yhat], 0))


class Problem(NamedTuple):
  """A linear PFD problem: sizes, true parameters and noise level."""
  n: int
  m: int
  d_z: int
  w: np.ndarray      # w* [d_x]
  v: np.ndarray      # v* [d_u]
  sigma: float

  @staticmethod
  def example1(w_seed: int = 0, d_z: int = 10, n: int = 30, m: int = 200, sigma: float = 15.0) -> "Problem":
    """The paper's Example 1: d_x = d_u = 10, n = 30, m = 200, sigma = 15, v* = [10, ..., 1], w* ~ N(0, I)."""
    w = np.random.default_rng(w_seed).normal(size=10)
    return Problem(n, m, d_z, w, np.arange(10, 0, -1, dtype=np.float64), sigma)


class MonteCarlo(NamedTuple):
  mean: float
  stderr: float
  errors: np.ndarray  # per trial


@functools.partial(jax.jit, static_argnames=("method", "n", "m", "trials", "alpha", "reduce_noise", "dtype",
                                             "static_d_z"))
def _errors(key, w, v, sigma, d_z, *, method, n, m, trials, alpha, reduce_noise, dtype, static_d_z):
  d_x, d_u = w.shape[0], v.shape[0]

  def trial(k):
    kx, ku, ke = jax.random.split(k, 3)
    xa = jax.random.normal(kx, (n + m, d_x), dtype)
    ua = jax.random.normal(ku, (n + m, d_u), dtype)
    # z = the first d_z coordinates of u. With alpha = 0, d_z is traced (one compilation serves every d_z):
    # the other columns are zeroed, which leaves the column space of [X, Z], hence every least-squares fit,
    # unchanged (lstsq is SVD-based and drops the zero singular values). With alpha > 0 the columns are
    # sliced statically and the student solved by QR: vmapped SVD-based lstsq calls of that path hung on
    # the CPU backend (jax 0.10) once run over several lax.map chunks.
    if method == "placebo":  # noise columns in place of z, from their own stream (the other draws unchanged;
      # fold_in(k, i) for a small i would repeat split(k, 3)[i], i.e. u itself)
      ua_z = jax.random.normal(jax.random.fold_in(k, PLACEBO_STREAM), (n + m, d_u), dtype)
    else:
      ua_z = ua
    za = ua_z[:, :static_d_z] if static_d_z is not None else jnp.where(jnp.arange(d_u) < d_z, ua_z, 0.0)
    x, u = xa[:n], ua[:n]
    y0 = x @ w + u @ v
    if reduce_noise and (alpha == 0.0 or method == "regression"):
      est = estimate(method, x, za[:n], xa, za, y0[:, None], alpha=alpha)
      return jnp.sum((est[:, 0] - w) ** 2) + sigma ** 2 * noise_frobenius(method, x, za[:n], xa, za)
    if reduce_noise:  # general alpha: the estimator's matrix column by column
      rhs = jnp.concatenate([y0[:, None], jnp.eye(n, dtype=dtype)], 1)
      est = estimate(method, x, za[:n], xa, za, rhs, alpha=alpha)
      return jnp.sum((est[:, 0] - w) ** 2) + sigma ** 2 * jnp.sum(est[:, 1:] ** 2)
    y = y0 + sigma * jax.random.normal(ke, (n,), dtype)
    est = estimate(method, x, za[:n], xa, za, y[:, None], alpha=alpha)
    return jnp.sum((est[:, 0] - w) ** 2)

  # vmap chunks of trials, lax.map over the chunks: bounded memory for any number of trials
  per_trial = (n + m) * (d_x + d_u + (n + 1 if reduce_noise and alpha > 0 else 1))
  chunk = int(max(1, min(trials, 256, 2 ** 24 // per_trial)))
  keys = jax.random.split(key, -(-trials // chunk) * chunk)
  return jax.lax.map(jax.vmap(trial), keys.reshape((-1, chunk) + keys.shape[1:])).reshape(-1)[:trials]


def monte_carlo(key, problem: Problem, method: str = "pfd", *, trials: int = 4096, alpha: float = 0.0,
                reduce_noise: bool = False, dtype=jnp.float32) -> MonteCarlo:
  """Mean of ||w_hat - w*||^2 over `trials` independent designs (vmapped in memory-bounded chunks).

  reduce_noise=True averages each design's error over the label noise analytically (same expectation,
  smaller variance): with alpha = 0 through :func:`noise_frobenius` (cheap at any n); with alpha > 0 by
  applying the estimator to n + 1 right-hand sides (meant for n up to a few hundred). dtype=jnp.float64 needs ``jax.config.update("jax_enable_x64", True)``. The same key gives the
  same draws for every method and d_z (common random numbers across a figure's curves).
  """
  _check(method in METHODS, f"method must be one of {METHODS}, got {method!r}")
  _check(0.0 <= alpha < 1.0, f"alpha must be in [0, 1), got {alpha}")
  _check(0 <= problem.d_z <= len(problem.v), f"d_z={problem.d_z} must be in [0, {len(problem.v)}]")
  _check(method != "gend" or problem.d_z > 0, "GenD needs d_z >= 1 privileged features")
  if dtype == jnp.float64 and not jax.config.jax_enable_x64:
    raise ValueError("float64 Monte-Carlo needs jax.config.update('jax_enable_x64', True)")
  w = jnp.asarray(problem.w, dtype)
  v = jnp.asarray(problem.v, dtype)
  err = np.asarray(_errors(key, w, v, float(problem.sigma), problem.d_z, method=method, n=problem.n,
                           m=problem.m, trials=trials, alpha=float(alpha), reduce_noise=reduce_noise,
                           dtype=dtype, static_d_z=problem.d_z if alpha > 0 else None), np.float64)
  return MonteCarlo(float(err.mean()), float(err.std(ddof=1) / np.sqrt(err.size)), err)
