"""A seeded e-commerce search-log simulator: the Table 3 study of the paper on data anyone can rerun.

Generative model (one ``numpy.random.Generator``; every split drawn from it in turn):

* A session (query group) shows ``L ~ U{min_items..max_items}`` items. Item i has K = 4 latent factors
  ``f_i ~ N(0, I)``, a query effect ``c_q ~ N(0, 0.5^2)``, latent relevance ``a_i = f_i . beta + c_q`` with
  ``beta = [1.0, 0.7, 0.5, 0.3]``, and a purchase intent ``u_i ~ N(0, 0.8^2)`` that no regular feature sees.
* Regular features (``num_features``): feature j observes one factor, ``x_ij = lam_j f_ik + sqrt(1-lam_j^2) e_ij``
  with lam_j in [0.2, 0.9] (the query and product-title signal of the paper's model).
* The logging ranker orders items by ``a_i + N(0, logging_noise^2)`` (default 1); ``pos_i`` in 1..L is the shown
  position. A share ``random_share`` of sessions (default 0) is shown in a uniformly random order instead, as
  real systems do to estimate propensities; they are drawn from their own generator, so the default draws
  are unchanged, and marked by one more privileged column (``randomized``, 1 on every item of such a session).
* Cascade of user actions: examined ~ Bernoulli(pos^-eta) (position bias, eta = 1 by default; 0 = none);
  click = examined and Bernoulli(sigmoid(a_i - 2.5)); add-to-cart = click and Bernoulli(sigmoid(a_i + u_i - 1));
  purchase = add and Bernoulli(sigmoid(a_i + u_i - purchase_offset)) (``purchase_offset`` 2 by default; larger
  = sparser purchases, the label sparsity the Table 3 sweep varies).
* Target y = purchase (also stored as ``rel``). Privileged features z, never available at serving time:
  column 0 = log2(1 + position), column 1 = click, column 2 = add-to-cart. As a LETOR file
  (:func:`to_letor_lines`, ``experiments/export_logs.py``) the regular features are ids 1..num_features and
  position, click, add-to-cart the next three ids. Add-to-cart is the most
  predictive of purchase, click less, position least (the paper's ordering).

**The truth** (``truth=True``: one more split, ``truth``, the test sessions with y = rel = the unbiased target):
the probability that the item is bought *had it been examined*, ``sigmoid(a - 2.5) sigmoid(a + u - 1)
sigmoid(a + u - 2)``, which no position affects. NDCG on it (gain 2^p - 1, every test session, since every
target is positive) judges a model on what users want rather than on what the logging ranker let them see;
the logged purchases of ``test`` are position-biased (an item must be examined before it can be bought), so a
model that learns the logging ranker's position effect is rewarded there. The ranking by the truth has NDCG 1.

Positive groups are sessions with a purchase; the others play the role of the paper's unlabeled logs. With the
defaults (seed 0): 33% of training sessions have a purchase; 1.6% of shown items are bought, 3.9% clicked,
2.6% added to cart; corr(., purchase) over items is -0.25 for log-position, 0.63 for click, 0.77 for add.

**What the paper gives of its Table 3 setting, and what it does not.** Section 4.3 gives the cascade's columns
(position, click, add-to-cart as privileged features of a purchase target), that teachers train on the sessions
with a purchase and students distil on all of them ("As in public datasets"), and each teacher's NDCG@8 relative
to no-distillation (``experiments/framework/reported.py``: ``TABLE3``); it gives neither the purchase rate nor the session
length. The default purchase rate (a third of sessions) is therefore this simulator's choice, far denser than
the paper's public sets (2.5-9% positive groups, Table 1): ``experiments/paper/table3_sparsity.py`` sweeps
``purchase_offset`` down to the public sets' rates and shows, at each measured rate, the teachers beside Table
3's and where the paper's claims turn.
"""
from __future__ import annotations

import dataclasses
from typing import Tuple

import numpy as np

from pfd_jax.config import ConfigError, option
from pfd_jax.data.datasets import Dataset
from pfd_jax.data.groups import Groups

PRIVILEGED = ("position", "click", "add_to_cart")
RANDOMIZED = "randomized"  # the column that marks randomised sessions (with random_share > 0)
_BETA = np.array([1.0, 0.7, 0.5, 0.3])


@dataclasses.dataclass(frozen=True)
class SimulatorOptions:
  """The log simulator's settings as options of the drivers that simulate logs (table3_logs, debias, export_logs):
  :func:`simulate`'s sessions and seed."""
  sessions: Tuple[int, ...] = option((800, 200, 800), "Simulated sessions in train, vali, test.", lo=1)
  sim_seed: int = option(0, "Seed of the log simulator.")

  def __post_init__(self):
    if len(self.sessions) != 3:
      raise ConfigError("sessions", f"three counts (train,vali,test) expected, got {self.sessions}")


def _sigmoid(v):
  return 1.0 / (1.0 + np.exp(-v))


