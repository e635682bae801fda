"""Paired comparisons of a Table 2 run's rows (one loss's :class:`experiments.framework.records.LossRecord`): by
(fold, seed) run, by test query, and of the seed ensembles (:mod:`pfd_jax.ops.stats`,
:mod:`experiments.framework.tabulate`)."""
from __future__ import annotations

import concurrent.futures
import os
from typing import Any, Dict, List, Mapping, Optional

import numpy as np

from experiments.framework import tabulate
from experiments.framework.records import LossRecord
from pfd_jax.methods import rows as rows_lib
from pfd_jax.ops import stats


def declared_claims(res: Mapping[str, Any]) -> Dict[str, List[rows_lib.RowClaim]]:
  """{row: its claims} a Table 2 run is judged by (:attr:`pfd_jax.methods.rows.Row.claims`): a row of the user's
  module with the claims the run recorded (its provenance's registered rows), the project's rows (and every row of
  a run from before they were recorded) as declared now (a change after a run is marked in the family,
  experiments/page/frozen.py)."""
  recorded = res.get("provenance", {}).get("registered", {}).get("rows") or {}
  ours = {name: list(row.row_claims) for name, row in rows_lib.REGISTRY.items()}
  return {name: [rows_lib.RowClaim(**c) for c in r["claims"]] if r.get("module") != rows_lib.__name__ or
          name not in ours else ours[name] for name, r in recorded.items()} or ours


def ensemble_comparisons(loss_res: LossRecord) -> Dict[str, tabulate.Comparisons]:
  """Every row's seed ensemble over the test queries pooled over folds (one ensemble per fold, so queries are the
  unit), paired: against the incumbent's seed ensemble ('vs_lambdamart'; rows.incumbent()) and against the row's
  own single models, each query's NDCG averaged over seeds ('vs_single')."""
  folds = [f for f in loss_res.folds.values() if f.ensembles is not None]
  if not folds:
    return {}
  valid = np.concatenate([np.asarray(f.test_lists_valid, bool) for f in folds])
  pooled = lambda get: {name: np.concatenate([np.asarray(get(f, name)) for f in folds])[None]
                        for name in folds[0].ensembles}
  ens = pooled(lambda f, n: f.ensembles[n]["test_lists"])
  single = pooled(lambda f, n: f.rows[n].test_lists)
  out = {name: dict(vs_single=tabulate.comparison_record(stats.per_query(v, single[name], valid)))
         for name, v in ens.items()}
  incumbent = rows_lib.incumbent()
  if incumbent in ens:
    for name, v in ens.items():
      if name != incumbent:
        out[name][f"vs_{incumbent}"] = tabulate.comparison_record(stats.per_query(v, ens[incumbent], valid))
  return out


def query_lists(loss_res: LossRecord) -> Dict[str, np.ndarray]:
  """{row: [Q]} each test query's NDCG@8 averaged over seeds, pooled over folds (the queries with a positive)."""
  valid = np.concatenate([np.asarray(f.test_lists_valid, bool) for f in loss_res.folds.values()])
  per_query = {}
  for f in loss_res.folds.values():
    for name, r in f.rows.items():
      per_query.setdefault(name, []).append(np.asarray(r.test_lists))
  return {k: np.concatenate(v)[valid] for k, v in per_query.items()}


def reference(names) -> str:
  """The row a table compares every other with: no-distillation, or in a run without it (a deciding run whose
  members against it are decided trains only the rows still compared), the first of its rows in registry order."""
  base = rows_lib.baseline()
  return base if base in names else rows_lib.table_order(names)[0]


