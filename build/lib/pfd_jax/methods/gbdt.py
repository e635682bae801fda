"""The practitioner's incumbent, LightGBM LambdaMART, and distillation across model families.

Rows (each over the run's S seeds, evaluated by :mod:`pfd_jax.ops.metrics` on the lists the MLP rows are
evaluated on, with the same empty-list rule):

* **LambdaMART**: ``objective="lambdarank"`` on the regular features ``x`` with the run's binary labels.
* **LambdaMART teacher**: the same on ``concat(x, z)`` (the GBDT analogue of the PFD teacher).
* **GBDT teacher -> MLP student**: the LambdaMART teacher's scores as the teacher logits of Eq. 1, through
  the student's teacher transform like any teacher. The scores are *out of fold*: the training groups are
  split into K folds (by query, seeded per seed) and each fold is scored by a teacher fitted on the other
  K - 1, so no training list is scored by a model that saw it. A tree ensemble fits its training lists
  almost perfectly (in-sample NDCG near 1 on the positive groups), so in-sample scores would teach the
  labels back rather than what the privileged features predict; an MLP teacher fits them far less
  tightly, which is why the paper's PFD can use in-sample logits. Scores of one list come from one model,
  so a list's targets share one scale (lambdarank scores are unnormalised).
* **MLP teacher -> GBDT students**: LightGBM on ``x`` fitted to the distilled targets of Eq. 1 with the
  PFD teacher's logits t: ``q = alpha * y + (1 - alpha) * sigmoid(t)`` on the groups of the data loss (the
  positive groups in the paper's protocol) and ``q = sigmoid(t)`` with weight ``1 - alpha`` elsewhere.
  Two objectives: ``xent`` is LightGBM's ``cross_entropy`` on q (binary cross-entropy is linear in its
  label, so this is exactly alpha * BCE(y) + (1 - alpha) * BCE(sigmoid t), RankBCE's Eq. 1, pointwise);
  ``grades`` is ``lambdarank`` on the integer grades round(4 q) (0..4, LightGBM's gains 2^g - 1), the
  listwise reading: the same target quantised into the graded relevance lambdarank needs.

Model selection: every fit stops early on NDCG@ks[0] of the split the MLP rows select their best epoch on
(``TrainConfig.select_on``: the paper's test split by default), computed by :mod:`pfd_jax.ops.metrics` on the
same lists (a LightGBM ``feval``), so every row of a table is selected alike. (LightGBM's own ``ndcg@k``
scores a list without a positive 1, ours leaves it out, and its metric checks training labels too, which
the cross-entropy student's fractional labels fail.) Seeds differ by LightGBM's ``seed`` with bagging and
feature subsampling; ``deterministic=True`` makes a seed give the same model on every run.

Pure functions over host arrays: no files, no printing (saving is :mod:`pfd_jax.serving`'s).
"""
from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional, Sequence

import jax.numpy as jnp
import numpy as np

from pfd_jax import config
from pfd_jax.data.groups import Groups
from pfd_jax.data.padding import bucketize
from pfd_jax.data.preprocess import positive_groups
from pfd_jax.ops import metrics as metrics_lib
from pfd_jax.ops.scoring import features, ndcg_fn
from pfd_jax.training.evaluation import device_buckets, eval_buckets, predict as predict_mlp
from pfd_jax.training.structures import EpochScalars, Hooks

if TYPE_CHECKING:
  from pfd_jax.methods.distill import Context, Done, Trained
  from pfd_jax.methods.rows import Row
  from pfd_jax.data.datasets import Dataset
  from pfd_jax.training.config import TrainConfig


