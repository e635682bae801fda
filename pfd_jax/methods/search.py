"""PFD searched on validation: which privileged columns the teacher reads, and how hard its student follows it.

The paper's Figure 5 finds PFD's gain non-monotone in how predictive the privileged features are, and a teacher
that reads a near-copy of the label teaches targets that a student on x alone cannot follow (HA-PFD removes the
most predictive privileged features for that reason). So on a team's own data the privileged columns are a
choice, and so is the strength of the distillation. :func:`search` makes the choice without reading test:

* **subsets** of the privileged columns (:func:`subsets`): all; each column alone; and backward elimination from
  the most predictive column (all but the first, all but the first two, ...), the columns ordered by their
  correlation with the label on the training split (:func:`column_strength`). A subset is an input mask of one
  shape (the other columns set to 0), so every teacher is one compiled program.
* **how hard**: alpha (Eq. 1's weight of the data term) and the teacher's temperature (sigmoid(t / T) for the
  pointwise and pairwise teachers, softmax(t / T) for the listwise one), the grid of every subset's students
  trained side by side in one program (:func:`pfd_jax.training.train`'s ``variants``).
* **no distillation**, the reference: a distilling candidate is chosen only when it is shown better.

A team's run searches cheaply (experiments.table2 --search's defaults; :func:`search`'s arguments): the
candidates are screened with two seeds and stop early on validation, and in two stages (every subset at the plain
PFD setting, then alpha x temperature for the best subset only); the chosen candidate is then trained as a PFD row
is, every seed and every epoch, and that model is the row "PFD, searched".

**The evidence**. A validation split of tens of lists cannot tell a 5% gain from noise, so every
candidate is also scored out of fold on the training lists (:func:`cross_fit`: K folds, each candidate and no
distillation trained on the other folds' lists and scored on the held-out ones), and the choice reads those lists
with the validation ones, seeds and lists crossed (:func:`pfd_jax.ops.stats.crossed`: a seed's luck counts as
noise, not only a list's).

**The rule** is the fallback procedure (:func:`pfd_jax.ops.choice.fallback`) over a declared order
(:func:`sequence`): plain PFD (every column at the plain setting) against no distillation first, at half the level
(2.5% one-sided); then each other subset at the plain setting, sharing the other half; each subset's softening and
alpha right after it, at the level it passed with. A level is carried forward whenever a candidate is found better
than no distillation, so a candidate reached through a chain of gains is tested at the sum. Of those found better the
one with the largest estimated gain is chosen, none found: no distillation. A candidate without a gain is chosen with
probability at most the level (5%), whatever the others' gains; the first comparison keeps half of it, not a
Bonferroni share, and a column that helps alone while every column together does not (the paper's HA-PFD case) is
still within reach. The search report states, by simulation at the user's own sizes
(:func:`pfd_jax.ops.choice.operating`), the probability of finding a true gain of 3% and 5% in plain PFD and the
smallest gain the data could have shown. The second stage's subsets are picked on the same scores; their settings
are tested only through their subset's pass. The test split is never read here.
"""
from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, NamedTuple, Optional, Sequence, Tuple

import jax
import numpy as np

from pfd_jax.data.preprocess import positive_groups
from pfd_jax.ops import choice, stats, theory
from pfd_jax.training.evaluation import per_list_ndcg, predict
from pfd_jax.training.loop import Hooks, train

if TYPE_CHECKING:
  from pfd_jax.methods.distill import Context, Done, Trained
  from pfd_jax.methods.rows import Row
  from pfd_jax.data.datasets import Dataset
  from pfd_jax.training.config import TrainConfig

ALPHAS = (0.2, 0.5, 0.8)
TEMPERATURES = (1.0, 3.0)
FOLDS = 3  # table2's cross-fitting folds for the search (SearchOptions)
GAINS = (0.03, 0.05)  # the relative gains whose power the search report states


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


@dataclasses.dataclass
class Search:
  """What :func:`search` found. lists: every candidate's validation NDCG per list (the screening seeds' mean);
  scores: every candidate's per-list NDCG [S, Q_p] on every part (the validation split, then each cross-fitting
  fold's held-out training lists); estimates: each candidate's gain over no distillation on all of them
  (:func:`pfd_jax.ops.stats.crossed`, seeds x lists); choice: the fallback procedure's dict
  (:func:`pfd_jax.ops.choice.fallback`, with the order tested, the best pooled mean and every pooled mean);
  operating: the rule's simulated operating characteristics at these sizes (:func:`operating`); the columns'
  strengths, each subset teacher's validation NDCG, the chosen candidate's and no-distillation's trained models with
  every seed (TrainResult), the validation lists they were compared on, the screening's seeds and patience, the
  cross-fitting folds and the search's wall time."""
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
  folds: int = 0
  predicted: Dict[Tuple[int, ...], theory.Predicted] = dataclasses.field(default_factory=dict)

  @property
  def candidate(self) -> Candidate:
    return self.choice["chosen"]


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


