"""Paper analogues: generated populations shaped like the paper's three public datasets (``yahoo_like``,
``istella_like``, ``web30k_like``), for verdicts about the paper's world where its files are not at hand.

Two kinds of settings, kept apart on purpose:

* **Shape** (the paper's Table 1, fixed before anything is trained): regular and privileged feature counts,
  query groups, documents per group, and the share of top-grade documents that makes Equation 2 (t = 4,
  tau_target = 4.8) give Table 1's share of positive training groups.
* **Teachers** (the paper's Table 4, set by ``experiments.calibrate`` from teacher and no-distillation rows only):
  ``weight`` (the share of latent relevance carried by the factor that the top-correlated columns observe),
  ``leak`` (how much every regular column also sees of that factor) and ``noise`` (relevance no column sees).

Generative model (one ``numpy.random.Generator`` seeded by ``seed``; the same seed gives the same bits):

* Query q has ``n_q = clip(round(LogNormal(log(mean_docs) - s^2/2, s)), min_docs, max_docs)`` documents (s = 0.6;
  the lower clip is the preprocessing's ``min_docs``, so Table 1's group count is the generated one) and an
  effect ``c_q ~ N(0, 0.5^2)``.
* Document i has factors ``u0 ~ N(0, 1)`` (the privileged side) and ``u_1..u_6 ~ N(0, I)`` (the regular side,
  weights ``b ∝ [1, .8, .65, .5, .4, .3]``, |b| = 1) and latent relevance
  ``a = sqrt(weight) u0 + sqrt(1 - weight) b.u + c_q + noise e``. Grades 0..4 threshold ``a`` at its normal
  quantiles with shares MSLR-like for grades 1-3 and ``top_share`` for grade 4.
* ``num_privileged`` columns observe u0 with loadings in [0.8, 0.98] (individually the most correlated with y, so
  the paper's top-k split picks them; a larger leak or weaker weight brings a few regular columns into the top k, as
  on the calibrated Web30k population, and the split then takes them, as the paper's would); the others observe one
  regular-side factor with loadings in [0.2, 0.7] plus ``leak u0`` (10% of them are pure noise). Half of all
  columns are count-like, ``round(exp(1.5 f + 2))``.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
from typing import Any, Dict, Optional

import numpy as np

from pfd_jax.config import JsonObject
from pfd_jax.data import labels
from pfd_jax.data.groups import Groups, Splits

_B = np.array([1.0, 0.8, 0.65, 0.5, 0.4, 0.3])
_B = _B / np.linalg.norm(_B)
_QUERY_SD = 0.5
_SHARES_1_3 = (0.32, 0.13)  # grades 1 and 2 (MSLR-WEB30K's shares, about); grade 3: 2.4 x grade 4's (MSLR's ratio)
SPLIT_QID = {"train": 0, "vali": 10 ** 7, "test": 2 * 10 ** 7}


@dataclasses.dataclass(frozen=True)
class Analogue:
  """One paper analogue.

  paper: the paper's name for the dataset; num_regular, num_privileged: Table 1's feature counts; queries: Table 1's
  training and test groups (validation: the test count, which Table 1 does not give); mean_docs: Table 1's
  documents per training group; top_share: the share of grade-4 documents (sets Table 1's % positive training
  groups under Equation 2); positive_groups: Table 1's % positive training groups (the target top_share meets);
  fraction: the share of the paper's groups a run on two cores generates (the page says it); weight, leak, noise:
  the teachers' settings (module docstring), from ``experiments.calibrate``; calibrated: the calibration's record
  (its commit and results file), empty while the defaults below are uncalibrated; test_scale: the test split's
  groups x this (a measurement setting, the calibration's: more test lists of the same population estimate the
  same teachers' NDCG with less noise; a deciding run on an analogue sets it too, by name, to decide a claim on
  more test lists of the same population: experiments/framework/protocol.py); scored (1: on): validation and test
  generated as lists with a positive only, the only lists a selection or a test scores (:func:`generate`)."""
  paper: str
  num_regular: int
  num_privileged: int
  queries: tuple
  mean_docs: float
  top_share: float
  positive_groups: float
  fraction: float
  max_docs: int = 1300
  min_docs: int = 10
  weight: float = 0.5
  leak: float = 0.0
  noise: float = 0.7
  calibrated: str = ""
  test_scale: float = 1.0
  scored: float = 0.0

  @property
  def num_features(self) -> int:
    return self.num_regular + self.num_privileged

  def num_queries(self, scale: float = 1.0) -> tuple:
    """(train, vali, test) groups at `scale` x the declared fraction (scale = 1 / fraction: the paper's), the test
    split's x test_scale."""
    train, test = self.queries
    return tuple(max(int(round(n * self.fraction * scale)), 1) for n in (train, test, test * self.test_scale))


# Table 1 of the paper. top_share: the value at which the expected % of positive training groups under Equation 2
# (sum over documents, no draw) is Table 1's at the paper's groups (tests/test_analogues.py checks it). Yahoo's
# 700 = 500 + 200 columns. fraction: the share at which a training epoch holds about 110,000-150,000 documents
# (Yahoo 109,000, Web30k 113,000, Istella 146,000), so that one draw of Table 2's four rows takes minutes
# on two cores (students distil on every group each epoch): the rule that sizes the runs made on two cores.
ANALOGUES = {
    "yahoo_like": Analogue("Yahoo", 500, 200, (14477, 4089), 30.02, top_share=0.0207, positive_groups=2.46,
                           fraction=0.25, max_docs=139),
    "istella_like": Analogue("Istella", 170, 50, (23171, 9782), 315.90, top_share=0.0082, positive_groups=8.83,
                             fraction=0.02, max_docs=1300),
    "web30k_like": Analogue("Web30k", 96, 40, (18151, 6072), 124.35, top_share=0.0072, positive_groups=3.54,
                            fraction=0.05, max_docs=1300),
}


# The sizing rule of the populations that decide Table 2 (declared from Table 1 before any run at these sizes): a
# draw's training split holds at least POSITIVE_TRAIN_GROUPS groups with a positive (the paper's own count where that
# is smaller), since the data loss reads those groups alone and a student that sees 30-50 of them selects noise; its
# validation split holds VALI_LISTS lists with a positive, the only ones a selection scores, so that the best epoch
# is chosen on a split that tells epochs apart (NDCG@8 of one list varies by about 0.3: 300 lists put the
# validation mean's error near 0.02). Positive shares are Table 1's % positive training groups, which top_share meets.
POSITIVE_TRAIN_GROUPS = 150
VALI_LISTS = 300


@dataclasses.dataclass(frozen=True)
class Sizing:
  """What the sizing rule gives an analogue: fraction (of the paper's groups, at most 1), train_groups (generated
  at that fraction), positive_train_groups (expected: train_groups x Table 1's share), vali_lists (with a positive)
  and vali_generated (the validation lists generated to hold them, at Table 1's share)."""
  fraction: float
  train_groups: int
  positive_train_groups: float
  vali_lists: int
  vali_generated: int


def sizing(name: str) -> Sizing:
  """The sizing rule (POSITIVE_TRAIN_GROUPS, VALI_LISTS) in closed form from analogue `name`'s Table 1 shape."""
  a = ANALOGUES[name]
  share, train = a.positive_groups / 100, a.queries[0]
  target = min(POSITIVE_TRAIN_GROUPS, train * share)
  fraction = min(1.0, target / (train * share))
  groups = int(math.ceil(train * fraction))
  return Sizing(fraction, groups, groups * share, VALI_LISTS, int(math.ceil(VALI_LISTS / share)))


TEACHER_SETTINGS = ("weight", "leak", "noise")
MEASUREMENT_SETTINGS = ("test_scale", "scored")  # how a population is measured, not what it is
LOSSES = ("rankbce", "ranknet")  # Table 4's two losses, each with its own teachers' row


SETTINGS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "analogues.json")


