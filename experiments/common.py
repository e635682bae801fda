"""Shared flags and output helpers of the experiment drivers (printing and files live here, not in pfd_jax)."""
from __future__ import annotations

import dataclasses
import json
import os
import platform
import time
from typing import NamedTuple, Optional

import jax
import numpy as np
from absl import flags, logging

from pfd_jax import data as D
from pfd_jax import distill
from pfd_jax import rank_distill
from pfd_jax import serving
from pfd_jax import train as T

FLAGS = flags.FLAGS


def flag(define, name: str, *args, **kw):
  """Defines an absl flag unless a driver imported earlier in this process already did.

  Drivers share flag names (dataset, loss, out_dir, ...); a test process imports several drivers. Defaults
  that differ per driver are None here and resolved by the driver at run time.
  """
  if name not in FLAGS:
    define(name, *args, **kw)


def define_common_flags():
  """Flags every training driver has: output root and loss (defaults resolved per driver)."""
  flag(flags.DEFINE_string, "out_dir", None, "Output root (default results/<driver>/); files go to "
       "<out_dir>/<dataset>/.")
  flag(flags.DEFINE_enum, "loss", None, ["rankbce", "ranknet", "both"], "Ranking loss (default per driver).")
  flag(flags.DEFINE_boolean, "save_models", False, "Save every trained row's model (all seeds + feature recipe) "
       "under <out_dir>/<dataset>/models/[<loss>/][fold<k>/]<row>/, loadable with pfd_jax.load_model and "
       "python -m experiments.predict.")


def out_root(driver: str) -> str:
  return FLAGS.out_dir or os.path.join("results", driver)


def single_loss(default: str = "rankbce") -> str:
  """--loss for drivers that study one loss at a time."""
  from absl import app
  loss = FLAGS.loss or default
  if loss == "both":
    raise app.UsageError("--loss must be rankbce or ranknet for this driver")
  return loss


def write_outputs(root: str, res: dict, md: str, plot=None, png: Optional[str] = None) -> str:
  """<root>/<dataset>/{results.json, table.md, png}; returns the Markdown."""
  out_dir = os.path.join(root, res["config"]["dataset"])
  write_json(os.path.join(out_dir, "results.json"), res)
  write_text(os.path.join(out_dir, "table.md"), md)
  if plot is not None:
    plot(res, os.path.join(out_dir, png))
  return md


def output_config(driver: str) -> dict:
  """Where a driver writes (out_dir) and whether it saves its models."""
  return dict(out_dir=out_root(driver), save_models=FLAGS.save_models)


def run_and_write(driver: str, run, to_markdown, plot=None, png: Optional[str] = None, **extra) -> None:
  """A single-loss driver's main: config from the data and training flags (+ extra), run, write, print."""
  cfg = data_config_from_flags()
  cfg.update(**train_config_from_flags(), **output_config(driver), loss=single_loss(), **extra)
  res = run(cfg)
  print(write_outputs(out_root(driver), res, to_markdown(res), plot, png))


