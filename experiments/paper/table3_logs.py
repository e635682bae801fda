r"""Table 3 of the paper on simulated e-commerce logs: purchase is the target; position, click and
add-to-cart are privileged. (The Amazon logs cannot be rerun; pfd_jax/data/logs.py documents the simulator.)
Placebo rows (--placebo, default on): every PFD teacher and the multi-teacher student again, on the privileged
columns permuted as --placebo_within says (pfd_jax.methods.distill's placebo control).

  python -m experiments.paper.table3_logs                     # RankBCE, 5 seeds, 100 epochs
  python -m experiments.paper.table3_logs --sessions=3000,500,3000

Rows as in the paper, every number scaled to the no-distillation baseline: pre-training on click / add (and
fine-tuning on purchase from those weights), self-distillation, PFD with each privileged feature (teacher
and student) and multi-teacher PFD (teacher loss averaged over the three teachers); then the practitioner's
incumbent (:mod:`pfd_jax.methods.gbdt`): LightGBM LambdaMART on the regular features, a LambdaMART teacher on all
three privileged features with its out-of-fold scores distilled into the MLP student, and LightGBM students
of an MLP PFD teacher on all three (--nolightgbm leaves them out). Writes results/table3_logs/logs/.
"""
import time

import dataclasses

import numpy as np

from experiments.framework.records import RunRecord
from experiments.framework import fold_data, lifecycle, monitor, plots, protocol, rowstore, rundir, schema, tabulate
from experiments.framework.schema import Preset
from pfd_jax.methods import distill
from pfd_jax.training import device
from pfd_jax.methods import rows as rows_lib
from pfd_jax import training as training_lib
from pfd_jax.config import option
from pfd_jax.data import logs
from pfd_jax.data.config import draw_seed
from pfd_jax.data.logs import SimulatorOptions
from pfd_jax.methods.gbdt import GBDTConfig


@dataclasses.dataclass(frozen=True)
class Options(SimulatorOptions):
  placebo: bool = option(True, "Also the placebo rows: each PFD teacher and the multi-teacher student again with "
                         "the privileged columns permuted (--placebo_within), the control for distillation alone.")
  lightgbm: bool = option(True, "Also the LightGBM rows: LambdaMART, its teacher and cross-family distillation.")
  gbdt: GBDTConfig = option(GBDTConfig(), "LightGBM settings of the LightGBM rows.")
  draws: int = option(0, "The runs' population: 0 = one simulation (--sim_seed) shared by the seeds; N = N "
                      "simulations, each a draw of its own logs with its own seeds and step order (use --seeds=1: each "
                      "draw a run; the claims' unit is then the draw).", lo=0, omit_default=True)
  purchase_offset: float = option(2.0, "The purchase's logit offset in the simulator's cascade (larger = sparser "
                                  "purchases; pfd_jax.data.logs).", omit_default=True)


ROWS = [("no_distill", "Baseline: no-distillation"),
        ("pre_click", "Pretrain on click"), ("pre_click_ft", "Pretrain on click + finetune on purchase"),
        ("pre_add", "Pretrain on add"), ("pre_add_ft", "Pretrain on add + finetune on purchase"),
        ("self_teacher", "No privileged feature: teacher"), ("self", "No privileged feature: student"),
        ("position_teacher", "Position as privileged feature: teacher*"), ("position", "Position: student"),
        ("click_teacher", "Click as privileged feature: teacher*"), ("click", "Click: student"),
        ("add_teacher", "Add as privileged feature: teacher*"), ("add", "Add: student"),
        ("multi", "Multi-teacher: distill from position + click + add"),
        ("position_placebo_teacher", "Placebo: position permuted, teacher"),
        ("position_placebo", "Placebo: position permuted, student"),
        ("click_placebo_teacher", "Placebo: click permuted, teacher"), ("click_placebo", "Placebo: click permuted, student"),
        ("add_placebo_teacher", "Placebo: add permuted, teacher"), ("add_placebo", "Placebo: add permuted, student"),
        ("multi_placebo", "Placebo: multi-teacher from the three permuted teachers"),
        ("pfd_teacher", "Position + click + add: PFD teacher*"), ("lambdamart", "LambdaMART"),
        ("lambdamart_teacher", "LambdaMART teacher* (position + click + add)"),
        ("pfd_from_lambdamart", "PFD student (LambdaMART teacher)"),
        ("gbdt_xent_from_pfd", "GBDT student, cross-entropy (PFD teacher)"),
        ("lambdamart_from_pfd", "LambdaMART student, teacher grades (PFD teacher)")]
GBDT_ROWS = 6  # the last rows, with --lightgbm
PLACEBO_ROWS = 7  # with --placebo
PRIVILEGED = ("position", "click", "add")


