r"""The Committee Perceptron (Elsas, Carvalho & Carbonell) and its perceptron family, as one ``lax.scan``.

Training pairs ``(q, d_i, d_j)`` with ``rel_i > rel_j`` inside each query, each with the query-balancing
factor :math:`\eta_q = 1/|S_q|` (:math:`S_q` = the query's pairs). The stream visits every pair once per
pass, in an order shuffled per pass by a key. The current hypothesis :math:`w^l` (linear score
:math:`s(d) = \langle d, w \rangle`, :math:`w^0 = 0`) has a success counter :math:`c_l`. On a mis-ranking
:math:`s(d_j) \ge s(d_i)` (the slides' pseudo-code):

1. if :math:`c_l > c_{min}`, the smallest counter in the committee :math:`W`, then :math:`(w^l, c_l)` enters
   :math:`W` and the minimum is evicted (a fixed-size priority queue of K slots; empty slots hold counter 0,
   so a hypothesis enters a non-full committee iff it ranked at least one pair right; ties evict the
   lowest slot index);
2. :math:`w^{l+1} = w^l + \eta_q (d_i - d_j)`, :math:`c_{l+1} = 0`.

Otherwise :math:`c_l \leftarrow c_l + 1`. The family, all from the same stream (one scan computes them all):

* **vanilla**: the last hypothesis; **pocket**: the longest-surviving one (a committee of K = 1);
* **averaged**: :math:`\sum_l c_l w^l` over every hypothesis (a running sum, O(d));
* **voted**: every hypothesis votes with its rank of each document, weighted by :math:`c_l`; storing all of
  them is O(mistakes x d), so the scan keeps the ``vote_capacity`` longest-surviving hypotheses (a committee
  of that size, exact while there are no more hypotheses than that; :class:`PerceptronState` counts them);
* **committee**: the K best, combined either as the counter-weighted average of their weight vectors
  (:math:`\sum_k c_k w^k`, O(d) at test time) or by counter-weighted rank voting.

Committees of several sizes run in one scan (``caps``), and their bookkeeping runs only on mistakes
(``lax.cond``; one row written in place), so a pair costs two dot products when ranked right. At the end
of every pass the state is *read out* with the current hypothesis offered to each committee under the same
rule (so a long-surviving final hypothesis counts), without changing the stream's state.
"""
from __future__ import annotations

import functools
from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from pfd_jax.ops import metrics


def query_pairs(rel: np.ndarray, offsets: np.ndarray):
  """All within-query pairs (i, j) with rel_i > rel_j, as global document indices, and eta_q per pair.

  Returns (pairs int32 [P, 2], eta float32 [P]).
  """
  pairs, eta = [], []
  for q in range(len(offsets) - 1):
    lo, hi = offsets[q], offsets[q + 1]
    r = rel[lo:hi]
    i, j = np.nonzero(r[:, None] > r[None, :])
    if i.size:
      pairs.append(np.stack([i + lo, j + lo], 1))
      eta.append(np.full(i.size, 1.0 / i.size, np.float32))
  if not pairs:
    raise ValueError("no within-query pair with different relevance labels")
  return np.concatenate(pairs).astype(np.int32), np.concatenate(eta)


class PerceptronState(NamedTuple):
  """The stream's state; committee c has capacity caps[c] (a tuple entry each)."""
  w: jax.Array           # [d] current hypothesis
  c: jax.Array           # [] its success counter
  com_w: tuple           # ([K_c, d] committee members, ...)
  com_c: tuple           # ([K_c] their counters, 0 = empty slot, ...)
  avg: jax.Array         # [d] sum of c_l w^l over retired hypotheses (averaged perceptron)
  hypotheses: jax.Array  # [] hypotheses retired so far (= mistakes)


def init_state(dim: int, caps: Sequence[int]) -> PerceptronState:
  return PerceptronState(w=jnp.zeros(dim), c=jnp.zeros((), jnp.int32),
                         com_w=tuple(jnp.zeros((k, dim)) for k in caps),
                         com_c=tuple(jnp.zeros(k, jnp.int32) for k in caps), avg=jnp.zeros(dim),
                         hypotheses=jnp.zeros((), jnp.int32))