def define_data_flags(default_dataset: str = "synthetic"):
  if "dataset" in FLAGS:
    return
  flags.DEFINE_enum("dataset", default_dataset, list(D.NAMES), "Dataset name (letor = any folder by --data_dir).")
  flags.DEFINE_string("data_dir", None, "Dataset folder; default $PFD_DATA_DIR/<name> or ../shared/data.")
  flags.DEFINE_string("cache_dir", "cache", "Where parsed LETOR files are cached as .npz.")
  flags.DEFINE_list("folds", None, "Folds to run (default: all folds of the dataset).")
  flags.DEFINE_float("t", 4.0, "Eq. 2 temperature.")
  flags.DEFINE_float("tau", None, "Eq. 2 tau_target (default: per dataset, see README).")
  flags.DEFINE_integer("num_privileged", None, "With --privileged=auto: how many features are privileged "
                       "(default: per dataset).")
  flags.DEFINE_string("privileged", None, "Privileged features: 'auto' (the paper's protocol: the "
                      "--num_privileged columns most |correlated| with y on the training split) or a comma list "
                      "of 1-based feature ids as written in the files, e.g. 7,15. Default: auto for named "
                      "datasets; required with --dataset=letor.")
  flags.DEFINE_enum("labels", None, list(D.LABEL_MODES), "Training labels: gumbel (the paper's Eq. 2 draws) or "
                    "file (the file's own labels; graded ones need --positive_grade). Default: file for "
                    "--dataset=letor, gumbel otherwise.")
  flags.DEFINE_float("positive_grade", None, "With --labels=file: y = 1[label >= this grade].")
  flags.DEFINE_integer("min_docs", 10, "Drop query groups with fewer documents.")
  flags.DEFINE_boolean("query_norm", False, "LETOR QueryLevelNorm (per-query min-max) before log1p.")
  flags.DEFINE_integer("label_seed", 0, "Seed of the Gumbel label draws (fixed across training seeds).")
  flags.DEFINE_float("synthetic_scale", 1.0, "Synthetic data: multiply query counts.")
  flags.DEFINE_boolean("synthetic_web30k", False, "Synthetic data at MSLR-WEB30K size (overrides scale).")


def define_train_flags():
  """Training flags shared by the drivers (defaults: the paper's protocol, appendix A.3)."""
  if "seeds" in FLAGS:
    return
  flags.DEFINE_integer("seeds", 5, "Training seeds, vmapped in one program.")
  flags.DEFINE_integer("seed", 0, "Base PRNG seed of the training keys.")
  flags.DEFINE_integer("epochs", 100, "Training epochs.")
  flags.DEFINE_float("alpha", 0.5, "Eq. 1 weight of the data loss.")
  flags.DEFINE_integer("batch_size", None, "Groups per batch (default: paper's 500 RankBCE / 300 RankNet).")
  flags.DEFINE_float("lr", None, "Learning rate (default: paper's 1e-3 RankBCE / 3e-4 RankNet).")
  flags.DEFINE_float("weight_decay", 0.005, "Coupled L2 weight decay.")
  flags.DEFINE_integer("hidden", 100, "Hidden width.")
  flags.DEFINE_integer("layers", 5, "Dense layers.")
  flags.DEFINE_enum("select_on", "test", ["test", "vali"], "Best epoch by NDCG@8 on this split.")
  flags.DEFINE_enum("empty_rule", "exclude", ["exclude", "zero"], "Test lists without a positive.")
  flags.DEFINE_enum("data_groups", "positive", ["positive", "all"], "Groups of the data loss (Table 5).")
  flags.DEFINE_integer("max_buckets", 4, "Length buckets per split.")
  flags.DEFINE_enum("teacher_loss", None, ["pointwise", "pairwise", "listwise", "topk"],
                    "How teachers teach (default: the student's own loss on sigmoid probabilities, the paper's "
                    "PFD). pointwise = RankBCE, pairwise = RankNet on sigmoid(t); listwise = SDR softmax on "
                    "max(a t + b, 0); topk = Ranking Distillation's weighted top-K loss.")
  flags.DEFINE_float("transform_a", 1.0, "SDR affine teacher transform slope a (listwise).")
  flags.DEFINE_float("transform_b", 0.0, "SDR affine teacher transform intercept b (listwise).")
  flags.DEFINE_integer("topk_k", 10, "Ranking Distillation: teacher's top-K unlabelled documents.")
  flags.DEFINE_enum("topk_scheme", "hybrid", list(rank_distill.SCHEMES), "Ranking Distillation weighting.")
  flags.DEFINE_float("topk_lambda", 5.0, "Ranking Distillation Eq. 8 lambda.")
  flags.DEFINE_float("topk_mu", 0.1, "Ranking Distillation Eq. 9 mu.")
  flags.DEFINE_integer("topk_eps", 10, "Ranking Distillation Algorithm 1 samples epsilon.")
  flags.DEFINE_integer("topk_warmup", None, "Ranking Distillation warm-up epochs with w^a only (default "
                       "half the epochs).")
  flags.DEFINE_string("mesh", "", "Data-parallel device mesh, e.g. data:4 or seeds:2,data:2 (default: one "
                      "device). CPU test: XLA_FLAGS=--xla_force_host_platform_device_count=4.")


