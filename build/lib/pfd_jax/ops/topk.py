r"""Ranking Distillation (Tang & Wang, KDD 2018): the teacher's top-K unlabelled documents as weighted positives.

For each query the teacher ranks the *unlabelled* documents :math:`\tilde O = \{d: y_d = 0\}` and its top K,
:math:`\pi_1..\pi_K`, become positives of a weighted pointwise loss (Eq. 5)

  :math:`L^D = -\sum_{r=1}^{K} w_r \log \sigma(\hat y_{\pi_r})`,

mixed with the student's own ranking loss as :math:`(1 - a) L^R + a L^D` (Eq. 4; our trainer's ``alpha``
is the weight of the data term, so ``alpha = 1 - a``). Weighting schemes (:data:`SCHEMES`):

* ``uniform``: :math:`w_r = 1/K`;  ``inverse``: :math:`w_r = 1/r`;
* ``position`` (Eq. 8): :math:`w^a_r \propto e^{-r/\lambda}`, normalised over the list's positions;
* ``discrepancy`` (Eq. 9): :math:`w^b_r = \tanh(\max(\mu(\hat r_{\pi_r} - r), 0))`, where
  :math:`\hat r` is the student's rank of :math:`\pi_r` among :math:`\tilde O` estimated by sampling
  :math:`\epsilon` other unlabelled documents (Algorithm 1, vectorised: all K documents of all lists at once);
* ``hybrid`` (section 3.2.3): :math:`w_r = w^a_r w^b_r / \sum_i w^a_i w^b_i`.

Schemes that use :math:`w^b` use :math:`w^a` alone during the first ``warmup`` epochs (the paper's m warm-up
iterations, "usually more than half of the total"), when the student's ranks are not yet informative.
Weights are constants of the gradient (``stop_gradient``), as in the reference implementation's weighted
log loss.

Choices where the paper is silent (documented here, flags in the drivers): Algorithm 1 samples from
:math:`\tilde O` minus :math:`\pi_r` itself (its :math:`\epsilon \in [1, N - 1]` and :math:`N - 1` in
:math:`\hat r = \lfloor n (N-1)/\epsilon \rfloor + 1` count the *other* documents; with
:math:`\epsilon = N - 1` the estimate is then exact); a list with fewer than :math:`\epsilon + 1`
unlabelled documents samples all of them; a list with fewer than K unlabelled documents uses the positions
it has, and position weights are normalised over those.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from pfd_jax.ops import metrics

SCHEMES = ("uniform", "inverse", "position", "discrepancy", "hybrid")


def unlabelled(labels, mask):
  """bool[..., L]: real documents with y = 0 (the set O~ of the paper)."""
  return mask.astype(bool) & (labels == 0)


def teacher_ranks(teacher_scores, labels, mask, k: int):
  """float[..., L]: r in 1..k for the teacher's top-k unlabelled documents of each list, 0 elsewhere.

  teacher_scores may carry extra leading axes (seeds, teachers); labels and mask broadcast against them.
  Ties keep list order (the stable sort of :func:`pfd_jax.ops.metrics.ranks`).
  """
  unl = jnp.broadcast_to(unlabelled(labels, mask), teacher_scores.shape)
  r = metrics.ranks(teacher_scores, unl)
  return jnp.where(unl & (r <= k), r, 0).astype(jnp.float32)


def position_weights(r, lam: float):
  r"""Eq. 8 :math:`e^{-r/\lambda}` per position r (>= 1), unnormalised."""
  return jnp.exp(-r / lam)


def discrepancy_weights(r_hat, r, mu: float):
  r"""Eq. 9: :math:`\tanh(\max(\mu (\hat r - r), 0))` (0 where the student ranks the document at least as
  high as the teacher)."""
  return jnp.tanh(jnp.maximum(mu * (r_hat - r), 0.0))


def _topk_positions(t_rank, k: int):
  """Indices [..., k] of the documents at teacher positions 1..k, and whether position r exists."""
  kk = min(k, t_rank.shape[-1])
  key = jnp.where(t_rank > 0, t_rank, jnp.inf)
  neg, idx = jax.lax.top_k(-key, kk)
  return idx, jnp.isfinite(neg)


def estimate_ranks(key, scores, t_rank, unl, k: int, eps: int):
  r"""Algorithm 1 for the top-k documents of every list at once: :math:`\hat r` [..., k].

  For the document :math:`\pi_r`, draw :math:`\epsilon` of the other unlabelled documents without replacement
  (all of them when there are fewer), count the :math:`n` whose student score is higher, and return
  :math:`\lfloor n (N - 1) / \epsilon \rfloor + 1` with :math:`N = |\tilde O|`. Sampling without replacement
  is vectorised as the :math:`\epsilon` smallest of i.i.d. uniforms over the candidates.
  """
  idx, present = _topk_positions(t_rank, k)
  l = scores.shape[-1]
  e = min(eps, l - 1) if l > 1 else 1
  s_top = jnp.take_along_axis(scores, idx, -1)                                  # [..., k]
  cand = unl[..., None, :] & (jnp.arange(l) != idx[..., :, None])              # [..., k, L] others in O~
  u = jnp.where(cand, jax.random.uniform(key, cand.shape), jnp.inf)
  neg_u, pick = jax.lax.top_k(-u, e)                                            # e smallest uniforms
  drawn = jnp.isfinite(neg_u)                                                   # fewer candidates than e
  higher = jnp.take_along_axis(jnp.broadcast_to(scores[..., None, :], cand.shape), pick, -1) > s_top[..., None]
  n = jnp.sum(drawn & higher, -1)
  n_other = jnp.sum(unl, -1, keepdims=True) - 1                                  # N - 1
  e_eff = jnp.maximum(jnp.minimum(e, n_other), 1)
  r_hat = jnp.floor(n * n_other / e_eff) + 1
  return jnp.where(present, r_hat, 0.0), idx, present


def topk_weights(r, present, r_hat=None, *, scheme: str = "hybrid", k: int = 10, lam: float = 5.0,
                 mu: float = 0.1, use_discrepancy: bool = True):
  """w_r [..., k] of `scheme` (:data:`SCHEMES`) at positions r (1..k; `present` marks those the list has);
  lam, mu: the sharpness of Eqs. 8 and 9."""
  pf = present.astype(jnp.float32)
  w_a = position_weights(r, lam) * pf
  w_a = w_a / jnp.maximum(jnp.sum(w_a, -1, keepdims=True), 1e-30)
  if scheme == "uniform":
    return pf / k
  if scheme == "inverse":
    return pf / r
  if scheme == "position" or not use_discrepancy:
    return w_a
  w_b = discrepancy_weights(r_hat, r, mu) * pf
  if scheme == "discrepancy":
    return w_b
  w = w_a * w_b
  return w / jnp.maximum(jnp.sum(w, -1, keepdims=True), 1e-30)


def topk_loss(scores, t_rank, mask, labels, *, key, k: int = 10, scheme: str = "hybrid", lam: float = 5.0,
              mu: float = 0.1, eps: int = 10, hybrid_on=True, reduce_fn=None):
  r"""Eq. 5 per list: :math:`-\sum_r w_r \log\sigma(s_{\pi_r})` over the teacher's top-K unlabelled documents.

  Args:
    scores: student logits [..., L]; t_rank: :func:`teacher_ranks` [..., L]; mask, labels: [..., L].
    key: PRNG key of Algorithm 1's samples (only the discrepancy-based schemes draw).
    k, scheme, lam, mu, eps: the teacher's top K, the weighting (:data:`SCHEMES`), Eq. 8's lambda, Eq. 9's
      mu and Algorithm 1's samples per document (:class:`pfd_jax.training.config.TopK` holds the defaults).
    hybrid_on: traced bool/float; False = warm-up (w^a only) for the schemes that use w^b.
  """
  unl = unlabelled(labels, mask)
  kk = min(k, scores.shape[-1])
  r_hat, idx, present = estimate_ranks(key, jax.lax.stop_gradient(scores), t_rank, unl, kk, eps)
  r = jnp.arange(1, kk + 1, dtype=jnp.float32)
  weights = functools.partial(topk_weights, scheme=scheme, k=k, lam=lam, mu=mu)
  w = weights(r, present, r_hat)
  if scheme in ("discrepancy", "hybrid"):
    w = jnp.where(hybrid_on, w, weights(r, present, use_discrepancy=False))
  w = jax.lax.stop_gradient(w)
  per_list = -jnp.sum(w * jax.nn.log_sigmoid(jnp.take_along_axis(scores, idx, -1)), -1)
  return per_list if reduce_fn is None else reduce_fn(per_list)


# ------------------------------------------------------------------ as a teaching (pfd_jax.training.teaching)

def teaching_targets(cfg, logits, labels, mask):
  """The teaching's targets: the teacher's top-K ranks among each list's unlabelled documents (cfg: a TrainConfig)."""
  return teacher_ranks(logits, labels, mask, cfg.topk.k)


def teaching_loss(cfg, key, labels, phase):
  """The teaching's term: the weighted top-K loss (:func:`topk_loss`); phase: the warm-up is over."""
  settings = cfg.topk.loss_settings()
  return lambda s, t, m, reduce_fn=None: topk_loss(s, t, m, labels, key=key, hybrid_on=phase, reduce_fn=reduce_fn,
                                                  **settings)


def teaching_phase(cfg, epoch: int) -> bool:
  """The teaching's schedule: w^a only for the warm-up epochs (default half of them), then hybrid."""
  warmup = cfg.epochs // 2 if cfg.topk.warmup is None else cfg.topk.warmup
  return epoch >= warmup
