r"""Masked ranking losses over padded lists (the teacher term of Eq. 1 is :mod:`pfd_jax.ops.teacher`).

Every loss takes ``scores`` and ``labels`` of shape ``[..., L]`` and a boolean ``mask`` (True = real
document); padded documents never change a value or a gradient. Reduction, the same everywhere:

  * **within a list**: a *sum* over documents (pointwise) or over ordered pairs (pairwise), as in the
    paper's Eq. 1 and appendix A.2 (sums over sets);
  * **across lists**: ``reduce_fn`` (default ``jnp.sum``, which makes a batch loss the paper's sum over
    the batch's documents); ``reduce_fn=None`` returns the per-list values ``[...]``.

A list with no real document contributes exactly 0. Labels may be soft (teacher probabilities in [0, 1]).
"""
from __future__ import annotations

import functools
from typing import Callable, Mapping, NamedTuple, Tuple

import jax
import jax.numpy as jnp

from pfd_jax.ops import metrics
from pfd_jax.ops.lists import ReduceFn, real, reduce_lists
from pfd_jax.registry import Registry

def rank_bce(scores, labels, mask=None, *, reduce_fn: ReduceFn = jnp.sum):
  r"""RankBCE (appendix A.2): :math:`\sum_{i} \mathrm{CE}(\sigma(s_i), y_i)` over the real documents.

  :math:`\mathrm{CE}(\sigma(s), y) = -y\log\sigma(s) - (1-y)\log(1-\sigma(s)) = \mathrm{softplus}(s) - y s`,
  evaluated in that stable form. Shapes: scores, labels, mask ``[..., L]``.
  """
  m = real(scores, mask)
  per_doc = jax.nn.softplus(scores) - labels * scores
  return reduce_lists(jnp.sum(jnp.where(m, per_doc, 0.0), axis=-1), reduce_fn)


def mse(scores, labels, mask=None, *, reduce_fn: ReduceFn = jnp.sum):
  r"""Pointwise squared error :math:`\sum_i (s_i - y_i)^2` over real documents (SDR's pointwise baseline)."""
  m = real(scores, mask)
  return reduce_lists(jnp.sum(jnp.where(m, (scores - labels) ** 2, 0.0), axis=-1), reduce_fn)


def ranknet(scores, labels, mask=None, *, pairs: str = "all", reduce_fn: ReduceFn = jnp.sum):
  r"""RankNet (appendix A.2): :math:`\sum_{i \ne j} \mathrm{CE}(\sigma(s_i - s_j), (y_i - y_j + 1)/2)`.

  Args:
    pairs: ``"all"`` = every ordered pair of distinct real documents, the paper's form (a tie gives
      target 1/2; soft labels give soft targets); ``"positive"`` = the common variant over pairs with
      :math:`y_i > y_j` only, each with target 1, i.e. :math:`\sum_{y_i > y_j} \log(1 + e^{-(s_i - s_j)})`.

  Stability and memory: each pair's :math:`\mathrm{CE}(\sigma(d), p) = \mathrm{softplus}(d) - p d` is
  finite with finite gradients for any score gap (no log of a saturated sigmoid). The gradient is written
  by hand (``jax.custom_vjp``) as one pair reduction per document, e.g. for ``"all"``
  :math:`\partial/\partial s_i = 2\sum_j w_{ij}\sigma(s_i - s_j) - \sum_j w_{ij}(y_i - y_j + 1)`, so no
  ``[..., L, L]`` residual is kept between the passes, and pairs are formed in column blocks of
  ``PAIR_BLOCK`` documents: memory is O(L * PAIR_BLOCK) per list, not O(L^2) (a 1,300-document list at
  batch 300 fits a CPU; the compiled memory is checked by a test). Gradients flow to ``scores`` and, for
  ``"all"``, to soft ``labels`` too.
  """
  m = real(scores, mask)
  if pairs == "all":
    per_list = _ranknet_all(scores, labels, m)
  elif pairs == "positive":
    per_list = _ranknet_positive(scores, labels, m)
  else:
    raise ValueError(f"pairs must be 'all' or 'positive', got {pairs!r}")
  return reduce_lists(per_list, reduce_fn)


PAIR_BLOCK = 128  # documents j per pair block: a call holds one [..., L, PAIR_BLOCK] buffer at a time


