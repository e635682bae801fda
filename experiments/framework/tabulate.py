"""Markdown tables and their statistics cells: mean ± std, paired changes with intervals and p-values
(:mod:`pfd_jax.ops.stats`), the seeds a comparison would need."""
from __future__ import annotations

import dataclasses
from typing import Any, Dict, Mapping, Optional, Tuple, TypedDict

import numpy as np

from pfd_jax.data import specs
from pfd_jax.ops import stats

Runs = Dict[str, np.ndarray]  # {row: [runs, len(ks)]} best-epoch metrics, paired run by run across rows


class ComparisonRecord(TypedDict):
  """A paired comparison as results.json keeps it (:func:`comparison_record`): the fields of
  :class:`pfd_jax.ops.stats.Comparison`, its relative interval, the p < 0.05 marker and the paired runs a
  POWER_CHANGE relative change needs for 80% power."""
  unit: str
  n: int
  mean: float
  reference: float
  diff: float
  sd: float
  rel: float
  t_ci: Tuple[float, float]
  boot_ci: Tuple[float, float]
  t_p: float
  wilcoxon_p: float
  rel_ci: Tuple[float, float]
  significant: bool
  runs_for_power: Optional[int]


Comparisons = Dict[str, ComparisonRecord]  # {row: its comparison with the reference row}


def markdown_table(header: list, rows: list) -> str:
  out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
  out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
  return "\n".join(out) + "\n"


def title(cfg: Mapping[str, Any]) -> str:
  """'<dataset>, <loss>[, <population>]' of a results.json config (table and plot titles): generated data say
  whether every run shared one fixed draw or re-drew its own (--draws)."""
  data = cfg["data"]
  pop = (f", {data['draws']} re-drawn draws" if data.get("draws") else
         ", one fixed draw" if generated(data["dataset"]) else "")
  return f"{data['dataset']}, {cfg['run']['loss']}{pop}"


def generated(dataset: str) -> bool:
  """Whether a run's dataset is made in memory (the synthetic default, a paper analogue), not read from files."""
  spec = specs.REGISTRY.get(dataset)
  return spec is not None and spec.in_memory


def ratio(value: float, base: float) -> Optional[float]:
  """value / base, or None where base is zero or either is not finite (never inf or nan in a table)."""
  value, base = float(value), float(base)
  return value / base if base != 0 and np.isfinite(value) and np.isfinite(base) else None


def fmt_change(value: float, base: float) -> str:
  """'+7.1%' against the baseline, or 'n/a' (zero or non-finite baseline)."""
  r = ratio(value, base)
  return "n/a" if r is None else f"{100 * (r - 1):+.1f}%"


def fmt_pm(mean: float, std: float, digits: int = 3) -> str:
  """'0.308 ± 0.019', or 'n/a' for a non-finite value."""
  return f"{mean:.{digits}f} ± {std:.{digits}f}" if np.isfinite(mean) and np.isfinite(std) else "n/a"