def share(name: str, scale: float = 1.0) -> float:
  """The share of the paper's groups that `scale` generates (1: the paper's Table 1 counts)."""
  return ANALOGUES[name].fraction * scale


def share_key(share_: float) -> str:
  """A share's key in analogues.json (four significant digits: 0.25, 1, 0.05)."""
  return f"{share_:.4g}"


def populations(name: str) -> Dict[str, Dict[str, JsonObject]]:
  """{share of the paper's groups: {loss: record}} of analogue `name` in analogues.json (written by
  experiments.calibrate: the chosen candidate, its distance to that loss's Table 4 row, the code that measured it).
  A population is calibrated at the size its runs use (the teachers move with the training groups), so each share
  has its own; a calibration on both losses writes its one population under each, one loss's under that loss."""
  with open(SETTINGS_FILE) as f:
    return json.load(f).get(name, {})


def calibrations(name: str, scale: float = 1.0) -> Dict[str, JsonObject]:
  """{loss: record} of analogue `name` calibrated at the share `scale` generates ({} while none is)."""
  return populations(name).get(share_key(share(name, scale)), {})


def analogue(name: str, loss: Optional[str] = None, scale: float = 1.0) -> Analogue:
  """Analogue `name` with its calibrated teachers' settings (analogues.json, read when asked) at the size `scale`
  generates: the population calibrated for `loss`'s teachers, or (loss None) the one population of an analogue
  calibrated on both losses at once. An analogue whose losses were calibrated apart has two populations, and a
  ValueError asks which; an uncalibrated one keeps the module's defaults and an empty ``calibrated`` (a loss named
  but not calibrated at this size: a ValueError naming the calibration's command)."""
  a, chosen = ANALOGUES[name], calibrations(name, scale)
  if loss is not None:
    if loss not in chosen:  # a run that names a calibrated population never gets the defaults in its place
      raise ValueError(f"analogue {name!r} is not calibrated for {loss} at {share(name, scale):g} of the paper's "
                       f"groups (pfd_jax/data/analogues.json): python -m experiments.calibrate --dataset={name} "
                       f"--loss={loss} --synthetic_scale={scale:g}")
    chosen = {loss: chosen[loss]}
  settings = {json.dumps({k: r[k] for k in TEACHER_SETTINGS}, sort_keys=True) for r in chosen.values()}
  if len(settings) > 1:
    raise ValueError(f"analogue {name!r} is calibrated per loss ({', '.join(sorted(chosen))}: Table 4's teachers of "
                     f"the two losses are met by two populations): name one, --analogue=calibrated_for=<loss>")
  if not chosen:
    return a
  record = next(iter(chosen.values()))
  return dataclasses.replace(a, **{k: record[k] for k in TEACHER_SETTINGS},
                             calibrated=json.dumps(record, sort_keys=True))