def train_config_from_flags() -> dict:
  return dict(seeds=FLAGS.seeds, seed=FLAGS.seed, epochs=FLAGS.epochs, alpha=FLAGS.alpha,
              batch_size=FLAGS.batch_size, lr=FLAGS.lr, weight_decay=FLAGS.weight_decay, hidden=FLAGS.hidden,
              layers=FLAGS.layers, select_on=FLAGS.select_on, empty_rule=FLAGS.empty_rule,
              data_groups=FLAGS.data_groups, max_buckets=FLAGS.max_buckets, teacher_loss=FLAGS.teacher_loss,
              transform_a=FLAGS.transform_a, transform_b=FLAGS.transform_b,
              topk=dict(k=FLAGS.topk_k, scheme=FLAGS.topk_scheme, lam=FLAGS.topk_lambda, mu=FLAGS.topk_mu,
                        eps=FLAGS.topk_eps, warmup=FLAGS.topk_warmup), mesh=parse_mesh(FLAGS.mesh))


def parse_mesh(text: str) -> tuple:
  """'seeds:2,data:2' -> (('seeds', 2), ('data', 2)); '' -> () (one device)."""
  from absl import app
  out = []
  for part in filter(None, text.split(",")):
    name, _, size = part.partition(":")
    if name not in ("data", "seeds") or not size.isdigit() or int(size) < 1:
      raise app.UsageError(f"--mesh={text!r}: expected axis:size pairs with axes data and/or seeds, e.g. data:4")
    out.append((name, int(size)))
  return tuple(out)


def train_config(cfg: dict, loss: str, **overrides) -> T.TrainConfig:
  """The TrainConfig of a driver's config dict for `loss` (paper's batch size and lr unless given)."""
  kw = dict(epochs=cfg["epochs"], alpha=cfg["alpha"], weight_decay=cfg["weight_decay"], hidden=cfg["hidden"],
            layers=cfg["layers"], select_on=cfg["select_on"], empty_rule=cfg["empty_rule"],
            data_groups=cfg["data_groups"])
  if cfg.get("batch_size"):
    kw["batch_size"] = cfg["batch_size"]
  if cfg.get("lr"):
    kw["lr"] = cfg["lr"]
  if cfg.get("teacher_loss"):
    kw.update(distill.TEACHER_LOSSES[cfg["teacher_loss"]])
  kw.update(transform_a=cfg.get("transform_a", 1.0), transform_b=cfg.get("transform_b", 0.0),
            topk=rank_distill.TopK(**(cfg.get("topk") or {})), mesh=tuple(map(tuple, cfg.get("mesh") or ())))
  kw.update(overrides)
  return T.TrainConfig.paper(loss, **kw)


def progress(prefix: str):
  """A run_methods log_fn factory: one absl log line per epoch of every row."""
  def make(row):
    def log(epoch, loss, ndcg, seconds):
      logging.info("%s %-13s epoch %3d  loss %10.3f  select NDCG %.4f  %6.1fs", prefix, row, epoch + 1, loss,
                   ndcg, seconds)
    return log
  return make


SYNTHETIC_TAU = 4.4  # see README: tau 4.8 leaves ~16 positive training groups in the small default