@dataclasses.dataclass(frozen=True)
class GBDTConfig:
  """LightGBM settings of the GBDT rows (flags --gbdt_<field>)."""
  trees: int = config.option(500, "LightGBM boosting rounds at most; early stopping on the selection split picks "
                             "the best.", lo=1)
  leaves: int = config.option(31, "Leaves per tree (num_leaves).", lo=2)
  learning_rate: float = config.option(0.05, "Shrinkage per tree.", lo=0, lo_open=True)
  min_leaf: int = config.option(20, "Minimum documents per leaf (min_data_in_leaf).", lo=1)
  subsample: float = config.option(0.8, "Fraction of documents (bagging, every tree) and of features per tree: "
                                   "what makes the seeds differ.", lo=0, lo_open=True, hi=1)
  early_stopping: int = config.option(50, "Stop after this many rounds without a better NDCG@k on the "
                                      "selection split.", lo=1)
  oof_folds: int = config.option(5, "Folds of the training groups for the LambdaMART teacher's out-of-fold "
                                 "distillation targets.", lo=2)
  threads: int = config.option(0, "LightGBM threads (0: its default, every core).", lo=0)

  def __post_init__(self):
    config.check(self)


@dataclasses.dataclass
class Result:
  """The GBDT rows' counterpart of :class:`pfd_jax.training.TrainResult`: one LightGBM model (text) per seed.

  best: {split: [S, len(ks)]} NDCG of the early-stopped models; best_epoch: [S] their number of trees;
  curves and loss are empty (no epochs); params: the LightGBM parameters of seed 0 (seed s adds s)."""
  models: list
  best: Dict[str, np.ndarray]
  best_epoch: np.ndarray
  seconds: float
  params: Dict[str, Any]
  view: str
  curves: Dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
  loss: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros((0,), np.float32))

  def boosters(self) -> list:
    return [booster(m) for m in self.models]


def booster(model_text: str):
  import lightgbm as lgb  # deferred on purpose: the library imports without LightGBM until a GBDT row runs
  return lgb.Booster(model_str=model_text)


def lgb_params(gc: GBDTConfig, objective: str, seed: int) -> Dict[str, Any]:
  """LightGBM's parameters of one fit (objective 'lambdarank' or 'cross_entropy'; the selection metric is
  ours, :func:`selection_metric`)."""
  return dict(objective=objective, num_leaves=gc.leaves, learning_rate=gc.learning_rate,
              min_data_in_leaf=gc.min_leaf, bagging_fraction=gc.subsample, bagging_freq=1,
              feature_fraction=gc.subsample, seed=int(seed), deterministic=True, force_row_wise=True,
              num_threads=gc.threads, metric="None", verbosity=-1)


def flat_features(groups: Groups, view: str) -> np.ndarray:
  """f32[N, D] inputs of a view (x, z, xz, xz:i,j) of flat groups, columns in the MLP's input order."""
  return np.ascontiguousarray(features({"x": groups.x, "z": groups.z}, view), np.float32)


def fit(gc: GBDTConfig, train: Groups, view: str, select: Groups, seed: int, cfg: TrainConfig, *,
        objective: str = "lambdarank", label: Optional[np.ndarray] = None, weight: Optional[np.ndarray] = None,
        query_index: Optional[np.ndarray] = None, max_buckets: int, callbacks: Sequence[Callable] = (),
        position: Optional[np.ndarray] = None):
  """One early-stopped LightGBM model on the groups `query_index` of `train` (default all); label defaults to
  the binary y. Returns the lgb.Booster, best_iteration set by early stopping on NDCG@ks[0] of `select` (our
  metric on the MLP rows' lists: :func:`selection_metric`; `max_buckets`: the MLP rows' bucketing, which
  orders the lists alike). position: i32[N] the 0-based display position of every training document, for
  LightGBM's position-bias model of lambdarank (4.1+: a position bias factor learned beside the trees, left out
  when scoring; Dataset(position=...))."""
  import lightgbm as lgb  # deferred on purpose (see booster)
  if query_index is not None:
    rows = train.rows(query_index)
    train = train.take(query_index)
    label = None if label is None else label[rows]
    weight = None if weight is None else weight[rows]
    position = None if position is None else position[rows]
  label = train.y if label is None else label
  tr = lgb.Dataset(flat_features(train, view), label=label, weight=weight, group=train.sizes, position=position,
                   free_raw_data=True)
  va = lgb.Dataset(flat_features(select, view), label=select.y, group=select.sizes, reference=tr)
  return lgb.train(lgb_params(gc, objective, seed), tr, num_boost_round=gc.trees, valid_sets=[va],
                   feval=selection_metric(cfg, select, max_buckets=max_buckets),
                   callbacks=[lgb.early_stopping(gc.early_stopping, verbose=False), *callbacks])


