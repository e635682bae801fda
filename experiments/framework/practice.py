"""What a practitioner's Table 2 run says beside its table: which model to deploy (chosen on validation, with its
serving latency), its seed ensembles, and what the PFD search found (the chosen configuration per fold and the
privileged-column report) or, not run, what it would cost."""
from __future__ import annotations

from typing import Mapping, Optional

import numpy as np

from experiments.framework import costing, deploy, tabulate
from experiments.framework.pairs import aggregate, primary
from experiments.framework.records import LossRecord
from pfd_jax.methods import rows as rows_lib
from pfd_jax.methods import search
from pfd_jax.ops import choice, stats
from pfd_jax.training import TrainConfig
from pfd_jax.training.evaluation import per_list_ndcg


def search_record(found: search.Search, ds, fresh: Optional[dict] = None) -> dict:
  """What results.json keeps of a fold's PFD search: each privileged column's strength (|corr| with the label on the
  lists it was read on: the selection lists, or the training split before them), the selection lists' count, each
  subset teacher's and each candidate's validation NDCG (and its mean over every part), the fallback procedure's
  order, levels and p-values, each candidate's gain over no distillation, the rule's operating characteristics, the
  choice, the search's time, and its claimed gains against lists it never read (`fresh`: :func:`fresh_record`)."""
  key = lambda c: "+".join(map(str, c))
  base, choice = found.lists[search.Candidate()], found.choice
  gain = lambda e: dict(diff=e.diff, se=e.se, df=e.df, reference=e.reference, unit=e.unit, n=e.n,
                        interval=list(e.interval()))
  plain = choice["order"][0] if choice["order"] else None  # the first subset at the plain PFD setting
  measured = {c.columns: e.diff / e.reference for c, e in found.estimates.items()
              if plain and (c.alpha, c.temperature) == (plain.alpha, plain.temperature) and e.reference}
  return dict(feature_ids=[int(i) + 1 for i in ds.privileged] if ds.privileged is not None else None,
              strength=found.strength, teachers={key(c): float(v.mean()) for c, v in found.teachers.items()},
              candidates={c.label: float(v.mean()) for c, v in found.lists.items()},
              pooled={c.label: v for c, v in choice["means"].items()},
              single={key(c.columns): max(float(v.mean()) for d, v in found.lists.items() if d.columns == c.columns)
                      for c in found.lists if len(c.columns) == 1},
              chosen=found.candidate.label, best=choice["best"].label, order=[c.label for c in choice["order"]],
              levels=choice["levels"], p=choice["p"], passed=[c.label for c in choice["passed"]], whole=found.whole,
              gains={c.label: gain(e) for c, e in found.estimates.items()}, operating=found.operating,
              folds=found.folds, lists=int(found.valid.sum()),
              subsets={key(c): dict(predicted=p.gain, explained=p.explained, measured=measured.get(c))
                       for c, p in found.predicted.items()},
              pooled_lists=int(sum(v.shape[1] for v in found.scores[search.Candidate()])),
              seconds=found.seconds, seeds=found.seeds, patience=found.patience, selection=found.selection, fresh=fresh,
              vs_no_distill=tabulate.comparison_record(stats.per_query(found.lists[found.candidate][None], base[None])))


def fresh_gain(cfg: TrainConfig, found: search.Search, es, candidate: search.Candidate) -> dict:
  """A candidate's gain over no distillation as the search read it (pooled over every part: its estimate; and on the
  validation part alone) against the same screened models' on lists the search never read (`es`, an EvalSet: a
  run's test lists, a constructed folder's fresh ones), pooled with the same part weights, and the validation
  part's alone; each relative to no distillation's mean. read - fresh is what the search's selection added."""
  lists = lambda model: per_list_ndcg(cfg, model.params, es, "x")
  base, cand, ok = [], [], None
  for b, c in zip(found.models[search.Candidate()], found.models[candidate]):
    got, ok = lists(b)
    base.append(float(got[:, ok].mean()))
    cand.append(float(lists(c)[0][:, ok].mean()))
  w = choice.by_lists(found.scores[search.Candidate()])
  pooled = lambda v: float(np.dot(w, v) / w.sum())
  scored = found.scores[search.Candidate()][0]
  est = found.estimates[candidate]
  return dict(candidate=candidate.label, claimed=float(est.diff / est.reference),
              validation=float((found.scores[candidate][0] - scored).mean() / scored.mean()),
              fresh_validation=(cand[0] - base[0]) / base[0], fresh=(pooled(cand) - pooled(base)) / pooled(base),
              fresh_lists=int(ok.sum()))