def mean_std_table(rows: Runs, labels: Mapping[str, str], ks=(8, 16, 32), reference: Optional[str] = None,
                   seeds: int = 1) -> str:
  """Markdown rows `labels[k]` with mean ± std over the first axis of rows[k] [runs, len(ks)]; with a
  `reference` row, the comparison note and each other row's paired comparison of NDCG@ks[0] (:func:`compare`,
  :func:`change_cells`; runs are folds x `seeds`)."""
  if not reference:
    body = [[labels[k]] + [fmt_pm(m, s) for m, s in zip(np.asarray(v).mean(0), np.asarray(v).std(0))]
            for k, v in rows.items()]
    return markdown_table([""] + [f"NDCG@{k}" for k in ks], body)
  cmp = compare(rows, reference)
  runs = len(rows[reference])
  folds = max(1, runs // seeds)
  body = [[labels[k]] + [fmt_pm(m, s) for m, s in zip(np.asarray(v).mean(0), np.asarray(v).std(0))] +
          change_cells(cmp.get(k), folds) for k, v in rows.items()]
  return (stats_note(labels[reference], runs, folds, ks[0]) + "\n" +
          markdown_table([""] + [f"NDCG@{k}" for k in ks] + change_header(labels[reference], ks[0]), body))


POWER_CHANGE = 0.02  # the relative change a table's power column is about


def compare(rows: Runs, reference: str, col: int = 0, seed: int = 0) -> Comparisons:
  """{row: comparison record} of rows[k][:, col] against rows[reference][:, col], paired run by run (rows of
  one table share their (fold, seed) runs: the same keys and data)."""
  ref = np.asarray(rows[reference])[:, col]
  return {k: comparison_record(stats.paired(np.asarray(v)[:, col], ref, seed=seed))
          for k, v in rows.items() if k != reference}


def comparison_record(c: stats.Comparison) -> ComparisonRecord:
  """A comparison as results.json keeps it: every field, the relative interval, the p < 0.05 marker and how
  many paired runs would detect a POWER_CHANGE relative change with 80% power at this spread."""
  return dict(dataclasses.asdict(c), rel_ci=c.rel_ci, significant=c.significant,
              runs_for_power=stats.runs_for_power(POWER_CHANGE * c.reference, c.sd))


def change_header(reference: str, k: int, unit: str = "runs") -> list:
  return [f"NDCG@{k} vs {reference} ({unit}): change [95% CI], p", f"seeds for ±{100 * POWER_CHANGE:.0f}%"]


def change_cell(c: Optional[ComparisonRecord]) -> str:
  """'+7.1% [+1.9%, +12.3%] p=0.004 †' (relative change, paired-t interval, p; † for p < 0.05)."""
  if not c:
    return ""
  if not np.isfinite(c["rel"]):
    return "n/a"
  lo, hi = c["rel_ci"]
  p = c["t_p"]
  ptxt = "n/a" if not np.isfinite(p) else ("p<1e-4" if p < 1e-4 else f"p={p:.2g}" if p < 0.01 else f"p={p:.2f}")
  return (f"{100 * c['rel']:+.1f}% [{100 * lo:+.1f}%, {100 * hi:+.1f}%] {ptxt}" +
          (" †" if c["significant"] else ""))


def change_cells(c: Optional[ComparisonRecord], folds: int = 1) -> list:
  """[change cell, seeds cell]: the seeds per fold (runs / folds) a paired t-test needs for a POWER_CHANGE
  relative change with 80% power at the measured spread of this row's differences."""
  if not c:
    return ["", ""]
  n = c["runs_for_power"]
  return [change_cell(c), "n/a" if n is None else f"{-(-n // folds):,}"]


def stats_note(reference: str, runs: int, folds: int, k: int = 8, draws: bool = False) -> str:
  """The sentence under a table header that says what the comparison columns are. draws: the runs are draws of
  the population (one seed each) that the driver does not record as folds."""
  unit = f"{runs} draws" if draws else f"{runs} runs (folds x seeds)" if folds > 1 else f"{runs} seeds"
  need = "draws" if draws else "seeds per fold" if folds > 1 else "seeds"
  return (f"Change vs {reference}: mean paired difference of NDCG@{k} over the {unit}, each run of a row paired "
          f"with the same run of the reference (same keys, same data), relative to the reference mean; 95% "
          f"paired-t interval; paired t-test p-value, † = p < 0.05 (bootstrap intervals and Wilcoxon p-values in "
          f"results.json). Seeds for ±{100 * POWER_CHANGE:.0f}%: {need} a paired "
          f"t-test would need to detect a {100 * POWER_CHANGE:.0f}% change with 80% power at this row's spread.\n")


def ids_text(ids: list) -> str:
  """1-based ids, runs collapsed: [1, 2, 3, 7] -> '1-3,7'."""
  out, i = [], 0
  ids = list(ids)
  while i < len(ids):
    j = i
    while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
      j += 1
    out.append(str(ids[i]) if j == i else f"{ids[i]}-{ids[j]}")
    i = j + 1
  return ",".join(out) or "none"


def privileged_text(datas: list) -> str:
  """The privileged and regular ids of a run's folds ({privileged_choice, privileged_ids, regular_ids} each, in
  fold order): one list when every fold has the same; else each fold's (up to 5 folds), or fold 1's and how many
  of them the others share on average (an automatic choice is made on each fold's own training split)."""
  first = datas[0]
  choice = first["privileged_choice"]
  if all(d["privileged_ids"] == first["privileged_ids"] for d in datas):
    return (f"Privileged feature ids ({choice}): {ids_text(first['privileged_ids'])}; regular: "
            f"{ids_text(first['regular_ids'])}")
  if len(datas) <= 5:
    return f"Privileged feature ids ({choice}, per fold): " + "; ".join(
        f"fold {k}: {ids_text(d['privileged_ids'])}" for k, d in enumerate(datas, 1))
  ref = set(first["privileged_ids"])
  shared = sum(len(ref & set(d["privileged_ids"])) for d in datas[1:]) / (len(datas) - 1)
  return (f"Privileged feature ids ({choice}, chosen per fold): fold 1's {ids_text(first['privileged_ids'])}; the "
          f"other {len(datas) - 1} folds share {shared:.1f} of its {len(ref)} on average")


def dropped_text(d: Mapping[str, Any]) -> str:
  """The lists the data filters dropped, per split with the rule ('' where none was)."""
  lost = d.get("dropped_lists")
  if not lost:
    return ""
  rule = f"fewer than {d.get('min_docs')} documents" + (" or no positive" if d.get("require_positive") else "")
  return (f"Lists dropped before training and scoring ({rule}): " +
          ", ".join(f"{split} {n:,} of {of:,}" for split, (n, of) in lost.items()) + ". ")