def selection_metric(cfg: TrainConfig, groups: Groups, *, max_buckets: int) -> Callable:
  """LightGBM ``feval``: NDCG@ks[0] of the predictions on `groups`, averaged over its lists with a positive
  (the MLP rows' best-epoch criterion; the empty-list rule only scales it)."""
  fn = ndcg_fn((int(cfg.ks[0]),))
  lists = eval_buckets(dataclasses.replace(groups, x=np.zeros((groups.num_docs, 0))), max_buckets)
  parts = [(jnp.asarray(np.where(b.mask, _bucket_rows(b, groups.offsets), 0)), jnp.asarray(b.y), jnp.asarray(b.mask))
           for b in lists]
  count = max(sum(int(p[0].shape[0]) for p in parts), 1)

  def feval(preds, _):
    preds = jnp.asarray(np.asarray(preds, np.float32))
    tot = sum(float(fn(preds[rows][None], y, m).sum()) for rows, y, m in parts)
    return f"ndcg@{cfg.ks[0]}", tot / count, True
  return feval


def predict(model, groups: Groups, view: str) -> np.ndarray:
  """f32[N] scores of a booster (best iteration) on flat groups."""
  return np.asarray(model.predict(flat_features(groups, view), num_iteration=model.best_iteration),
                    np.float32)


def fold_of_groups(num_groups: int, folds: int, seed: int) -> np.ndarray:
  """i64[Q]: the out-of-fold fold (0..folds-1) of every group, a seeded balanced assignment."""
  return np.random.default_rng(seed).permutation(np.arange(num_groups) % folds)


def out_of_fold(fit_fn: Callable, score_fn: Callable, groups: Groups, folds: int, seed: int) -> np.ndarray:
  """f32[N] out-of-fold scores: fold k's documents scored by ``fit_fn(query_index)``, a model fitted on the
  groups of every other fold, through ``score_fn(model, held_out_groups)``."""
  which = fold_of_groups(groups.num_queries, folds, seed)
  out = np.zeros(groups.num_docs, np.float32)
  for k in range(folds):
    held = np.flatnonzero(which == k)
    if held.size == 0:
      continue
    model = fit_fn(np.flatnonzero(which != k))
    out[groups.rows(held)] = score_fn(model, groups.take(held))
  return out


def distilled_targets(y: np.ndarray, teacher_logit: np.ndarray, in_data: np.ndarray, alpha: float) -> tuple:
  """(label q, weight) of Eq. 1 for a pointwise learner (see the module docstring): documents of the data
  loss's groups (`in_data`, bool[N]) get alpha * y + (1 - alpha) * sigmoid(t) with weight 1, the others
  sigmoid(t) with weight 1 - alpha."""
  p = 1.0 / (1.0 + np.exp(-np.asarray(teacher_logit, np.float64)))
  q = np.where(in_data, alpha * y + (1.0 - alpha) * p, p)
  return q, np.where(in_data, 1.0, 1.0 - alpha)


def grades(q: np.ndarray, levels: int = 4) -> np.ndarray:
  """Integer grades 0..levels of targets q in [0, 1] (lambdarank's graded relevance)."""
  return np.rint(np.clip(q, 0.0, 1.0) * levels).astype(np.int32)


# ------------------------------------------------------------------ evaluation on the MLP rows' lists