def parse_privileged(text: Optional[str]) -> Optional[list]:
  """--privileged: None or 'auto' -> None (automatic choice); '7,15' -> [7, 15] (1-based ids)."""
  from absl import app
  if text is None or text.strip() == "auto":
    return None
  ids = []
  for tok in text.split(","):
    tok = tok.strip()
    if not tok.isdigit() or int(tok) < 1:
      raise app.UsageError(f"--privileged={text!r}: {tok!r} is not a feature id (1-based integers, e.g. "
                           "--privileged=7,15, or --privileged=auto)")
    ids.append(int(tok))
  if len(set(ids)) != len(ids):
    raise app.UsageError(f"--privileged={text!r}: duplicate feature ids")
  return ids


def data_config_from_flags(needs_privileged: bool = True) -> dict:
  """The data flags as a config dict, checked. needs_privileged: the driver trains on privileged features,
  so a folder given by path must name them (--privileged) rather than fall back to a silent default."""
  from absl import app
  labels = FLAGS.labels or ("file" if FLAGS.dataset == "letor" else "gumbel")
  if FLAGS.positive_grade is not None and labels != "file":
    raise app.UsageError("--positive_grade applies to --labels=file only")
  privileged = parse_privileged(FLAGS.privileged)
  if needs_privileged and FLAGS.dataset == "letor" and FLAGS.privileged is None:
    raise app.UsageError("--dataset=letor reads your own folder, so say which features are privileged (known at "
                         "training time only): --privileged=ID,ID,... with 1-based feature ids as in the files, "
                         "or --privileged=auto for the paper's protocol (the --num_privileged features most "
                         "correlated with the labels)")
  return dict(dataset=FLAGS.dataset, data_dir=FLAGS.data_dir, cache_dir=FLAGS.cache_dir,
              folds=[int(f) for f in FLAGS.folds] if FLAGS.folds else None, t=FLAGS.t, tau=FLAGS.tau,
              num_privileged=FLAGS.num_privileged, min_docs=FLAGS.min_docs, query_norm=FLAGS.query_norm,
              label_seed=FLAGS.label_seed, synthetic_scale=FLAGS.synthetic_scale,
              synthetic_web30k=FLAGS.synthetic_web30k, labels=labels, positive_grade=FLAGS.positive_grade,
              privileged=privileged)


def describe_data(cfg: dict) -> str:
  """One line: the label mode and the privileged features in force (printed when a run starts)."""
  labels = cfg.get("labels", "gumbel")
  if labels == "file":
    lab = "the file's own labels" + (f", y = 1[label >= {cfg['positive_grade']}]" if cfg.get("positive_grade")
                                     is not None else " (0/1)")
  else:
    lab = "Gumbel draws of Eq. 2 (the paper's protocol)"
  priv = (f"feature ids {','.join(map(str, cfg['privileged']))}" if cfg.get("privileged")
          else "chosen automatically (most correlated with y)")
  return f"labels: {lab}; privileged features: {priv}"


def folds_of(cfg: dict) -> list:
  have = D.available_folds(cfg["dataset"], cfg.get("data_dir"))
  folds = cfg.get("folds") or have
  bad = [f for f in folds if f not in have]
  if bad:
    raise ValueError(f"--folds {bad}: dataset {cfg['dataset']!r} has folds {have} on disk")
  return folds


def load_dataset(cfg: dict, fold: int = 1) -> D.Dataset:
  """Loads and preprocesses one fold as configured by `cfg` (see data_config_from_flags)."""
  name = cfg["dataset"]
  syn = None
  if name == "synthetic":
    syn = D.web30k_scale() if cfg.get("synthetic_web30k") else dict(scale=cfg.get("synthetic_scale", 1.0))
    syn.update(cfg.get("synthetic_kwargs") or {})
  raw = D.load_raw(name, cfg.get("data_dir"), fold=fold, cache_dir=cfg.get("cache_dir"), synthetic_kwargs=syn)
  tau = cfg.get("tau")
  if tau is None and name == "synthetic":
    tau = SYNTHETIC_TAU
  privileged = cfg.get("privileged")
  if privileged:
    width = max(g.x.shape[1] for g in raw.values())
    bad = [i for i in privileged if i > width]
    if bad:
      from absl import app
      raise app.UsageError(f"--privileged: feature ids {bad} are out of range; dataset {name!r} has features "
                           f"1..{width}")
  return D.prepare(name, raw, t=cfg.get("t", 4.0), tau=tau, num_privileged=cfg.get("num_privileged"),
                   min_docs=cfg.get("min_docs", 10), query_norm=cfg.get("query_norm", False),
                   log1p=cfg.get("log1p", True), seed=cfg.get("label_seed", 0),
                   labels=cfg.get("labels", "gumbel"), positive_grade=cfg.get("positive_grade"),
                   privileged=privileged)


