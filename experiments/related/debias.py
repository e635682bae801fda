r"""Position as a privileged feature against the unbiased learning-to-rank family, judged on the truth.

The simulated logs (pfd_jax/data/logs.py) at each bias strength --etas (examination k^-eta: 0 = no bias,
2 = steep), with a share --random_share of sessions shown in random order and a logging ranker that boosts a
promotion score unrelated to relevance (--promotion; 0 = none, and then the bias preserves the ranking by
relevance, so there is little for any method to fix: the preset no_promotion); every model trains on the logged
purchases and is judged twice on the test sessions: on the **truth** (the purchase probability had the item
been examined, which no position affects) and on the logged purchases (position-biased). Rows
(pfd_jax.methods.debias):

* no-distillation (regular features x);
* position-aware learning: x + position in training, every item served at position 1; the two-tower model
  (an item MLP plus an additive shallow position tower) served alike;
* IPS: RankBCE (or softmax) on the labels y / theta_k, with theta known (k^-eta), estimated from the
  randomised sessions' click-through rates, or by regression-EM on every session's clicks; clipped at --ips_clip;
* PFD with the position as the privileged feature, and with position + click (teacher* rows see them at test);
* the placebo: PFD(position) with the privileged columns permuted (the control for distillation alone);
* LightGBM LambdaMART on x, and with LightGBM's position-bias model (Dataset position; --nolightgbm: none).

Selection (best epoch, early stopping) is on the validation split's logged purchases, all a practitioner has.

  python -m experiments.related.debias                       # RankBCE, 5 seeds, eta 0, 1, 2
  python -m experiments.related.debias --etas=1 --seeds=3 --epochs=30

Writes results/debias/logs/ (logs_no_promotion/ with --promotion=0).
"""
import dataclasses
import time
from typing import Any, Dict, Mapping, Tuple

import numpy as np

from experiments.framework.records import RunRecord
from experiments.framework import fold_data, lifecycle, monitor, plots, rowstore, rundir, schema, tabulate
from experiments.framework.schema import Preset
from pfd_jax.data.logs import SimulatorOptions
from pfd_jax import data as data_lib
from pfd_jax.config import ConfigError, option
from pfd_jax.data import logs
from pfd_jax.methods import debias, distill
from pfd_jax.methods.gbdt import GBDTConfig
from pfd_jax.methods.rows import Recipe, Row


@dataclasses.dataclass(frozen=True)
class Options(SimulatorOptions):
  etas: Tuple[float, ...] = option((0.0, 1.0, 2.0), "Position-bias strengths eta (examination k^-eta) swept.", lo=0)
  random_share: float = option(0.1, "Share of sessions shown in random order (the IPS propensities from "
                               "randomised sessions are estimated on the training split's).", lo=0, hi=1,
                               lo_open=True)
  logging_noise: float = option(1.0, "Std of the logging ranker's noise (its quality: 0 = orders by relevance).",
                                lo=0)
  promotion: float = option(1.0, "Weight of a promotion score in the logging ranker: a regular feature unrelated to "
                            "relevance that the logging ranker boosts (0 = none: the bias then preserves the "
                            "ranking by relevance).", lo=0)
  ips_clip: float = option(0.05, "IPS: propensities are clipped from below at this value.", lo=0, hi=1,
                           lo_open=True)
  placebo: bool = option(True, "Also the placebo rows: PFD(position) with the privileged columns permuted.")
  lightgbm: bool = option(True, "Also LightGBM LambdaMART, plain and with its position-bias model.")
  gbdt: GBDTConfig = option(GBDTConfig(), "LightGBM settings of the LightGBM rows.")


