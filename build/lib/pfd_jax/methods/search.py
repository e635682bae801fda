"""PFD searched on validation: which privileged columns the teacher reads, and how hard its student follows it.

The paper's Figure 5 finds PFD's gain non-monotone in how predictive the privileged features are, and a teacher
that reads a near-copy of the label teaches targets that a student on x alone cannot follow (HA-PFD removes the
most predictive privileged features for that reason). So on a team's own data the privileged columns are a
choice, and so is the strength of the distillation. :func:`search` makes the choice without reading test:

* **subsets** of the privileged columns (:func:`subsets`): all; each column alone; and backward elimination from
  the most predictive column (all but the first, all but the first two, ...), the columns ordered by their
  correlation with the label on the selection lists (:func:`column_strength`, below). A subset is an input mask of one
  shape (the other columns set to 0), so every teacher is one compiled program.
* **how hard**: alpha (Eq. 1's weight of the data term) and the teacher's temperature (sigmoid(t / T) for the
  pointwise and pairwise teachers, softmax(t / T) for the listwise one), the grid of every subset's students
  trained side by side in one program (:func:`pfd_jax.training.train`'s ``variants``).
* **no distillation**, the reference: a distilling candidate is chosen only when it is shown better.

A team's run searches cheaply (experiments.paper.table2 --search's defaults; :func:`search`'s arguments): the
candidates are screened with two seeds and stop early, and in two stages (every subset at the plain PFD setting,
then alpha x temperature for the first subsets the rule finds better than no distillation); the chosen candidate
is then trained as a PFD row is, every seed and every epoch, and that model is the row "PFD, searched".

**Nested** (:func:`pfd_jax.methods.parts.nested`): half the validation lists, set aside first, choose every
screened model's epoch and early stop and order the columns; no candidate is scored on them, and no list that
scores a candidate chose anything about it.

**The evidence**. A validation split of tens of lists cannot tell a 5% gain from noise, so every candidate is also
scored out of fold on the training lists (:func:`pfd_jax.methods.parts.cross_fit`: K folds, each candidate and no
distillation trained on the other folds' lists and scored on the held-out ones), and the choice reads those lists
with the validation ones, seeds and lists crossed (:func:`pfd_jax.ops.stats.crossed`: a seed's luck counts as noise,
not only a list's).

**The rule** is the fallback procedure (:func:`pfd_jax.ops.choice.fallback`) over a declared order
(:func:`sequence`): plain PFD (every column at the plain setting) against no distillation first, at half the level
(2.5% one-sided); then each other subset at the plain setting, sharing the other half; each subset's softening and
alpha right after it, at the level it passed with. A level is carried forward whenever a candidate is found better
than no distillation, so a candidate reached through a chain of gains is tested at the sum. Of those found better the
one with the largest estimated gain is chosen, none found: no distillation. A candidate without a gain is chosen with
probability at most the level (5%), whatever the others' gains; the first comparison keeps half of it, not a
Bonferroni share, and a column that helps alone while every column together does not (the paper's HA-PFD case) is
still within reach. The search report states, by simulation at the user's own sizes, the probability of finding a
true gain of 3% and 5% in plain PFD by its first comparison and the smallest gain the data could have shown
(:func:`pfd_jax.ops.choice.operating`), and the probability that the whole rule as run chooses distillation when one
subset's plain setting has that gain (:func:`pfd_jax.methods.rule.whole`). The order is declared before a score is
read (the columns' order comes from the selection lists), and the second stage screens a subset's settings only once
its plain setting has passed (the first ``refine`` such subsets in the declared order): a setting never screened
counts as not found better, so the rule as run rejects no more than the fallback procedure over every subset's every
setting, and keeps its level (:func:`pfd_jax.ops.choice.fallback`). The test split is never read here.
"""
from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, NamedTuple, Optional, Sequence, Tuple

import jax
import numpy as np

from pfd_jax.data.preprocess import positive_groups
from pfd_jax.methods.parts import (ALPHAS, SCORE, SELECT, SELECT_SHARE, TEMPERATURES, Candidate,  # noqa: F401
                                   column_strength, masked, nested, sequence, settings, subsets)