def fold_setup(cfg: dict, loss: str, fold: int = 1, ds: Optional[D.Dataset] = None, **overrides):
  """(dataset, device data, TrainConfig, seed keys) of one fold, checked for the splits training needs."""
  ds = load_dataset(cfg, fold) if ds is None else ds
  tc = train_config(cfg, loss, **overrides)
  need = {"train", "test", tc.select_on}
  if not need <= set(ds.splits):
    raise ValueError(f"dataset {cfg['dataset']!r} fold {fold} needs the splits {sorted(need)}; it has "
                     f"{list(ds.splits)}")
  splits = ("test", "vali") if tc.select_on == "vali" else ("test",)
  dd = distill.to_device(ds, cfg.get("max_buckets", 4), splits, tc.data_groups)
  keys = jax.random.split(jax.random.PRNGKey(cfg.get("seed", 0)), cfg.get("seeds", 5))
  return ds, dd, tc, keys


class ModelSink:
  """Saves trained rows as :class:`pfd_jax.serving.Ranker` folders when the config asks (--save_models):
  ``<out_dir>/<dataset>/models/[<loss>/][fold<k>/]<row>/`` (the loss level when a run trains both losses,
  the fold level for multi-fold runs). Calling it returns the result, so it wraps a training call inline."""

  def __init__(self, cfg: dict, ds: D.Dataset, fold: int = 1, loss: Optional[str] = None):
    self.cfg, self.ds, self.fold, self.loss = cfg, ds, fold, loss
    self.enabled = bool(cfg.get("save_models"))
    parts = [cfg.get("out_dir") or "results", cfg["dataset"], "models"]
    if cfg.get("loss") == "both" and loss:
      parts.append(loss)
    if cfg["dataset"] in D.NAMES and len(folds_of(cfg)) > 1:
      parts.append(f"fold{fold}")
    self.root = os.path.join(*parts)

  def __call__(self, row: str, result: T.TrainResult, view: str, tc: T.TrainConfig) -> T.TrainResult:
    if self.enabled:
      serving.make_ranker(result, tc, view, self.ds.config, dataset=self.cfg["dataset"],
                          data_dir=self.cfg.get("data_dir"), fold=self.fold, row=row).save(
                              os.path.join(self.root, row.replace(" ", "_").replace("/", "_")))
    return result


class PFDFold(NamedTuple):
  """One fold of an ablation: its data, config, keys, progress logger, baseline and PFD teacher runs."""
  ds: D.Dataset
  dd: object
  tc: T.TrainConfig
  keys: jax.Array
  log: object
  baseline: T.TrainResult
  teacher: T.TrainResult
  save: ModelSink


def pfd_folds(cfg: dict):
  """Yields a :class:`PFDFold` per fold of `cfg`: the no-distillation baseline (view x) and the PFD teacher
  (view xz) that the ablation drivers build on, both trained on the positive groups."""
  for fold in folds_of(cfg):
    ds, dd, tc, keys = fold_setup(cfg, cfg["loss"], fold)
    log = progress(f"[fold{fold}]")
    save = ModelSink(cfg, ds, fold)
    base = save("no_distill", distill.train_on_data(keys, tc, dd, "x", log("no_distill")), "x", tc)
    teacher = save("pfd_teacher", distill.train_on_data(keys, tc, dd, "xz", log("pfd_teacher")), "xz", tc)
    yield PFDFold(ds, dd, tc, keys, log, base, teacher, save)