_D, _G = "pfd_jax.methods.distill", "pfd_jax.methods.gbdt"
# This driver's rows besides no-distillation, each one Row value with its title and training function (judged on
# the truth; the position is the logs' column 0, click column 1), in training order (a teacher before its students).
DEBIAS_ROWS = (
    Row("position_feature", "Position as a feature, served at position 1",
        recipe=Recipe(view="xz:{position}", train=f"{_D}:train_served"), servable=False),
    Row("two_tower", "Two-tower (item MLP + additive position tower), served at position 1",
        recipe=Recipe(view="xz:{position}", overrides=(("tower", 1),), train=f"{_D}:train_served"), servable=False),
    Row("ips_known", "IPS, known propensities k^-eta",
        recipe=Recipe(train=f"{_D}:train_ips", train_args=(("propensities", "known"),))),
    Row("ips_randomized", "IPS, propensities from randomised sessions",
        recipe=Recipe(train=f"{_D}:train_ips", train_args=(("propensities", "randomized"),))),
    Row("ips_em", "IPS, regression-EM propensities",
        recipe=Recipe(train=f"{_D}:train_ips", train_args=(("propensities", "em"),))),
    Row("pfd_position_teacher", "PFD teacher* (x + position)", recipe=Recipe(view="xz:{position}"), method=None),
    Row("pfd_position", "PFD(position) student", recipe=Recipe(teacher="pfd_position_teacher")),
    Row("pfd_position_top", "PFD(position) student, taught at position 1",
        recipe=Recipe(teacher="pfd_position_teacher", train_args=(("at_top", True),))),
    Row("pfd_position_click_teacher", "PFD teacher* (x + position + click)", recipe=Recipe(view="xz:{position},1"),
        method=None),
    Row("pfd_position_click", "PFD(position + click) student", recipe=Recipe(teacher="pfd_position_click_teacher")),
    # the placebo teacher reads permuted columns, in no file: never saved as a model
    Row("placebo_teacher", "Placebo teacher (x + permuted position)", recipe=Recipe(view="xz:{position}", placebo=True),
        method=None, servable=False),
    Row("placebo", "Placebo student (PFD(position) on permuted columns)",
        recipe=Recipe(teacher="placebo_teacher", placebo=True)),
    Row("lambdamart", "LambdaMART (x)", recipe=Recipe(train=f"{_G}:train_lightgbm", one_process=True)),
    Row("lambdamart_position", "LambdaMART + LightGBM position-bias model",
        recipe=Recipe(train=f"{_G}:train_lightgbm", train_args=(("position_bias", True),), one_process=True)))
ROWS = [("no_distill", "No-distillation (x)")] + [(r.name, r.title) for r in DEBIAS_ROWS]  # the table's order
LABELS = dict(ROWS)
PROPENSITIES = ("known", "randomized", "em")  # the IPS rows' tables (propensities())
TOP = 1.0  # log2(1 + 1): the position column's value at the top position (served_at)


def rows_of(o: Options, props: Mapping[str, np.ndarray]) -> tuple:
  """The rows of one bias strength besides no-distillation: one IPS row per propensity table it has, the placebo
  rows with --placebo, the LightGBM rows with --lightgbm."""
  table = lambda r: dict(r.recipe.train_args).get("propensities")  # an IPS row's
  return tuple(r for r in DEBIAS_ROWS if (table(r) is None or table(r) in props)
               and (o.placebo or not r.recipe.placebo) and (o.lightgbm or not r.recipe.one_process))


def simulate(o: Options, eta: float) -> data_lib.Dataset:
  return logs.simulate(sessions=o.sessions, seed=o.sim_seed, eta=eta, logging_noise=o.logging_noise,
                       random_share=o.random_share, promotion=o.promotion, truth=True)


def propensities(o: Options, ds: data_lib.Dataset, eta: float) -> tuple:
  """({known, randomized, em}: propensity tables over positions 0..max (entry 0 unused) from the training split's
  clicks, notes): the randomised estimate is left out, with a note, when those sessions have no top click."""
  tr = ds["train"]
  pos, click = logs.positions(tr.z), tr.z[:, 1]
  top = int(max(logs.positions(g.z).max() for g in ds.splits.values()))
  props, notes = {"known": debias.examination(top, eta)}, {}
  try:
    props["randomized"] = debias.randomized_propensities(click, pos, tr.z[:, 3] > 0, top)
  except ValueError as e:
    notes["ips_randomized_note"] = f"left out: {e}"
  props["em"] = debias.em_propensities(click, pos, tr.x, top).propensity
  return props, notes


def run_eta(cfg: schema.Config, eta: float, log) -> Dict[str, Any]:
  o = cfg.options
  ds = simulate(o, eta)
  _, dd, tc, keys = fold_data.fold_setup(cfg, None, 1, ds)
  if tc.loss not in debias.IPS_LOSSES:
    raise ConfigError("loss", f"{tc.loss!r}: the IPS rows need a loss affine in its labels, one of "
                      f"{debias.IPS_LOSSES}")
  store = rowstore.RowStore(cfg, ds)
  tag = f"eta{eta:g}"
  props, notes = propensities(o, ds, eta)
  res = {"no_distill": store(f"{tag}_no_distill", "x", tc, lambda: distill.train_on_data(
      keys, tc, dd, "x", log(f"{tag} no_distill")))}
  ctx = distill.Context(keys, tc, dd, ds, fit=store.fit(f"{tag}_"), hooks=lambda row: log(f"{tag} {row}"),
                        placebo=fold_data.placebo_data(cfg, ds, tc),
                        device_data=lambda d: fold_data.device_data(cfg, d, tc),
                        lightgbm=o.gbdt, seed=cfg.run.seed, position=distill.Position(
                            0, logs.positions(ds["train"].z), props, tc, TOP, o.ips_clip))
  res.update({k: t.result for k, t in distill.run_rows(ctx, rows_of(o, props)).items()})
  top10 = lambda t: [round(float(v), 4) for v in t[1:11]]
  return {"truth": {k: r.best["truth"] for k, r in res.items()}, "logged": {k: r.best["test"] for k, r in res.items()},
          "propensities": {k: top10(t) for k, t in props.items()},
          "propensity_error": {k: float(np.max(np.abs(t[1:11] - props["known"][1:11]))) for k, t in props.items()},
          "randomized_sessions": int((ds["train"].z[ds["train"].offsets[:-1], 3] > 0).sum()),
          "positive_train_sessions": dd.num_positive_groups, **notes}


