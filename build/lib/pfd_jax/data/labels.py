"""Equation 2's labels and the Gumbel draws they read, keyed by document where a document's label must not depend on
the split or process that holds it (NumPy only: the generators and the preprocessing both read them)."""
from __future__ import annotations

import numpy as np


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _mix(h: np.ndarray) -> np.ndarray:
  """SplitMix64's finaliser (Steele, Lea and Flood, OOPSLA 2014): a bijection of uint64 whose outputs for
  consecutive inputs pass BigCrush; numpy's uint64 products wrap modulo 2^64, as the finaliser means them to."""
  with np.errstate(over="ignore"):
    h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
  return h ^ (h >> np.uint64(31))


def document_gumbel(seed: int, qid: np.ndarray, position: np.ndarray):
  """(G0, G1), f32[N] each: two standard Gumbel draws per document, a function of (seed, its query id, its
  position in its query) alone. A document of a file keeps its draws, hence its Eq. 2 label, in every split and
  fold that holds it (MSLR-WEB30K's S-blocks are each fold's train, validation or test by rotation), whatever
  the process that reads it; G = -log(-log U), U the top 53 bits of a SplitMix64 hash, offset by half a step
  so that U lies in (0, 1)."""
  with np.errstate(over="ignore"):
    base = _mix(_mix(np.uint64(seed) * _GOLDEN + np.uint64(1)) ^ np.asarray(qid).astype(np.int64).view(np.uint64))
    doc = _mix(base + (np.asarray(position).astype(np.uint64) + np.uint64(1)) * _GOLDEN)
    out = []
    for stream in (1, 2):
      u = ((_mix(doc ^ np.uint64(stream) * _GOLDEN) >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0 ** -53
      out.append((-np.log(-np.log(u))).astype(np.float32))
  return out[0], out[1]


def gumbel_labels(rel: np.ndarray, g0: np.ndarray, g1: np.ndarray, *, t: float = 4.0,
                  tau: float = 4.8) -> np.ndarray:
  """Eq. 2: y = 1[t*r + G1 > t*tau + G0], so P(y = 1) = sigmoid(t * (r - tau)). f32[N] of 0/1.

  Called with tau = tau_privileged and the same draws it gives the Figure 5 privileged feature z.
  """
  return (t * rel + g1 > t * tau + g0).astype(np.float32)