def _pair_blocks(block_fn, s, y, m, block=None):
  """Runs `block_fn` over column blocks j of the pair matrix and combines the results.

  block_fn(s_j, y_j, m_j, j_index) -> (row [..., L], col [..., C]) where `*_j` are ``[..., 1, C]`` slices of
  the documents j of one block (padded blocks are masked). Returns (sum of rows [..., L], cols [..., L]).
  Lists up to `block` long take a single block (no loop); longer ones loop with ``lax.scan``, so memory is
  O(L * block) instead of O(L^2).
  """
  block = PAIR_BLOCK if block is None else block
  l = s.shape[-1]
  if l <= block:
    return block_fn(s[..., None, :], y[..., None, :], m[..., None, :], jnp.arange(l))
  nb = -(-l // block)
  pad = nb * block - l
  widths = [(0, 0)] * (s.ndim - 1) + [(0, pad)]
  sp, yp, mp = jnp.pad(s, widths), jnp.pad(y, widths), jnp.pad(m, widths)
  split = lambda a: jnp.moveaxis(a.reshape(a.shape[:-1] + (nb, block)), -2, 0)[..., None, :]

  def body(row, xs):
    sj, yj, mj, jj = xs
    r, c = block_fn(sj, yj, mj, jj)
    return row + r, c

  row, cols = jax.lax.scan(body, jnp.zeros(s.shape, s.dtype),
                           (split(sp), split(yp), split(mp), jnp.arange(nb * block).reshape(nb, block)))
  cols = jnp.moveaxis(cols, 0, -2).reshape(s.shape[:-1] + (nb * block,))[..., :l]
  return row, cols


def _pairs(s, y, m, sj, yj, mj, jj):
  """Pair quantities of documents i (all) against the block j: d_ij, pair mask (i != j)."""
  d = s[..., :, None] - sj
  w = m[..., :, None] & mj & (jnp.arange(s.shape[-1])[:, None] != jj)
  return d, w


@jax.custom_vjp
def _ranknet_all(s, y, m):
  def block_fn(sj, yj, mj, jj):
    d, w = _pairs(s, y, m, sj, yj, mj, jj)
    target = (y[..., :, None] - yj + 1.0) / 2.0
    return jnp.sum(jnp.where(w, jax.nn.softplus(d) - target * d, 0.0), -1), jnp.zeros(s.shape[:-1] + jj.shape, s.dtype)
  return jnp.sum(_pair_blocks(block_fn, s, y, m)[0], -1)


def _ranknet_all_fwd(s, y, m):
  return _ranknet_all(s, y, m), (s, y, m)


def _ranknet_all_bwd(res, g):
  s, y, m = res
  mf = m.astype(s.dtype)

  def block_fn(sj, yj, mj, jj):
    d, w = _pairs(s, y, m, sj, yj, mj, jj)
    return jnp.sum(jnp.where(w, jax.nn.sigmoid(d), 0.0), -1), jnp.zeros(s.shape[:-1] + jj.shape, s.dtype)

  sig = _pair_blocks(block_fn, s, y, m)[0]
  n_other = jnp.sum(mf, -1, keepdims=True) - 1.0  # real documents other than i
  y_m, s_m = jnp.where(m, y, 0.0), jnp.where(m, s, 0.0)
  # sum_j w_ij (y_i - y_j + 1) and sum_j w_ij (s_i - s_j), O(L) each
  lin_y = n_other * (y + 1.0) - (jnp.sum(y_m, -1, keepdims=True) - y_m)
  d_s = jnp.where(m, 2.0 * sig - lin_y, 0.0)
  d_y = jnp.where(m, -(n_other * s - (jnp.sum(s_m, -1, keepdims=True) - s_m)), 0.0)
  return g[..., None] * d_s, g[..., None] * d_y, None


_ranknet_all.defvjp(_ranknet_all_fwd, _ranknet_all_bwd)


@jax.custom_vjp
def _ranknet_positive(s, y, m):
  def block_fn(sj, yj, mj, jj):
    d, w = _pairs(s, y, m, sj, yj, mj, jj)
    w = w & (y[..., :, None] > yj)
    return jnp.sum(jnp.where(w, jax.nn.softplus(-d), 0.0), -1), jnp.zeros(s.shape[:-1] + jj.shape, s.dtype)
  return jnp.sum(_pair_blocks(block_fn, s, y, m)[0], -1)


def _ranknet_positive_fwd(s, y, m):
  return _ranknet_positive(s, y, m), (s, y, m)


def _ranknet_positive_bwd(res, g):
  s, y, m = res

  def block_fn(sj, yj, mj, jj):
    d, w = _pairs(s, y, m, sj, yj, mj, jj)
    # d/ds_i softplus(-(s_i - s_j)) = -sigmoid(-(s_i - s_j)); +sigmoid(...) for the worse document j
    sig = jnp.where(w & (y[..., :, None] > yj), jax.nn.sigmoid(-d), 0.0)
    return -jnp.sum(sig, -1), jnp.sum(sig, -2)

  row, col = _pair_blocks(block_fn, s, y, m)
  return g[..., None] * (row + col), jnp.zeros_like(y), None


_ranknet_positive.defvjp(_ranknet_positive_fwd, _ranknet_positive_bwd)


def softmax(scores, labels, mask=None, *, reduce_fn: ReduceFn = jnp.sum):
  r"""Listwise softmax cross-entropy (ListNet; SDR Eq. 5/8): :math:`-\sum_i y_i \log \frac{e^{s_i}}{\sum_j e^{s_j}}`.

  Labels are real-valued and non-negative and are *not* renormalised (SDR's and optax's
  ``ranking_softmax_loss`` convention); the softmax runs over real documents only.
  """
  m = real(scores, mask)
  s = jnp.where(m, scores, -jnp.inf)
  shift = jax.lax.stop_gradient(jnp.max(jnp.where(m, scores, -jnp.inf), axis=-1, keepdims=True))
  shift = jnp.where(jnp.isfinite(shift), shift, 0.0)
  lse = jnp.log(jnp.sum(jnp.where(m, jnp.exp(s - shift), 0.0), axis=-1, keepdims=True)) + shift
  logp = jnp.where(m, scores - lse, 0.0)
  return reduce_lists(-jnp.sum(jnp.where(m, labels * logp, 0.0), axis=-1), reduce_fn)


def listmle(scores, labels, mask=None, *, key=None, reduce_fn: ReduceFn = jnp.sum):
  r"""ListMLE (Xia et al., 2008): the Plackett-Luce negative log-likelihood of the labels' ordering,
  :math:`-\sum_i \log \frac{e^{s_{\pi(i)}}}{\sum_{j \ge i} e^{s_{\pi(j)}}}`, :math:`\pi` the real documents by
  decreasing label. Ties keep their order in the list, or, given a PRNG `key`, are broken at random (rax's
  ``listmle_loss`` convention; with binary labels nearly every document ties, so training passes a key per
  step). Padding sorts last and is out of every sum.
  """
  m = real(scores, mask)
  operands = [~m, -labels] + ([jax.random.uniform(key, scores.shape)] if key is not None else [])
  order = jnp.lexsort(operands[::-1], axis=-1)
  s, ms = jnp.take_along_axis(scores, order, -1), jnp.take_along_axis(m, order, -1)
  # padding (last) enters as a finite floor, not -inf: an all-padding tail would give nan gradients
  lse = jax.lax.cumlogsumexp(jnp.where(ms, s, jnp.finfo(s.dtype).min / 4), axis=s.ndim - 1, reverse=True)
  return reduce_lists(-jnp.sum(jnp.where(ms, s - lse, 0.0), axis=-1), reduce_fn)


def _gains_and_ideal(labels, m):
  """(gains 2^y - 1 on real documents, ideal DCG of each list, 1 where the list has no gain)."""
  gains = jnp.where(m, jnp.exp2(labels) - 1.0, 0.0)
  ideal = -jnp.sort(-gains, axis=-1)
  idcg = jnp.sum(ideal / jnp.log2(2.0 + jnp.arange(gains.shape[-1])), axis=-1)
  return gains, jnp.where(idcg > 0, idcg, 1.0)


def approx_ndcg(scores, labels, mask=None, *, temperature: float = 1.0, reduce_fn: ReduceFn = jnp.sum):
  r"""ApproxNDCG (Qin et al., 2010): minus NDCG with every rank replaced by its smooth approximation
  :math:`\hat r_i = 1 + \sum_{j \ne i} \sigma((s_j - s_i) / T)` over the real documents (gain
  :math:`2^y - 1`, discount :math:`1/\log_2(1 + \hat r)`, the ideal DCG exact): rax's
  ``approx_t12n(ndcg_metric)``. A list without gain contributes 0.
  """
  m = real(scores, mask)
  d = (scores[..., None, :] - scores[..., :, None]) / temperature  # [i, j] = (s_j - s_i) / T
  pair = m[..., :, None] & m[..., None, :] & ~jnp.eye(scores.shape[-1], dtype=bool)
  approx_rank = 1.0 + jnp.sum(jnp.where(pair, jax.nn.sigmoid(d), 0.0), -1)
  gains, idcg = _gains_and_ideal(labels, m)
  return reduce_lists(-jnp.sum(gains / jnp.log2(1.0 + approx_rank), -1) / idcg, reduce_fn)


def lambdaloss(scores, labels, mask=None, *, mu: float = 5.0, reduce_fn: ReduceFn = jnp.sum):
  r"""LambdaLoss's NDCG-Loss2++ (Wang et al., CIKM 2018, Eq. 13): pairs :math:`y_i > y_j` of real documents,
  each :math:`\log(1 + e^{-(s_i - s_j)})` weighted by :math:`\frac{|G_i - G_j|}{\mathrm{IDCG}}
  (\rho_{ij} + \mu \delta_{ij})` with :math:`G = 2^y - 1`, ranks r by the current scores (no gradient),
  :math:`\rho_{ij} = |1/D(r_i) - 1/D(r_j)|` (LambdaRank's |delta NDCG|), :math:`\delta_{ij} = |1/D(|r_i - r_j|) -
  1/D(|r_i - r_j| + 1)|` and :math:`D(r) = \log_2(1 + r)`. rax's ``pairwise_logistic_loss`` with
  ``dcg_lambdaweight + mu * dcg2_lambdaweight`` (normalize=True), less rax's factor of the padded list size.
  Pairs are formed whole (O(L^2) memory per list, as rax).
  """
  m = real(scores, mask)
  r = jax.lax.stop_gradient(metrics.ranks(scores, m)).astype(scores.dtype)
  gains, idcg = _gains_and_ideal(labels, m)
  inv_d = lambda x: 1.0 / jnp.log2(1.0 + x)
  rho = jnp.abs(inv_d(r)[..., :, None] - inv_d(r)[..., None, :])
  gap = jnp.abs(r[..., :, None] - r[..., None, :])
  delta = jnp.where(gap > 0, jnp.abs(inv_d(gap) - inv_d(gap + 1.0)), 0.0)
  weight = jnp.abs(gains[..., :, None] - gains[..., None, :]) / idcg[..., None, None] * (rho + mu * delta)
  pair = m[..., :, None] & m[..., None, :] & (labels[..., :, None] > labels[..., None, :])
  d = scores[..., :, None] - scores[..., None, :]
  return reduce_lists(jnp.sum(jnp.where(pair, weight * jax.nn.softplus(-d), 0.0), (-2, -1)), reduce_fn)


class Loss(NamedTuple):
  """A registered ranking loss: its function (scores, labels, mask, *, reduce_fn, **params), the keyword
  hyper-parameters it takes with their defaults (set by TrainConfig.loss_params, flag ``--loss_params``), the
  TrainConfig fields bound to keywords (``{keyword: field}``), whether it draws randomness (it then takes
  ``key=``, one draw per training step), and whether it is listwise (the listwise family of the drivers' --loss)."""
  name: str
  fn: Callable
  params: Mapping[str, float] = {}
  fields: Mapping[str, str] = {}
  needs_key: bool = False
  listwise: bool = False

  def bind(self, params: Mapping[str, float] = {}, **fields) -> Callable:
    """The loss with its hyper-parameters bound: `params` over the declared defaults (an unknown name is a
    ValueError naming the known ones), `fields` the configuration's values of :attr:`fields`. Hyper-parameters at
    their defaults are not bound, so the function is the one the defaults always computed."""
    unknown = sorted(set(params) - set(self.params))
    if unknown:
      raise ValueError(f"loss {self.name!r} has no hyper-parameter {', '.join(unknown)}; it has "
                       f"{', '.join(self.params) or 'none'}")
    kw = {k: v for k, v in params.items() if v != self.params[k]}
    kw.update({k: fields[f] for k, f in self.fields.items()})
    return functools.partial(self.fn, **kw) if kw else self.fn


REGISTRY: Registry[Loss] = Registry("loss")
for _loss in (Loss("rankbce", rank_bce), Loss("ranknet", ranknet, fields={"pairs": "ranknet_pairs"}),
              Loss("softmax", softmax, listwise=True), Loss("mse", mse),
              Loss("listmle", listmle, needs_key=True, listwise=True),
              Loss("approxndcg", approx_ndcg, params={"temperature": 1.0}, listwise=True),
              Loss("lambdaloss", lambdaloss, params={"mu": 5.0}, listwise=True)):
  REGISTRY.register(_loss)


def listwise() -> tuple:
  """The registered listwise losses."""
  return tuple(n for n, l in REGISTRY.items() if l.listwise)


def get_loss(name: str) -> Callable:
  """The function of the registered loss `name` (its hyper-parameters at their defaults)."""
  if name not in REGISTRY:
    raise ValueError(f"unknown loss {name!r}; known: {', '.join(REGISTRY)}")
  return REGISTRY[name].fn
