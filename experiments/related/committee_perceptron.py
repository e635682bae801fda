r"""The Committee Perceptron and its family against a RankSVM peer (the slides' OHSUMED figures).

  python -m experiments.related.committee_perceptron                       # LETOR 3.0 OHSUMED, 5 folds
  python -m experiments.related.committee_perceptron --dataset=synthetic
  python -m experiments.related.committee_perceptron --dataset=mq2008      # the staged vali/test pair

Features: LETOR QueryLevelNorm (per-query min-max, no log1p), every feature, the graded labels; every
query with at least --min_docs documents (queries without a relevant document score 0 and are left out of
the means, as everywhere here). Per fold:

* one ``lax.scan`` streams the training pairs for --passes shuffled passes and yields, after every pass,
  vanilla, pocket, averaged, voted (--vote_capacity longest-surviving hypotheses) and committees of every
  --committee_sizes, with both committee predictions (weighted average of weight vectors; rank voting);
* each variant's passes T (and the committee's K) are chosen by MAP on the validation split;
* RankSVM: scikit-learn's LinearSVC (liblinear, hinge loss, no intercept) on the same pairs' differences,
  half of them negated so the classes balance, C chosen on validation from --svm_c.

A fold without a validation split (the staged MQ2008 pair: vali is its only training data) selects on the
test split, which the table says. Training wall times: RankSVM per fit; each perceptron variant timed alone
(a scan keeping only its own state) for --timing_passes passes on the last fold, reported per pass and at
its chosen T. Writes results/committee_perceptron/<dataset>/latest/{results.json, table.md, committee.png}.
"""
import dataclasses
import time
from typing import Tuple

import jax
import jax.numpy as jnp
import numpy as np

from experiments.framework.records import RunRecord
from experiments.framework import fold_data, lifecycle, plots, rundir, schema, tabulate
from experiments.framework.schema import Preset
from pfd_jax import data as data_lib
from pfd_jax.ops import metrics
from pfd_jax.methods import perceptron as P
from pfd_jax.config import option
from pfd_jax.data import padding


@dataclasses.dataclass(frozen=True)
class Options:
  passes: int = option(30, "Passes over the pair stream (T is chosen among 1..passes).", lo=1)
  committee_sizes: Tuple[int, ...] = option((5, 10, 20, 50), "Committee sizes K (chosen on vali).", lo=1)
  vote_capacity: int = option(200, "Hypotheses the voted perceptron keeps.", lo=1)
  svm_c: Tuple[float, ...] = option((0.001, 0.01, 0.1), "RankSVM C values (chosen on vali).", lo=0, lo_open=True)
  timing_passes: int = option(10, "Passes of the per-variant timing scans (last fold).", lo=1)
  cp_seed: int = option(0, "Seed of the pass shuffles and of RankSVM's pair signs.")

KS = tuple(range(1, 11))
NAMES = metrics.metric_names(KS)  # NDCG@1..10, P@1..10, MAP
MAP = NAMES.index("MAP")


def splits_of(ds: data_lib.Dataset):
  """(train, selection, test) split names: vali selects unless it is the training data (staged MQ2008)."""
  train = "train" if "train" in ds.splits else "vali"
  select = "vali" if "vali" in ds.splits and train != "vali" else "test"
  return train, select, "test"


@jax.jit
def _linear_table(ws, x, y, mask):
  """[M, metrics] mean over lists with a relevant document of each weight vector ws [M, d] on one bucket."""
  s = jnp.einsum("qld,md->mql", x, ws)
  t = jax.vmap(lambda sc: metrics.metric_table(sc, y, mask, KS))(s)  # [M, metrics, Q]
  return jnp.sum(jnp.where(metrics.has_relevant(y, mask), t, 0.0), -1)


@jax.jit
def _vote_table(com_w, com_c, x, y, mask):
  """[M, metrics] like _linear_table for rank-voting committees com_w [M, K, d], com_c [M, K]."""
  s = jax.vmap(lambda w, c: P.vote_scores(w, c, x, mask))(com_w, com_c)
  t = jax.vmap(lambda sc: metrics.metric_table(sc, y, mask, KS))(s)
  return jnp.sum(jnp.where(metrics.has_relevant(y, mask), t, 0.0), -1)


