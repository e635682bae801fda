r"""Table 2 / Table 4 / Figure 2 of the paper: no-distillation, self-distillation, GenD and PFD, beside the
practitioner's incumbent (LightGBM LambdaMART) and distillation across model families (:mod:`pfd_jax.methods.gbdt`).

  python -m experiments.paper.table2                                  # both losses, synthetic default
  python -m experiments.paper.table2 --dataset=ohsumed --loss=rankbce # 5 folds x 5 seeds
  python -m experiments.paper.table2 --dataset=web30k --data_dir=/data/MSLR-WEB30K --seeds=5

Writes <out_dir>/<dataset>[-<data folder>]/<hash>/results.json (linked as <out_dir>/<dataset>[-...]/latest once
written: config, environment, per-seed best metrics and per-epoch curves of every row, wall times), table.md (the paper's Table 4 layout: mean +- std over folds x seeds and the
change against no-distillation) and fig2_<loss>.png (test NDCG@8 per epoch of every method).
"""
import dataclasses
import time
from typing import Any, Dict, Mapping, Tuple

import numpy as np
from absl import logging

from experiments.framework import (costing, deploy, drawn, drawstore, fold_data, lifecycle, monitor, plots, position,
                                   practice, protocol, records, rowstore, rundir, schema, sequential_runs, tabulate,
                                   walltime)
from experiments.framework.pairs import aggregate, column_comparisons, comparisons, reference
from experiments.framework.records import FoldRecord, LossRecord, RowRecord, RunRecord
from experiments.framework.schema import Preset
from pfd_jax import distributed
from pfd_jax.config import ConfigError, option
from pfd_jax.methods import distill, search
from pfd_jax.methods import rows as rows_lib
from pfd_jax.methods.gbdt import GBDTConfig
from pfd_jax.ops import losses as losses_lib


def all_methods() -> tuple:
  """The --methods choices: every registered row's that no option adds (pfd_jax.methods.rows)."""
  return rows_lib.methods()


# The rows of a run without --methods, named here (not "every registered row"), so that a row registered later (a
# user's, or the project's) changes no published run and no run's folder: it runs where --methods names it.
DEFAULT_METHODS = ("no_distill", "self_distill", "gend", "pfd", "placebo", "lambdamart", "pfd_from_lambdamart",
                   "gbdt_from_pfd")