def list_ndcg(cfg: TrainConfig, scores: np.ndarray, groups: Groups, *, max_buckets: int) -> tuple:
  """(NDCG@ks of every list with a positive [S, K, Q], has-a-positive [Q]) of per-document scores [S, N] on a
  labelled split: the lists of :func:`pfd_jax.training.evaluation.eval_buckets`, in bucket order (the order of
  :func:`pfd_jax.training.evaluation.per_list_ndcg`, so GBDT and MLP rows pair list by list)."""
  scores = np.asarray(scores, np.float32)
  g = dataclasses.replace(groups, x=np.ascontiguousarray(scores.T), z=None)
  fn = ndcg_fn(tuple(cfg.ks))
  vals, valid = [np.zeros((scores.shape[0], len(cfg.ks), 0), np.float32)], [np.zeros(0, bool)]
  for b in eval_buckets(g, max_buckets):
    s = jnp.moveaxis(jnp.asarray(b.x), -1, 0)  # [S, Q, L]
    vals.append(np.asarray(fn(s, jnp.asarray(b.y), jnp.asarray(b.mask))))
    valid.append(np.asarray(metrics_lib.has_relevant(b.y, b.mask)))
  return np.concatenate(vals, -1), np.concatenate(valid)


def mean_ndcg(cfg: TrainConfig, scores: np.ndarray, groups: Groups, *, max_buckets: int) -> np.ndarray:
  """[S, len(ks)] NDCG of per-document scores averaged over the split's lists by cfg.empty_rule (what
  :func:`pfd_jax.training.evaluation.evaluate` gives an MLP on the same split)."""
  vals, valid = list_ndcg(cfg, scores, groups, max_buckets=max_buckets)
  tot = np.where(valid, vals, 0.0).sum(-1, dtype=np.float32)
  return metrics_lib.list_mean(tot, int(valid.sum()), groups.num_queries, cfg.empty_rule)


def doc_scores(cfg: TrainConfig, params, groups: Groups, view: str, *, max_buckets: int) -> np.ndarray:
  """f32[S, N] logits of S seed-stacked MLPs on flat groups (an MLP teacher's scores for a GBDT student)."""
  buckets = bucketize(groups, max_buckets)
  per_bucket = predict_mlp(cfg, params, device_buckets(buckets), view)
  return from_buckets([np.asarray(p) for p in per_bucket], buckets, groups.offsets)


def from_buckets(per_bucket: Sequence[np.ndarray], buckets: Sequence, offsets: np.ndarray) -> np.ndarray:
  """[S, N] per document of per-bucket [S, Q, L] values of the groups with `offsets` (bucket -> file order)."""
  s = per_bucket[0].shape[0] if per_bucket else 1
  out = np.zeros((s, int(offsets[-1])), np.float32)
  for v, b in zip(per_bucket, buckets):
    rows = _bucket_rows(b, offsets)
    out[:, rows[b.mask]] = np.asarray(v)[:, b.mask]
  return out


def to_buckets(per_doc: np.ndarray, buckets: Sequence, offsets: np.ndarray) -> list:
  """Per-bucket f32[S, Q, L] (0 on padding) of per-document values [S, N] of the groups with `offsets`:
  teacher logits in the layout :func:`pfd_jax.methods.distill.train_student` takes."""
  out = []
  for b in buckets:
    rows = _bucket_rows(b, offsets)
    v = np.where(b.mask[None], np.asarray(per_doc)[:, np.where(b.mask, rows, 0)], 0.0).astype(np.float32)
    out.append(jnp.asarray(v))
  return out


def _bucket_rows(b, offsets: np.ndarray) -> np.ndarray:
  """i64[Q, L] flat document rows of a bucket's slots (padding slots run past their group: mask them)."""
  return np.asarray(offsets)[b.index][:, None] + np.arange(b.list_size)[None, :]