def environment() -> dict:
  import flax
  import optax
  return dict(python=platform.python_version(), jax=jax.__version__, flax=flax.__version__,
              optax=optax.__version__, numpy=np.__version__, backend=jax.default_backend(),
              devices=[str(d) for d in jax.devices()], machine=platform.machine(),
              cpus=os.cpu_count(), time=time.strftime("%Y-%m-%d %H:%M:%S"))


def _jsonable(o):
  if dataclasses.is_dataclass(o) and not isinstance(o, type):
    return _jsonable(dataclasses.asdict(o))
  if isinstance(o, dict):
    return {str(k): _jsonable(v) for k, v in o.items()}
  if isinstance(o, (list, tuple)):
    return [_jsonable(v) for v in o]
  if isinstance(o, np.ndarray):
    return o.tolist()
  if isinstance(o, (np.floating, np.integer, np.bool_)):
    return o.item()
  if hasattr(o, "shape") and hasattr(o, "dtype"):  # jax arrays
    return np.asarray(o).tolist()
  return o


def write_json(path: str, obj) -> None:
  """Writes atomically (tmp + rename) so an interrupted run never leaves a truncated file."""
  os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
  tmp = path + ".tmp"
  with open(tmp, "w") as f:
    json.dump(_jsonable(obj), f, indent=1)
  os.replace(tmp, path)


def write_text(path: str, text: str) -> None:
  os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
  with open(path, "w") as f:
    f.write(text)


def markdown_table(header: list, rows: list) -> str:
  out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
  out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
  return "\n".join(out) + "\n"


def mean_std_table(rows: dict, labels: dict, ks=(8, 16, 32)) -> str:
  """Markdown rows `labels[k]` with mean ± std over the first axis of rows[k] [runs, len(ks)]."""
  body = [[labels[k]] + [f"{m:.3f} ± {s:.3f}" for m, s in zip(np.asarray(v).mean(0), np.asarray(v).std(0))]
          for k, v in rows.items()]
  return markdown_table([""] + [f"NDCG@{k}" for k in ks], body)


def bar_plot(res: dict, path: str, labels: dict, scale_to: Optional[str] = None) -> None:
  """Horizontal bars of NDCG@8 (mean ± std over runs) of res['rows'][k] for k in `labels`, optionally
  divided by the mean of row `scale_to`."""
  plt = pyplot()
  keys = [k for k in labels if k in res["rows"]]
  vals = [np.asarray(res["rows"][k])[:, 0] for k in keys]
  div = np.asarray(res["rows"][scale_to])[:, 0].mean() if scale_to else 1.0
  fig, ax = plt.subplots(figsize=(7, 0.45 * len(keys) + 1.2))
  ax.barh(range(len(keys)), [v.mean() / div for v in vals], xerr=[v.std() / div for v in vals], color="C0",
          label="mean ± std over runs")
  ax.set_yticks(range(len(keys)), [labels[k] for k in keys], fontsize=8)
  ax.invert_yaxis()
  finish_plot(fig, ax, res, path, "test NDCG@8" + (f" / {labels[scale_to]}" if scale_to else ""), "")


def finish_plot(fig, ax, res: dict, path: str, xlabel: str, ylabel: str = "test NDCG@8") -> None:
  """Labels, a '<dataset>, <loss>' title and the legend, then saves `fig` as a PNG at `path`."""
  plt = pyplot()
  ax.set_xlabel(xlabel)
  ax.set_ylabel(ylabel)
  ax.set_title(f"{res['config']['dataset']}, {res['config']['loss']}")
  ax.legend(fontsize=8)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


def pyplot():
  """matplotlib's pyplot on the file-only Agg backend."""
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  return plt