from pfd_jax.methods.rule import GAINS, second_stage, whole  # noqa: F401
from pfd_jax.ops import choice, stats, theory
from pfd_jax.training.evaluation import per_list_ndcg, predict
from pfd_jax.training.loop import Hooks, train

if TYPE_CHECKING:
  from pfd_jax.methods.distill import Context, Done, Trained
  from pfd_jax.methods.rows import Row
  from pfd_jax.data.datasets import Dataset
  from pfd_jax.training.config import TrainConfig

FOLDS = 3  # table2's cross-fitting folds for the search (SearchOptions)


def predicted(ds: Dataset, subset_list) -> Dict[Tuple[int, ...], theory.Predicted]:
  """{subset: :class:`pfd_jax.ops.theory.Predicted`}: Theorem 2's gain of each subset's PFD over no distillation at
  plug-in estimates from the training split (:func:`pfd_jax.ops.theory.predicted_gain`; labelled: the documents of
  the groups with a positive, which the teacher trains on; a subset the data cannot support: omitted)."""
  g = ds["train"]
  labelled = np.repeat(positive_groups(g), g.sizes)
  out = {}
  for cols in subset_list:
    try:
      out[cols] = theory.predicted_gain(g.x, g.z, g.y, labelled, cols)
    except ValueError:  # fewer labelled documents than parameters
      pass
  return out


@dataclasses.dataclass
class Search:
  """What :func:`search` found. lists: every candidate's validation NDCG per list (the screening seeds' mean);
  scores: every candidate's per-list NDCG [S, Q_p] on every part (the validation split, then each cross-fitting
  fold's held-out training lists); estimates: each candidate's gain over no distillation on all of them
  (:func:`pfd_jax.ops.stats.crossed`, seeds x lists); choice: the fallback procedure's dict
  (:func:`pfd_jax.ops.choice.fallback`, with the order tested, the best pooled mean and every pooled mean);
  operating: the first comparison's simulated operating characteristics at these sizes
  (:func:`pfd_jax.ops.choice.operating`); whole: the whole rule's (:func:`pfd_jax.methods.rule.whole`); the columns'
  strengths (on the selection lists), each subset teacher's validation NDCG, the chosen candidate's trained models
  with every seed and the validation part's screened no distillation (TrainResult), the validation lists they were
  compared on, the screening's seeds and patience, the cross-fitting folds, the search's wall time, the
  selection lists' count (0: a search from before they were set aside) and every part's screened models (models:
  {candidate: [one per part]}, what a measurement of the claimed gains on fresh lists scores)."""
  lists: Dict[Candidate, np.ndarray]
  choice: Dict[str, Any]
  strength: np.ndarray
  teachers: Dict[Tuple[int, ...], np.ndarray]
  chosen: object
  baseline: object
  valid: np.ndarray
  seconds: float = 0.0
  seeds: int = 0
  patience: int = 0
  scores: Dict[Candidate, list] = dataclasses.field(default_factory=dict)
  estimates: Dict[Candidate, stats.Estimate] = dataclasses.field(default_factory=dict)
  operating: Optional[Dict[str, Any]] = None
  whole: Optional[Dict[str, Any]] = None
  folds: int = 0
  predicted: Dict[Tuple[int, ...], theory.Predicted] = dataclasses.field(default_factory=dict)
  selection: int = 0
  models: Dict[Candidate, list] = dataclasses.field(default_factory=dict)

  @property
  def candidate(self) -> Candidate:
    return self.choice["chosen"]


