"""PFD searched on validation: which privileged columns the teacher reads, and how hard its student follows it.

The paper's Figure 5 finds PFD's gain non-monotone in how predictive the privileged features are, and a teacher
that reads a near-copy of the label teaches targets that a student on x alone cannot follow (HA-PFD removes the
most predictive privileged features for that reason). So on a team's own data the privileged columns are a
choice, and so is the strength of the distillation. :func:`search` makes the choice on the validation lists alone:

* **subsets** of the privileged columns (:func:`subsets`): all; each column alone; and backward elimination from
  the most predictive column (all but the first, all but the first two, ...), the columns ordered by their
  correlation with the label on the training split (:func:`column_strength`). A subset is an input mask of one
  shape (the other columns set to 0), so every teacher is one compiled program.
* **how hard**: alpha (Eq. 1's weight of the data term) and the teacher's temperature (sigmoid(t / T) for the
  pointwise and pairwise teachers, softmax(t / T) for the listwise one), the grid of every subset's students
  trained side by side in one program (:func:`pfd_jax.training.train`'s ``variants``).
* **no distillation** itself is a candidate, the simplest.

A team's run searches cheaply (experiments.table2's defaults for its own data; :func:`search`'s arguments): the
candidates are screened with two seeds and stop early on validation, and in two stages (every subset at the plain
PFD setting, then alpha x temperature for the best subset only); the chosen candidate is then trained as a PFD row
is, every seed and every epoch, and that model is the row "PFD, searched".

The choice is :func:`pfd_jax.ops.stats.tied_with_best` over every candidate's per-list validation NDCG: the
simplest candidate that a paired test over the validation lists cannot tell from the best, in the declared order of
:meth:`Candidate.simplicity` (no distillation before any teacher; fewer columns; at equal columns the setting
closest to plain PFD), so the search is never worse than no distillation by more
than validation can see and says when nothing beats it. The test split is never read here.
"""
from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Callable, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from pfd_jax.ops import stats
from pfd_jax.training.evaluation import per_list_ndcg, predict
from pfd_jax.training.loop import Hooks, train

if TYPE_CHECKING:
  from pfd_jax.methods.distill import Context, Done, Trained
  from pfd_jax.methods.rows import Row
  from pfd_jax.data.datasets import Dataset
  from pfd_jax.training.config import TrainConfig

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


def column_strength(ds: Dataset, split: str = "train") -> np.ndarray:
  """|corr(z_j, y)| of every privileged column with the training label over the split's documents (0 for a
  constant column)."""
  g = ds[split]
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


def masked(ds: Dataset, columns: Sequence[int]) -> Dataset:
  """`ds` with every privileged column outside `columns` set to 0 in every split (the same shapes)."""
  keep = np.zeros(ds[next(iter(ds.splits))].z.shape[1], bool)
  keep[list(columns)] = True
  splits = {s: dataclasses.replace(g, z=np.where(keep, g.z, 0).astype(g.z.dtype)) for s, g in ds.splits.items()}
  return dataclasses.replace(ds, splits=splits, config=dict(ds.config, privileged_mask=[int(c) for c in columns]))


@dataclasses.dataclass
class Search:
  """What :func:`search` found: every candidate's validation NDCG per list (the screening seeds' mean) and mean,
  the choice (:func:`pfd_jax.ops.stats.tied_with_best`'s dict), the columns' strengths, each subset teacher's
  validation NDCG, the chosen candidate's and no-distillation's trained models with every seed (TrainResult), the
  validation lists they were compared on, the screening's seeds and patience, and the search's wall time."""
  lists: dict
  choice: dict
  strength: np.ndarray
  teachers: dict
  chosen: object
  baseline: object
  valid: np.ndarray
  seconds: float = 0.0
  seeds: int = 0
  patience: int = 0

  @property
  def candidate(self) -> Candidate:
    return self.choice["chosen"]