def comparisons(loss_res: LossRecord) -> Dict[str, tabulate.Comparisons]:
  """Every row against the reference (no-distillation), paired: by (fold, seed) run ('runs') and by test query
  pooled over folds, each query's NDCG@8 averaged over seeds ('queries'; lists with a positive)."""
  per_query = query_lists(loss_res)
  base = reference(per_query)
  others = [k for k in per_query if k != base]
  # each row's bootstrap on its own thread (NumPy draws and gathers without the GIL; each has its own seeded
  # generator, so the same bits): a drawn run pools ~140,000 test queries, 10,000 resamples of them a row
  compare = lambda k: tabulate.comparison_record(stats.per_query(per_query[k], per_query[base]))
  with concurrent.futures.ThreadPoolExecutor(max(1, min(len(others), os.cpu_count() or 1))) as pool:
    queries = dict(zip(others, pool.map(compare, others)))
  return dict(runs=tabulate.compare(aggregate(loss_res), base), queries=queries,
              **column_comparisons(loss_res), **({"ensembles": e} if (e := ensemble_comparisons(loss_res)) else {}))


def column_comparisons(loss_res: LossRecord) -> Dict[str, tabulate.Comparisons]:
  """The table's further paired columns, one per row with a column of its own (rows.Row.versus): every student
  against the placebo student ('vs_placebo': what the privileged information adds beyond distillation), the
  LightGBM rows against the PFD student ('vs_pfd') and every row against LambdaMART, the practitioner's incumbent
  ('vs_lambdamart', paired by (fold, seed index)). Only those whose rows the table has."""
  pooled = aggregate(loss_res)
  out = {}
  for row in rows_lib.columns():  # 'vs_<row>' for every row with a column of its own that the table has
    if row.name in pooled and (found := {k: v for k, v in tabulate.compare(pooled, row.name).items()
                                         if row.compares(k)}):
      out[f"vs_{row.name}"] = found
  return out


def primary(loss_res: LossRecord, a: str, b: str) -> Optional[stats.Estimate]:
  """The interval of a claim about row a against row b for the claim's unit (experiments.page.claims): over
  the data draws when the run re-drew its data per fold (--draws; each draw's mean over its seeds); over seeds and
  test queries crossed when its data are fixed and it kept each seed's per-query NDCG (>= 2 seeds); None when
  neither (a file from before: the run-level interval serves)."""
  folds = list(loss_res.folds.values())
  if not folds or any(a not in f.rows or b not in f.rows for f in folds):
    return None
  ref = float(aggregate(loss_res)[b][:, 0].mean())
  if len(folds) > 1 and all(f.data.get("draw") for f in folds):
    d = [np.mean(np.asarray(f.rows[a].best["test"])[:, 0] - np.asarray(f.rows[b].best["test"])[:, 0])
         for f in folds]
    return stats.runs_estimate(d, ref, "draws")
  blocks = []
  for f in folds:
    la, lb = f.rows[a].seed_lists, f.rows[b].seed_lists
    if la is None or lb is None or np.asarray(la).shape[0] < 2:
      return None
    valid = np.asarray(f.test_lists_valid, bool)
    blocks.append(np.asarray(la, np.float64)[:, valid] - np.asarray(lb, np.float64)[:, valid])
  return stats.crossed(blocks, ref)


def test_selected(loss_res: LossRecord) -> Dict[str, np.ndarray]:
  """{row: [runs]} test NDCG@ks[0] at each run's best epoch *on test* (the paper's protocol), from the per-epoch
  test curves of a run that selected on validation: beside aggregate(), the optimism of choosing on the split one
  reports. Rows without curves (LightGBM) are left out."""
  out = {}
  for fold in loss_res.folds.values():
    for name, r in fold.rows.items():
      if r.curves and "test" in r.curves:
        out.setdefault(name, []).append(np.asarray(r.curves["test"], np.float64)[:, :, 0].max(1))
  return {k: np.concatenate(v) for k, v in out.items()}


def aggregate(loss_res: LossRecord, split: str = "test") -> Dict[str, np.ndarray]:
  """{row: [folds * seeds, len(ks)]} best-epoch metrics pooled over folds and seeds."""
  rows = {}
  for fold in loss_res.folds.values():
    for name, r in fold.rows.items():
      rows.setdefault(name, []).append(np.asarray(r.best[split]))
  return {name: np.concatenate(v, 0) for name, v in rows.items()}