def search(keys, cfg: TrainConfig, ds: Dataset, to_device: Callable[[Dataset], object], *,
           alphas: Sequence[float] = ALPHAS, temperatures: Sequence[float] = TEMPERATURES,
           top: Optional[int] = None, subset_list: Optional[Sequence[Tuple[int, ...]]] = None,
           hooks: Optional[Callable] = None, level: float = 0.05, baseline=None, seeds: Optional[int] = None,
           patience: int = 0, refine: Optional[int] = None, plain_pfd=None, folds: int = 0,
           split_seed: int = 0, share: float = SELECT_SHARE) -> Search:
  """Searches the PFD configurations of the module docstring on `ds`'s validation split (and, with `folds`, on
  cross-fitted training lists) and returns the :class:`Search`. to_device(dataset) returns its
  :class:`pfd_jax.training.device.DeviceData` (with 'vali' and 'test' evaluation sets, from those splits);
  cfg.select_on should be 'vali' (nothing about test may select anything). hooks(name) gives each model's
  :class:`pfd_jax.training.Hooks`; top: the most predictive columns searched one by one (:func:`subsets`);
  subset_list: the subsets themselves instead; baseline: the no-distillation row with these keys and cfg when the
  caller has trained it already (kept when the search chooses no distillation; not trained again); plain_pfd:
  likewise the PFD student of every privileged column at cfg.alpha and T = 1 (the PFD row).

  share: the validation lists set aside as selection lists (:func:`pfd_jax.methods.parts.nested`, dealt by
  `split_seed`): every screened model's epoch is chosen on them, and the columns are ordered on them; the other
  validation lists score the validation part.
  folds: cross-fitting over the training lists (:func:`pfd_jax.methods.parts.cross_fit`): every candidate and no
  distillation are also trained on each fold's complement and scored on its held-out lists, each fold's models with
  keys of their own (fold_in of the screening keys), so that the choice reads the training lists besides the
  validation ones. The parts' gains are pooled weighted by their lists.

  What makes it cheap (each off by default: the full grid, every seed, every epoch):

  * seeds: the candidates and no distillation are screened with the first `seeds` keys only (teachers too), and
    the chosen one is then trained again with every key, teacher and student, as its row is.
  * patience: the screened models stop early on the selection lists (:func:`pfd_jax.training.train`).
  * refine: two stages instead of the whole grid. First every subset's student at the plain PFD setting
    (cfg.alpha, T = 1); then the alpha x temperature grid of a subset once the rule has found its plain setting
    better than no distillation, for the first `refine` such subsets in the declared order. None: the whole grid
    for every subset.

  The choice: :func:`pfd_jax.ops.choice.fallback` over :func:`sequence`'s order of every subset's every setting
  (one never screened counts as not found better) at `level`, each candidate's gain over no distillation estimated
  on every part (seeds x lists crossed); with one screening seed the lists alone are the units (the seed term left
  out).
  """
  if cfg.select_on != "vali":
    raise ValueError(f"the PFD search selects on validation: select_on='vali', got {cfg.select_on!r}")
  t0 = time.time()
  sc = Screening(keys, cfg, ds, to_device, hooks=hooks or (lambda name: Hooks()), seeds=seeds, patience=patience,
                 folds=folds, split_seed=split_seed, share=share)
  strength = column_strength(sc.select)
  subset_list = subset_list or subsets([int(c) for c in np.argsort(-strength, kind="stable")], top)
  subset_list = [tuple(int(i) for i in cols) for cols in subset_list]
  plain = dict(alpha=cfg.alpha, temperature=1.0)
  full = settings(cfg.alpha, alphas, temperatures)
  for cols in subset_list:
    sc.screen(cols, full if refine is None else [plain])
  order, weights = sequence([Candidate(cols, v["alpha"], v["temperature"]) for cols in subset_list for v in full],
                            subset_list, plain, cfg.alpha)
  rest = [v for v in full if v != plain]
  first = [c for c in order if c in sc.scores]  # the first stage's, before the rule screens any grid
  rule = second_stage(sc, order, weights, level, rest, refine)
  estimates = {c: sc.estimate(c) for c in order if c in sc.scores}
  means = {c: sc.pooled(c) for c in sc.scores}
  rule.update(chosen=rule["chosen"] or Candidate(), order=order, means=means, best=max(means, key=means.get))
  c, n = rule["chosen"], sc.n
  if not c.columns:
    chosen = baseline if baseline is not None else sc.baseline_row()
  elif plain_pfd is not None and c == Candidate(tuple(range(len(strength))), cfg.alpha, 1.0):
    chosen = plain_pfd
  else:  # the chosen PFD as its row: every seed, every epoch, the whole training split
    chosen = sc.pfd(c.columns, [dict(alpha=c.alpha, temperature=c.temperature)], 0, row=True)[0][0]
  oc = (choice.operating(sc.gain(order[0]), sc.pooled(Candidate()), level * weights[0], GAINS)
        if order and n > 1 else None)
  rule_as_run = (whole({c: sc.gain(c) for c in sc.scores if c.columns}, sc.weights, sc.pooled(Candidate()),
                       order=order, level_weights=weights, level=level, rest=rest, refine=refine, first=first)
                 if order and n > 1 else None)
  return Search(lists={c: v[0].mean(0) for c, v in sc.scores.items()}, choice=rule, strength=strength,
                teachers=sc.teachers, chosen=chosen, baseline=sc.models[Candidate()][0], valid=sc.valid[0],
                seconds=time.time() - t0, seeds=n, patience=patience, scores=sc.scores, estimates=estimates,
                operating=oc, whole=rule_as_run, folds=folds, predicted=predicted(ds, subset_list),
                selection=sc.select.num_queries, models=sc.models)