def parse_settings(text: str) -> Dict[str, Any]:
  """'weight=0.4,leak=0.1' -> {'weight': 0.4, 'leak': 0.1}: the teachers' settings (module docstring), the
  measurement's test_scale (>= 1), or calibrated_for=<loss> (the population calibrated for that loss's teachers,
  analogues.json); a ValueError names a bad item."""
  out, known = {}, TEACHER_SETTINGS + MEASUREMENT_SETTINGS + ("calibrated_for",)
  for item in filter(None, (t.strip() for t in text.split(","))):
    key, _, value = item.partition("=")
    if key not in known:
      raise ValueError(f"analogue setting {item!r}: expected one of {', '.join(known)} as name=value")
    if key == "calibrated_for":
      if value not in LOSSES:
        raise ValueError(f"analogue setting {item!r}: calibrated_for names a loss ({', '.join(LOSSES)})")
      out[key] = value
      continue
    try:
      out[key] = float(value)
    except ValueError:
      raise ValueError(f"analogue setting {item!r}: {value!r} is not a number") from None
  if "calibrated_for" in out and set(out) & set(TEACHER_SETTINGS):
    raise ValueError(f"analogue settings {text!r}: calibrated_for reads the teachers' settings from analogues.json; "
                     f"give it or {', '.join(TEACHER_SETTINGS)}, not both")
  if (not 0 <= out.get("weight", 0.5) <= 1 or out.get("leak", 0) < 0 or out.get("noise", 0) < 0
      or out.get("test_scale", 1) < 1 or out.get("scored", 0) not in (0, 1)):
    raise ValueError(f"analogue settings {text!r}: weight in [0, 1], leak and noise >= 0, test_scale >= 1, scored "
                     "0 or 1")
  return out


