"""Which model to deploy: the candidate rows of a practitioner's run, chosen on the validation split, with the
serving latency of each measured on the run's own test documents; and the per-list NDCG of each row's models and
of its seed ensemble (:func:`row_lists`, :func:`ensembles`), which the choice and a run's query-level comparisons
read.

A candidate is a row a service can run (it reads regular features only; no teacher, no placebo control), as a
single model (its best seed on validation) or as its seed ensemble. The choice reads validation NDCG only, so the
test numbers beside it are an honest estimate of what the chosen model will do.
"""
from __future__ import annotations

import time
from typing import Any, Dict, List, Mapping, TypedDict

import jax
import jax.numpy as jnp
import numpy as np

from experiments.framework import tabulate
from pfd_jax import training as training_lib
from pfd_jax.methods import distill, gbdt
from pfd_jax.methods import rows as rows_lib
from pfd_jax.ops import choice, metrics, stats
from pfd_jax.ops.scoring import features, scoring

QUERY_DOCS = 100  # documents per timed query
REPEATS = 200


class Timing(TypedDict):
  """Milliseconds of one timed call: median and 99th percentile."""
  p50_ms: float
  p99_ms: float


class Latency(TypedDict):
  """A row's serving latency: one seed's model and the mean over every seed's (:func:`latency`)."""
  single: Timing
  ensemble: Timing


class Choice(TypedDict, total=False):
  """The model to deploy (:func:`choose`) as results.json keeps it: the row and its kind (single / ensemble), its
  validation NDCG, the best candidate and those tied with it, the gap to the best in points and SE, the gap that
  would count, the validation lists, every candidate's validation mean, and the choice against no-distillation
  (``vs_<baseline>``) when that is a candidate."""
  row: str
  kind: str
  vali: float
  best: str
  within: List[str]
  gap: List[float]
  threshold: float
  lists: int
  vali_all: Dict[str, float]
  vs_no_distill: tabulate.ComparisonRecord


def candidates(rows: Mapping[str, Any]) -> list:
  """The rows a service can run from a saved model: students and baselines on x (not teachers, not the placebo
  control, not the position-aware rows, whose served input is a constant no saved model holds)."""
  return [n for n in rows if (r := rows_lib.REGISTRY[n]).servable and not r.is_teacher and not r.recipe.placebo]


def wall_times(fn, calls: int, warmup: int = 1) -> np.ndarray:
  """Seconds of each of `calls` timed calls of fn() after `warmup` untimed ones (the drivers' one timing loop)."""
  for _ in range(warmup):
    fn()
  t = np.empty(calls)
  for i in range(calls):
    t0 = time.perf_counter()
    fn()
    t[i] = time.perf_counter() - t0
  return t


def _timed(fn, repeats: int = REPEATS) -> Timing:
  ms = 1e3 * wall_times(fn, repeats)
  return dict(p50_ms=float(np.percentile(ms, 50)), p99_ms=float(np.percentile(ms, 99)))


def latency(tc, result, groups, view: str) -> Latency:
  """{single: {p50_ms, p99_ms}, ensemble: {...}} of scoring one query of QUERY_DOCS documents of `groups` (drawn
  from its documents, seeded) in process: one seed's model, and the mean over every seed's models."""
  rows = np.random.default_rng(0).choice(groups.num_docs, size=QUERY_DOCS, replace=groups.num_docs < QUERY_DOCS)
  one = dict(x=groups.x[rows], z=None if groups.z is None else groups.z[rows])
  feats = np.ascontiguousarray(features(one, view), np.float32)
  if isinstance(result, gbdt.Result):
    boosters = result.boosters()
    single = lambda: boosters[0].predict(feats, num_iteration=boosters[0].best_iteration)
    ensemble = lambda: np.mean([b.predict(feats, num_iteration=b.best_iteration) for b in boosters], 0)
  else:
    predict = scoring(tc.arch, tuple(tc.ks)).predict
    first = jax.tree_util.tree_map(lambda a: a[:1], result.params)
    x = jnp.asarray(feats)[None]
    single = lambda: jax.block_until_ready(predict(first, x))
    ensemble = lambda: jax.block_until_ready(jnp.mean(predict(result.params, x), 0))
  return dict(single=_timed(single), ensemble=_timed(ensemble))