def fresh_record(cfg: TrainConfig, found: search.Search, es) -> Optional[dict]:
  """:func:`fresh_gain` of the best distilling candidate by pooled score and of the chosen one (None when it does
  not distil; the same record, scored once, when it is the best), scored after the choice; None for a search that
  kept no screened models."""
  if not found.models:
    return None
  means = found.choice["means"]
  best = max((c for c in means if c.columns), key=means.get)
  gain = fresh_gain(cfg, found, es, best)
  if not found.candidate.columns:
    return dict(best=gain, chosen=None)
  return dict(best=gain, chosen=gain if found.candidate == best else fresh_gain(cfg, found, es, found.candidate))


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
  shipped = _shipped(record, row) if kind != "ensemble" else ""
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
          f"**, validation {d['vali']:.3f}, test NDCG@{ks[0]} {test:.3f} (the mean over seeds){vs_text}.{shipped}{rule} "
          f"Saved models: "
          f"`--save_models` writes every row under the run folder's models/ (`python -m experiments.predict`, "
          f"`python -m experiments.export`).\n\n" +
          (f"Serving latency in process of one {deploy.QUERY_DOCS}-document query (this machine, fold "
           f"{record.first_fold_number}, ms p50 / p99 of {deploy.REPEATS}):\n\n" +
           tabulate.markdown_table(["Row", "single model", "seed ensemble"], lat_rows) + "\n" if lat_rows else ""))


def _shipped(record: LossRecord, row: str) -> str:
  """What the saved model of `row` scores on the table's test lists: per fold the seed a saved model serves (the
  best on its selection split, pfd_jax.methods.ranker), averaged over folds."""
  select = record.train_config.get("select_on", "vali")
  picked = []
  for f in record.folds.values():
    r = f.rows[row]
    if select not in r.best or "test" not in r.best:
      return ""
    seed = int(np.argmax(np.asarray(r.best[select])[:, 0]))
    picked.append((seed, float(np.asarray(r.best["test"])[seed, 0])))
  seeds = ", ".join(str(s) for s, _ in picked)
  return (f" As shipped (the saved model serves seed {seeds}{' per fold' if len(picked) > 1 else ''}, the best on "
          f"{select}): test {np.mean([v for _, v in picked]):.3f}.")


def _vali_curve(r) -> Optional[np.ndarray]:
  """A row's validation NDCG@first-cutoff curve [models, epochs] (a saved record holds lists), or None where it
  has none or it is not one array (a GBDT row's boosting rounds differ in number)."""
  try:
    c = np.asarray((r.curves or {}).get("vali", []), float)
  except ValueError:
    return None
  return c[..., 0] if c.ndim == 3 else None


def search_offer(record: LossRecord, cfg: Mapping, o: search.SearchOptions) -> str:
  """The note of a run on a team's own data (its file labels, the best epoch on validation) that did not search
  (--search asks for it): what it would have cost at this run's pace, and the smallest gain of plain PFD over no
  distillation this run's test lists could show at the search's first level (the search reads other lists:
  validation, and the training lists out of fold); '' for any other run."""
  folds = list(record.folds.values())
  if (cfg["options"].get("search") or cfg["train"]["select_on"] != "vali" or not folds or
      folds[0].data.get("labels") != "file" or any(r not in folds[0].rows for r in ("no_distill", "pfd"))):
    return ""
  seconds = [r.seconds for f in folds for r in f.rows.values() if r.seconds]
  stops = costing.curve_stops([c for f in folds for r in f.rows.values() if (c := _vali_curve(r)) is not None], o,
                              cfg["train"]["epochs"])
  privileged = int(folds[0].data.get("num_privileged") or 0)
  est, level = primary(record, "pfd", "no_distill"), 0.05 / 2  # the search's first test: half its 5% level
  mde = (f"; plain PFD against no distillation on this table's {est.n} test lists x seeds: a smallest detectable "
         f"gain of {100 * est.mde(0.8, level) / est.reference:.1f}% (80% power, one-sided {100 * level:g}%, the "
         "search's first test)" if est is not None and est.reference else "")
  return (f"**PFD search not run** (--search adds the row 'PFD, searched on validation': per fold "
          f"{costing.search_cost(o, privileged, cfg['train']['alpha'], seconds, epochs=cfg['train']['epochs'], seeds=cfg['run']['seeds'], stops=stops)})"
          f"{mde}.\n\n")