class Screening:
  """The candidates screened on every part (:func:`pfd_jax.methods.parts.nested`: the validation part, then each
  cross-fitting fold), each model's epoch chosen on the selection lists: every candidate's per-list NDCG [S, Q_p] on
  each part's scoring lists (scores) and its models (one per part), the validation part's teachers' NDCG and every
  part's teacher targets (trained once per subset). Screened on the first `seeds` keys with early stopping
  (`patience`); no distillation too, on every part (its scores are the reference of every gain)."""

  def __init__(self, keys, cfg, ds, to_device, *, hooks, seeds, patience, folds, split_seed,
               share: float = SELECT_SHARE):
    self.keys, self.cfg, self.ds, self.to_device, self.hooks, self.patience = keys, cfg, ds, to_device, hooks, patience
    self.n = n = min(seeds or keys.shape[0], keys.shape[0])
    fold_keys = lambda i: jax.vmap(lambda k: jax.random.fold_in(k, i))(keys[:n])
    self.select, parts = nested(ds, folds, share, split_seed)
    self.parts = [(keys[:n] if i == 0 else fold_keys(i), d, f"_cf{i}" if i else "_screened")
                  for i, d in enumerate(parts)]
    self.scores, self.teachers, self.targets, self.valid, self.models = {Candidate(): []}, {}, {}, [], {}
    # as pfd_jax.methods.distill trains them: data-only models on the positive groups, students on every group
    for p, (ks, d, tag) in enumerate(self.parts):
      dev = to_device(d)
      base = train(ks, cfg, dev.train_pos, "x", {SELECT: dev.eval_sets[SELECT]}, hooks=hooks(f"no_distill{tag}"),
                   patience=patience)
      lists, ok = per_list_ndcg(cfg, base.params, dev.eval_sets[SCORE], "x")
      self.valid.append(ok)
      self.scores[Candidate()].append(lists[:, ok])
      self.models.setdefault(Candidate(), []).append(base)
    self.weights = choice.by_lists(self.scores[Candidate()])

  def pfd(self, cols, grid, p, row=False):
    """The students of `grid` of subset `cols` on part p with its teacher's targets (trained here on first use):
    screened (the part's keys, early stopping, the epoch chosen on the selection lists; the validation teacher's
    scores kept), or as the row (every key, every epoch, the whole training split, the run's own validation
    selection). Returns (the students, the masked device data)."""
    cfg = self.cfg
    ks, d, tag = (self.keys, self.ds, "_chosen") if row else self.parts[p]
    dev, name = self.to_device(masked(d, cols)), "_".join(map(str, cols))  # a metric writer's legal name
    evals, fit = (dev.eval_sets, {}) if row else ({SELECT: dev.eval_sets[SELECT]}, dict(patience=self.patience))
    if row or (p, cols) not in self.targets:
      teacher = train(ks, cfg, dev.train_pos, "xz", evals, hooks=self.hooks(f"teacher_z{name}{tag}"), **fit)
      got = predict(cfg, teacher.params, dev.train_all, "xz")
      if not row:
        self.targets[p, cols] = got
        if p == 0:
          lists = per_list_ndcg(cfg, teacher.params, dev.eval_sets[SCORE], "xz")[0]
          self.teachers[cols] = lists.mean(0)[self.valid[0]]
    else:
      got = self.targets[p, cols]
    students = train(ks, cfg, dev.train_all, "x", evals, teacher=got,
                     hooks=self.hooks(f"students_z{name}{tag}"), variants=grid, **fit)
    return students, dev

  def screen(self, cols, grid):
    """`grid`'s students of subset `cols` on every part, their per-list scores kept."""
    for p in range(len(self.parts)):
      students, dev = self.pfd(cols, grid, p)
      for v, student in zip(grid, students):
        c = Candidate(cols, v["alpha"], v["temperature"])
        lists = per_list_ndcg(self.cfg, student.params, dev.eval_sets[SCORE], "x")[0]
        self.scores.setdefault(c, []).append(lists[:, self.valid[p]])
        self.models.setdefault(c, []).append(student)

  def baseline_row(self, hooks_name: str = "no_distill"):
    """No distillation as its row is trained: every key, every epoch, the whole training split, the run's own
    validation selection."""
    dev = self.to_device(self.ds)
    return train(self.keys, self.cfg, dev.train_pos, "x", dev.eval_sets, hooks=self.hooks(hooks_name))

  def pooled(self, c) -> float:
    """Candidate c's mean NDCG over every part's lists (the parts weighted by their lists)."""
    return float(sum(w * v.mean() for w, v in zip(self.weights, self.scores[c])))

  def gain(self, c) -> list:
    """c's paired per-list differences from no distillation [S, Q_p], one per part."""
    return [a - b for a, b in zip(self.scores[c], self.scores[Candidate()])]

  def estimate(self, c) -> stats.Estimate:
    """c's gain over no distillation on every part: seeds x lists crossed; with one seed the lists are the units."""
    ref = self.pooled(Candidate())
    if self.n > 1:
      return stats.crossed(self.gain(c), ref, self.weights)
    return stats.runs_estimate(np.concatenate([d.ravel() for d in self.gain(c)]), ref, "lists")