def resolved(name: str, settings: Optional[Dict[str, Any]] = None, scale: float = 1.0) -> Analogue:
  """The analogue a generation with `settings` (:func:`parse_settings`'s) at `scale` makes: all three teachers'
  settings given (a calibration's candidate), the shape with them; else the population calibrated at that size
  which they name (calibrated_for), or the one in force, with the settings given over it."""
  settings = dict(settings or {})
  loss = settings.pop("calibrated_for", None)
  base = ANALOGUES[name] if set(TEACHER_SETTINGS) <= set(settings) else analogue(name, loss, scale)
  return dataclasses.replace(base, **settings)


def _grade_cuts(top_share: float, sd: float) -> np.ndarray:
  from statistics import NormalDist
  shares = np.array([*_SHARES_1_3, 2.4 * top_share, top_share])
  upper = np.cumsum(shares[::-1])[::-1]  # P(grade >= 1..4)
  return np.array([NormalDist(0.0, sd).inv_cdf(1.0 - p) for p in upper])


def _design(rng, a: Analogue):
  """Per column: (observed factor index into [u0, u1..u6], loading, leak, count-like)."""
  f, p = a.num_features, a.num_privileged
  fac = np.concatenate([np.zeros(p, np.int64), rng.integers(1, 1 + _B.size, f - p)])
  lam = np.concatenate([rng.uniform(0.8, 0.98, p), rng.uniform(0.2, 0.7, f - p)])
  leak = np.concatenate([np.zeros(p), np.full(f - p, a.leak)])
  noise_cols = rng.choice(np.arange(p, f), size=(f - p) // 10, replace=False)
  lam[noise_cols], leak[noise_cols] = 0.0, 0.0
  perm = rng.permutation(f)  # the privileged side is not simply the first columns
  return fac[perm], lam[perm], leak[perm], rng.random(f) < 0.5


def relevance(rng, a: Analogue, num_queries: int) -> tuple:
  """(list sizes [Q], latent factors [N, 7], grades [N]) of `num_queries` lists: the documents without their
  columns (what Table 1's shape depends on)."""
  s = 0.6
  sizes = np.clip(np.round(rng.lognormal(np.log(a.mean_docs) - s * s / 2, s, num_queries)), a.min_docs,
                  a.max_docs).astype(np.int64)
  n = int(sizes.sum())
  u = rng.normal(size=(n, 1 + _B.size)).astype(np.float32)
  latent = (np.sqrt(a.weight) * u[:, 0] + np.sqrt(1 - a.weight) * (u[:, 1:] @ _B)
            + np.repeat(rng.normal(0, _QUERY_SD, num_queries), sizes) + a.noise * rng.normal(size=n))
  cuts = _grade_cuts(a.top_share, float(np.sqrt(1.0 + _QUERY_SD ** 2 + a.noise ** 2)))
  return sizes, u, np.searchsorted(cuts, latent).astype(np.float32)


BLOCK = 1 << 16  # documents whose columns are made at once: memory holds the columns and one block's draws


def _columns(rng, u: np.ndarray, design) -> np.ndarray:
  """x f32[N, F] of documents with factors u [N, 7], a block of documents at a time (BLOCK): each block's noise
  continues the generator's stream in the order one draw of the whole [N, F] takes, so the bits do not depend on
  the block, and no float64 copy of the whole matrix is made (Istella's test split holds millions of documents)."""
  fac, lam, leak, count_like = design
  resid = np.sqrt(np.maximum(1.0 - lam ** 2 - leak ** 2, 0.1)).astype(np.float32)
  lam, leak = lam.astype(np.float32), leak.astype(np.float32)
  x = np.empty((u.shape[0], fac.size), np.float32)
  for start in range(0, u.shape[0], BLOCK):
    ub = u[start:start + BLOCK]
    xb = ub[:, fac] * lam + ub[:, :1] * leak
    xb += rng.normal(size=xb.shape).astype(np.float32) * resid
    xb[:, count_like] = np.round(np.exp(np.clip(1.5 * xb[:, count_like] + 2, None, 30)))
    x[start:start + BLOCK] = xb
  return x


def _split(rng, a: Analogue, num_queries: int, design) -> Groups:
  sizes, u, rel = relevance(rng, a, num_queries)
  offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
  return Groups(x=_columns(rng, u, design), rel=rel, qid=np.arange(num_queries, dtype=np.int64), offsets=offsets)


def _scored_split(rng, a: Analogue, lists: int, design, label_seed: int, qid0: int) -> Groups:
  """`lists` lists with a positive under Eq. 2 (t = 4, tau = 4.8; each document's draws keyed by the label seed, its
  list's qid and its position: :func:`pfd_jax.data.labels.document_gumbel`, so preprocessing gives them the same
  labels): lists are drawn (their documents' relevance, no columns) in blocks until `lists` of them hold a
  positive, and only those get columns. A list keeps the qid of its place among all drawn (qid0 + index)."""
  share = a.positive_groups / 100
  parts, kept, drawn = [], 0, 0  # per block: (sizes, factors, grades, qids) of its lists with a positive
  while kept < lists:
    n = max(256, int(1.2 * (lists - kept) / share))
    size, u, rel = relevance(rng, a, n)
    offsets = np.concatenate([[0], np.cumsum(size)])
    qid = qid0 + drawn + np.arange(n, dtype=np.int64)
    position = np.arange(offsets[-1]) - np.repeat(offsets[:-1], size)
    g0, g1 = labels.document_gumbel(label_seed, np.repeat(qid, size), position)
    has = np.add.reduceat(labels.gumbel_labels(rel, g0, g1), offsets[:-1]) > 0
    keep = np.flatnonzero(has)[:lists - kept]
    docs = np.repeat(np.isin(np.arange(n), keep), size)  # the kept lists' documents
    parts.append((size[keep], u[docs], rel[docs], qid[keep]))
    kept, drawn = kept + keep.size, drawn + n
  size, u, rel, qid = (np.concatenate(p) for p in zip(*parts))
  offsets = np.concatenate([[0], np.cumsum(size)]).astype(np.int64)
  return Groups(x=_columns(rng, u, design), rel=rel, qid=qid, offsets=offsets)


def scored_lists(a: Analogue, scale: float = 1.0) -> tuple:
  """(validation, test) lists with a positive that a scored population generates: Table 1's share of the lists an
  unscored one would (its test_scale included), validation at least VALI_LISTS."""
  _, vali, test = a.num_queries(scale)
  share = a.positive_groups / 100
  return max(VALI_LISTS, int(round(vali * share))), max(1, int(round(test * share)))


def generate(name: str, *, scale: float = 1.0, seed: int = 0, settings: Optional[Dict[str, Any]] = None,
             label_seed: int = 0) -> Splits:
  """Raw splits {'train', 'vali', 'test'} -> :class:`Groups` of analogue `name` (before any preprocessing).

  scale multiplies the declared fraction's query counts (1 / fraction: the paper's); settings overrides fields of
  the analogue (the calibration's candidates: weight, leak, noise) or name its population (calibrated_for), or asks
  for scored validation and test lists (scored=1: :func:`scored_lists` of them, each with a positive under the
  labels `label_seed` gives documents; the data's preprocessing must key its labels by document)."""
  a = resolved(name, settings, scale)
  rng = np.random.default_rng(seed)
  design = _design(rng, a)
  out = {}
  counts = a.num_queries(scale)
  scored = dict(zip(("vali", "test"), scored_lists(a, scale))) if a.scored else {}
  for split, nq in zip(("train", "vali", "test"), counts):
    if split in scored:
      out[split] = _scored_split(rng, a, scored[split], design, label_seed, SPLIT_QID[split])
      continue
    g = _split(rng, a, nq, design)
    out[split] = dataclasses.replace(g, qid=g.qid + SPLIT_QID[split])
  return out