def run(cfg: schema.Config) -> RunRecord:
  t0 = time.time()
  log = monitor.progress("[debias]")
  per_eta = {f"{eta:g}": run_eta(cfg, eta, log) for eta in cfg.options.etas}
  for r in per_eta.values():
    r["comparisons"] = {split: tabulate.compare(r[split], "no_distill") for split in ("truth", "logged")}
  return RunRecord(config=cfg, env=rundir.environment(), etas=per_eta, seconds=time.time() - t0)


def _table(r: Mapping[str, Any]) -> str:
  header = ["Model", "NDCG@8 truth", "NDCG@8 logged"] + ["truth vs no-distillation (runs)",
                                                         "logged vs no-distillation (runs)"]
  rows = []
  for k, label in ROWS:
    if k not in r["truth"]:
      continue
    truth, logged = np.asarray(r["truth"][k]), np.asarray(r["logged"][k])
    rows.append([label, tabulate.fmt_pm(truth[:, 0].mean(), truth[:, 0].std()),
                 tabulate.fmt_pm(logged[:, 0].mean(), logged[:, 0].std()),
                 tabulate.change_cell(r["comparisons"]["truth"].get(k)),
                 tabulate.change_cell(r["comparisons"]["logged"].get(k))])
  return tabulate.markdown_table(header, rows)


def to_markdown(res: RunRecord) -> str:
  cfg = res["config"]
  o = cfg["options"]
  out = [f"# Position debiasing on simulated logs ({cfg['run']['loss']})\n",
         f"{cfg['run']['seeds']} seeds, {o['sessions']} sessions (train, vali, test), {100 * o['random_share']:g}% "
         f"shown in random order, logging-ranker noise {o['logging_noise']:g}, promotion {o.get('promotion', 0):g}, "
         f"IPS clip {o['ips_clip']:g}; best epoch "
         f"on vali's logged purchases. NDCG@8 at the best epoch on the test sessions' **truth** (purchase "
         f"probability had the item been examined; every session) and on their **logged** purchases (sessions "
         f"with a purchase). Teacher* rows see their privileged inputs at test. {res['seconds']:.0f} s.\n",
         tabulate.stats_note("no-distillation", cfg["run"]["seeds"], 1)]
  for eta, r in res["etas"].items():
    props = "; ".join(f"{k} {' '.join(f'{v:.2f}' for v in t[:6])}" for k, t in r["propensities"].items())
    out.append(f"\n## eta = {eta}\n\nPropensities at positions 1-6: {props} (max error over 1-10: " +
               ", ".join(f"{k} {v:.3f}" for k, v in r["propensity_error"].items() if k != "known") + "; "
               f"{r['randomized_sessions']} randomised training sessions" +
               (f"; IPS from randomised sessions {r['ips_randomized_note']}" if "ips_randomized_note" in r else "") +
               ").\n\n" +
               _table(r))
  return "\n".join(out) + "\n"


def plot(res: RunRecord, path: str) -> None:
  plt = plots.pyplot()
  fig, ax = plt.subplots(figsize=(7, 4))
  etas = list(res["etas"])
  for k in ("no_distill", "position_feature", "two_tower", "ips_known", "ips_em", "pfd_position", "pfd_position_top",
            "placebo", "lambdamart"):
    if all(k in res["etas"][e]["truth"] for e in etas):
      ax.plot([float(e) for e in etas], [np.mean(np.asarray(res["etas"][e]["truth"][k])[:, 0]) for e in etas],
              marker="o", label=LABELS[k])
  plots.finish_plot(fig, ax, res, path, "position bias eta", "truth NDCG@8")


PRESETS = (Preset("default", "logs", "", "Position debiasing: PFD against unbiased learning-to-rank, on the truth "
                  "(a logging ranker that boosts promoted items)"),
           Preset("no_promotion", "logs_no_promotion", "--promotion=0", "Position debiasing without promotion: a "
                  "bias that preserves the ranking by relevance"))

DRIVER = schema.Driver("debias", run, to_markdown, plot, "debias.png", options=Options,
                       groups=("train", "run", "output"),
                       folder=lambda cfg: "logs" if cfg.options.promotion else "logs_no_promotion",
                       defaults=(("select_on", "vali"),), losses=debias.IPS_LOSSES,
                       rows=lambda cfg: len(cfg.options.etas) * (
                           1 + len(rows_of(cfg.options, dict.fromkeys(PROPENSITIES)))),
                       presets=PRESETS)

if __name__ == "__main__":
  lifecycle.main(DRIVER)