def simplicity(candidate: tuple) -> tuple:
  """How complex a candidate (row, kind) is to train and serve, smallest first: no teacher before a student of
  one (the searched PFD's teachers are its own), a single model before a seed ensemble, then the row registry's
  order (no-distillation first)."""
  row, kind = candidate
  r, names = rows_lib.REGISTRY[row], rows_lib.REGISTRY.names()
  return (r.recipe.distilled, kind == "ensemble", names.index(row))


def choose(fold_results: list, ensembles: bool) -> Choice:
  """The model to deploy: :func:`pfd_jax.ops.choice.tied_with_best` over the candidates (rows a service can run,
  as single models and seed ensembles), on every fold's validation lists with a positive, from table2's
  :class:`experiments.framework.records.FoldRecord` s (their ensembles' per-list validation NDCG). With it, the
  chosen candidate against no-distillation on the same lists (the paired difference's 95% interval). {} when
  the run has no validation split."""
  lists = {}
  for f in fold_results:
    for name in candidates(f.rows):
      e = (f.ensembles or {}).get(name, {})
      if e.get("vali_lists") is None:
        return {}
      valid = np.asarray(e["vali_valid"], bool)
      lists.setdefault((name, "single"), []).append(np.asarray(e["vali_single_lists"], np.float64)[valid])
      if ensembles:
        lists.setdefault((name, "ensemble"), []).append(np.asarray(e["vali_lists"], np.float64)[valid])
  if not lists:
    return {}
  lists = {c: np.concatenate(v) for c, v in lists.items()}
  pick = choice.tied_with_best(lists, simplicity)
  (row, kind), key = pick["chosen"], lambda c: f"{c[0]}/{c[1]}"
  out = dict(row=row, kind=kind, vali=pick["means"][pick["chosen"]], best=key(pick["best"]),
             within=[key(c) for c in pick["within"]], gap=list(pick["gap"]), threshold=pick["threshold"],
             lists=int(lists[pick["chosen"]].size),
             vali_all={key(c): m for c, m in pick["means"].items()})
  base = rows_lib.baseline()
  if (base, "single") in lists:
    out[f"vs_{base}"] = tabulate.comparison_record(stats.per_query(lists[pick["chosen"]], lists[(base, "single")]))
  return out


def row_lists(tc: training_lib.TrainConfig, row: distill.Trained, groups, es, max_buckets: int) -> tuple:
  """(NDCG@ks[0] of every list [S, Q], has-a-positive [Q]) of a row's S models on one split (groups: its lists,
  es: the same on the device), lists in bucket order."""
  if isinstance(row.result, gbdt.Result):
    return gbdt.per_list_ndcg(tc, row.result, groups, max_buckets=max_buckets)
  return training_lib.per_list_ndcg(row.config, row.result.params, es, row.view)


def ensembles(tc: training_lib.TrainConfig, rows: Dict[str, distill.Trained], ds, dd) -> Dict[str, Dict[str, Any]]:
  """{row: NDCG@ks over the test lists and per test list NDCG@ks[0]} of every row's seed ensemble (a row that reads
  the permuted z, in no file: none), and on validation the same per list of the ensemble and of the single models
  (their seeds' mean), which the deploy choice pairs (deploy.choose); rows: {name: distill.Trained}."""
  out = {}
  for name, t in rows.items():
    if rows_lib.REGISTRY[name].recipe.permuted:
      continue
    out[name] = {}
    for split in ("test", "vali") if "vali" in dd.eval_sets else ("test",):
      v, valid = distill.ensemble_lists(t.config, t.result, ds[split], t.view, max_buckets=dd.max_buckets)
      mean = metrics.list_mean(np.where(valid, v, 0.0).sum(-1), int(valid.sum()), ds[split].num_queries,
                               tc.empty_rule)
      if split == "test":
        out[name].update(ndcg=mean, test_lists=v[0])
      else:
        single = row_lists(tc, t, ds[split], dd.eval_sets[split], dd.max_buckets)[0]
        out[name].update(vali_ndcg=mean, vali_lists=v[0], vali_valid=valid, vali_single_lists=single.mean(0))
  return out
