"""The PFD search's candidates and the lists it fits, chooses and scores on (:mod:`pfd_jax.methods.search` trains
and chooses): a candidate, the column subsets and their order, the declared sequence the rule tests, and the parts.

**Nested: no list is read twice for choosing and scoring** (:func:`nested`). The validation split is dealt in
two before anything is trained: its *selection* lists choose every screened model's best epoch (and its early
stop) and order the privileged columns (:func:`column_strength`), and no candidate is scored on them; its other
lists score the validation part's models, which fit on every training list. Each cross-fitting fold's models fit
on the other folds' training lists, choose their epoch on the same selection lists and are scored on the fold's
own. So a candidate's score is never the maximum over epochs of that same score (which biases every candidate's
gain upward by its own epoch selection), and the order in which the rule tests the candidates is fixed by lists
it never scores. (The training lists are not the ones set aside: a team's few labelled training lists are what
distillation helps, and the validation split is there to choose with.)

A part is a :class:`pfd_jax.data.datasets.Dataset` whose splits are its fitting lists ('train'), the selection
lists (``SELECT``, the evaluation slot a training run selects its epoch on) and its scoring lists (``SCORE``, the
other evaluation slot of :func:`pfd_jax.training.device.to_device`): the run's own test split is never one of them,
the parts being built from its training and validation splits only.
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Dict, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from pfd_jax.data.preprocess import positive_groups

if TYPE_CHECKING:
  from pfd_jax.data.datasets import Dataset
  from pfd_jax.data.groups import Groups

SELECT, SCORE = "vali", "test"  # a part's evaluation slots: the selection lists, the scoring lists
SELECT_SHARE = 0.5  # the share of the validation lists with a positive that choose (the others score)
ALPHAS = (0.2, 0.5, 0.8)
TEMPERATURES = (1.0, 3.0)


class Candidate(NamedTuple):
  """A searched configuration: the privileged columns its teacher reads (indices into z; () = no distillation),
  alpha and the teacher's temperature."""
  columns: Tuple[int, ...] = ()
  alpha: float = 1.0
  temperature: float = 1.0

  @property
  def label(self) -> str:
    if not self.columns:
      return "no distillation"
    return f"z[{','.join(map(str, self.columns))}], alpha {self.alpha:g}, T {self.temperature:g}"

  def simplicity(self, plain_alpha: float = 0.5) -> tuple:
    """The declared complexity order the choice reads (smallest first), each level breaking the previous one's ties:
    no distillation; then fewer columns; at equal columns the setting closest to plain PFD (alpha `plain_alpha`,
    T = 1): the alpha nearest plain's, then the temperature nearest 1 (|log T|), then of two alphas as near the
    larger (less weight on the teacher); last the columns' indices."""
    return (bool(self.columns), len(self.columns), round(abs(self.alpha - plain_alpha), 9),
            abs(np.log(self.temperature)), -self.alpha, self.columns)


def column_strength(g: Groups) -> np.ndarray:
  """|corr(z_j, y)| of every privileged column with the label over the documents of `g` (0 for a constant column);
  the search reads it on its selection lists (:func:`nested`)."""
  z, y = np.asarray(g.z, np.float64), np.asarray(g.y, np.float64)
  zc, yc = z - z.mean(0), y - y.mean()
  den = np.sqrt((zc ** 2).sum(0) * (yc ** 2).sum())
  return np.abs(np.divide(zc.T @ yc, den, out=np.zeros(z.shape[1]), where=den > 0))


def subsets(order: Sequence[int], top: Optional[int] = None) -> Tuple[Tuple[int, ...], ...]:
  """The searched column subsets, given the columns from the most predictive down: all; each of the `top` most
  predictive alone; backward elimination from the most predictive (all but order[:1], ..., all but order[:top]).
  Each once, sorted indices (top None: every column; a team's few named columns, 1 + 2 (P - 1) subsets)."""
  order = list(order)
  top = len(order) if top is None else min(top, len(order))
  out = [tuple(sorted(order))] + [(c,) for c in order[:top]]
  out += [tuple(sorted(order[k:])) for k in range(1, min(top + 1, len(order)))]
  return tuple(dict.fromkeys(out))


def masked(ds: Dataset, columns) -> Dataset:
  """`ds` with every privileged column outside `columns` set to 0 in every split (the same shapes)."""
  keep = np.zeros(ds[next(iter(ds.splits))].z.shape[1], bool)
  keep[list(columns)] = True
  splits = {s: dataclasses.replace(g, z=np.where(keep, g.z, 0).astype(g.z.dtype)) for s, g in ds.splits.items()}
  return dataclasses.replace(ds, splits=splits, config=dict(ds.config, privileged_mask=[int(c) for c in columns]))


