"""What a Table 2 run's protocol says beside its table: the population its runs sampled (one fixed draw, or data
re-drawn per run with --draws, with the data's fingerprints), the selection of the best epoch (and, on validation,
the paper's test selection on the same runs with its optimism), and the power study of a re-drawn population."""
from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

import numpy as np

from experiments.framework import tabulate
from experiments.framework.pairs import aggregate, test_selected
from experiments.framework.records import LossRecord
from pfd_jax.methods import rows as rows_lib
from pfd_jax.ops import stats


def population_text(cfg: Mapping[str, Any], record: LossRecord) -> str:
  """Which data the runs saw: re-drawn per fold (--draws) or one fixed draw, with the data's fingerprints."""
  prints = [f.data.get("data_fingerprint") for f in record.folds.values()]
  prints = ", ".join(p for p in prints if p) or "not recorded"
  if cfg["data"].get("draws"):
    return (f"\n**Population: re-drawn.** {cfg['data']['draws']} draws of the data and its labels (each a fold: its own "
            f"training, validation and test sets, seeds and step order; {cfg['run']['seeds']} seed(s) each); the "
            f"claims' unit is the draw. Data fingerprints: {prints}.\n")
  return (f"\n**Population: fixed data.** Every run trains and is tested on the same data (per fold); seeds vary the "
          f"initialisation and batches only, so a verdict speaks of this draw. Data fingerprints: {prints}.\n")


BUDGET_MINUTES = 75.0  # what the decisive re-run may take on the developers' 2-core machine (declared before its pilot ran)


def redrawn_power(records: Mapping[str, LossRecord]) -> Dict[str, Any]:
  """The power study of a run that re-drew its data (--draws), per loss and PFD comparison: the run and query
  variance components (relative to the compared row's mean; stats.redrawn_components, unclipped), the spread of a
  draw's difference at this test size, the power this run had for a tabulate.POWER_CHANGE change and the draws a
  test needs for 80%; and the run's mean seconds per draw (all losses)."""
  out, seconds = {}, 0.0
  for loss, record in records.items():
    folds = list(record.folds.values())
    seconds += float(np.mean([f.seconds for f in folds]))
    a = rows_lib.primary().name
    for b in rows_lib.compared():  # the rows the PFD student's claims name
      if not all(a in f.rows and b in f.rows for f in folds):
        continue
      lists = [np.asarray(f.rows[a].test_lists)[np.asarray(f.test_lists_valid, bool)] -
               np.asarray(f.rows[b].test_lists)[np.asarray(f.test_lists_valid, bool)] for f in folds]
      ref = float(aggregate(record)[b][:, 0].mean())
      run, query = stats.redrawn_components(lists)
      q = float(np.mean([d.size for d in lists]))
      sd = float(np.std([d.mean() for d in lists], ddof=1))  # = sqrt(run + mean query / Q_k), measured directly
      e = stats.Estimate(0.0, 1.0, sd / np.sqrt(len(folds)), len(folds) - 1, "draws", len(folds))
      out[f"{loss}/{b}"] = dict(run=run / ref ** 2, query=query / ref ** 2, queries=q, sd=sd / ref,
                                power=e.power(tabulate.POWER_CHANGE * ref),
                                need=stats.runs_for_power(tabulate.POWER_CHANGE, sd / ref))
  return dict(comparisons=out, seconds_per_draw=seconds, draws=len(next(iter(records.values())).folds))


def _at(sd: float, draws: int) -> tuple:
  """(MDE at 80% power, power at a tabulate.POWER_CHANGE change) of the draws' test at `draws` draws whose relative
  difference has sd `sd` (one-sided 2.5%, the claims' test)."""
  e = stats.Estimate(0.0, 1.0, sd / np.sqrt(max(draws, 2)), max(draws, 2) - 1, "draws", draws)
  return e.mde(), e.power(tabulate.POWER_CHANGE)


def plan(pilot: Mapping[str, Any], budget_minutes: float = BUDGET_MINUTES) -> Dict[str, Any]:
  """The decisive run a re-drawn pilot run (its results.json) sizes: the draws its seconds per draw fit in
  `budget_minutes`, and each PFD comparison's MDE and power at that many draws from the pilot's spread of a draw."""
  return dict(_sized(redrawn_power({loss: LossRecord.from_json(r) for loss, r in pilot["losses"].items()}),
                     budget_minutes), pilot_commit=(pilot.get("provenance", {}).get("code", {}).get("git_commit") or ""))