def per_list_ndcg(cfg: TrainConfig, result: Result, groups: Groups, *, max_buckets: int) -> tuple:
  """(NDCG@ks[0] of every list [S, Q], has-a-positive [Q]): :func:`pfd_jax.training.evaluation.per_list_ndcg` of a GBDT
  row, lists in the same order."""
  vals, valid = list_ndcg(cfg, scores(result, groups), groups, max_buckets=max_buckets)
  return vals[:, 0], valid


def scores(result: Result, groups: Groups) -> np.ndarray:
  """f32[S, N] scores of every seed's model on flat groups."""
  return np.stack([predict(m, groups, result.view) for m in result.boosters()])


# ------------------------------------------------------------------ the GBDT rows' models

def train(gc: GBDTConfig, cfg: TrainConfig, ds: Dataset, view: str, num_seeds: int, *, seed: int = 0,
          objective: str = "lambdarank", targets: Optional[Callable] = None, query_index=None,
          eval_splits: Sequence[str] = ("test",), max_buckets: int, hooks: Hooks = Hooks(),
          position: Optional[np.ndarray] = None) -> Result:
  """S early-stopped LightGBM models on the training split (seed s: LightGBM seed `seed` + s), evaluated on
  `eval_splits`. targets(s) -> (label, weight) per document of the training split (default: y, unweighted);
  query_index: the training groups fitted (default all); hooks: what every REPORT_EVERY boosting rounds are
  reported to (the selection NDCG, as an MLP row's epochs); position: the training documents' display positions
  (:func:`fit`)."""
  t0 = time.time()
  tr, select = ds["train"], ds[cfg.select_on]
  models = []
  for s in range(num_seeds):
    label, weight = targets(s) if targets else (None, None)
    models.append(fit(gc, tr, view, select, seed + s, cfg, objective=objective, label=label, weight=weight,
                      query_index=query_index, max_buckets=max_buckets, position=position,
                      callbacks=[reporter(hooks, cfg, s, (num_seeds, gc.trees), t0)]))
  best = {split: mean_ndcg(cfg, np.stack([predict(m, ds[split], view) for m in models]), ds[split],
                           max_buckets=max_buckets) for split in eval_splits}
  return Result(models=[m.model_to_string(num_iteration=m.best_iteration) for m in models], best=best,
                best_epoch=np.asarray([m.best_iteration for m in models], np.int32), seconds=time.time() - t0,
                params=lgb_params(gc, objective, seed), view=view)


REPORT_EVERY = 10  # boosting rounds between a LightGBM row's progress reports


def reporter(hooks: Hooks, cfg: TrainConfig, model: int, shape: tuple, t0: float) -> Callable:
  """A LightGBM callback: every REPORT_EVERY rounds of seed `model`, its selection NDCG as
  :class:`pfd_jax.training.loop.EpochScalars` to the hooks' writers (round model * trees + i of seeds * trees,
  shape = (seeds, trees); no loss), then the hooks' safe point (a signal stops the row there)."""
  num_seeds, trees = shape

  def callback(env) -> None:
    if (env.iteration + 1) % REPORT_EVERY:
      return
    ndcg = next(r[2] for r in env.evaluation_result_list if r[1].startswith("ndcg@"))
    scalars = EpochScalars(epoch=model * trees + env.iteration, epochs=num_seeds * trees, loss=np.full(1, np.nan),
                           metrics={cfg.select_on: np.array([[ndcg]])}, ks=(int(cfg.ks[0]),), select_on=cfg.select_on,
                           seconds=time.time() - t0, first_model=model, unit="round")
    for w in hooks.writers:
      w.write_epoch(scalars)
    if hooks.safe_point is not None:
      hooks.safe_point()
  return callback


