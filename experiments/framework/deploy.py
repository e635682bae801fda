"""Which model to deploy: the candidate rows of a practitioner's run, chosen on the validation split, with the
serving latency of each measured on the run's own test documents.

A candidate is a row a service can run (it reads regular features only; no teacher, no placebo control), as a
single model (its best seed on validation) or as its seed ensemble. The choice reads validation NDCG only, so the
test numbers beside it are an honest estimate of what the chosen model will do.
"""
from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

from pfd_jax.methods import gbdt
from pfd_jax.methods import rows as rows_lib
from pfd_jax.ops.scoring import features, scoring

QUERY_DOCS = 100  # documents per timed query
REPEATS = 200


def candidates(rows: dict) -> list:
  """The rows a service can run from a saved model: students and baselines on x (not teachers, not the placebo
  control, not the position-aware rows, whose served input is a constant no saved model holds)."""
  return [n for n in rows if (r := rows_lib.REGISTRY[n]).servable and not r.is_teacher and not r.placebo]


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


def _timed(fn, repeats: int = REPEATS) -> dict:
  ms = 1e3 * wall_times(fn, repeats)
  return dict(p50_ms=float(np.percentile(ms, 50)), p99_ms=float(np.percentile(ms, 99)))


def latency(tc, result, groups, view: str) -> dict:
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


def choose(fold_results: list, ensembles: bool) -> dict:
  """The candidate (row, single or ensemble) with the highest validation NDCG@ks[0] averaged over folds (a
  single model's: its seeds' mean), from table2's :class:`experiments.framework.records.FoldRecord` s (rows'
  best['vali'], ensembles' vali NDCG). {} when the run has no validation split."""
  scores = {}
  for f in fold_results:
    for name in candidates(f.rows):
      vali = f.rows[name].best.get("vali")
      if vali is None:
        return {}
      scores.setdefault((name, "single"), []).append(float(np.mean(np.asarray(vali)[:, 0])))
      ens = (f.ensembles or {}).get(name, {}).get("vali_ndcg")
      if ensembles and ens is not None:
        scores.setdefault((name, "ensemble"), []).append(float(np.asarray(ens).reshape(-1)[0]))
  if not scores:
    return {}
  (row, kind), vals = max(scores.items(), key=lambda kv: np.mean(kv[1]))
  return dict(row=row, kind=kind, vali=float(np.mean(vals)),
              vali_all={f"{r}/{k}": float(np.mean(v)) for (r, k), v in scores.items()})
