"""What a Table 2 run's protocol says beside its table: the population its runs sampled (one fixed draw, or data
re-drawn per run with --draws, with the data's fingerprints), the selection of the best epoch (and, on validation,
the paper's test selection on the same runs with its optimism), and the power study of a re-drawn population."""
from __future__ import annotations

import os
from typing import Any, Dict, Mapping, Optional

import numpy as np

from experiments.framework import tabulate
from experiments.framework.schema import Preset
from experiments.framework.sequential_runs import ANALOGUE_TEST_LISTS
from experiments.framework.pairs import aggregate, test_selected
from experiments.framework.records import LossRecord
from experiments.framework.records import ROOT, read_results
from pfd_jax.data import analogues
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


# A draw's train, vali, test queries: the generator's 400 for training (the cost); validation and test as large as
# a fold of MSLR-WEB30K's (3:1:1, 6,306 each: the paper's protocol), ~820 test queries with a positive instead of 78.
DRAW_QUERIES = "400,6306,6306"
PILOT_DRAWS = 6  # the pilot ('redrawn'): the run and query components' order of magnitude in ~12 minutes
PILOT = "published/table2-synthetic-confirmatory"  # the page's copy of the pilot, which sizes the decisive runs
DECISIVE_DRAWS = 40  # plan(pilot): the draws BUDGET_MINUTES holds at the pilot's seconds per draw
GPU_DRAWS = 174  # plan(pilot, mde=0.02): the draws at which every comparison's MDE is at most 2%
# decisive_gpu trains all its draws side by side (experiments/framework/drawn.py): one layout, so each row compiles
# once per loss. On the device, estimated: every draw's training groups and its validation and test lists with a
# positive (~800 each), ~80 MB a draw at the generator's ~40 documents and 136 features, twice that with the
# placebo's copy: ~28 GB for 174 draws, within an H100's 78 GB.
GPU_DRAWS_PER_PROGRAM = GPU_DRAWS


def redrawn_flags(tag: str, draws: int, extra: str = "") -> str:
  """A table2 preset's flags on the re-drawn population: `draws` draws of DRAW_QUERIES queries, one seed each, the
  best epoch on validation (test scored at the kept epochs only), every PFD row."""
  return (f"--tag={tag} --draws={draws} --seeds=1 --select_on=vali --curves=select --synthetic_queries={DRAW_QUERIES} "
          f"{extra + ' ' if extra else ''}--methods={','.join(rows_lib.methods(one_process=False))}")


# The ablations' confirmatory runs (Tables 5 and 6, Figures 3, 4 and 5; experiments/page/family.py): the
# population of Table 2's decisive run (each draw its own data, labels and validation and test sets of DRAW_QUERIES
# queries), one seed a draw, the best epoch on validation. Declared before any of them ran: half the decisive run's
# draws, so that each fits an afternoon on two cores (report --plan estimates each from its fixed-data run).
ABLATION_DRAWS = 20


def redrawn_preset(title: str, label: str = "synthetic-redrawn", sizes: str = f"--synthetic_queries={DRAW_QUERIES}",
                   drawn: str = "draws with test and validation sets of 6,306 queries") -> Preset:
  """An ablation driver's confirmatory preset ('redrawn', results `label`): ABLATION_DRAWS draws of the re-drawn
  population at `sizes` (the driver's flags; `drawn` says them on the page), one seed a draw, validation
  selection."""
  return Preset("redrawn", label, f"--tag=redrawn --draws={ABLATION_DRAWS} --seeds=1 --select_on=vali "
                f"--curves=select {sizes}", f"{title}, re-drawn population: {ABLATION_DRAWS} {drawn}, validation "
                "selection")


BUDGET_MINUTES = 75.0  # the decisive run's time on two CPU cores (declared before its pilot ran)


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


def plan(pilot: Mapping[str, Any], budget_minutes: float = BUDGET_MINUTES, mde: float = 0.0) -> Dict[str, Any]:
  """The decisive run a re-drawn pilot run (its results.json) sizes: the draws its seconds per draw fit in
  `budget_minutes` (mde > 0: the fewest draws at which every PFD comparison's MDE is at most `mde`), and each
  comparison's MDE and power at that many draws from the pilot's spread of a draw."""
  return dict(_sized(redrawn_power({loss: LossRecord.from_json(r) for loss, r in pilot["losses"].items()}),
                     budget_minutes, mde),
              pilot_commit=(pilot.get("provenance", {}).get("code", {}).get("git_commit") or ""))