@dataclasses.dataclass(frozen=True)
class Options:
  methods: Tuple[str, ...] = option((), "Methods (rows) to run (default: the paper's four, the placebo and the three "
                                    "LightGBM rows, DEFAULT_METHODS; placebo = the PFD teacher and student "
                                    "on privileged features permuted as --placebo_within says, the control that separates "
                                    "the privileged information from distillation; the LightGBM ones, lambdamart "
                                    "(LambdaMART on x), pfd_from_lambdamart (LambdaMART teacher on x+z, MLP "
                                    "student) and gbdt_from_pfd (PFD teacher, LightGBM students), in a one-process "
                                    "run only; any row registered in pfd_jax.methods.rows).", choices=all_methods)
  gbdt: GBDTConfig = option(GBDTConfig(), "LightGBM settings of the LightGBM rows.")
  position: int = option(0, "Feature id of the display position (in --privileged; 1, 2, ... or log2(1 + position)):"
                         " adds the debiasing rows (those of pfd_jax.methods.rows with when=('position',)).", lo=0,
                         omit_default=True)
  randomized: int = option(0, "Feature id marking the lists shown in random order (1 on their items; in --privileged):"
                           " IPS from their click rates too.", lo=0, omit_default=True)
  ips_clip: float = option(0.05, "IPS rows: propensities are clipped from below at this value.", lo=0, hi=1,
                           lo_open=True, omit_default=True)
  search: bool = option(False, "Adds the row 'PFD, searched on validation' (pfd_jax.methods.search): teachers on "
                        "subsets of the privileged columns, students over alpha x teacher temperature, chosen by "
                        "the fallback procedure against no distillation; needs --select_on=vali. Off by default "
                        "(its cost is many rows'): a run on your own data that leaves it out says what it would cost "
                        "and could detect.", omit_default=True)
  search_folds: int = option(3, "--search: cross-fitting folds over the training lists, every candidate also scored "
                             "on its held-out lists (0 = the validation lists only).", lo=0, omit_default=True)
  search_columns: int = option(4, "--search: the most predictive privileged columns tried one by one (alone, and "
                               "removed in turn from all of them).", lo=1, omit_default=True)
  search_seeds: int = option(2, "--search: the seeds each candidate is screened with (the chosen one is then "
                             "trained with every seed, as a PFD row; 0 = every seed).", lo=0, omit_default=True)
  search_patience: int = option(10, "--search: screened teachers and students stop once no model has improved on "
                                "the selection lists (half the validation lists) for this many epochs (0 = every "
                                "epoch).", lo=0, omit_default=True)
  search_refine: int = option(1, "--search: the alpha x temperature grid is tried for this many subsets, the first "
                              "whose plain PFD setting the rule finds better (0 = the grid for every subset).", lo=0,
                              omit_default=True)
  teachers_only: bool = option(False, "Only the baseline and the teachers of --methods (calibrate).", omit_default=True)
  baseline: bool = option(True, "Train no-distillation beside --methods (--nobaseline: a deciding run whose claims "
                          "against it are decided trains only the rows still compared).", omit_default=True)
  pilot: str = option("", "A re-drawn pilot run's folder (its results.json, or the page's gzipped copy in "
                      "published/): the run records the plan that pilot gives (protocol.plan: the draws of "
                      "protocol.BUDGET_MINUTES, each comparison's MDE and power at 2%) and its page sets it beside "
                      "what the run achieved.", omit_default=True)
  target_mde: float = option(0.0, "With --pilot: size by a target instead of the time budget (the fewest draws at "
                             "which every PFD comparison's MDE is at most this, relative; 0 = the budget).", lo=0,
                             omit_default=True)
  draw_store: str = option("", "With --draws: each finished draw kept as a small record under "
                           "published/draws/<this name>/<loss>/ and committed to the repository as it ends; a draw "
                           "committed there is read, not trained (experiments/framework/drawstore.py).",
                           omit_default=True)
  draws_per_program: int = option(0, "With --draws: this many draws of an MLP row in one program, on one layout "
                                  "(experiments/framework/drawn.py); 0 = one after another.", lo=0, omit_default=True)

  def __post_init__(self):
    if self.draw_store and (self.draws_per_program or "/" in self.draw_store or self.draw_store.startswith(".")):
      raise ConfigError("draw_store", f"{self.draw_store!r}: a plain name, for draws run one after another "
                        "(not with --draws_per_program)")
    if self.randomized and not self.position:
      raise ConfigError("randomized", "the randomised lists serve the --position rows; name the "
                        "position column with --position too")

  def methods_for(self, processes: int) -> tuple:
    """The methods a run of `processes` processes trains (LightGBM needs the whole training split in one)."""
    if not self.methods:
      return tuple(m for m in DEFAULT_METHODS if m in rows_lib.methods(one_process=processes == 1))
    whole = set(self.methods) - set(rows_lib.methods(one_process=False))
    if processes > 1 and whole:
      raise ConfigError("methods", f"{','.join(sorted(whole))}: LightGBM rows need the whole training split in one "
                        "process; run them in one process")
    return self.methods

  def offered(self, ps=None) -> tuple:
    """The run options that add rows (pfd_jax.methods.rows.Row.when): the search, and with a position column its
    rows (IPS from randomised lists when their propensities could be estimated)."""
    return (("search",) if self.search else ()) + (("position",) if self.position else ()) + (
        ("randomized",) if ps is not None and "randomized" in ps.propensities else ())

  def searching(self) -> "search.SearchOptions":
    return search.SearchOptions(self.search_columns, self.search_seeds or None, self.search_patience,
                                self.search_refine or None, self.search_folds)


