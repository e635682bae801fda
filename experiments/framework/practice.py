"""What a practitioner's Table 2 run says beside its table: which model to deploy (chosen on validation, with its
serving latency), and what the PFD search found (the chosen configuration per fold and the privileged-column
report)."""
from __future__ import annotations

from typing import Mapping

import numpy as np

from experiments.framework import deploy, tabulate
from experiments.framework.pairs import aggregate
from experiments.framework.records import LossRecord
from pfd_jax.methods import rows as rows_lib
from pfd_jax.methods import search
from pfd_jax.ops import stats


def search_record(found: search.Search, ds) -> dict:
  """What results.json keeps of a fold's PFD search: each privileged column's strength (|corr| with the label
  on train), each subset teacher's and each candidate's validation NDCG, the choice and the search's time."""
  key = lambda c: "+".join(map(str, c))
  base = found.lists[search.Candidate()]
  return dict(feature_ids=[int(i) + 1 for i in ds.privileged] if ds.privileged is not None else None,
              strength=found.strength, teachers={key(c): float(v.mean()) for c, v in found.teachers.items()},
              candidates={c.label: float(v.mean()) for c, v in found.lists.items()},
              single={key(c.columns): max(float(v.mean()) for d, v in found.lists.items() if d.columns == c.columns)
                      for c in found.lists if len(c.columns) == 1},
              chosen=found.candidate.label, best=found.choice["best"].label, tied=len(found.choice["within"]),
              gap=list(found.choice["gap"]), threshold=found.choice["threshold"], lists=int(found.valid.sum()),
              seconds=found.seconds, seeds=found.seeds, patience=found.patience,
              vs_no_distill=tabulate.comparison_record(stats.per_query(found.lists[found.candidate][None], base[None])))


def deploy_text(record: LossRecord, compared: Mapping[str, tabulate.Comparisons], ks) -> str:
  """Which model to deploy (chosen on validation), its test NDCG and interval against LambdaMART, and the measured
  serving latency of every candidate ('' for a run without the choice)."""
  d = record.deploy
  if not d:
    return ""
  row, kind = d["row"], d["kind"]
  incumbent, base = rows_lib.incumbent(), rows_lib.baseline()
  if kind == "ensemble":
    test = np.mean([np.asarray(f.ensembles[row]["ndcg"], np.float64).reshape(-1)[0] for f in record.folds.values()])
    vs = (compared.get("ensembles") or {}).get(row, {}).get(f"vs_{incumbent}")
    unit = f"{rows_lib.title(incumbent)}'s seed ensemble, over test queries"
  else:
    test = float(np.mean(aggregate(record)[row][:, 0]))
    vs = (compared.get(f"vs_{incumbent}") or {}).get(row)
    unit = f"{rows_lib.title(incumbent)}, over runs"
  lat = record.first_fold.latency or {}
  lat_rows = [[rows_lib.title(n), f"{v['single']['p50_ms']:.2f} / {v['single']['p99_ms']:.2f}",
               f"{v['ensemble']['p50_ms']:.2f} / {v['ensemble']['p99_ms']:.2f}"] for n, v in lat.items()]
  vs_text = f"; vs {unit}: {tabulate.change_cell(vs)}" if vs and row != incumbent else ""
  name = lambda c: rows_lib.title(c.split("/")[0]) + (", seed ensemble" if c.endswith("/ensemble") else "")
  rule = ("" if "best" not in d else  # a run from before this rule chose the plain maximum
          f" The simplest candidate that validation cannot tell from the best ({name(d['best'])}, "
          f"{d['vali_all'][d['best']]:.3f}): not worse by a one-sided paired t-test over {d['lists']} validation lists "
          f"at 5%, Bonferroni over the {len(d['vali_all'])} candidates ({len(d['within'])} tied), so that the winner of "
          f"many noisy validation scores is not deployed for its noise: {100 * d['gap'][0]:.1f} points below the best "
          f"({d['gap'][0] / d['gap'][1] if d['gap'][1] else 0:.1f} SE; a gap of {d['threshold']:.1f} SE would count)" +
          (f"; against no-distillation on validation {tabulate.change_cell(d[f'vs_{base}'])}" if f"vs_{base}" in d
           and row != base else "") + ".")
  return (f"**Which to deploy** (chosen on validation NDCG@{ks[0]} among the rows a service can run, single models "
          f"and seed ensembles; test never read): **{rows_lib.title(row)}{', seed ensemble' if kind == 'ensemble' else ''}"
          f"**, validation {d['vali']:.3f}, test NDCG@{ks[0]} {test:.3f}{vs_text}.{rule} Saved models: "
          f"`--save_models` writes every row under the run folder's models/ (`python -m experiments.predict`, "
          f"`python -m experiments.export`).\n\n" +
          (f"Serving latency in process of one {deploy.QUERY_DOCS}-document query (this machine, fold "
           f"{record.first_fold_number}, ms p50 / p99 of {deploy.REPEATS}):\n\n" +
           tabulate.markdown_table(["Row", "single model", "seed ensemble"], lat_rows) + "\n" if lat_rows else ""))