def search_text(record: LossRecord) -> str:
  """The PFD search's report ('' without --search): per fold the chosen configuration and why, the search's time
  against one PFD row's (teacher + student), and what the rule could have found at these sizes; per privileged
  column (folds' mean) its strength, its teacher's and its best student's validation gain over no-distillation
  (over the folds whose search screened that column alone: each fold orders and prunes its subsets on its own
  lists). A record of the earlier rule (the simplest candidate tied with the best) reads as that rule."""
  folds = {k: f for k, f in record.folds.items() if f.search}
  if not folds:
    return ""
  lines = []
  for k, f in folds.items():
    s, base = f.search, f.search["candidates"]["no distillation"]
    primary = rows_lib.primary()
    pfd = sum(f.rows[n].seconds for n in (primary.recipe.teacher, primary.name) if n in f.rows)
    screened = (f", screened with {s['seeds']} seed{'s' * (s['seeds'] > 1)}" if s.get("seeds") else "") + (
        f", patience {s['patience']} epochs" if s.get("patience") else "")
    cost = (f"{len(s['candidates'])} candidates{screened}, in {s['seconds']:.0f} s with the chosen one's training on "
            f"every seed" + (f" ({s['seconds'] / pfd:.1f}x one PFD teacher and student)" if pfd else ""))
    if "order" not in s:
      lines.append(_tied_line(k, s, base, cost))
      continue
    first = s["order"][0]
    why = (f"found better than no distillation, {_gain(s['gains'][s['chosen']])}; {len(s['passed'])} of the "
           f"{len(s['order'])} candidates passed" if s["chosen"] != "no distillation" else
           f"no candidate found better than no distillation; the first, plain PFD: {_gain(s['gains'][first])} "
           f"(p={s['p'][0]:.2g} at level {s['levels'][0]:.3g})")
    where = (f"{s['pooled_lists']} lists: {s['lists']} validation" +
             (f" and the training lists out of {s['folds']} cross-fitted folds" if s.get("folds") else ""))
    lines.append(f"- {k}: **{s['chosen']}** ({why}; {where}); {cost}." + _operating(s.get("operating"))
                 + _whole(s.get("whole")) + _fresh(s.get("fresh")))
  head = next(iter(folds.values())).search
  ids = head["feature_ids"] or list(range(len(head["strength"])))
  mean = lambda get: np.mean([get(f.search) for f in folds.values()])
  theory = "subsets" in head  # a record of the earlier rule has no prediction
  known = lambda j, k: all(f.search["subsets"].get(str(j), {}).get(k) is not None for f in folds.values())
  cell = lambda j, k: f"{100 * mean(lambda s: s['subsets'][str(j)][k]):+.1f}%" if known(j, k) else "-"
  rows = [[f"feature {ids[j]} (z[{j}])", f"{mean(lambda s: s['strength'][j]):.3f}", _over(folds, "teachers", j),
           _over(folds, "single", j)] + ([cell(j, "measured")] if theory else [])
          for j in range(len(ids)) if any(str(j) in f.search["teachers"] for f in folds.values())]
  rule = ("the fallback procedure over a declared order (plain PFD against no distillation first at half the 5% "
          "level, the other subsets sharing the rest, each subset's settings after it at the level it passed with; "
          "seeds x lists crossed over the validation lists and the cross-fitted training lists): of the candidates "
          "found better than no distillation the one with the largest gain, none: no distillation; a candidate "
          "without a gain is chosen with probability at most 5%" if "order" in head else
          "the simplest candidate that a one-sided paired test over the validation lists (Bonferroni over the "
          "candidates) cannot tell from the best")
  nested = head.get("selection")  # a record from before the selection lists were set aside has none
  grid, selection = _nesting(nested)
  return ("**PFD searched on validation** (pfd_jax.methods.search; test never read): teachers on subsets of the "
          "privileged columns (all, each alone, backward elimination from the most predictive), students over "
          f"alpha x teacher temperature (for {grid}), no distillation a "
          f"candidate; chosen: {rule}, then trained with every seed as a PFD row "
          f"is (the row 'PFD, searched on validation').{selection}\n\n" + "\n".join(lines) + "\n\n" +
          _bias(folds) +
          tabulate.markdown_table(["Privileged column", "abs corr with the label (" +
                                   ("selection lists)" if nested else "train)"),
                                   "its teacher alone vs no-distillation (vali NDCG)",
                                   "its best student vs no-distillation (vali NDCG)"] +
                                  (["its student's measured gain (plain setting, every part)"] if theory else []),
                                  rows) + "\n" + (_withdrawn(folds) if theory else ""))