def _sized(p: Mapping[str, Any], budget_minutes: float, mde: float = 0.0) -> Dict[str, Any]:
  sds = [v["sd"] for v in p["comparisons"].values()]
  if mde > 0:  # MDE falls with the draws: bisect for the first count at which the largest reaches `mde`
    lo, hi = 2, 2
    while max(_at(sd, hi)[0] for sd in sds) > mde:
      lo, hi = hi, 2 * hi
    while lo < hi:
      mid = (lo + hi) // 2
      lo, hi = (lo, mid) if max(_at(sd, mid)[0] for sd in sds) <= mde else (mid + 1, hi)
    draws = hi
  else:
    draws = int(budget_minutes * 60 // p["seconds_per_draw"])
  return dict(budget_minutes=budget_minutes if mde <= 0 else None, target_mde=mde or None,
              seconds_per_draw=p["seconds_per_draw"], pilot_draws=p["draws"], draws=draws,
              comparisons={k: dict(zip(("mde", "power"), _at(v["sd"], draws)), sd=v["sd"])
                           for k, v in p["comparisons"].items()})


def power_text(cfg: Mapping[str, Any], records: Mapping[str, LossRecord],
               pilot: Optional[Mapping[str, Any]] = None) -> str:
  """The re-drawn population's power study and the size of a decisive run ('' for fixed data); pilot: the plan
  (:func:`plan`) the run was sized by, set beside what it achieved."""
  if not cfg["data"].get("draws") or len(next(iter(records.values())).folds) < 2:
    return ""
  p = redrawn_power(records)
  if not p["comparisons"]:  # a run of the PFD rows alone: nothing compared with the PFD student
    return ""
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
    target = (f"the draws at which every comparison's MDE is at most {100 * pilot['target_mde']:.1f}%"
              if pilot.get("target_mde") else f"the draws {pilot['budget_minutes']:.0f} minutes hold")
    text += (f"\nThis run was sized by its pilot (commit `{pilot['pilot_commit'][:10]}`, {pilot['pilot_draws']} draws "
             f"at {pilot['seconds_per_draw']:.0f} s per draw on its machine) to {target}: {pilot['draws']} draws; it ran "
             f"{n} draws in {p['seconds_per_draw'] * n / 60:.0f} minutes of training and scoring. "
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


# The paper's own protocol on its own files (section 4 and appendix A.3; docs/paper-datasets.md): Table 2 / Table 4's
# rows with RankBCE and RankNet, alpha 0.5, 100 epochs, the best epoch on test (A.3: "the one that has the best testing
# NDCG@8 score in each run"), "5 independent runs" on Yahoo and Istella, "the official 5-fold splits" (one run each) on
# Web30k. The preprocessing and labels are each dataset's defaults, the paper's: groups with no positive grade or
# fewer than 10 documents removed, log1p, Eq. 2's labels at t = 4, tau = 4.8, k = 40 / 200 / 50 privileged columns.
PAPER_FLAGS = ("--tag=paper --loss=both --methods=no_distill,self_distill,gend,pfd --alpha=0.5 --epochs=100 "
               "--select_on=test --empty_rule=exclude --labels=gumbel --min_docs=10 --log1p")
PAPER_RUNS = {"web30k": ("MSLR-WEB30K", 1, 5, "its five official folds, one run each"),  # (title, seeds, folds, runs)
              "yahoo": ("Yahoo! LTR Set 1", 5, 1, "5 independent runs"),
              "istella": ("Istella LETOR", 5, 1, "5 independent runs")}
def _paper_cost(name: str) -> str:
  # a GPU's figure only from a run of the preset on one: none has run (the benchmark's GPU rate is of training epochs
  # of a narrower MLP, without evaluation or RankNet's pairs, so it is no figure of this run)
  return (f"which the project does not hold: $PFD_DATA_DIR/{name}; docs/paper-datasets.md; its time on a GPU not "
          "measured (no run of it on one yet); on two cores, its probe says (--plan)")


PAPER_PRESETS = tuple(
    Preset(f"paper_{name}", f"{name}-paper", f"--dataset={name} --seeds={seeds} {PAPER_FLAGS}" +
           (f" --folds={','.join(map(str, range(1, folds + 1)))}" if folds > 1 else ""),  # refused without them
           f"Table 2 / Table 4 on {title} as the paper ran it ({runs})", accelerator=_paper_cost(name),
           needs=f"the paper's {title} files")
    for name, (title, seeds, folds, runs) in PAPER_RUNS.items())


# Table 2 on the paper analogues (docs/analogues.md): per analogue and loss a pilot, then the decisive run it sizes,
# whose three claims are members of the page's family (experiments/page/family.py), declared with the sizing
# rule below before any pilot or decisive run was made. Each loss runs on the population calibrated to its own
# Table 4 row at the run's size (--analogue=calibrated_for=<loss>: an error while it is not calibrated there): on two
# cores at the analogue's declared fraction of the paper's groups (pfd_jax.data.analogues: an epoch of about
# 110,000-150,000 documents), with the paper's rows, 100 epochs, one seed a draw, the best epoch on validation (Table
# 1's validation lists at that fraction). The test split holds ANALOGUE_TEST_LISTS[name] x Table 1's test lists at
# any size, as the calibration measured it: a claim's MDE is mostly the noise of the few test lists with a positive
# (Yahoo's 4,089 hold about a hundred): five times Table 1's for Yahoo and Web30k. Istella's once, declared before
# any Istella calibration or run: its 9,782 test lists (316 documents each, 8.83% with a positive) hold about 860
# with a positive, about Web30k's five times (1,009 measured) and more than Yahoo's (about 500), while five times
# them (15 million documents, 13.6 GB of float32 columns before the lists without a positive are dropped) do not
# fit 24 GiB beside training. The same runs at the paper's groups (--synthetic_scale = 1 / fraction, on the
# population calibrated there) are presets for an accelerator: diagnostics beside the members' runs.
ANALOGUE_PILOT_DRAWS = 3
ANALOGUE_MDE = 0.03  # the decisive run: the fewest draws at which every comparison's MDE is at most this (plan)


def analogue_flags(name: str, loss: str, tag: str, draws: int, extra: str = "", scale: float = 1.0, *,
                   methods: str = "--methods=no_distill,self_distill,gend,pfd") -> str:
  test_scale = ANALOGUE_TEST_LISTS[name] / analogues.share(name, scale)
  return (f"--dataset={name} --loss={loss} --analogue=calibrated_for={loss},test_scale={test_scale:g} "
          f"--synthetic_scale={scale:g} --tag={tag} --draws={draws} --seeds=1 "
          f"--select_on=vali --curves=select --epochs=100 {extra + ' ' if extra else ''}{methods}").rstrip()


def decisive_plan(name: str, loss: str, root: str = ROOT, size: str = "") -> Dict[str, Any]:
  """plan(an analogue's published pilot, mde=ANALOGUE_MDE), the rule declared before the pilot ran; {} while the
  pilot is not published. size: '' (the declared fraction) or 'paper_' (the paper's groups)."""
  path = os.path.join(root, "published", f"table2-{name}-{size}pilot_{loss}")
  if not os.path.isdir(path):
    return {}
  return plan(read_results(path, "pilot"), mde=ANALOGUE_MDE)


def decisive_draws(name: str, loss: str, root: str = ROOT, size: str = "") -> int:
  """The draws of an analogue's decisive run (decisive_plan's); 0 while the pilot is not published (the decisive
  run then fails at once on --pilot)."""
  return decisive_plan(name, loss, root, size).get("draws", 0)


RUN_HOURS = 3  # a run on two cores that one waits for: a longer one is a GPU's, or made as several runs that resume
ON_TWO_CORES = "a run of its own (minutes a draw on a 2-core CPU; it resumes by row), or a GPU"


def _two_cores(sized: Mapping[str, Any]) -> str:
  """Where a decisive run its pilot sized can be made: its hours on two cores at the pilot's seconds per draw."""
  hours = sized["draws"] * sized["seconds_per_draw"] / 3600
  if hours <= RUN_HOURS:
    return ON_TWO_CORES
  return (f"an accelerator: about {hours:.0f} hours on two cores at its pilot's {sized['seconds_per_draw']:.0f} s a "
          "draw (a run resumes by row: stop and start it again as you like)")


AT_THE_FRACTION = "minutes a draw on two cores at the declared fraction; a run resumes by row"


def _uncalibrated(name: str, loss: str, scale: float, size: str) -> str:
  """What a run on analogue `name` with `loss` waits for first: '' when it is calibrated at `scale`."""
  return ("" if loss in analogues.calibrations(name, scale) else
          f"its calibration at {size} size (docs/analogues.md), then ")


def _analogue_presets(name: str, loss: str, paper_size: bool = False) -> tuple:
  size, scale = ("paper_", 1 / analogues.ANALOGUES[name].fraction) if paper_size else ("", 1.0)
  pilot, sized = f"{name}-{size}pilot_{loss}", decisive_plan(name, loss, size=size)
  draws = sized.get("draws", 0)
  first = _uncalibrated(name, loss, scale, "the paper" if paper_size else "this")
  where = "an accelerator" if paper_size else ON_TWO_CORES
  at = ("the paper's groups" if paper_size else
        f"{analogues.ANALOGUES[name].fraction:g} of the paper's groups, the declared fraction")
  cost = ("hours on two cores: every student's distillation term reads every training group each epoch; a run "
          "resumes by row") if paper_size else AT_THE_FRACTION
  return (Preset(f"{name}_{loss}_{size}pilot", pilot,
                 analogue_flags(name, loss, f"{size}pilot_{loss}", ANALOGUE_PILOT_DRAWS, scale=scale),
                 f"Table 2 / Table 4 on the {name} analogue, {loss}: pilot ({ANALOGUE_PILOT_DRAWS} draws at {at}, "
                 "validation selection)", accelerator=cost, needs=first + where),
          Preset(f"{name}_{loss}_{size}decisive", f"{name}-{size}decisive_{loss}", analogue_flags(
              name, loss, f"{size}decisive_{loss}", draws, f"--label_seed=1 --seed=1 --target_mde={ANALOGUE_MDE:g} "
              f"--pilot=published/table2-{pilot}", scale=scale),
                 f"Table 2 / Table 4 on the {name} analogue, {loss}, decisive: the draws its pilot sizes for an MDE "
                 f"of {100 * ANALOGUE_MDE:g}% on every comparison ({draws or 'its pilot not run yet'}) at {at}, "
                 "validation selection", accelerator=cost,
                 needs=first + ("" if draws else "its pilot, then ") + (
                     _two_cores(sized) if draws and not paper_size else where)))


# all three analogues, declared at once with their members (each waits for its calibration)
ANALOGUE_PRESETS = tuple(p for paper_size in (False, True) for name in analogues.ANALOGUES
                         for loss in analogues.LOSSES for p in _analogue_presets(name, loss, paper_size))


# A figure's sweep on the analogue the paper ran it on (Figure 3: section 4.2, "The experiments here use the Yahoo
# dataset and RankBCE loss"; Figures 4 and 5 name no dataset): the ablations' rule (ABLATION_DRAWS draws, one seed a
# draw, validation selection), on the population calibrated to that loss's Table 4 teachers at the declared
# fraction, its test split as Table 2's analogue runs hold it, and draws of its own (seeds 2: Table 2's pilot draws
# from seeds 0, its decisive run from seeds 1). Declared, with its member, before it ran.
def analogue_redrawn_preset(title: str, name: str, loss: str, extra: str) -> Preset:
  """A sweep driver's confirmatory preset on analogue `name` with `loss` (`extra`: the driver's own flags)."""
  a = analogues.ANALOGUES[name]
  return Preset(f"{name}_redrawn", f"{name}-redrawn", analogue_flags(
      name, loss, "redrawn", ABLATION_DRAWS, f"--label_seed=2 --seed=2 {extra}", methods=""),
                f"{title} on the {a.paper} analogue, {loss}, re-drawn population: {ABLATION_DRAWS} draws at "
                f"{a.fraction:g} of the paper's groups, validation selection",
                accelerator=AT_THE_FRACTION, needs=_uncalibrated(name, loss, 1.0, "this") + ON_TWO_CORES)
