r"""Self-Distilled neural Rankers (SDR, Qin et al.): rows of SDR's Tables 2 and 3 and its Figure 3 (left).

  python -m experiments.related.sdr                            # synthetic default, graded labels 0-4
  python -m experiments.related.sdr --dataset=ohsumed          # 5 folds, labels 0-2
  python -m experiments.related.sdr --dataset=web10k           # the MSLR-WEB10K sample in ../shared/data

SDR's setting, not the PFD paper's: labels are the dataset's *graded* relevance (no Gumbel binarisation),
every feature is an input (no privileged split), every training group is used, and teacher and student are
the same MLP. A teacher is trained with a pointwise (MSE) or listwise (softmax, Eq. 8) loss; its student
with SDR Eq. 4, ``(1 - a) l(y, s) + a l_B(g(t), s)``, where ``l`` is the teacher's own loss (so the
pointwise-pointwise row has two consistent objectives, as SDR section 5.4 intends) and ``l_B`` is the
pointwise (MSE, Eq. 12) or listwise (softmax) distillation loss; g is the affine max(a1 t + b, 0)
(Eq. 10; a1 = --transform_a, b = --transform_b; SDR used the identity on Web30K). Our trainer weights the
*data* term by alpha, so alpha = 1 - a. Rows:

  * Table 2: {pointwise, listwise} teacher alone ("/"), and with {pointwise, listwise} distillation;
  * Table 3: the listwise teacher (a = 0), SDR (a = --sdr_a), teacher-only objective (a = 1);
  * Figure 3 left: SDR with the softmax transform exp(t_i / T) / sum_j exp(t_j / T) for T in --temperatures
    (all temperatures x seeds trained side by side in one program).

NDCG@1, 5, 10 (gain 2^rel - 1) on test; the best epoch is chosen by NDCG@5 on --select_on. Writes
results/sdr/<dataset>/{results.json, table.md, sdr.png}.
"""
import dataclasses
import time
from typing import Dict, Tuple

import numpy as np

from experiments.framework.records import RunRecord
from experiments.framework import fold_data, lifecycle, monitor, plots, protocol, rowstore, rundir, schema, tabulate
from experiments.framework.schema import Preset
from pfd_jax import data as data_lib
from pfd_jax.methods import distill
from pfd_jax.config import option


@dataclasses.dataclass(frozen=True)
class Options:
  sdr_a: float = option(0.5, "SDR Eq. 4 weight a of the distillation loss (alpha = 1 - a).", lo=0, hi=1)
  temperatures: Tuple[float, ...] = option((0.1, 1.0, 5.0), "Softmax-transform temperatures T.", lo=0, lo_open=True)

KS = (5, 1, 10)        # training-time cut-offs: the first (NDCG@5, SDR's headline) selects the best epoch
SHOW = (1, 5, 10)      # table column order
TEACHER_LOSS = {"pointwise": "mse", "listwise": "softmax"}


def row_name(name: str) -> str:
  """A table row's saved-row name: 'listwise -> pointwise' -> 'listwise_to_pointwise'."""
  return name.replace(" -> ", "_to_").replace(" = ", "").replace(" ", "_").strip("()")


def run(cfg: schema.Config) -> RunRecord:
  t0 = time.time()
  a = cfg.options.sdr_a
  rows, order = {}, []

  def record(name, res):
    rows.setdefault(name, []).append(res.best["test"][:, [KS.index(k) for k in SHOW]])
    if name not in order:
      order.append(name)
    return res

  def add(name, tc, train):
    return record(name, store(row_name(name), "x", tc, train))

  for fold in fold_data.folds_of(cfg.data):
    plain = dataclasses.replace(cfg.data, num_privileged=0, privileged="")
    ds = data_lib.with_graded_labels(fold_data.load_dataset(plain, fold))
    log = monitor.progress(f"[sdr fold{fold}]")
    store = rowstore.RowStore(cfg, ds, fold, "softmax")
    _, dd, base, keys = fold_data.fold_setup(cfg, "softmax", fold, ds=ds, data_groups="all", ks=KS,
                                             teacher_transform="affine", alpha=1.0 - a)
    tcs, logits = {}, {}
    for kind, loss in TEACHER_LOSS.items():
      tc = dataclasses.replace(base, loss=loss)
      teacher = add(f"{kind} teacher", tc, lambda: distill.train_on_data(keys, tc, dd, "x", log(f"{kind} teacher")))
      tcs[kind], logits[kind] = tc, distill.teacher_targets(tc, [(teacher, "x")], dd)
      for student, t_loss in TEACHER_LOSS.items():
        tcs_ = dataclasses.replace(tc, teacher_loss=t_loss)
        add(f"{kind} -> {student}", tcs_,
            lambda: distill.train_student(keys, tcs_, dd, logits[kind], log(f"{kind}->{student}")))
    lw = dataclasses.replace(tcs["listwise"], teacher_loss="softmax")
    lw0 = dataclasses.replace(lw, alpha=0.0)
    add("teacher-only objective (a = 1)", lw0, lambda: distill.train_student(keys, lw0, dd, logits["listwise"],
                                                                             log("a=1")))
    # Figure 3 (left): every temperature x seed trained side by side in one program.
    sweep = [dict(teacher_transform="softmax", temperature=t) for t in cfg.options.temperatures]
    names = [f"softmax transform T = {t}" for t in cfg.options.temperatures]
    trained = store.many([(row_name(n), "x", dataclasses.replace(lw, **v)) for n, v in zip(names, sweep)],
                         lambda: distill.train_student(keys, lw, dd, logits["listwise"], log("softmax T sweep"),
                                                       variants=sweep))
    for n, res in zip(names, trained):
      record(n, res)
  rows = {k: np.concatenate(v) for k, v in rows.items()}
  return RunRecord(config=cfg, env=rundir.environment(), data=ds.config, order=order, rows=rows,
                   comparisons=comparisons(rows), seconds=time.time() - t0)