def _split(rng, sessions, min_items, max_items, lam, fac, eta, noise=1.0, random_share=0.0, rand_rng=None,
           promotion=0.0, purchase_offset=2.0):
  sizes = rng.integers(min_items, max_items + 1, sessions)
  n = int(sizes.sum())
  offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
  f = rng.normal(size=(n, _BETA.size))
  a = f @ _BETA + np.repeat(rng.normal(0, 0.5, sessions), sizes)
  u = rng.normal(0, 0.8, n)
  x = f[:, fac] * lam + np.sqrt(1 - lam ** 2) * rng.normal(size=(n, lam.size))
  pos = np.empty(n)
  logged = a + noise * rng.normal(size=n)
  shuffled = np.zeros(sessions, bool)
  if random_share > 0:  # its own generator: the main stream's draws stay those of random_share = 0
    shuffled = rand_rng.random(sessions) < random_share
  if promotion > 0:
    promoted = rand_rng.normal(size=n)
    logged = logged + promotion * promoted
    x = np.concatenate([x, promoted[:, None]], 1)
  if random_share > 0:
    logged = np.where(np.repeat(shuffled, sizes), rand_rng.random(n), logged)
  for q in range(sessions):  # positions within each session (a per-session argsort; file-side, numpy)
    s, e = offsets[q], offsets[q + 1]
    pos[s + np.argsort(-logged[s:e], kind="stable")] = np.arange(1, e - s + 1)
  examined = rng.random(n) < pos ** -eta
  p_click, p_add, p_buy = _sigmoid(a - 2.5), _sigmoid(a + u - 1.0), _sigmoid(a + u - purchase_offset)
  click = examined & (rng.random(n) < p_click)
  add = click & (rng.random(n) < p_add)
  purchase = add & (rng.random(n) < p_buy)
  cols = [np.log2(1 + pos), click, add] + ([np.repeat(shuffled, sizes)] if random_share > 0 else [])
  z = np.stack(cols, 1).astype(np.float32)
  y = purchase.astype(np.float32)
  g = Groups(x=x.astype(np.float32), rel=y, y=y, z=z, qid=np.arange(sessions, dtype=np.int64), offsets=offsets)
  truth = (p_click * p_add * p_buy).astype(np.float32)
  return g, dataclasses.replace(g, rel=truth, y=truth)


def simulate(*, sessions=(800, 200, 800), min_items: int = 15, max_items: int = 35, num_features: int = 20,
             eta: float = 1.0, logging_noise: float = 1.0, random_share: float = 0.0, promotion: float = 0.0,
             purchase_offset: float = 2.0, truth: bool = False, seed: int = 0) -> Dataset:
  """Simulated logs as a ready :class:`Dataset` (train / vali / test), y = purchase, z = PRIVILEGED (and
  RANDOMIZED with random_share > 0); truth=True adds the split ``truth`` (the test sessions judged on the
  unbiased target, see the module docstring). The defaults reproduce the Table 3 analogue's data bit for bit."""
  if not 0 <= random_share <= 1:
    raise ValueError(f"random_share must be in [0, 1], got {random_share}")
  rng = np.random.default_rng(seed)
  rand_rng = np.random.default_rng((seed, 1))
  fac = rng.integers(0, _BETA.size, num_features)
  lam = rng.uniform(0.2, 0.9, num_features)
  made = {name: _split(rng, s, min_items, max_items, lam, fac, eta, logging_noise, random_share, rand_rng, promotion,
                       purchase_offset) for name, s in zip(("train", "vali", "test"), sessions)}
  num_features += promotion > 0
  splits = {name: g for name, (g, _) in made.items()}
  if truth:
    splits["truth"] = made["test"][1]
  privileged = list(PRIVILEGED) + ([RANDOMIZED] if random_share > 0 else [])
  cfg = dict(name="logs", sessions=list(sessions), min_items=min_items, max_items=max_items,
             num_features=num_features + len(privileged), num_regular=num_features, eta=eta, seed=seed,
             privileged=privileged, labels="file", positive_grade=None, t=None, tau=None,
             regular_ids=list(range(1, num_features + 1)),
             privileged_ids=list(range(num_features + 1, num_features + len(privileged) + 1)),
             log1p=False, query_norm=False, min_docs=min_items, reference_split="train")
  defaults = dict(logging_noise=1.0, random_share=0.0, promotion=0.0, purchase_offset=2.0)
  given = dict(logging_noise=logging_noise, random_share=random_share, promotion=promotion,
               purchase_offset=purchase_offset)
  cfg.update({k: v for k, v in given.items() if v != defaults[k]})  # the default's record kept
  return Dataset(name="logs", splits=splits, privileged=np.arange(len(privileged)), config=cfg)


def positions(z: np.ndarray) -> np.ndarray:
  """i64[N] the shown positions 1..L back from the privileged column 0, log2(1 + position)."""
  return np.rint(np.exp2(z[:, 0]) - 1).astype(np.int64)


def relabel(ds: Dataset, column: int) -> Dataset:
  """The same sessions with y = privileged column `column` (click = 1, add-to-cart = 2): pre-training data."""
  out = {s: Groups(x=g.x, rel=g.z[:, column], y=g.z[:, column], z=g.z, qid=g.qid, offsets=g.offsets)
         for s, g in ds.splits.items()}
  return Dataset(name=ds.name, splits=out, privileged=ds.privileged, config=dict(ds.config, label=column))


def to_letor_lines(g: Groups, qid_offset: int = 0, privileged: bool = True):
  """LETOR lines of simulated sessions: ``purchase qid:Q 1:x1 ... [21:position 22:click 23:add]``.

  privileged=False leaves the privileged ids out (the file as it exists at serving time).
  """
  feats = np.concatenate([g.x, g.z], 1) if privileged else g.x
  qid = np.repeat(g.qid + qid_offset, g.sizes)
  for label, q, row in zip(g.y, qid, feats):
    yield f"{label:g} qid:{q} " + " ".join(f"{j}:{v:.7g}" for j, v in enumerate(row, 1)) + "\n"