def _sized(p: Mapping[str, Any], budget_minutes: float) -> Dict[str, Any]:
  draws = int(budget_minutes * 60 // p["seconds_per_draw"])
  return dict(budget_minutes=budget_minutes, seconds_per_draw=p["seconds_per_draw"], pilot_draws=p["draws"],
              draws=draws, comparisons={k: dict(zip(("mde", "power"), _at(v["sd"], draws)), sd=v["sd"])
                                        for k, v in p["comparisons"].items()})


def power_text(cfg: Mapping[str, Any], records: Mapping[str, LossRecord],
               pilot: Optional[Mapping[str, Any]] = None) -> str:
  """The re-drawn population's power study and the size of a decisive run ('' for fixed data); pilot: the plan
  (:func:`plan`) the run was sized by, set beside what it achieved."""
  if not cfg["data"].get("draws") or len(next(iter(records.values())).folds) < 2:
    return ""
  p = redrawn_power(records)
  change = 100 * tabulate.POWER_CHANGE
  n = p["draws"]
  rows = []
  for k, v in p["comparisons"].items():
    mde, pw = _at(v["sd"], n)
    planned = (pilot or {}).get("comparisons", {}).get(k)
    rows.append([k.replace("/", ": PFD vs "), f"{v['run']:.2e}", f"{v['query'] / v['queries']:.2e}",
                 f"{v['queries']:.0f}", f"{100 * v['sd']:.1f}%", f"{pw:.2f}", f"{100 * mde:.1f}%"] +
                ([f"{planned['power']:.2f}", f"{100 * planned['mde']:.1f}%"] if pilot else []) +
                ["n/a" if v["need"] is None else f"{v['need']:,}"])
  # the test set's share of a draw's measured variance (sd^2 = run + query / Q, estimated directly)
  share = [v["query"] / v["queries"] / v["sd"] ** 2 for v in p["comparisons"].values() if v["sd"] > 0] or [np.nan]
  dominant = ("the run component (training data, labels, initialisation) dominates every comparison: the test set's "
              f"share of a draw's variance is {100 * min(share):.0f}-{100 * max(share):.0f}%" if max(share) < 0.5 else
              "the test set's draw (query / Q) dominates " + (f"every comparison ({100 * min(share):.0f}-"
                                                              f"{100 * max(share):.0f}% of a draw's variance)"
                                                              if min(share) >= 0.5 else
                                                              f"some comparisons (up to {100 * max(share):.0f}%)"))
  need = max((v["need"] or 10 ** 9) for v in p["comparisons"].values())
  sized = _sized(p, BUDGET_MINUTES)
  head = ["Comparison", "run (relative variance)", "query / Q", "Q (test queries with a positive)", "sd of a draw",
          f"power for {change:.0f}% here", "MDE here"] + (
      [f"planned power for {change:.0f}%", "planned MDE"] if pilot else []) + ["draws for 80% at 2%"]
  text = (f"\n## Power on the re-drawn population\n\nPer draw, the paired relative difference of NDCG@8 varies with "
          f"variance run + query / Q (`pfd_jax.ops.stats.redrawn_components`, unbiased, the run component not "
          f"clipped): run = what re-drawing the training data, labels and initialisation moves, query / Q = the test "
          f"set's draw; here {dominant}. Power: this run's, for a true {change:.0f}% gain (one-sided 2.5%); MDE: the "
          f"smallest true change its test finds with 80% power ({n} draws); draws: those a test needs for 80% at "
          f"2%.\n\n" + tabulate.markdown_table(head, rows) +
          f"\nEvery comparison at 80% power for a {change:.0f}% change needs "
          f"{'more than 1,000,000' if need >= 10 ** 9 else f'{need:,}'} draws at this size; at this run's "
          f"{p['seconds_per_draw']:.0f} s per draw, {BUDGET_MINUTES:.0f} minutes (the decisive run's budget, declared "
          f"before its pilot ran) hold {sized['draws']} draws, whose largest MDE is "
          f"{100 * max(v['mde'] for v in sized['comparisons'].values()):.1f}% and smallest power for {change:.0f}% "
          f"{min(v['power'] for v in sized['comparisons'].values()):.2f}.\n")
  if pilot:
    text += (f"\nThis run was sized by its pilot (commit `{pilot['pilot_commit'][:10]}`, {pilot['pilot_draws']} draws at "
             f"{pilot['seconds_per_draw']:.0f} s per draw): {pilot['draws']} draws in {pilot['budget_minutes']:.0f} "
             f"minutes; it ran {n} draws in {p['seconds_per_draw'] * n / 60:.0f} minutes of training and scoring. "
             f"Planned: each comparison's MDE and power from the pilot's sd of a draw at {pilot['draws']} draws; "
             f"achieved: from this run's own.\n")
  return text


def optimism_text(record: LossRecord, select_on: str) -> str:
  """With validation selection: the paper's test selection on the same runs, and its optimism."""
  if select_on != "vali":
    return ("Selection: the best epoch on **test**, scored on the same test set (the paper's protocol; optimistic: a "
            "run with --select_on=vali measures by how much).\n\n")
  chosen, on_test = aggregate(record), test_selected(record)
  if not on_test:
    return ("Selection: the best epoch on **validation** (confirmatory). The run scored test at each model's "
            "selected epoch only (--curves=select), so the paper's test selection on the same runs (its optimism) "
            "is not measured here.\n\n")
  rows = [[rows_lib.title(k), f"{chosen[k][:, 0].mean():.4f}", f"{v.mean():.4f}",
           f"{100 * (v.mean() / chosen[k][:, 0].mean() - 1):+.1f}%"] for k, v in on_test.items() if k in chosen]
  pfd = rows_lib.primary().name
  gain = lambda a, b: 100 * (a[pfd].mean() / a[b].mean() - 1) if {pfd, b} <= set(a) else None
  vals = {k: v[:, 0] for k, v in chosen.items()}
  lines = "; ".join(f"PFD vs {rows_lib.title(b, short=True)} {gain(on_test, b):+.1f}% (test-selected) against "
                    f"{gain(vals, b):+.1f}% (validation-selected)" for b in rows_lib.compared(paper=True)
                    if gain(on_test, b) is not None)
  return ("Selection: the best epoch on **validation** (confirmatory). The paper's protocol on the same runs, the best "
          "epoch on test scored on test, reads higher by its optimism" + (f" ({lines})" if lines else "") + ":\n\n" +
          tabulate.markdown_table(["Row", "test NDCG@8, validation-selected", "test-selected", "optimism"], rows) +
          "\n")
