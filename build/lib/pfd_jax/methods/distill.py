"""The methods of the paper's Table 2 (sections 3.1-3.2): no-distillation, self-distillation, GenD, PFD.

* **no-distillation**: a student on regular features ``x``, data loss only, trained on the positive
  query groups (groups with at least one y = 1; appendix A.5 treats the others as unlabeled).
* **teachers** are trained the same way on the positive groups with their own inputs: ``x``
  (self-distillation), ``z`` (GenD) or ``concat(x, z)`` (PFD). The teacher is its run's best checkpoint.
* **students** see ``x`` only and train on *all* groups with Eq. 1: alpha * data loss on the positive
  groups + (1 - alpha) * loss against the teacher's probabilities sigmoid(g) on every group.
* **placebo** (a control, not in the paper): PFD's teacher and student on a copy of the data whose privileged
  rows are permuted across documents (:func:`pfd_jax.data.with_placebo_privileged`): the teacher has PFD's
  inputs, capacity and training, the student PFD's distillation, and only the link between z and the label is
  gone. PFD student vs placebo student, paired, measures what the privileged information adds beyond
  distillation as regularisation.
* **the debiasing rows** (:func:`train_served`, :func:`train_ips`, :mod:`pfd_jax.methods.debias`): the display
  position as a feature served at the top position, the two-tower model, IPS, PFD with the position as the
  privileged feature (and its student taught by the teacher's predictions with every item at the top position),
  and LambdaMART with LightGBM's position-bias model.
* **the GBDT rows** (:func:`pfd_jax.methods.gbdt.train_lightgbm`, :func:`train_mlp_from_lightgbm`,
  :func:`pfd_jax.methods.gbdt.train_lightgbm_student`): LightGBM LambdaMART, and distillation across model
  families: an MLP student of an out-of-fold LambdaMART teacher, and GBDT students of the MLP PFD teacher.

Every row's model input, teacher, settings and training function are its entry of the row registry
(:mod:`pfd_jax.methods.rows`). A row's function is called as ``train(ctx, row, done)``: ctx, the :class:`Context`
of one (loss, fold) of a run (its data on the device, keys, settings, and how a result is kept: ``ctx.fit``); row,
its :class:`~pfd_jax.methods.rows.Row`; done, the rows trained before it ({name: :class:`Trained`}: its teacher is
there). It returns the row's :class:`Trained`; a new kind of training is a new function, never a branch.

Seeds: every run of a table uses the same ``S`` training keys, so seed s of the baseline, of each teacher
and of each student share their key (common random numbers), and teacher seed s teaches student s.
Because the self-distillation teacher is trained exactly like the baseline with the same key, it *is*
the baseline run, which is therefore reused rather than trained twice.
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable, Dict, NamedTuple, Optional, Sequence

import jax.numpy as jnp
import numpy as np

from pfd_jax.data.padding import bucketize
from pfd_jax.methods import debias, gbdt
from pfd_jax.methods import rows as rows_lib
from pfd_jax.training.device import DeviceData
from pfd_jax.training.evaluation import predict
from pfd_jax.training.loop import Hooks, TrainResult, train

if TYPE_CHECKING:
  from pfd_jax.methods.rows import Row
  from pfd_jax.training.config import TrainConfig

# The --methods choices of the built-in rows (the row registry, :mod:`pfd_jax.methods.rows`, has every row: its
# view, its teacher, its overrides; rows registered later are choices too, rows.methods()).
METHODS = rows_lib.methods(one_process=False)  # no_distill, self_distill, gend, pfd, placebo
LIGHTGBM_METHODS = tuple(m for m in rows_lib.methods() if m not in METHODS)  # lambdamart, pfd_from_lambdamart, ...


class Trained(NamedTuple):
  """A trained row: its result (a TrainResult, or a LightGBM row's gbdt.Result), the view it is scored with (a
  position-aware row: every item at the top position) and its training configuration; found: what its training
  found besides its models (the PFD search's :class:`pfd_jax.methods.search.Search`)."""
  result: Any
  view: str
  config: Any
  found: Any = None


Done = Dict[str, Trained]  # the rows trained before a row, by name (its teacher is there)


class Position(NamedTuple):
  """What the debiasing rows read: the position's privileged column, the training split's display positions
  1..L [N], the IPS propensity tables ({name: table}), the IPS rows' configuration, the column's value at position 1
  (after the recipe's transforms) and the propensities' lower clip."""
  column: int
  positions: np.ndarray
  propensities: Dict[str, np.ndarray]
  ips_config: Any
  top: float
  clip: float


@dataclasses.dataclass
class Context:
  """One (loss, fold) of a run, as its rows' training functions read it.

  keys: the S training keys (seed s of every row shares its key); cfg: the loss's TrainConfig; dd: the fold's
  DeviceData; ds: its Dataset; fit(row, config, train) -> result: how a row's result is kept (a driver loads the rows
  an interrupted run saved; default: train); hooks(name) -> Hooks; placebo() -> the placebo rows' DeviceData;
  device_data(Dataset) -> DeviceData: a variant of ds on the device as dd was; lightgbm: LightGBM's settings;
  seed: LightGBM's base seed; cache: kept across the losses of one fold (what no loss changes: the LambdaMART rows,
  out-of-fold teacher scores); position: the debiasing rows' :class:`Position`; search: the search's settings;
  found(row, config, make) -> what a row's training found besides its models (the PFD search's Search), kept as
  the driver keeps it (a driver loads the one an interrupted run saved; default: make())."""
  keys: Any
  cfg: Any
  dd: Any
  ds: Any = None
  fit: Callable = lambda row, config, train_fn: train_fn()
  hooks: Callable = lambda name: Hooks()
  placebo: Optional[Callable] = None
  device_data: Optional[Callable] = None
  lightgbm: Optional[gbdt.GBDTConfig] = None
  seed: int = 0
  cache: Dict[str, Any] = dataclasses.field(default_factory=dict)
  position: Optional[Position] = None
  search: Any = None  # pfd_jax.methods.search.SearchOptions
  found: Callable = lambda row, config, make: make()
  scratch: Dict[Any, Any] = dataclasses.field(default_factory=dict)  # kept for this call only

  def once(self, key, make: Callable, keep: bool = True):
    """make() computed once under `key`: for the fold, across its losses (keep), or for this context only (this
    loss and fold)."""
    store = self.cache if keep else self.scratch
    return store[key] if key in store else store.setdefault(key, make())

  def view(self, row: Row) -> str:
    """The row's model input, its ``{position}`` the run's position column."""
    view = row.recipe.view
    return view.format(position=self.position.column) if self.position is not None else view

  def data(self, row: Row):
    """The row's device data: the placebo copy for a placebo row."""
    return self.placebo() if row.recipe.placebo else self.dd

  def lightgbm_kw(self) -> Dict[str, Any]:
    """The keywords every LightGBM row passes to gbdt.train (seeds, splits, bucketing: rows pair list by list)."""
    return dict(num_seeds=int(np.shape(self.keys)[0]), seed=self.seed, eval_splits=tuple(self.dd.eval_sets),
                max_buckets=self.dd.max_buckets)

  def kept(self, row: Row, config, view: str, train_fn: Callable) -> Trained:
    """The row's Trained (scored on `view`), its result kept by :attr:`fit` (saved with the view it trains on)."""
    return Trained(self.fit(row.viewing(self.view(row)), config, train_fn), view, config)

  @staticmethod
  def trained(result, view: str, config, found=None) -> Trained:
    """A row's Trained, for a function that keeps its result its own way (the PFD search: its models in what it
    found, kept by :attr:`found`)."""
    return Trained(result, view, config, found)


# ------------------------------------------------------------------ the MLP rows' helpers

def train_on_data(keys, cfg: TrainConfig, dd: DeviceData, view: str, hooks: Hooks = Hooks()) -> TrainResult:
  """A data-loss-only run (the baseline or a teacher) on the positive groups (or all, per to_device)."""
  return train(keys, cfg, dd.train_pos, view, dd.eval_sets, hooks=hooks)


def teacher_targets(cfg: TrainConfig, teachers: Sequence[tuple], dd: DeviceData,
                    z_override=None) -> list:
  """Teacher logits on every training group, per bucket: [S, Q, L] (one teacher) or [S, K, Q, L].

  teachers: (TrainResult, view) or (TrainResult, view, TrainConfig) tuples; the config gives the teacher's
  model shape (default `cfg`: teacher and student alike). The student's teacher term turns logits into its
  targets (its teaching's targets, :mod:`pfd_jax.training.teaching`: the transform of the logits, or top-K
  ranks).
  """
  per_teacher = [predict(t[2] if len(t) > 2 else cfg, t[0].params, dd.train_all, t[1], z_override)
                 for t in teachers]
  if len(per_teacher) == 1:
    return per_teacher[0]
  return [jnp.stack(ts, axis=1) for ts in zip(*per_teacher)]


def train_student(keys, cfg: TrainConfig, dd: DeviceData, targets: list, hooks: Hooks = Hooks(),
                  variants: Optional[Sequence[Dict[str, Any]]] = None):
  """A student on x over all training groups with Eq. 1 against `targets` (see teacher_targets); with
  `variants` (e.g. ``[{"alpha": a} for a in alphas]``), one student per variant trained side by side in one
  program (a list of results; :func:`pfd_jax.training.train`)."""
  return train(keys, cfg, dd.train_all, "x", dd.eval_sets, teacher=targets, hooks=hooks,
               variants=variants)


def num_rows(methods: Sequence[str]) -> int:
  """How many models :func:`run_methods` trains for `methods` (the baseline, and the teachers they need)."""
  return len(rows_lib.plan(methods))


def run_methods(keys, cfg: TrainConfig, dd: DeviceData, methods: Sequence[str] = METHODS, *,
                hooks: Optional[Callable[[str], Hooks]] = None,
                fit: Optional[Callable] = None, placebo: Optional[Callable[[], DeviceData]] = None) -> Dict[str, Any]:
  """Runs the rows of `methods` (--methods choices of the row registry, :func:`pfd_jax.methods.rows.plan`: each with
  the teachers it needs; the baseline no_distill always) and returns {row name: TrainResult}, e.g. rows no_distill,
  self_distill, gend_teacher, gend, pfd_teacher, pfd, placebo_teacher, placebo: :func:`run_rows` on a
  :class:`Context` of `dd` alone (hooks(row name): that row's Hooks; fit(row, config, train): how a result is kept,
  default train; placebo(): the placebo rows' device data, called only when a placebo row trains).
  """
  ctx = Context(keys, cfg, dd, fit=fit or Context.fit, hooks=hooks or Context.hooks, placebo=placebo)
  return {name: t.result for name, t in run_rows(ctx, rows_lib.plan(methods)).items()}



# ------------------------------------------------------------------ the kinds of training (Recipe.train)

def train_mlp(ctx: Context, row: Row, done: Done, at_top: bool = False) -> Trained:
  """An MLP on the row's view, with its overrides: on data alone (no teacher), or on x as the student of its
  teacher row against the teacher's logits (Eq. 1). at_top: the teacher's logits with the position column at its
  top value (a PFD(position) student taught as if every item were shown first)."""
  config = row.recipe.config(ctx.cfg)
  view = ctx.view(row)
  if row.recipe.teacher is None:
    return ctx.kept(row, config, view, lambda: train_on_data(ctx.keys, config, ctx.data(row), view,
                                                             ctx.hooks(row.name)))
  t = done[row.recipe.teacher]
  z = np.float32(ctx.position.top) if at_top else None
  return ctx.kept(row, config, view, lambda: train_student(
      ctx.keys, config, ctx.data(row), teacher_targets(config, [(t.result, t.view, t.config)], ctx.data(row), z),
      ctx.hooks(row.name)))


def train_mlp_from_lightgbm(ctx: Context, row: Row, done: Done) -> Trained:
  """An MLP student on x of its LightGBM teacher row's out-of-fold scores (each training group scored by a model
  that never saw it; computed once per fold)."""
  teacher = done[row.recipe.teacher]
  config = row.recipe.config(ctx.cfg)
  tr = ctx.ds["train"]

  def student():
    scores = ctx.once(f"{row.recipe.teacher}_oof", lambda: gbdt.teacher_scores_oof(
        ctx.lightgbm, config, ctx.ds, teacher.view, int(np.shape(ctx.keys)[0]), seed=ctx.seed,
        query_index=gbdt.loss_groups(config, tr), max_buckets=ctx.dd.max_buckets,
        hooks=ctx.hooks(f"{row.recipe.teacher}_oof")))
    targets = gbdt.to_buckets(scores, bucketize(tr, ctx.dd.max_buckets), tr.offsets)
    return train_student(ctx.keys, config, ctx.dd, targets, ctx.hooks(row.name))
  return ctx.kept(row, config, "x", student)


def train_served(ctx: Context, row: Row, done: Done) -> Trained:
  """A position-aware MLP (the position a feature, or a tower of its own by the row's overrides): trained on the
  display positions, scored with every item at the top position (the data served once per fold and loss)."""
  config = row.recipe.config(ctx.cfg)
  view = ctx.view(row)
  served = ctx.once("served", lambda: ctx.device_data(debias.serve_at(ctx.ds, ctx.position.column,
                                                                      ctx.position.top)), keep=False)
  return ctx.kept(row, config, f"{view}={ctx.position.top:g}",
                  lambda: train_on_data(ctx.keys, config, served, view, ctx.hooks(row.name)))


def train_ips(ctx: Context, row: Row, done: Done, propensities: str = "em") -> Trained:
  """An MLP on x trained on the inverse-propensity-weighted labels of the propensity table `propensities`, with
  the IPS configuration (a loss affine in its labels)."""
  p = ctx.position
  config = row.recipe.config(p.ips_config)
  weighted = debias.with_train_labels(ctx.ds, debias.ips_labels(ctx.ds["train"].y, p.positions,
                                                                p.propensities[propensities], p.clip),
                                      ips=propensities)
  return ctx.kept(row, config, "x", lambda: train_on_data(ctx.keys, config, ctx.device_data(weighted), "x",
                                                          ctx.hooks(row.name)))


def run_rows(ctx: Context, plan, done: Optional[Dict[str, Trained]] = None) -> Dict[str, Trained]:
  """Trains the rows of `plan` (:func:`pfd_jax.methods.rows.plan`: teachers before their students) in order, each by
  its own function (:attr:`pfd_jax.methods.rows.Recipe.trainer`): {row name: Trained}. done: rows the caller trained
  already (not trained again)."""
  if ctx.placebo is None and any(r.recipe.placebo for r in plan):  # before anything trains
    raise ValueError("the placebo rows need their data: Context(placebo=lambda: to_device(...)) of "
                     "pfd_jax.data.with_placebo_privileged(ds)")
  done = dict(done or {})
  for row in (r for r in plan if r.name not in done):
    done[row.name] = row.recipe.trainer(ctx, row, done)
  return done


def ensemble_lists(cfg: TrainConfig, result, groups, view: str, *, max_buckets: int) -> tuple:
  """(NDCG@ks of every list with a positive [K, Q], has-a-positive [Q]) of a row's seed ensemble on a labelled
  split: every document scored by the mean over the S seeds' best models (an MLP row's logits, a LightGBM row's
  raw scores), lists in the order of the rows' per-list NDCG (they pair list by list). One model per fold, so an
  ensemble is compared over queries, not runs."""
  if isinstance(result, gbdt.Result):
    scores = gbdt.scores(result, groups)
  else:
    scores = gbdt.doc_scores(cfg, result.params, groups, view, max_buckets=max_buckets)
  vals, valid = gbdt.list_ndcg(cfg, scores.mean(0, keepdims=True), groups, max_buckets=max_buckets)
  return vals[0], valid