def ensemble_table(record: LossRecord, compared: Mapping[str, tabulate.Comparisons], ks) -> str:
  """The seed-ensemble rows ('' for a run without them), placed before the main table."""
  ens = compared.get("ensembles")
  if not ens:
    return ""
  folds = [f.ensembles for f in record.folds.values()]
  table = []
  for name in rows_lib.table_order(ens):
    means = np.mean([np.asarray(f[name]["ndcg"], np.float64).reshape(-1) for f in folds], 0)
    table.append([rows_lib.title(name) + ", seed ensemble"] + [f"{m:.3f}" for m in means] +
                 [tabulate.change_cell(ens[name].get("vs_lambdamart")), tabulate.change_cell(ens[name]["vs_single"])])
  n_q = next(iter(ens.values()))["vs_single"]["n"]
  return (f"Seed ensembles: every document scored by the mean over the seeds' best models (MLP logits, LightGBM raw "
          f"scores); NDCG@k averaged over folds. One ensemble per fold, so the paired comparisons are over the {n_q} "
          f"test queries with a positive (pooled over folds; 95% paired-t interval, p).\n\n" +
          tabulate.markdown_table(["Seed ensemble"] + [f"NDCG@{k}" for k in ks] +
                                  [f"NDCG@{ks[0]} vs LambdaMART ensemble (queries)",
                                   f"NDCG@{ks[0]} vs its single models (queries)"], table) + "\n")


def _withdrawn(folds) -> str:
  """Why the table shows no per-subset prediction, with the rank correlation of Theorem 2's plug-in prediction and
  the measured gains over every fold's subsets at the plain setting (stats.rank_correlation; '' under 4 pairs)."""
  pairs = [(v["predicted"], v["measured"]) for f in folds.values() for v in f.search["subsets"].values()
           if v.get("measured") is not None and v.get("predicted") is not None]
  rho = stats.rank_correlation(*zip(*pairs))[0] if len(pairs) >= 4 else np.nan
  if not np.isfinite(rho):
    return ""
  return (f"\nNo column's gain is predicted. Theorem 2 at plug-in estimates (pfd_jax.ops.theory.predicted_gain, in "
          f"each record) loses its penalty term once the labelled documents number in the thousands, so it can only "
          f"grow with what a column explains and cannot flag a column too predictive to teach from (Figure 5's "
          f"regime); it did not order the measured gains on the re-drawn Figure 5 population (its page says by how "
          f"much). Here its Spearman's rho with the measured gains of the {len(pairs)} searched subsets is "
          f"{rho:+.2f}; the subsets share columns and lists, so Fisher's interval, which counts them as independent, "
          f"is not given.\n")


def _nesting(selection: int) -> tuple:
  """(which subsets' grids a search screened, what chose its models' epochs) as a record with `selection` lists set
  aside says (0: a search from before they were)."""
  if not selection:
    return ("the subsets best at the plain PFD setting", " This search predates the nested one: each screened "
            "model's epoch was chosen on the lists that then scored it, which favours every candidate by its own "
            "epoch's luck; re-running the preset searches nested.")
  return ("the first subset the rule finds better at the plain PFD setting", f" Nested: {selection} validation "
          "lists, set aside first, choose every screened model's epoch and order the columns, and score nothing; no "
          "list that scores a candidate chose anything about it.")


def _gain(g: dict) -> str:
  """A candidate's gain over no distillation as the search estimated it: relative, with its 95% interval."""
  rel = lambda x: f"{100 * x / g['reference']:+.1f}%" if g["reference"] else "nan"
  return f"{rel(g['diff'])} [{rel(g['interval'][0])}, {rel(g['interval'][1])}]"


def _operating(o) -> str:
  """What the rule could have found at this fold's sizes (simulated; '' without two screening seeds)."""
  if not o:
    return ""
  pw = " / ".join(f"{100 * float(g):g}%" for g in o["power"])
  return (f" At these sizes ({o['seeds']} seeds x {o['lists']} lists, {o['trials']} simulated studies) a true gain "
          f"of {pw} in plain PFD is found with probability {' / '.join(f'{v:.2f}' for v in o['power'].values())} "
          f"(closed form {' / '.join(f'{v:.2f}' for v in o['closed'].values())}); a candidate without a gain is "
          f"chosen with probability at most 5% (the first comparison's simulated false rate at its level "
          f"{o['level']:.3g}: {o['false']:.3f}); the smallest gain found with probability 0.8: "
          f"{100 * o['mde']:.1f}%.")