class SearchOptions(NamedTuple):
  """The PFD search's settings (:func:`pfd_jax.methods.search.search`)."""
  top: int = 4
  seeds: Optional[int] = 2
  patience: int = 10
  refine: Optional[int] = 1
  folds: int = FOLDS

  def candidates(self, privileged: int, alpha: float) -> int:
    """How many candidates the search scores at most with `privileged` columns at the run's `alpha`: no
    distillation, every subset at the plain PFD setting and, for the first `refine` subsets the rule finds better
    there, the rest of the alpha x temperature grid (refine None: the whole grid for every subset), as
    :func:`search` screens them."""
    n = len(subsets(range(privileged), self.top))
    grid = len(settings(alpha))
    return 1 + (n * grid if self.refine is None else n + min(self.refine, n) * (grid - 1))

  @property
  def programs(self) -> int:
    """The progress count of a search: on each part (validation, each cross-fitted fold) at most 1 + 2 k subsets
    (k = top), a teacher and a student program each, and the refined subsets' grids; each fold's no-distillation;
    the chosen candidate's teacher and student."""
    subsets, parts = 1 + 2 * self.top, 1 + self.folds
    return parts * (2 * subsets + (self.refine or 0)) + self.folds + 2


def train_row(ctx: Context, row: Row, done: Done, baseline: str = "no_distill", plain: str = "pfd") -> Trained:
  """A row's training (:mod:`pfd_jax.methods.distill`'s ``train(ctx, row, done) -> Trained``): PFD searched on
  validation (:func:`search`, its own teachers; kept by ctx.found), the chosen one with every seed. baseline / plain:
  the rows of this run the search reuses (no-distillation, and the plain PFD student kept when the search chooses
  its setting)."""
  o = ctx.search or SearchOptions()
  found = ctx.found(row.viewing(ctx.view(row)), ctx.cfg, lambda: search(
      ctx.keys, ctx.cfg, ctx.ds, ctx.device_data, hooks=ctx.hooks, top=o.top, baseline=done[baseline].result,
      plain_pfd=done[plain].result if plain in done else None, seeds=o.seeds, patience=o.patience, refine=o.refine,
      folds=o.folds))
  config = dataclasses.replace(ctx.cfg, alpha=found.candidate.alpha, temperature=found.candidate.temperature)
  return ctx.trained(found.chosen, "x", config, found)