def search(keys, cfg: TrainConfig, ds: Dataset, to_device: Callable[[Dataset], object], *,
           alphas: Sequence[float] = ALPHAS, temperatures: Sequence[float] = TEMPERATURES,
           top: Optional[int] = None, subset_list: Optional[Sequence[Tuple[int, ...]]] = None,
           hooks: Optional[Callable] = None, level: float = 0.05, baseline=None, seeds: Optional[int] = None,
           patience: int = 0, refine: Optional[int] = None, plain_pfd=None) -> Search:
  """Searches the PFD configurations of the module docstring on `ds`'s validation split and returns the
  :class:`Search`. to_device(dataset) returns its :class:`pfd_jax.methods.distill.DeviceData` (with a 'vali'
  evaluation set); cfg.select_on should be 'vali' (nothing about test may select anything). hooks(name) gives
  each model's :class:`pfd_jax.training.Hooks`; top: the most predictive columns searched one by one
  (:func:`subsets`); subset_list: the subsets themselves instead; baseline: the no-distillation run with these keys
  and cfg when the caller has trained it already (not trained again); plain_pfd: likewise the PFD student of every
  privileged column at cfg.alpha and T = 1 (the PFD row), kept when the search chooses that configuration.

  What makes it cheap (each off by default: the full grid, every seed, every epoch):

  * seeds: the candidates are screened with the first `seeds` keys only (their teachers too), and the chosen one
    is then trained again with every key, teacher and student, as a PFD row is; no-distillation's screening
    lists are its first `seeds` models' (a seed's model does not depend on the seeds beside it, up to float
    rounding).
  * patience: the screened teachers and students stop early on validation (:func:`pfd_jax.training.train`); the
    baseline keeps its every epoch, so a screened candidate is compared at a slight disadvantage, the side that
    keeps no distillation when in doubt.
  * refine: two stages instead of the whole grid. First every subset's student at the plain PFD setting
    (cfg.alpha, T = 1); then the alpha x temperature grid for the `refine` subsets best on validation only.
    The choice is made over every candidate of both stages. None: the whole grid for every subset.
  """
  if cfg.select_on != "vali":
    raise ValueError(f"the PFD search selects on validation: select_on='vali', got {cfg.select_on!r}")
  hooks, t0 = hooks or (lambda name: Hooks()), time.time()
  n = min(seeds or keys.shape[0], keys.shape[0])
  strength = column_strength(ds)
  subset_list = subset_list or subsets([int(c) for c in np.argsort(-strength, kind="stable")], top)
  dd = to_device(ds)
  # as pfd_jax.methods.distill trains them: data-only models on the positive groups, students on every group
  if baseline is None:
    baseline = train(keys, cfg, dd.train_pos, "x", dd.eval_sets, hooks=hooks("no_distill"))
  vali = lambda result, dev: per_list_ndcg(cfg, result.params, dev.eval_sets["vali"], "x")
  base_lists, valid = vali(baseline, dd)
  lists, models = {Candidate(): base_lists[:n].mean(0)[valid]}, {Candidate(): baseline}
  full = [dict(alpha=a, temperature=t) for a in alphas for t in temperatures]
  plain = dict(alpha=cfg.alpha, temperature=1.0)
  teachers = {}

  def pfd(cols, grid, targets=None, row=False):
    """The students of `grid` of subset `cols` with the teacher's targets (trained here when None): screened (the
    first n keys, early stopping; the teacher's validation lists kept), or as the row (every key, every epoch).
    Returns (the students, the masked device data, the targets)."""
    dev, name = to_device(masked(ds, cols)), "_".join(map(str, cols))  # a metric writer's legal name
    ks, fit, tag = (keys, {}, "_chosen") if row else (keys[:n], dict(patience=patience), "")
    if targets is None:
      teacher = train(ks, cfg, dev.train_pos, "xz", dev.eval_sets, hooks=hooks(f"teacher_z{name}{tag}"), **fit)
      targets = predict(cfg, teacher.params, dev.train_all, "xz")
      if not row:
        teachers[cols] = per_list_ndcg(cfg, teacher.params, dev.eval_sets["vali"], "xz")[0].mean(0)[valid]
    students = train(ks, cfg, dev.train_all, "x", dev.eval_sets, teacher=targets,
                     hooks=hooks(f"students_z{name}{tag}"), variants=grid, **fit)
    return students, dev, targets

  def screen(cols, grid, targets=None):
    students, dev, targets = pfd(cols, grid, targets)
    for v, student in zip(grid, students):
      c = Candidate(cols, v["alpha"], v["temperature"])
      lists[c], models[c] = vali(student, dev)[0].mean(0)[valid], student
    return targets

  subset_list = [tuple(int(i) for i in cols) for cols in subset_list]
  targets = {cols: screen(cols, full if refine is None else [plain]) for cols in subset_list}
  if refine is not None:  # the second stage: the grid for the best subsets, their teachers' targets kept
    stage1 = {c.columns: float(v.mean()) for c, v in lists.items() if c.columns}
    rest = [v for v in full if v != plain]
    for cols in sorted(stage1, key=stage1.get, reverse=True)[:refine] if rest else ():
      screen(cols, rest, targets[cols])
  choice = stats.tied_with_best(lists, lambda c: c.simplicity(cfg.alpha), level)
  c = choice["chosen"]
  if plain_pfd is not None and c == Candidate(tuple(range(len(strength))), cfg.alpha, 1.0):
    chosen = plain_pfd
  elif c.columns and (n < keys.shape[0] or patience):  # the chosen PFD as its row: every seed, every epoch
    chosen = pfd(c.columns, [dict(alpha=c.alpha, temperature=c.temperature)], row=True)[0][0]
  else:
    chosen = models[c]
  return Search(lists=lists, choice=choice, strength=strength, teachers=teachers, chosen=chosen,
                baseline=baseline, valid=valid, seconds=time.time() - t0, seeds=n, patience=patience)


class SearchOptions(NamedTuple):
  """The PFD search's settings (:func:`pfd_jax.methods.search.search`)."""
  top: int = 4
  seeds: Optional[int] = 2
  patience: int = 10
  refine: Optional[int] = 1


def train_row(ctx: Context, row: Row, done: Done, baseline: str = "no_distill", plain: str = "pfd") -> Trained:
  """A row's training (:mod:`pfd_jax.methods.distill`'s ``train(ctx, row, done) -> Trained``): PFD searched on
  validation (:func:`search`, its own teachers), the chosen candidate trained with every seed. baseline / plain:
  the rows of this run the search reuses (no-distillation, and the plain PFD student kept when the search chooses
  its setting)."""
  o = ctx.search or SearchOptions()
  found = search(ctx.keys, ctx.cfg, ctx.ds, ctx.device_data, hooks=ctx.hooks, top=o.top,
                 baseline=done[baseline].result, plain_pfd=done[plain].result if plain in done else None,
                 seeds=o.seeds, patience=o.patience, refine=o.refine)
  config = dataclasses.replace(ctx.cfg, alpha=found.candidate.alpha, temperature=found.candidate.temperature)
  return ctx.trained(found.chosen, "x", config, found)