def teacher_scores_oof(gc: GBDTConfig, cfg: TrainConfig, ds: Dataset, view: str, num_seeds: int, *,
                       seed: int = 0, query_index=None, max_buckets: int, hooks: Hooks = Hooks()) -> np.ndarray:
  """f32[S, N] out-of-fold LambdaMART teacher scores of the training split (module docstring): seed s splits
  the groups into gc.oof_folds folds with seed `seed` + s and fits each on the others' groups that are in
  `query_index` (default all). hooks: as :func:`train`'s, the S x oof_folds fits reported one after another
  (model = fit index)."""
  t0 = time.time()
  tr, select = ds["train"], ds[cfg.select_on]
  fitted = np.ones(tr.num_queries, bool) if query_index is None else np.isin(np.arange(tr.num_queries), query_index)
  fits, shape = iter(range(num_seeds * gc.oof_folds)), (num_seeds * gc.oof_folds, gc.trees)
  out = []
  for s in range(num_seeds):
    fit_fn = lambda idx, s=s: fit(gc, tr, view, select, seed + s, cfg, query_index=idx[fitted[idx]],
                                  max_buckets=max_buckets, callbacks=[reporter(hooks, cfg, next(fits), shape, t0)])
    out.append(out_of_fold(fit_fn, lambda m, g: predict(m, g, view), tr, gc.oof_folds, seed + s))
  return np.stack(out)


def loss_groups(cfg: TrainConfig, train: Groups) -> Optional[np.ndarray]:
  """The training groups of the data loss (cfg.data_groups: the positive ones, or None = all): what a
  LambdaMART row is fitted on, as the MLP rows' data term."""
  return np.flatnonzero(positive_groups(train)) if cfg.data_groups == "positive" else None


# ------------------------------------------------------------------ the LightGBM rows' training (Recipe.train)

def train_lightgbm(ctx: Context, row: Row, done: Done, position_bias: bool = False) -> Trained:
  """A row's training (:mod:`pfd_jax.methods.distill`'s ``train(ctx, row, done) -> Trained``): LightGBM LambdaMART
  on the row's view (kept across the fold's losses); position_bias: with LightGBM's position-bias model on the
  display positions (trained for each loss)."""
  config = row.recipe.config(ctx.cfg)
  view = ctx.view(row)
  kw = dict(ctx.lightgbm_kw(), query_index=loss_groups(config, ctx.ds["train"]))
  if position_bias:
    fn = lambda: train(ctx.lightgbm, config, ctx.ds, view, hooks=ctx.hooks(row.name),
                            position=ctx.position.positions - 1, **kw)
  else:
    fn = lambda: ctx.once(row.name, lambda: train(ctx.lightgbm, config, ctx.ds, view, hooks=ctx.hooks(row.name),
                                                       **kw))
  return ctx.kept(row, config, view, fn)


def train_lightgbm_student(ctx: Context, row: Row, done: Done, as_grades: bool = False,
                           objective: Optional[str] = None) -> Trained:
  """A LightGBM student on x of its MLP teacher row: Eq. 1's targets and weights (objective 'cross_entropy'), or
  LambdaMART on the targets as grades (as_grades=True). The teacher's logits on every training document are computed
  once for the fold's students."""
  t = done[row.recipe.teacher]
  config = row.recipe.config(ctx.cfg)
  tr = ctx.ds["train"]
  data_groups = loss_groups(config, tr)
  in_data = np.ones(tr.num_docs, bool) if data_groups is None else np.isin(tr.group_index, data_groups)

  def targets(s):
    logits = ctx.once((row.recipe.teacher, "logits"), lambda: doc_scores(
        t.config, t.result.params, tr, t.view, max_buckets=ctx.dd.max_buckets), keep=False)
    q, w = distilled_targets(tr.y, logits[s], in_data, config.alpha)
    return (grades(q), None) if as_grades else (q, w)
  kw = dict(ctx.lightgbm_kw(), **({"objective": objective} if objective else {}))
  return ctx.kept(row, config, "x", lambda: train(ctx.lightgbm, config, ctx.ds, "x", targets=targets,
                                                       hooks=ctx.hooks(row.name), **kw))