def cross_fit(ds: Dataset, folds: int, seed: int = 0) -> Tuple[Dataset, ...]:
  """`folds` datasets over `ds`'s training lists: each trains on the other folds' lists ('train') and scores its own
  held-out ones ('vali', out of fold); the lists dealt at random (seeded), each exactly once."""
  g = ds["train"]
  if not 2 <= folds <= g.num_queries // 2:
    raise ValueError(f"cross-fitting needs 2 <= folds <= half the {g.num_queries} training lists, got {folds}")
  parts = np.array_split(np.random.default_rng(seed).permutation(g.num_queries), folds)
  return tuple(dataclasses.replace(ds, splits={"train": g.take(np.sort(np.concatenate(parts[:i] + parts[i + 1:]))),
                                               "vali": g.take(np.sort(p))},
                                   config=dict(ds.config, cross_fit=[i + 1, folds, seed]))
               for i, p in enumerate(parts))


def nested(ds: Dataset, folds: int = 0, share: float = SELECT_SHARE, seed: int = 0) -> Tuple[Groups, tuple]:
  """(the selection lists, the parts) of the module docstring. The selection lists are a `share` of the validation
  lists that hold a positive (at least one; dealt at random, seeded); the validation part fits on every training
  list and scores the other validation lists; with `folds`, part k fits on the training lists less its k-th fold
  (:func:`cross_fit`, seed `seed`) and scores that fold. A list without a positive neither chooses nor scores (its
  NDCG is undefined): every such validation list goes with the scoring ones, where it is left out."""
  v = ds["vali"]
  if not 0 < share < 1:
    raise ValueError(f"the selection lists' share of the validation lists must lie in (0, 1), got {share}")
  positive = np.flatnonzero(positive_groups(v))
  if positive.size < 2:
    raise ValueError(f"the search chooses epochs on some validation lists with a positive and scores the others: "
                     f"it needs at least 2, the validation split has {positive.size}")
  aside = np.zeros(v.num_queries, bool)
  aside[np.random.default_rng([seed, 1]).permutation(positive)[:max(1, int(round(share * positive.size)))]] = True
  select = v.take(np.flatnonzero(aside))
  part = lambda fit, score, **config: dataclasses.replace(
      ds, splits={"train": fit, SELECT: select, SCORE: score}, config=dict(ds.config, **config))
  folded = cross_fit(dataclasses.replace(ds, splits={"train": ds["train"]}), folds, seed) if folds else ()
  return select, (part(ds["train"], v.take(np.flatnonzero(~aside))),) + tuple(
      part(d["train"], d["vali"], cross_fit=d.config["cross_fit"]) for d in folded)


def sequence(candidates, subset_list, plain: Dict[str, Any], plain_alpha: float) -> tuple:
  """The declared order of the distilling candidates and their weights in :func:`pfd_jax.ops.choice.fallback`:
  subset by subset in `subset_list`'s order (all columns, then each alone from the most predictive, then backward
  elimination), each at the plain PFD setting first and then its other settings in :meth:`Candidate.simplicity`'s
  order. Plain PFD (the first subset at the plain setting) is weighted 1/2, the other subsets' plain settings share
  the other half (plain PFD all of it when it is the only subset), and the other settings 0: they are tested only
  when the candidate before them was found better, at its level."""
  rank = {cols: i for i, cols in enumerate(subset_list)}
  is_plain = lambda c: (c.alpha, c.temperature) == (plain["alpha"], plain["temperature"])
  order = sorted((c for c in candidates if c.columns),
                 key=lambda c: (rank[c.columns], not is_plain(c), c.simplicity(plain_alpha)))
  others = sum(is_plain(c) for c in order[1:])
  weights = [0.0 if not is_plain(c) else (1.0 if not others else 0.5) if i == 0 else 0.5 / others
             for i, c in enumerate(order)]
  return order, weights


def settings(alpha: float, alphas: Sequence[float] = ALPHAS, temperatures: Sequence[float] = TEMPERATURES) -> list:
  """Every subset's students at most: alpha x temperature, and plain PFD (`alpha`, T = 1), from which the rule
  starts, always among them."""
  full = [dict(alpha=a, temperature=t) for a in alphas for t in temperatures]
  return full + ([] if dict(alpha=alpha, temperature=1.0) in full else [dict(alpha=alpha, temperature=1.0)])