def _whole(w) -> str:
  """What the whole rule as run could have found at this fold's sizes (pfd_jax.methods.rule.whole; '' for a record
  without it)."""
  if not w:
    return ""
  gains, plain, others = list(w["power"]), w["planted"][0], w["planted"][1:]
  span = lambda power, g: f"{min(power[g][c] for c in others):.2f}-{max(power[g][c] for c in others):.2f}"
  says = lambda power: " / ".join(f"{power[g][plain]:.2f}" for g in gains) + (
      f" when plain PFD has it, {' / '.join(span(power, g) for g in gains)} when another subset's plain setting "
      f"has it" if others else "")
  bound = (f"{w['seed_bound'] / w['seed_var']:.1f}x the estimate" if w["seed_var"] > 0 else
           f"{w['seed_bound']:.2g}, the estimate 0")
  return (f" The whole rule as run (every subset, the levels carried, the grid as it screens it; {w['trials']} "
          f"studies of these lists resampled, seed offsets drawn at the spread pooled over {w['seed_df']} degrees of "
          f"freedom) chooses distillation with probability {says(w['power'])}, for a true gain of "
          f"{' / '.join(f'{100 * float(g):g}%' for g in gains)}; at the seed spread's {100 * w['bound']:g}% upper "
          f"bound ({bound}) {says(w['bound_power'])}; with no gain anywhere {w['false']:.3f} (level "
          f"{w['level']:g}).")


def _over(folds, key: str, j: int) -> str:
  """The mean over folds of column j's gain over no distillation in the search record's `key` (teachers, single),
  over the folds that screened it, saying how many when not all; '-' where none did."""
  got = [f.search[key][str(j)] - f.search["candidates"]["no distillation"] for f in folds.values()
         if str(j) in f.search[key]]
  return "-" if not got else f"{np.mean(got):+.4f}" + (f" ({len(got)} of {len(folds)} folds)"
                                                          if len(got) < len(folds) else "")


def _fresh(f) -> str:
  """A fold's claimed gains against its test lists (fresh_record; '' for a record without them)."""
  if not f:
    return ""
  pct = lambda x: f"{100 * x:+.1f}%"
  say = lambda what, g: (f"{what} ({g['candidate']}) read {pct(g['claimed'])} over every part ({pct(g['validation'])} "
                         f"on the validation part), {pct(g['fresh'])} on the test lists ({pct(g['fresh_validation'])} "
                         f"for the validation part's models)")
  if f["chosen"] == f["best"]:
    said = [say("the best distilling candidate, the one chosen", f["best"])]
  else:
    said = [say("the best distilling candidate", f["best"])] + ([say("the chosen one", f["chosen"])] if f["chosen"] else [])
  return (" Against the test lists, which the search never read (the same screened models, scored after the "
          f"choice, {f['best']['fresh_lists']} lists with a positive): " + "; ".join(said) + ".")


def _bias(folds) -> str:
  """Over the folds: the best distilling candidate's (and the chosen one's) read - test gain, mean ± SE ('' for
  records without them)."""
  out = []
  for which, what in (("best", "the best distilling candidate"), ("chosen", "the chosen one")):
    got = [f.search["fresh"][which] for f in folds.values() if (f.search.get("fresh") or {}).get(which)]
    if got:
      d = np.array([100 * (g["claimed"] - g["fresh"]) for g in got])
      se = f" ± {d.std(ddof=1) / np.sqrt(d.size):.1f}" if d.size > 1 else ""
      out.append(f"{what}'s read gain (every part) minus its test gain: {d.mean():+.1f}{se} points over {d.size} "
                 f"fold{'s' * (d.size > 1)}")
  return ("The search's selection bias on this run: " + "; ".join(out) + " (experiments.search_bias measures it on "
          "constructed folders with many fresh lists).\n\n") if out else ""


def _tied_line(k: str, s: dict, base: float, cost: str) -> str:
  """A fold's line under the earlier rule (the simplest candidate tied with the best), as its record says."""
  why = ("no candidate beats no-distillation by more than validation noise" if s["chosen"] == "no distillation"
         else f"the simplest of the {s['tied']} candidates validation cannot tell from the best ({s['best']})")
  vs = (f"; against no-distillation on these lists {tabulate.change_cell(s['vs_no_distill'])}"
        if s.get("vs_no_distill") and s["chosen"] != "no distillation" else "")
  return (f"- {k}: **{s['chosen']}** (validation {s['candidates'][s['chosen']]:.4f}, no-distillation "
          f"{base:.4f}, {s['lists']} lists{vs}): {why}; {cost}.")