VIEWS = {"position_teacher": "xz:0", "click_teacher": "xz:1", "add_teacher": "xz:2"}


def run(cfg: schema.Config) -> RunRecord:
  """Every row on the simulated logs: one simulation (--sim_seed), or with --draws=N a simulation of its own per draw
  (draw k: simulator seed draw_seed(sim_seed, k), its own seeds and step order), the rows' runs stacked over the
  draws."""
  t0 = time.time()
  cfg = cfg.replace(data=dict(draws=cfg.options.draws)) if cfg.options.draws else cfg  # setup's keys per draw
  draws = [simulated_rows(cfg, fold) for fold in fold_data.folds_of(cfg.data)]
  best = {k: np.concatenate([d[0][k].best["test"] for d in draws]) for k in draws[0][0]}
  lightgbm = {k for k in best if k in rows_lib.REGISTRY and rows_lib.REGISTRY[k].recipe.one_process}
  return RunRecord(config=cfg, env=rundir.environment(), simulator=draws[0][1].config,
                   positive_train_sessions_pct=float(np.mean([d[2] for d in draws])),
                   privileged_corr={n: float(np.mean([d[3][n] for d in draws])) for n in logs.PRIVILEGED},
                   rows=best, comparisons=tabulate.compare(best, "no_distill"), vs_placebo=vs_placebo(best),
                   vs_multi=tabulate.compare({k: v for k, v in best.items() if k == "multi" or k in lightgbm}, "multi"),
                   seconds=time.time() - t0)


def simulated_rows(cfg: schema.Config, fold: int, prefix: str = "") -> tuple:
  """(the rows' results, the simulated logs, % of training sessions with a purchase, each privileged column's
  correlation with the purchase) of one simulation; its rows saved as <prefix><row> in the run folder."""
  seed = draw_seed(cfg.options.sim_seed, fold) if cfg.data.draws else cfg.options.sim_seed
  ds = logs.simulate(sessions=cfg.options.sessions, seed=seed, purchase_offset=cfg.options.purchase_offset)
  _, dd, tc, keys = fold_data.fold_setup(cfg, None, fold, ds)
  log = monitor.progress(f"[logs{f' draw {fold}' if cfg.data.draws else ''}{f' {prefix}' if prefix else ''}]")
  store = rowstore.RowStore(cfg, ds, fold)

  def fit(row, view, train, servable=True):
    res[row] = store(prefix + row, view, tc, train, servable)
    return res[row]

  res = {}
  fit("no_distill", "x", lambda: distill.train_on_data(keys, tc, dd, "x", log("no_distill")))
  res["self_teacher"] = res["no_distill"]
  for col, name in ((1, "click"), (2, "add")):
    pre_dd = device.to_device(logs.relabel(ds, col), cfg.data.max_buckets, ())
    pre = fit(f"pre_{name}", "x", lambda: training_lib.train(keys, tc, pre_dd.train_pos, "x", dd.eval_sets,
                                                             hooks=log(f"pre_{name}")))
    fit(f"pre_{name}_ft", "x", lambda: training_lib.train(keys, tc, dd.train_pos, "x", dd.eval_sets,
                                                          hooks=log(f"pre_{name}_ft"), init_params=pre.params))
  fit("self", "x", lambda: distill.train_student(keys, tc, dd, distill.teacher_targets(tc, [(res["no_distill"], "x")],
                                                                                       dd), log("self")))
  placebo = fold_data.placebo_data(cfg, ds, tc)
  for tag, data in [("", lambda: dd)] + ([("_placebo", placebo)] if cfg.options.placebo else []):
    teachers = []
    for col, name in enumerate(PRIVILEGED):
      view, row = f"xz:{col}", name + tag
      teacher = fit(f"{row}_teacher", view, lambda: distill.train_on_data(keys, tc, data(), view, log(f"{row}_teacher")),
                    servable=not tag)  # a placebo teacher's inputs exist in no file
      teachers.append((teacher, view))
      fit(row, "x", lambda: distill.train_student(keys, tc, data(), distill.teacher_targets(tc, [(teacher, view)],
                                                                                            data()), log(row)))
    fit("multi" + tag, "x", lambda: distill.train_student(keys, tc, data(), distill.teacher_targets(tc, teachers, data()),
                                                          log("multi" + tag)))
  if cfg.options.lightgbm:
    ctx = distill.Context(keys, tc, dd, ds, fit=store.fit(prefix), hooks=log, lightgbm=cfg.options.gbdt, seed=cfg.run.seed)
    done = {"no_distill": distill.Trained(res["no_distill"], "x", tc)}  # the baseline, trained above
    res.update({k: t.result for k, t in distill.run_rows(ctx, rows_lib.plan(distill.LIGHTGBM_METHODS), done).items()
                if k not in done})
  sim = ds["train"]
  return (res, ds, 100.0 * dd.num_positive_groups / dd.num_train_groups,
          {n: float(np.corrcoef(sim.z[:, j], sim.y)[0, 1]) for j, n in enumerate(logs.PRIVILEGED)})