def evaluate(buckets, *, ws=None, com=None) -> np.ndarray:
  """[M, metrics] test metrics averaged over lists with a relevant document (empty rule 'exclude')."""
  tot, n = 0.0, 0
  for b in buckets:
    x, y, m = jnp.asarray(b.x), jnp.asarray(b.y), jnp.asarray(b.mask)
    tot = tot + (_linear_table(jnp.asarray(ws), x, y, m) if com is None else _vote_table(*com, x, y, m))
    n += int(metrics.has_relevant(y, m).sum())
  return np.asarray(tot) / n


def variant_tables(out: P.PerceptronState, caps: list, sizes: list, vote_cap: int, buckets) -> dict:
  """{variant: [passes, metrics]} for every variant of the joint scan's read-outs."""
  T = out.w.shape[0]
  lin = {"vanilla": out.w, "averaged": out.avg, "pocket": out.com_w[caps.index(1)][:, 0]}
  for k in sizes:
    lin[f"committee K={k} (avg)"] = P.committee_weights(out.com_w[caps.index(k)], out.com_c[caps.index(k)])
  names = list(lin)
  res = evaluate(buckets, ws=jnp.concatenate([lin[n] for n in names]))
  tables = {n: res[i * T:(i + 1) * T] for i, n in enumerate(names)}
  for name, k in [(f"committee K={k} (vote)", k) for k in sizes] + [("voted", vote_cap)]:
    i = caps.index(k)
    tables[name] = evaluate(buckets, com=(out.com_w[i], out.com_c[i]))
  return tables


def rank_svm(x, pairs, c_values, seed, select_fn):
  """LinearSVC on pair differences (half negated); returns per C: weights, fit seconds, selection metrics."""
  from sklearn.svm import LinearSVC
  d = x[pairs[:, 0]] - x[pairs[:, 1]]
  flip = np.random.default_rng(seed).random(len(d)) < 0.5
  xs, ys = np.where(flip[:, None], -d, d), np.where(flip, -1, 1)
  fits = []
  for c in c_values:
    t0 = time.time()
    w = LinearSVC(C=c, fit_intercept=False, dual=True, max_iter=2000).fit(xs, ys).coef_[0].astype(np.float32)
    fits.append(dict(C=c, w=w, seconds=time.time() - t0, select=select_fn(w[None])[0]))
  return fits


def timing(diffs_x, pairs, eta, passes: int, variants: dict, seed: int) -> dict:
  """Seconds per pass of each variant alone: {name: s/pass} (compile excluded: a warm-up pass first)."""
  out = {}
  for name, caps in variants.items():
    key = jax.random.PRNGKey(seed)
    jax.block_until_ready(P.train(key, diffs_x, pairs, eta, 1, caps).w)  # compiles the 1-pass program
    jax.block_until_ready(P.train(key, diffs_x, pairs, eta, passes, caps).w)  # compiles this length
    t0 = time.time()
    jax.block_until_ready(P.train(key, diffs_x, pairs, eta, passes, caps).w)
    out[name] = (time.time() - t0) / passes
  return out