def search_text(record: LossRecord) -> str:
  """The PFD search's report ('' without --search): per fold the chosen configuration and why, the search's time
  against one PFD row's (teacher + student); per privileged column (folds' mean) its strength, its teacher's and
  its best student's validation gain over no-distillation."""
  folds = {k: f for k, f in record.folds.items() if f.search}
  if not folds:
    return ""
  lines = []
  for k, f in folds.items():
    s, base = f.search, f.search["candidates"]["no distillation"]
    why = ("no candidate beats no-distillation by more than validation noise" if s["chosen"] == "no distillation"
           else f"the simplest of the {s['tied']} candidates validation cannot tell from the best ({s['best']})")
    primary = rows_lib.primary()
    pfd = sum(f.rows[n].seconds for n in (primary.teacher, primary.name) if n in f.rows)
    vs = (f"; against no-distillation on these lists {tabulate.change_cell(s['vs_no_distill'])}"
          if s.get("vs_no_distill") and s["chosen"] != "no distillation" else "")
    screened = (f", screened with {s['seeds']} seed{'s' * (s['seeds'] > 1)}" if s.get("seeds") else "") + (
        f", patience {s['patience']} epochs" if s.get("patience") else "")
    lines.append(f"- {k}: **{s['chosen']}** (validation {s['candidates'][s['chosen']]:.4f}, no-distillation "
                 f"{base:.4f}, {s['lists']} lists{vs}): {why}; {len(s['candidates'])} candidates{screened}, in "
                 f"{s['seconds']:.0f} s with the chosen one's training on every seed" +
                 (f" ({s['seconds'] / pfd:.1f}x one PFD teacher and student)" if pfd else "") + ".")
  first = next(iter(folds.values())).search
  ids = first["feature_ids"] or list(range(len(first["strength"])))
  mean = lambda get: np.mean([get(f.search) for f in folds.values()])
  rows = [[f"feature {ids[j]} (z[{j}])", f"{mean(lambda s: s['strength'][j]):.3f}",
           f"{mean(lambda s: s['teachers'][str(j)] - s['candidates']['no distillation']):+.4f}",
           f"{mean(lambda s: s['single'][str(j)] - s['candidates']['no distillation']):+.4f}"]
          for j in range(len(ids)) if str(j) in first["teachers"]]
  return ("**PFD searched on validation** (pfd_jax.methods.search; test never read): teachers on subsets of the "
          "privileged columns (all, each alone, backward elimination from the most predictive), students over "
          "alpha x teacher temperature (for the subsets best at the plain PFD setting), no distillation a "
          "candidate; chosen: the simplest candidate that a one-sided paired test over the validation lists "
          "(Bonferroni over the candidates) cannot tell from the best, then trained with every seed as a PFD row "
          "is (the row 'PFD, searched on validation').\n\n" + "\n".join(lines) + "\n\n" +
          tabulate.markdown_table(["Privileged column", "abs corr with the label (train)",
                                   "its teacher alone vs no-distillation (vali NDCG)",
                                   "its best student vs no-distillation (vali NDCG)"], rows) + "\n")