def search(keys, cfg: TrainConfig, ds: Dataset, to_device: Callable[[Dataset], object], *,
           alphas: Sequence[float] = ALPHAS, temperatures: Sequence[float] = TEMPERATURES,
           top: Optional[int] = None, subset_list: Optional[Sequence[Tuple[int, ...]]] = None,
           hooks: Optional[Callable] = None, level: float = 0.05, baseline=None, seeds: Optional[int] = None,
           patience: int = 0, refine: Optional[int] = None, plain_pfd=None, folds: int = 0,
           split_seed: int = 0) -> Search:
  """Searches the PFD configurations of the module docstring on `ds`'s validation split (and, with `folds`, on
  cross-fitted training lists) and returns the :class:`Search`. to_device(dataset) returns its
  :class:`pfd_jax.training.device.DeviceData` (with a 'vali' evaluation set); cfg.select_on should be 'vali'
  (nothing about test may select anything). hooks(name) gives each model's :class:`pfd_jax.training.Hooks`; top:
  the most predictive columns searched one by one (:func:`subsets`); subset_list: the subsets themselves instead;
  baseline: the no-distillation run with these keys and cfg when the caller has trained it already (not trained
  again); plain_pfd: likewise the PFD student of every privileged column at cfg.alpha and T = 1 (the PFD row),
  kept when the search chooses that configuration.

  folds: cross-fitting (:func:`cross_fit`, lists dealt by `split_seed`): every candidate and no distillation are
  also trained on each fold's complement and scored on its held-out training lists, each fold's models with keys of
  their own (fold_in of the screening keys), so that the choice reads every training list besides the validation
  ones. The parts' gains are pooled weighted by their lists.

  What makes it cheap (each off by default: the full grid, every seed, every epoch):

  * seeds: the candidates are screened with the first `seeds` keys only (their teachers too), and the chosen one
    is then trained again with every key, teacher and student, as a PFD row is; no-distillation's validation
    lists are its first `seeds` models' (a seed's model does not depend on the seeds beside it, up to float
    rounding).
  * patience: the screened teachers and students stop early on validation (:func:`pfd_jax.training.train`); the
    validation part's baseline keeps its every epoch, so a screened candidate is compared there at a slight
    disadvantage, the side that keeps no distillation when in doubt (a cross-fitting fold's baseline is screened
    as its candidates are).
  * refine: two stages instead of the whole grid. First every subset's student at the plain PFD setting
    (cfg.alpha, T = 1); then the alpha x temperature grid for the `refine` subsets best on every part pooled.
    None: the whole grid for every subset.

  The choice: :func:`pfd_jax.ops.choice.fallback` over :func:`sequence`'s order and weights at `level`, each candidate's
  gain over no distillation estimated on every part (seeds x lists crossed); with one screening seed the lists
  alone are the units (the seed term left out).
  """
  if cfg.select_on != "vali":
    raise ValueError(f"the PFD search selects on validation: select_on='vali', got {cfg.select_on!r}")
  t0 = time.time()
  strength = column_strength(ds)
  subset_list = subset_list or subsets([int(c) for c in np.argsort(-strength, kind="stable")], top)
  subset_list = [tuple(int(i) for i in cols) for cols in subset_list]
  sc = _Screening(keys, cfg, ds, to_device, hooks=hooks or (lambda name: Hooks()), seeds=seeds, patience=patience,
                  folds=folds, split_seed=split_seed, baseline=baseline)
  plain = dict(alpha=cfg.alpha, temperature=1.0)
  full = settings(cfg.alpha, alphas, temperatures)
  for cols in subset_list:
    sc.screen(cols, full if refine is None else [plain])
  if refine is not None:  # the second stage: the grid for the subsets best on every part pooled, their targets kept
    stage1 = {c.columns: sc.pooled(c) for c in sc.scores if c.columns}
    rest = [v for v in full if v != plain]
    for cols in sorted(stage1, key=stage1.get, reverse=True)[:refine] if rest else ():
      sc.screen(cols, rest)
  order, weights = sequence(sc.scores, subset_list, plain, cfg.alpha)
  estimates = {c: sc.estimate(c) for c in order}
  rule = choice.fallback([(c, estimates[c]) for c in order], weights, level)
  means = {c: sc.pooled(c) for c in sc.scores}
  rule.update(chosen=rule["chosen"] or Candidate(), order=order, means=means, best=max(means, key=means.get))
  c, n = rule["chosen"], sc.n
  if plain_pfd is not None and c == Candidate(tuple(range(len(strength))), cfg.alpha, 1.0):
    chosen = plain_pfd
  elif c.columns and (n < keys.shape[0] or patience):  # the chosen PFD as its row: every seed, every epoch
    chosen = sc.pfd(c.columns, [dict(alpha=c.alpha, temperature=c.temperature)], 0, row=True)[0][0]
  else:
    chosen = sc.models[c]
  oc = (choice.operating(sc.gain(order[0]), sc.pooled(Candidate()), level * weights[0], GAINS)
        if order and n > 1 else None)
  return Search(lists={c: v[0].mean(0) for c, v in sc.scores.items()}, choice=rule, strength=strength,
                teachers=sc.teachers, chosen=chosen, baseline=sc.baseline, valid=sc.valid[0],
                seconds=time.time() - t0, seeds=n, patience=patience, scores=sc.scores, estimates=estimates,
                operating=oc, folds=folds, predicted=predicted(ds, subset_list))