def run(cfg: schema.Config) -> RunRecord:
  t_all = time.time()
  o = cfg.options
  sizes, vote_cap = list(o.committee_sizes), o.vote_capacity
  caps = sorted(set(sizes) | {1, vote_cap})
  per_fold = {}
  data = dataclasses.replace(cfg.data, num_privileged=0, privileged="", query_norm=True, log1p=False)
  for fold in fold_data.folds_of(cfg.data):
    ds = data_lib.with_graded_labels(fold_data.load_dataset(data, fold))
    tr_name, sel_name, te_name = splits_of(ds)
    tr = ds[tr_name]
    pairs, eta = P.query_pairs(tr.rel, tr.offsets)
    sel_b, te_b = (padding.bucketize(ds[s], cfg.data.max_buckets) for s in (sel_name, te_name))
    key = jax.random.PRNGKey(o.cp_seed)
    t0 = time.time()
    out = jax.block_until_ready(P.train(key, tr.x, pairs, eta, o.passes, caps))
    scan_s = time.time() - t0
    sel, test = variant_tables(out, caps, sizes, vote_cap, sel_b), variant_tables(out, caps, sizes, vote_cap, te_b)
    rows = {}
    for name in sel:
      t = int(np.argmax(sel[name][:, MAP]))  # first pass with the best selection MAP
      rows[name] = dict(passes=t + 1, select_map=sel[name][t, MAP], test=test[name][t])
    for form in ("avg", "vote"):  # the committee with its K chosen on validation too
      cands = [f"committee K={k} ({form})" for k in sizes]
      best = max(cands, key=lambda n: rows[n]["select_map"])
      rows[f"committee ({form}), K chosen"] = dict(rows[best], K=int(best.split("=")[1].split()[0]))
    svm = rank_svm(tr.x, pairs, o.svm_c, o.cp_seed, lambda w: evaluate(sel_b, ws=w)[:, MAP])
    best = max(svm, key=lambda f: f["select"])
    rows["RankSVM (LinearSVC)"] = dict(C=best["C"], select_map=best["select"], seconds=best["seconds"],
                                       test=evaluate(te_b, ws=best["w"][None])[0])
    per_fold[f"fold{fold}"] = dict(rows=rows, pairs=int(len(eta)), train_docs=int(tr.num_docs),
                                   hypotheses=np.asarray(out.hypotheses), scan_seconds=scan_s,
                                   svm_fits=[dict(C=f["C"], seconds=f["seconds"], select_map=f["select"])
                                             for f in svm],
                                   curves={n: dict(select=sel[n][:, MAP], test=test[n][:, MAP]) for n in sel},
                                   selected_on=sel_name, trained_on=tr_name)
  # timing scans on the last fold's pairs (its data are still at hand)
  variants = {"vanilla / averaged": (), "pocket": (1,), "voted": (vote_cap,),
              f"committee K={max(sizes)}": (max(sizes),)}
  per_pass = timing(tr.x, pairs, eta, o.timing_passes, variants, o.cp_seed)
  out = RunRecord(config=cfg, env=rundir.environment(), data=ds.config, folds=per_fold, seconds_per_pass=per_pass,
                  timing_pairs=int(len(eta)), seconds=time.time() - t_all)
  out["comparisons"] = comparisons(out)
  return out


ROW_ORDER = ["vanilla", "pocket", "averaged", "voted", "committee (avg), K chosen", "committee (vote), K chosen",
             "RankSVM (LinearSVC)"]
TIMING_OF = {"vanilla": "vanilla / averaged", "averaged": "vanilla / averaged", "pocket": "pocket",
             "voted": "voted"}


def pooled(res: RunRecord, name: str, key: str) -> list:
  return [f["rows"][name][key] for f in res["folds"].values()]


def comparisons(res: RunRecord) -> tabulate.Comparisons:
  """Every method's test NDCG@10 against RankSVM's, paired by fold."""
  ndcg10 = {name: np.stack([np.asarray(t) for t in pooled(res, name, "test")])[:, [NAMES.index("NDCG@10")]]
            for name in ROW_ORDER}
  return tabulate.compare(ndcg10, "RankSVM (LinearSVC)")