def compare_to(rows: tabulate.Runs, names: list, base: str) -> tabulate.Comparisons:
  return tabulate.compare({n: np.asarray(rows[n]) for n in names}, base, col=SHOW.index(5))


def comparisons(rows: tabulate.Runs) -> Dict[str, tabulate.Comparisons]:
  """{reference row: its comparisons}: every row against the teacher of its table (NDCG@5, paired by run)."""
  out = {}
  for base in ("pointwise teacher", "listwise teacher"):
    if base in rows:
      out[base] = compare_to(rows, [n for n in rows if n.startswith(base.split()[0])], base)
      if base == "listwise teacher":
        out[base].update(compare_to(rows, [base] + [n for n in rows if n.startswith(("softmax", "teacher-only"))],
                                    base))
  return out


def to_markdown(res: RunRecord) -> str:
  cfg, rows = res["config"], {k: np.asarray(v) for k, v in res["rows"].items()}

  runs = len(next(iter(rows.values())))
  folds = max(1, runs // cfg["run"]["seeds"])

  def table(names, base):
    body = []
    cmp = (res.get("comparisons") or comparisons(rows)).get(base) or compare_to(rows, names, base)
    for n in names:
      m, s, b = rows[n].mean(0), rows[n].std(0), rows[base].mean(0)
      cells = [tabulate.fmt_pm(x, e, 4) + ("" if n == base else f" ({tabulate.fmt_change(x, bb)})")
               for x, e, bb in zip(m, s, b)]
      body.append([n] + cells + tabulate.change_cells(cmp.get(n), folds))
    return tabulate.markdown_table(["teacher -> distillation loss"] + [f"NDCG@{k}" for k in SHOW] +
                                 tabulate.change_header("the first row", 5), body)

  tr, a = cfg["train"], cfg["options"]["sdr_a"]
  head = (f"# SDR on {cfg['data']['dataset']} (graded labels, all features, same-size student)\n\n"
          f"Mean ± std over folds x {cfg['run']['seeds']} seeds, {tr['epochs']} epochs, best epoch by NDCG@5 on "
          f"{tr['select_on']}; a = {a} (alpha = {1 - a}); affine g = max({tr['transform_a']}"
          f" t + {tr['transform_b']}, 0). Student rows: change against their own teacher. {res['seconds']:.0f} s "
          f"on {res['env']['backend']} ({res['env']['cpus']} CPUs).\n" +
          tabulate.stats_note("the first row of each table", runs, folds, 5) + "\n")
  t2 = ["pointwise teacher", "pointwise -> pointwise", "pointwise -> listwise"]
  t2b = ["listwise teacher", "listwise -> pointwise", "listwise -> listwise"]
  t3 = ["listwise teacher", "listwise -> listwise", "teacher-only objective (a = 1)"]
  sweep = ["listwise teacher", "listwise -> listwise"] + [n for n in res["order"] if n.startswith("softmax")]
  return (head + "## SDR Table 2: pointwise vs listwise teachers and distillation\n\n" + table(t2, t2[0]) + "\n" +
          table(t2b, t2b[0]) + "\n## SDR Table 3: the two objectives\n\n" + table(t3, t3[0]) +
          "\n## SDR Figure 3 (left): softmax teacher transform vs affine\n\n" + table(sweep, sweep[0]))


def plot(res: RunRecord, path: str) -> None:
  plt = plots.pyplot()
  rows = {k: np.asarray(v) for k, v in res["rows"].items()}
  temps = res["config"]["options"]["temperatures"]
  sm = np.stack([rows[f"softmax transform T = {t}"][:, 1] for t in temps], 1)
  fig, ax = plt.subplots(figsize=(6, 4))
  ax.errorbar(temps, sm.mean(0), yerr=sm.std(0), marker="o", capsize=3, label="SDR, softmax transform")
  for name, ls in (("listwise -> listwise", "-"), ("listwise teacher", "--")):
    ax.axhline(rows[name][:, 1].mean(), ls=ls, color="k" if ls == "--" else "C1",
               label="SDR, affine transform" if ls == "-" else "teacher")
  ax.set_xscale("log")
  res = dict(res, config=dict(res["config"], run=dict(res["config"]["run"], loss="softmax teacher")))
  plots.finish_plot(fig, ax, res, path, "temperature T", "test NDCG@5")


DRIVER = schema.Driver("sdr", run, to_markdown, plot, "sdr.png", options=Options, needs_privileged=False,
                       defaults=(("loss", "softmax"),), losses=("softmax",),
                       rows_per_fold=lambda cfg: 7 + len(cfg.options.temperatures),
                       presets=(Preset("default", "synthetic", "", "Self-Distilled neural Rankers (SDR)"),
                                protocol.redrawn_preset("Self-Distilled neural Rankers (SDR)")))

if __name__ == "__main__":
  lifecycle.main(DRIVER)