def vs_placebo(rows: tabulate.Runs) -> tabulate.Comparisons:
  """Each PFD student (one privileged feature, and multi-teacher) against its placebo, paired by seed."""
  return {k: tabulate.compare({k: rows[k], "placebo": rows[f"{k}_placebo"]}, "placebo")[k]
          for k in PRIVILEGED + ("multi",) if f"{k}_placebo" in rows}


def to_markdown(res: RunRecord) -> str:
  cfg = res["config"]
  base = np.asarray(res["rows"]["no_distill"]).mean(0)
  cmp = res.get("comparisons") or tabulate.compare(res["rows"], "no_distill")
  vs_multi = res.get("vs_multi") or {}
  vs_pl = res.get("vs_placebo") or vs_placebo(res["rows"])
  rows = [[label] + [f"{m / b:.3f}" for m, b in zip(np.asarray(res["rows"][k]).mean(0), base)] +
          tabulate.change_cells(cmp.get(k)) + ([tabulate.change_cell(vs_pl.get(k))] if vs_pl else []) +
          ([tabulate.change_cell(vs_multi.get(k))] if vs_multi else [])
          for k, label in ROWS if k in res["rows"]]
  corr = ", ".join(f"{k} {v:+.2f}" for k, v in res["privileged_corr"].items())
  draws = cfg["options"].get("draws", 0)
  runs = f"{draws} draws (one seed each)" if draws else f"{cfg['run']['seeds']} seeds"
  return (f"# Table 3 on simulated logs ({cfg['run']['loss']})\n\nPurchase NDCG@k at each row's best epoch, mean over "
          f"{runs}, scaled to the baseline (absolute baseline NDCG@8/16/32: "
          f"{' / '.join(f'{b:.3f}' for b in base)}). {res['positive_train_sessions_pct']:.1f}% of training "
          f"sessions have a purchase; corr with purchase: {corr}. {res['seconds']:.0f} s.\n" +
          tabulate.stats_note("the baseline", len(res["rows"]["no_distill"]), 1, draws=bool(draws)) + "\n" +
          ("Placebo rows: the teachers and the multi-teacher student again with the privileged columns permuted "
           f"{'within each session' if cfg['run'].get('placebo_within', 'query') == 'query' else 'across the split'} "
           "(values kept, link to purchase broken); 'vs its placebo' pairs each PFD student with its placebo by "
           "run: the privileged information's gain beyond distillation.\n\n" if vs_pl else "") +
          ("LightGBM rows (pfd_jax.methods.gbdt) are early-stopped on the selection split's NDCG@8; 'vs multi-teacher' "
           "pairs their seeds with the multi-teacher PFD student's by index.\n\n" if vs_multi else "") +
          tabulate.markdown_table(["Model", "NDCG@8", "NDCG@16", "NDCG@32"] + tabulate.change_header("baseline", 8) +
                                (["NDCG@8 vs its placebo (runs)"] if vs_pl else []) +
                                (["NDCG@8 vs multi-teacher (runs)"] if vs_multi else []), rows))


def plot(res: RunRecord, path: str) -> None:
  plots.bar_plot(res, path, dict(ROWS), scale_to="no_distill")


# The ids of the paper's Table 3 claims (table3_sparsity states them at each purchase rate, as diagnostics).
MULTI_VS_BASELINE, SINGLE_VS_BASELINE = "table3:multi-vs-baseline", "table3:single-vs-baseline"
MULTI_VS_PRETRAINING = "table3:multi-vs-pretraining"


# The runs of RESULTS.md this driver makes (python -m experiments.paper.table3_logs --preset=<name>).
PRESETS = (
    Preset('default', 'logs', '',
           'Table 3 analogue: simulated e-commerce logs'),
    # The paper's Table 3 claims' confirmatory run (experiments/page/family.py): each draw its own simulation,
    # validation and test sets as large as the other re-drawn runs' (protocol.DRAW_QUERIES), validation selection.
    protocol.redrawn_preset('Table 3 analogue', 'logs-redrawn', '--sessions=800,6306,6306',
                            'simulations with validation and test sets of 6,306 sessions'),
)


DRIVER = schema.Driver("table3_logs", run, to_markdown, plot, "table3_logs.png", options=Options,
                       groups=("train", "run", "output"), folder=lambda cfg: "logs",
                       rows=lambda cfg: len(ROWS) - 1 - (0 if cfg.options.lightgbm else GBDT_ROWS) -
                       (0 if cfg.options.placebo else PLACEBO_ROWS), presets=PRESETS)

if __name__ == "__main__":
  lifecycle.main(DRIVER)