def to_markdown(res: RunRecord) -> str:
  cfg = res["config"]
  folds = list(res["folds"].values())
  show = ["NDCG@1", "NDCG@3", "NDCG@5", "NDCG@10", "MAP"]
  per_pass = res["seconds_per_pass"]
  com_pp = next(v for k, v in per_pass.items() if k.startswith("committee"))
  body = []
  cmp = res.get("comparisons") or comparisons(res)
  for name in ROW_ORDER:
    test = np.stack([np.asarray(t) for t in pooled(res, name, "test")])
    cells = [f"{test[:, NAMES.index(m)].mean():.4f} ± {test[:, NAMES.index(m)].std():.4f}" for m in show]
    if name.startswith("RankSVM"):
      choice = "C " + "/".join(f"{c:g}" for c in pooled(res, name, "C"))
      secs = np.mean(pooled(res, name, "seconds"))
    else:
      t = np.asarray(pooled(res, name, "passes"))
      choice = f"T {t.mean():.1f}" + (f", K {'/'.join(str(k) for k in pooled(res, name, 'K'))}"
                                        if "K chosen" in name else "")
      secs = (per_pass[TIMING_OF[name]] if name in TIMING_OF else com_pp) * t.mean()
    body.append([name, choice, f"{secs:.2f}"] + cells + [tabulate.change_cell(cmp.get(name))])
  sel = folds[0]["selected_on"]
  return (f"# Committee Perceptron family vs RankSVM ({cfg['data']['dataset']}, QueryLevelNorm, graded labels)\n\n"
          f"Mean ± std over {len(folds)} fold(s) of the test metrics at the choices made on **{sel}** "
          f"(trained on {folds[0]['trained_on']}); {np.mean([f['pairs'] for f in folds]):,.0f} training pairs per "
          f"fold; {cfg['options']['passes']} passes streamed; voted keeps {cfg['options']['vote_capacity']} hypotheses (of "
          f"{np.mean([f['hypotheses'][-1] for f in folds]):,.0f} per fold). Training seconds: RankSVM = one "
          f"LinearSVC fit at the chosen C (mean over folds); perceptrons = seconds per pass of the variant alone "
          f"({', '.join(f'{k}: {v:.3f}' for k, v in per_pass.items())} s/pass on the last fold's "
          f"{res['timing_pairs']:,} pairs) x mean chosen T. Joint scan of all variants: "
          f"{np.mean([f['scan_seconds'] for f in folds]):.1f} s per fold. {res['seconds']:.0f} s in all on "
          f"{res['env']['backend']} ({res['env']['cpus']} CPUs). Change vs RankSVM: paired by fold (each method "
          f"and RankSVM on the same fold's data; {len(folds)} pairs, so intervals are wide), 95% paired-t interval "
          f"and p-value, † = p < 0.05.\n\n" +
          tabulate.markdown_table(["method", "choice", "train s"] + show +
                                ["NDCG@10 vs RankSVM (folds): change [95% CI], p"], body))


def plot(res: RunRecord, path: str) -> None:
  plt = plots.pyplot()
  fig, ax = plt.subplots(figsize=(6.5, 4))
  sizes = res["config"]["options"]["committee_sizes"]
  names = ["vanilla", "pocket", "averaged", "voted"] + [f"committee K={k} (avg)" for k in sizes]
  for name in names:
    c = np.stack([np.asarray(f["curves"][name]["test"]) for f in res["folds"].values()])
    ax.plot(np.arange(1, c.shape[1] + 1), c.mean(0), label=name, ls="-" if "committee" in name else "--")
  svm = np.mean([np.asarray(f["rows"]["RankSVM (LinearSVC)"]["test"])[MAP] for f in res["folds"].values()])
  ax.axhline(svm, color="k", ls=":", label="RankSVM")
  res = dict(res, config=dict(res["config"], run=dict(loss="test MAP per pass")))
  plots.finish_plot(fig, ax, res, path, "passes over the pair stream", "test MAP")


COMMITTEES = {"avg": "committee (avg), K chosen", "vote": "committee (vote), K chosen"}  # how: its row


DRIVER = schema.Driver("committee_perceptron", run, to_markdown, plot, "committee.png", options=Options,
                       groups=("data", "output"), needs_privileged=False,
                       defaults=(("dataset", "ohsumed"), ("min_docs", 1)),
                       presets=(Preset("default", "ohsumed", "", "Committee Perceptron family vs RankSVM (OHSUMED)"),))  # min_docs 1: LETOR evaluation keeps every query

if __name__ == "__main__":
  lifecycle.main(DRIVER)