def _offer(com_w, com_c, w, c):
  """Offers (w, c) to a committee: it replaces the minimum slot (the first one) if c beats its counter.
  One row is written (in place under jit), whether or not it enters."""
  k = jnp.argmin(com_c)
  enter = c > com_c[k]
  return com_w.at[k].set(jnp.where(enter, w, com_w[k])), com_c.at[k].set(jnp.where(enter, c, com_c[k]))


def _retire(state: PerceptronState) -> PerceptronState:
  """The current hypothesis leaves: offered to every committee and added to the average."""
  offered = [_offer(cw, cc, state.w, state.c) for cw, cc in zip(state.com_w, state.com_c)]
  return state._replace(com_w=tuple(o[0] for o in offered), com_c=tuple(o[1] for o in offered),
                        avg=state.avg + state.c * state.w, hypotheses=state.hypotheses + 1)


def step(state: PerceptronState, diff, eta) -> PerceptronState:
  """One pair of the stream (the slides' pseudo-code), diff = d_i - d_j; a mis-ranking is
  s(d_j) >= s(d_i), i.e. <diff, w> <= 0. The committee work runs only on a mistake."""
  def mistake(s):
    s = _retire(s)
    return s._replace(w=s.w + eta * diff, c=jnp.zeros_like(s.c))

  return jax.lax.cond(jnp.dot(diff, state.w) <= 0, mistake, lambda s: s._replace(c=s.c + 1), state)


def _stream(state, diffs, eta, order, keep_trace: bool = False):
  def body(s, p):
    s = step(s, diffs[p], eta[p])
    return s, (s if keep_trace else None)
  return jax.lax.scan(body, state, order)


def train(key, x, pairs, eta, passes: int, caps: Sequence[int] = (20,)) -> PerceptronState:
  """Runs `passes` shuffled passes over the pair stream; returns the read-out (:func:`_retire` applied to a
  copy: the current hypothesis offered to every committee) after every pass, each leaf with a leading
  [passes] axis. x: [N, d] documents; pairs: [P, 2]; eta: [P]."""
  return _train(key, _diffs(x, pairs), jnp.asarray(eta, jnp.float32), passes, tuple(int(k) for k in caps))


def _diffs(x, pairs):
  """[P, d] pair differences d_i - d_j (one gather per pair in the stream instead of two)."""
  x, pairs = jnp.asarray(x, jnp.float32), jnp.asarray(pairs)
  return x[pairs[:, 0]] - x[pairs[:, 1]]


@functools.partial(jax.jit, static_argnums=(3, 4))
def _train(key, diffs, eta, passes, caps):
  def one_pass(state, k):
    state, _ = _stream(state, diffs, eta, jax.random.permutation(k, diffs.shape[0]))
    return state, _retire(state)

  return jax.lax.scan(one_pass, init_state(diffs.shape[1], caps), jax.random.split(key, passes))[1]


def trace(x, pairs, eta, caps: Sequence[int]) -> PerceptronState:
  """The state after every pair of one pass in the given order (leaves with a leading [P] axis), for
  checking the scan step by step against a reference."""
  x = jnp.asarray(x, jnp.float32)
  return _stream(init_state(x.shape[1], tuple(caps)), _diffs(x, pairs), jnp.asarray(eta, jnp.float32),
                 jnp.arange(len(eta)), keep_trace=True)[1]


# ---------------------------------------------------------------- prediction

def committee_weights(com_w, com_c):
  """[..., d] counter-weighted average weight vector sum_k c_k w^k (O(d) scoring)."""
  return jnp.einsum("...k,...kd->...d", com_c.astype(com_w.dtype), com_w)


def vote_scores(com_w, com_c, x, mask):
  """Counter-weighted rank voting: -sum_k c_k rank_k(d) for x [Q, L, d] (higher = better)."""
  s = jnp.einsum("qld,kd->kql", x, com_w)
  r = metrics.ranks(s, jnp.broadcast_to(mask, s.shape)).astype(x.dtype)
  return -jnp.einsum("k,kql->ql", com_c.astype(x.dtype), r)