class _Screening:
  """The candidates screened on every part (the validation split, then each cross-fitting fold's held-out training
  lists): the parts' keys and data, every candidate's per-list NDCG [S, Q_p] on each (scores), the validation part's
  models, its teachers' validation NDCG and every part's teacher targets (trained once per subset)."""

  def __init__(self, keys, cfg, ds, to_device, *, hooks, seeds, patience, folds, split_seed, baseline):
    self.keys, self.cfg, self.ds, self.to_device, self.hooks, self.patience = keys, cfg, ds, to_device, hooks, patience
    self.n = n = min(seeds or keys.shape[0], keys.shape[0])
    fold_keys = lambda i: jax.vmap(lambda k: jax.random.fold_in(k, i))(keys[:n])
    self.parts = [(keys[:n], ds, "")] + [(fold_keys(i + 1), d, f"_cf{i + 1}")
                                         for i, d in enumerate(cross_fit(ds, folds, split_seed) if folds else ())]
    self.scores, self.teachers, self.targets, self.valid = {Candidate(): []}, {}, {}, []
    # as pfd_jax.methods.distill trains them: data-only models on the positive groups, students on every group
    for p, (ks, d, tag) in enumerate(self.parts):
      dev = to_device(d)
      if p == 0:
        base = self.baseline = baseline if baseline is not None else train(keys, cfg, dev.train_pos, "x",
                                                                           dev.eval_sets, hooks=hooks("no_distill"))
      else:
        base = train(ks, cfg, dev.train_pos, "x", dev.eval_sets, hooks=hooks(f"no_distill{tag}"), patience=patience)
      lists, ok = per_list_ndcg(cfg, base.params, dev.eval_sets["vali"], "x")
      self.valid.append(ok)
      self.scores[Candidate()].append(lists[:n][:, ok])
    self.models = {Candidate(): self.baseline}
    self.weights = choice.by_lists(self.scores[Candidate()])

  def pfd(self, cols, grid, p, row=False):
    """The students of `grid` of subset `cols` on part p with its teacher's targets (trained here on first use):
    screened (the part's keys, early stopping; the validation teacher's lists kept), or as the row (every key, every
    epoch, the whole training split). Returns (the students, the masked device data)."""
    cfg = self.cfg
    ks, d, tag = (self.keys, self.ds, "_chosen") if row else self.parts[p]
    dev, name = self.to_device(masked(d, cols)), "_".join(map(str, cols))  # a metric writer's legal name
    fit = {} if row else dict(patience=self.patience)
    if row or (p, cols) not in self.targets:
      teacher = train(ks, cfg, dev.train_pos, "xz", dev.eval_sets, hooks=self.hooks(f"teacher_z{name}{tag}"), **fit)
      got = predict(cfg, teacher.params, dev.train_all, "xz")
      if not row:
        self.targets[p, cols] = got
        if p == 0:
          lists = per_list_ndcg(cfg, teacher.params, dev.eval_sets["vali"], "xz")[0]
          self.teachers[cols] = lists.mean(0)[self.valid[0]]
    else:
      got = self.targets[p, cols]
    students = train(ks, cfg, dev.train_all, "x", dev.eval_sets, teacher=got,
                     hooks=self.hooks(f"students_z{name}{tag}"), variants=grid, **fit)
    return students, dev

  def screen(self, cols, grid):
    """`grid`'s students of subset `cols` on every part, their per-list scores kept."""
    for p in range(len(self.parts)):
      students, dev = self.pfd(cols, grid, p)
      for v, student in zip(grid, students):
        c = Candidate(cols, v["alpha"], v["temperature"])
        lists = per_list_ndcg(self.cfg, student.params, dev.eval_sets["vali"], "x")[0]
        self.scores.setdefault(c, []).append(lists[:, self.valid[p]])
        if p == 0:
          self.models[c] = student

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
    """How many candidates the search scores with `privileged` columns at the run's `alpha`: no distillation, every
    subset at the plain PFD setting and, for its `refine` best subsets, the rest of the alpha x temperature grid
    (refine None: the whole grid for every subset), as :func:`search` screens them."""
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