def num_rows(cfg: schema.Config) -> int:
  """How many models a run trains (the progress line's count): per loss and fold (a drawn run: per chunk of draws
  trained side by side), the rows of its methods and options and the teachers they need (a search counts its
  subsets' teachers and students)."""
  o = cfg.options
  offered = o.offered() + (("randomized",) if o.randomized else ())
  plan = rows_lib.plan(o.methods_for(cfg.output.num_processes), offered, not o.teachers_only, o.baseline)
  per_fold, folds = len(plan) + (o.searching().programs - 1 if o.search else 0), len(fold_data.folds_of(cfg.data))
  return len(cfg.losses) * (-(-folds // o.draws_per_program) if o.draws_per_program else folds) * per_fold


def run(cfg: schema.Config) -> RunRecord:
  """Runs every (loss, fold) of `cfg` and returns the results written to results.json (per loss a
  :class:`~experiments.framework.records.LossRecord`)."""
  if cfg.options.search and cfg.train.select_on != "vali":
    raise ConfigError("search", "the PFD search chooses on validation: add --select_on=vali (a folder with vali.txt)")
  if cfg.options.search and cfg.options.search_folds == 1:  # before any row trains
    raise ConfigError("search_folds", "cross-fitting needs at least 2 folds (0: the validation lists alone), got 1")
  out = RunRecord(config=cfg, env=rundir.environment(), losses={})
  if cfg.options.pilot:  # before any training: a missing pilot fails the run at once
    out["pilot"] = protocol.plan(records.read_results(cfg.options.pilot, "pilot"), mde=cfg.options.target_mde)
  t_all = time.time()
  fold_data.check_files(cfg.data)
  methods = cfg.options.methods_for(distributed.comm().count)
  if set(methods) != set(DEFAULT_METHODS) and not cfg.options.methods:
    logging.info("the LightGBM rows need the whole training split in one process: this %d-process run trains "
                 "the MLP rows only", distributed.comm().count)
  shared = {}  # LightGBM results that no loss changes (the LambdaMART rows, out-of-fold teacher scores), per fold
  side_by_side = drawn.run_folds(cfg, methods) if cfg.options.draws_per_program else None
  for loss in cfg.losses:
    if side_by_side is not None:
      folds = side_by_side[loss]
    else:
      names = [r.name for r in rows_lib.plan(methods, cfg.options.offered(), not cfg.options.teachers_only,
                                             cfg.options.baseline)]
      folds, kept = {}, drawstore.kept(cfg, loss, names)
      for fold in fold_data.folds_of(cfg.data):
        if fold in kept:
          folds[f"fold{fold}"] = drawstore.from_record(kept[fold])
          continue
        folds[f"fold{fold}"] = run_fold(cfg, loss, fold, methods, shared.setdefault(fold, {}), first=not folds)
        drawstore.keep(cfg, loss, fold, folds[f"fold{fold}"])
    record = out["losses"][loss] = LossRecord(train_config=cfg.train_config(loss).record(), folds=folds)
    record.comparisons = comparisons(record)
    if cfg.run.ensembles:
      record.deploy = deploy.choose(list(folds.values()), True)
  out["seconds"] = time.time() - t_all
  return out


def run_fold(cfg: schema.Config, loss: str, fold: int, methods: tuple, shared: Dict[str, Any],
             first: bool) -> FoldRecord:
  """The rows of `methods` and of the run's options (--position, --search) on one fold for one loss, each trained by
  its registry entry's function (pfd_jax.methods.distill.run_rows). shared: the fold's LightGBM results that
  no loss changes; first: the run's first fold (it measures the serving latency)."""
  t0 = time.time()
  ds, dd, tc, keys = fold_data.fold_setup(cfg, loss, fold)
  pos = position.position_setup(cfg, ds, tc) if cfg.options.position else None
  o = cfg.options
  where = None if pos is None else distill.Position(pos.column, pos.positions, pos.propensities, pos.ips_config,
                                                    pos.top, o.ips_clip)
  store = rowstore.RowStore(cfg, ds, fold, loss)
  log = monitor.progress(f"[{loss} fold{fold}]")
  placebo = fold_data.placebo_data(cfg, ds, tc, fold)
  found = costing.announce_search(store.found(), o.searching(), int(ds.config["num_privileged"]), tc.alpha,
                                   tc.epochs, cfg.run.seeds)
  ctx = distill.Context(keys, tc, dd, ds, fit=store.fit(), found=found, hooks=log, placebo=placebo,
                        lightgbm=o.gbdt, device_data=lambda d: fold_data.device_data(cfg, d, tc, fold),
                        seed=cfg.run.seed,
                        cache=shared, position=where, search=o.searching())
  plan = rows_lib.plan(methods, o.offered(pos), students=not o.teachers_only, baseline=o.baseline)
  rows = distill.run_rows(ctx, plan)
  baseline = next((r.name for r in plan if r.baseline), plan[0].name)  # each row's valid mask is the labels'
  found = next((t.found for t in rows.values() if t.found is not None), None)
  # Per test list NDCG@8 of each row's best-epoch models, averaged over seeds: the query-level comparison
  # (a row that reads the permuted z is scored on the placebo data).
  lists = {name: deploy.row_lists(tc, t, ds["test"],
                                  (placebo() if rows_lib.REGISTRY[name].recipe.permuted else dd).eval_sets["test"],
                                  dd.max_buckets) for name, t in rows.items()}
  record = FoldRecord(data=ds.config, train_groups=dd.num_train_groups, positive_train_groups=dd.num_positive_groups,
                      seconds=time.time() - t0,
                      rows={name: RowRecord.of(t.result, lists[name][0]) for name, t in rows.items()},
                      test_lists_valid=lists[baseline][1], debias=pos.notes if pos else None,
                      search=practice.search_record(found, ds, practice.fresh_record(tc, found, dd.eval_sets["test"]))
                      if found else None)
  if o.draw_store and "vali" in dd.eval_sets:  # a committed draw keeps what selected its epochs, list by list
    for name, t in rows.items():
      v, valid = deploy.row_lists(tc, t, ds["vali"], dd.eval_sets["vali"], dd.max_buckets)
      record.rows[name].vali_lists = np.asarray(v).mean(0)[np.asarray(valid, bool)]
  if cfg.run.ensembles:
    record.ensembles = deploy.ensembles(tc, rows, ds, dd)
    if first:
      record.latency = {n: deploy.latency(rows[n].config, rows[n].result, ds["test"], rows[n].view)
                        for n in deploy.candidates(rows)}
  return record


def _options(cfg: Dict[str, Any]) -> Options:
  """The search's options of a recorded run (what results.json leaves out is the default)."""
  return dataclasses.replace(Options(), **{k: v for k, v in cfg["options"].items() if k.startswith("search_")})


def to_markdown(res: RunRecord) -> str:
  cfg = res["config"]
  tr, rn = cfg["train"], cfg["run"]
  parts = [f"# Table 4 layout: {cfg['data']['dataset']}\n\n",
           f"Mean +- std over folds x seeds ({rn['seeds']} seeds); best epoch by NDCG@8 on "
           f"{tr['select_on']}; test lists without a positive: {tr['empty_rule']}d; alpha = {tr['alpha']}; "
           f"{tr['epochs']} epochs; teacher term: {rn.get('teaching') or 'the data loss on sigmoid(t) (paper)'}. "
           f"Rows marked * use privileged features. "
           f"Wall time {res['seconds']:.0f} s{walltime.loaded(res)} on {res['env']['backend']} "
           f"({res['env']['cpus']} CPUs).\n"]
  records = {loss: LossRecord.from_json(record) for loss, record in res["losses"].items()}
  first = next(iter(records.values()))
  parts.append(f"Labels: {_labels_text(first.first_fold.data)}. {tabulate.dropped_text(first.first_fold.data)}"
               f"{tabulate.privileged_text([f.data for f in first.folds.values()])}.\n" +
               protocol.population_text(cfg, next(iter(records.values()))))
  for loss, record in records.items():
    train = record.train_config
    pooled = aggregate(record)
    ks = train["ks"]
    baseline = reference(pooled)
    versus = "no-distillation" if baseline == rows_lib.baseline() else rows_lib.title(baseline, short=True)
    base = pooled[baseline].mean(0)
    fold0 = record.first_fold
    tau = f"tau_target={fold0.data['tau']}, " if fold0.data.get("tau") is not None else ""
    parts.append(f"\n## Loss: {loss} (batch {train['batch_size']}, lr {train['lr']}); {tau}"
                 f"{fold0.positive_train_groups}/{fold0.train_groups} positive train groups (fold "
                 f"{record.first_fold_number})\n\n")
    table = []
    compared = record.comparisons or comparisons(record)
    folds = len(record.folds)
    compared = dict(column_comparisons(record), **compared)  # a file from before a column: computed from its rows
    columns = [r for r in rows_lib.columns() if f"vs_{r.name}" in compared]  # vs placebo, PFD, LambdaMART
    for name in rows_lib.table_order(pooled):
      v = pooled[name]
      cells = [f"{tabulate.fmt_pm(m, s)} ({tabulate.fmt_change(m, b)})" for m, s, b in zip(v.mean(0), v.std(0), base)]
      runs = tabulate.change_cells(compared["runs"].get(name), folds)
      table.append([rows_lib.title(name)] + cells + runs[:1] + [tabulate.change_cell(compared["queries"].get(name))] +
                   runs[1:] + [tabulate.change_cell(compared[f"vs_{r.name}"].get(name)) for r in columns])
    n_q = next(iter(compared["queries"].values()), {}).get("n", 0)
    parts.append(tabulate.stats_note(versus, len(pooled[baseline]), folds, ks[0]) +
                 f"Per query: the same over the {n_q} test queries with a positive (pooled over folds), each "
                 "query's NDCG@8 averaged over seeds.\n\n")
    runs_head, seeds_head = tabulate.change_header(versus, ks[0])
    within = _PLACEBO_TEXT[cfg['run'].get('placebo_within', 'query')]
    parts.append("".join(r.column_note.format(k=ks[0], select_on=tr["select_on"], within=within) for r in columns) +
                 position.table2_note(fold0.debias, cfg["options"].get("position"), f"fold{record.first_fold_number}"))
    parts.append(protocol.optimism_text(record, tr["select_on"]) + practice.deploy_text(record, compared, ks) +
                 (practice.search_text(record) or practice.search_offer(record, cfg, _options(cfg).searching())) +
                 practice.ensemble_table(record, compared, ks))
    parts.append(tabulate.markdown_table(["Training method"] + [f"NDCG@{k}" for k in ks] +
                                       [runs_head, f"NDCG@{ks[0]} vs {versus} (queries)", seeds_head] +
                                       [f"NDCG@{ks[0]} vs {r.label} (runs)" for r in columns], table))
  return "".join(parts) + protocol.power_text(cfg, records, res.get("pilot"))


_PLACEBO_TEXT = {"query": "within each query", "split": "across the training split (and each eval split)"}


def _labels_text(d: Mapping[str, Any]) -> str:
  if d.get("labels") == "file":
    g = d.get("positive_grade")
    return "the files' own labels" + (f", y = 1[label >= {g}]" if g is not None else " (0/1)")
  return f"Gumbel draws of Eq. 2 (t = {d['t']}, tau = {d['tau']}, label seed {d['seed']})"


def plot_curves(res: RunRecord, path: str) -> list:
  """Figure 2: test NDCG@8 per epoch of every row, one PNG per loss (`path` with _<loss> before .png)."""
  plt = plots.pyplot()
  paths = []
  for loss, d in res["losses"].items():
    record = LossRecord.from_json(d)
    fig, ax = plt.subplots(figsize=(6, 4))
    # --curves=select scored only the selection split per epoch: its curves are the ones there are
    split = "test" if all("test" in r.curves for f in record.folds.values() for r in f.rows.values() if r.curves) \
        else res["config"]["train"]["select_on"]
    for name in rows_lib.table_order({n for f in record.folds.values() for n in f.rows}):
      curves = [np.asarray(f.rows[name].curves[split])[:, :, 0] for f in record.folds.values()
                if name in f.rows and f.rows[name].curves]  # LightGBM rows have no epochs
      if not curves:
        continue
      c = np.concatenate(curves, 0)  # [folds * seeds, E]
      x = np.arange(1, c.shape[1] + 1)
      ax.plot(x, c.mean(0), label=rows_lib.title(name), ls="--" if rows_lib.is_teacher(name) else "-")
      ax.fill_between(x, c.mean(0) - c.std(0), c.mean(0) + c.std(0), alpha=0.15)
    ax.set_xlabel("epoch")
    ax.set_ylabel(f"{split} NDCG@8")
    ax.set_title(f"{res['config']['data']['dataset']}, {loss}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    paths.append(path.replace(".png", f"_{loss}.png"))
    fig.savefig(paths[-1], dpi=120)
    plt.close(fig)
  return paths


# The runs of RESULTS.md this driver makes (python -m experiments.paper.table2 --preset=<name>).
PRESETS = (
    # The main job is the regression check (5 seeds on one draw: its claims stay on the page); the README's summary
    # takes Table 2's claims from the decisive run, sized to judge them.
    Preset('default', 'synthetic', '', 'Table 2 / Table 4: synthetic default (main job)'),
    Preset('ohsumed', 'ohsumed', '--dataset=ohsumed --loss=rankbce', 'Table 2 / Table 4: OHSUMED, 5 folds'),
    # All five of OHSUMED's folds: ApproxNDCG on its lists of up to 320 documents and the cross-fitted search make a
    # fold of this run long on two cores (its wall time is on the page); an interrupted run resumes by fold and row.
    Preset('ohsumed_own', 'letor-ohsumed_letor3', '--dataset=letor --data_dir=../shared/data/ohsumed_letor3 '
           '--positive_grade=2 --privileged=auto --methods=pfd,lambdamart --search',
           "Your own data, a LETOR folder with folds: OHSUMED's files (five folds), 'definitely relevant' (grade 2) "
           'the label, the 30% of features most correlated with it privileged (the modern ranker, validation '
           'selection, the PFD search)'),
    Preset('logs_letor', 'letor-logs_letor', '--dataset=letor --data_dir=logs_letor --privileged=21,22,23 '
           '--methods=pfd,placebo,lambdamart,gbdt_from_pfd --gbdt_leaves=15 --gbdt_min_leaf=50 --save_models --search',
           'Your own data: simulated logs as a LETOR folder, file labels, named privileged features (the modern '
           'ranker, validation selection, seed ensembles, the PFD search)',
           before='python -m experiments.export_logs --out=logs_letor'),
    # The confirmatory protocol (docs/protocol.md; protocol.redrawn_flags): every run its own draw of the data and
    # labels, the best epoch on validation. 'redrawn' is the pilot of the power study on that population, from which
    # 'decisive' (other draws and seeds; never re-chosen after its verdicts) and 'decisive_gpu' are sized.
    Preset('redrawn', 'synthetic-confirmatory', protocol.redrawn_flags('confirmatory', protocol.PILOT_DRAWS),
           f'Table 2 / Table 4 on the re-drawn population: {protocol.PILOT_DRAWS} draws with test and validation sets '
           f'of 6,306 queries, validation selection (the power study\'s pilot)'),
    Preset('decisive', 'synthetic-decisive_redrawn', protocol.redrawn_flags(
        'decisive_redrawn', protocol.DECISIVE_DRAWS, '--label_seed=1 --seed=1 --pilot=' + protocol.PILOT),
           f'Table 2 / Table 4, decisive, re-drawn population: {protocol.DECISIVE_DRAWS} draws, validation '
           f'selection (sized by the pilot for {protocol.BUDGET_MINUTES:.0f} minutes on two cores)'),
    Preset('decisive_gpu', 'synthetic-decisive_gpu', protocol.redrawn_flags(
        'decisive_gpu', protocol.GPU_DRAWS, '--label_seed=2 --seed=2 --target_mde=0.02 --draws_per_program='
        f'{protocol.GPU_DRAWS_PER_PROGRAM} --pilot={protocol.PILOT}'),
           f'Table 2 / Table 4, decisive on an accelerator: {protocol.GPU_DRAWS} draws (sized by the pilot for an '
           'MDE of 2% on every comparison)', accelerator="python -m experiments.accelerator on one GPU"),
    # The fixed-data decisive run (python -m experiments.paper.power chose it, pilot seeds 1000..): one draw of the data
    # shared by its 29 seeds, the best epoch on test; its verdicts speak of that draw.
    Preset('decisive_fixed', 'synthetic-decisive', f'--tag=decisive --synthetic_queries=400,200,6306 --seeds=29 '
           f'--methods={",".join(distill.METHODS)}', 'Table 2 / Table 4, decisive: the default training set, '
           '6,306 test queries, 29 seeds (sized by the power study)'),
    Preset('web30k', 'synthetic-web30k', f'--tag=web30k --synthetic_web30k --synthetic_chunk=500 '
           f'--methods={",".join(distill.METHODS)}', 'Table 2 / Table 4 at MSLR-WEB30K size (synthetic, 5 seeds)',
           accelerator="its expected time on your machine: python -m experiments.paper.table2 --preset=web30k --plan (a "
           "timed probe); not yet measured on an accelerator"),
    *protocol.PAPER_PRESETS, *protocol.ANALOGUE_PRESETS, *sequential_runs.PRESETS)


DRIVER = schema.Driver("table2", run, to_markdown, plot_curves, "fig2.png", options=Options,
                       defaults=(("loss", "both"),), losses=lambda: ("both",) + losses_lib.REGISTRY.names(),
                       needs_privileged=lambda cfg: any(
                           rows_lib.uses_privileged(r.name) for m in cfg.options.methods_for(cfg.output.num_processes)
                           for r in rows_lib.REGISTRY.values() if r.choice == m),
                       rows=num_rows, presets=PRESETS)

if __name__ == "__main__":
  lifecycle.main(DRIVER)
