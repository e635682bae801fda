"""The benchmark's model cases (python -m experiments.bench.benchmark: the headline; --case=export / --case=modern):
what the modern ranker (:data:`pfd_jax.training.config.MODERN`) costs against the paper's MLP, in training
(documents per second of the seed-vmapped step, along an ablation ladder from a plain MLP of the modern shape to
the modern ranker, each step against its multiply-add floor) and in serving (p50 / p99 latency of one exported
query)."""
from __future__ import annotations

import os
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np

from experiments.framework import deploy, rundir, tabulate
from pfd_jax import data as data_lib
from pfd_jax import serving
from pfd_jax import training as training_lib
from pfd_jax.data.config import DataConfig
from pfd_jax.ops.models import Arch
from pfd_jax.serving import export
from pfd_jax.training.config import MODERN

ARCHS = {"paper MLP": Arch(), "modern": Arch(**MODERN)}
_WIDE = dict(hidden=MODERN["hidden"], layers=MODERN["layers"])
# The modern ranker's options added one at a time, from the paper's MLP: what each costs.
LADDER = {"paper MLP": Arch(), f"{_WIDE['hidden']} x {_WIDE['layers'] - 1} plain": Arch(**_WIDE),
          "+ batch norm": Arch(**_WIDE, norm=MODERN["norm"]),
          "+ dropout": Arch(**_WIDE, norm=MODERN["norm"], dropout=MODERN["dropout"]),
          "+ noise (modern)": Arch(**MODERN),
          # the option validation did not keep (docs/modern-ranker.md): what it would save
          "modern, input norm without scale/bias": Arch(**MODERN, input_affine=False)}
assert LADDER["+ noise (modern)"] == ARCHS["modern"]


def dense_shapes(d: int, hidden: int, layers: int) -> list:
  """The (in, out) shapes of the MLP's Dense kernels on d input features."""
  return [(d, hidden)] + [(hidden, hidden)] * (layers - 2) + [(hidden, 1)]


def mlp_matmul_flops(dim: int, hidden: int, layers: int) -> int:
  """Forward multiply-add FLOPs of the MLP's Dense layers per document: 2 * sum(in * out)."""
  return 2 * sum(a * b for a, b in dense_shapes(dim, hidden, layers))


def matmul_chain(ws, x):
  """The sum of the MLP's bias-free products on x (the roofline's reference: its fwd + bwd are the step's
  products)."""
  for w in ws:
    x = x @ w
  return jnp.sum(x)


def timed(f) -> float:
  """Seconds of one call of f (which blocks)."""
  t0 = time.perf_counter()
  f()
  return time.perf_counter() - t0


def training_macs(arch: Arch, d: int) -> int:
  """The multiply-adds per document of a training step's matrix products, the floor of its cost: the forward
  sum(in * out) of the Dense layers, the same again for the weights' gradients and for the inputs' gradients, less
  the first layer's input gradient where nothing before it trains (the paper's MLP; an input batch norm without
  scale and bias; a trainable input normalisation needs it)."""
  forward = sum(a * b for a, b in dense_shapes(d, arch.hidden, arch.layers))
  trained = arch.norm == "layer" or (arch.norm == "batch" and arch.input_affine)
  return 3 * forward - (0 if trained else d * arch.hidden)


def _ranker(arch: Arch, d: int, seeds: int) -> serving.Ranker:
  """A ranker of `arch` on d raw features (log1p recipe) with `seeds` freshly initialised seeds; batch norm's
  running statistics set to a non-trivial state, as after training."""
  keys = jax.random.split(jax.random.PRNGKey(0), seeds)
  params = jax.vmap(lambda k: arch.module().init(k, jnp.zeros((1, d))))(keys)
  if "batch_stats" in params:
    params = dict(params, batch_stats=jax.tree_util.tree_map(lambda a: a + 0.5, params["batch_stats"]))
  recipe = dict(model=dict(kind="mlp", **arch._asdict()), transforms=dict(query_norm=False, log1p=True),
                input_ids=list(range(1, d + 1)), num_seeds=seeds, best_seed=0)
  return serving.Ranker(params=params, recipe=recipe)


def _percentiles(fn, calls: int) -> dict:
  t = deploy.wall_times(fn, calls, warmup=20)
  return dict(p50_us=float(np.percentile(t, 50) * 1e6), p99_us=float(np.percentile(t, 99) * 1e6))


def export_latency(o, sizes=None, calls=None) -> tuple:
  """Each architecture (and the modern one's 5-seed ensemble) exported to ONNX, scored by ONNX Runtime on one
  thread, one query of n documents per call, against the deserialised StableHLO export and JAX's jitted scoring of
  the same function: p50 / p99 microseconds per query (96 regular features, log1p in the graph), for queries of
  `sizes` documents (default o.export_sizes), `calls` timed calls each (default o.export_calls)."""
  import onnxruntime as ort
  sizes, calls = sizes or o.export_sizes, calls or o.export_calls
  d, rng = 96, np.random.default_rng(0)
  res, rows = dict(env=rundir.environment(), calls=calls, models={}), []
  cases = [(name, arch, 1) for name, arch in ARCHS.items()] + [("modern, 5-seed ensemble", ARCHS["modern"], 5)]
  for name, arch, seeds in cases:
    ranker = _ranker(arch, d, seeds)
    ensemble = seeds > 1
    with tempfile.TemporaryDirectory() as tmp:
      spec = export.export(ranker, tmp, "onnx", ensemble=ensemble)
      size = os.path.getsize(os.path.join(tmp, spec["artifact"]))
      so = ort.SessionOptions()
      so.intra_op_num_threads = so.inter_op_num_threads = 1
      sess = ort.InferenceSession(os.path.join(tmp, spec["artifact"]), so)
      hlo = export.export(ranker, tmp, "stablehlo", ensemble=ensemble)
      with open(os.path.join(tmp, hlo["artifact"]), "rb") as f:
        call = jax.export.deserialize(bytearray(f.read())).call
    inp = sess.get_inputs()[0].name
    jitted = jax.jit(export.serving_function(ranker, ensemble=ensemble))
    out = res["models"][name] = dict(onnx_bytes=size, sizes={})
    for n in sizes:
      x = np.abs(rng.normal(size=(n, d))).astype(np.float32)
      runs = {"onnxruntime": lambda: sess.run(None, {inp: x}), "stablehlo": lambda: np.asarray(call(x)),
              "jax.jit": lambda: jitted(x).block_until_ready()}
      per = out["sizes"][n] = {label: _percentiles(fn, calls) for label, fn in runs.items()}
      rows += [[name, n, label, f"{v['p50_us']:.0f}", f"{v['p99_us']:.0f}"] for label, v in per.items()]
  md = (f"Exported rankers (96 features, log1p in the graph; modern = {MODERN}): one query per call, "
        f"{calls} timed calls per size; ONNX Runtime {ort.__version__} on 1 thread, the StableHLO artifact "
        f"deserialised and JAX's jitted function on {jax.default_backend()}.\n\n" +
        tabulate.markdown_table(["model", "documents", "runtime", "p50 us", "p99 us"], rows))
  return res, md


def epoch_times(archs: dict, ds, seeds: int, repeats: int, max_buckets: int) -> dict:
  """{name: [seconds of the second of two epochs (the first compiles)] x repeats} of every architecture, RankBCE
  on all groups with `seeds` vmapped seeds, the repeats interleaved across the architectures."""
  buckets = training_lib.device_buckets(data_lib.bucketize(ds["train"], max_buckets))
  eval_set = training_lib.eval_set(ds["test"].take(np.arange(min(200, ds["test"].num_queries))), 2)
  timings = {}
  for _ in range(repeats):
    for name, arch in archs.items():
      cfg = training_lib.TrainConfig(epochs=2, data_groups="all", **arch._asdict())
      times = training_lib.EpochTimes()
      training_lib.train(jax.random.split(jax.random.PRNGKey(0), seeds), cfg, buckets, "x", {"test": eval_set},
                         hooks=training_lib.Hooks(writers=(times,)))
      timings.setdefault(name, []).append(times[1] - times[0])
  return timings


def synthetic(scale: float):
  """The Web30k-sized synthetic set at `scale` of its query counts (the paper's tau on 0-4 grades)."""
  kw = data_lib.web30k_scale()
  kw["num_queries"] = tuple(max(1, int(q * scale)) for q in kw["num_queries"])
  return data_lib.prepare(DataConfig(tau=4.8), data_lib.synthetic.generate(**kw))


def ladder(o, ds=None) -> tuple:
  """The ablation ladder (:data:`LADDER`): each architecture's training epoch (RankBCE, all groups, the last of
  o.seed_counts vmapped seeds; medians of o.repeats interleaved timings) against the paper's MLP, beside its
  multiply-add floor (:func:`training_macs`'s ratio): (results, markdown)."""
  ds = synthetic(o.scale) if ds is None else ds
  docs, seeds, d = ds["train"].num_docs, o.seed_counts[-1], int(ds["train"].x.shape[1])
  timings = epoch_times(LADDER, ds, seeds, o.repeats, o.max_buckets)
  base_t, base_m = float(np.median(timings["paper MLP"])), training_macs(LADDER["paper MLP"], d)
  res = dict(train_docs=docs, seeds=seeds, features=d, scale=o.scale, cases={})
  rows, prev = [], None
  for name, secs in timings.items():
    med, macs = float(np.median(secs)), training_macs(LADDER[name], d)
    res["cases"][name] = dict(seconds=secs, docs_per_s=docs * seeds / med, macs_per_doc=macs,
                              time_ratio=med / base_t, floor_ratio=macs / base_m,
                              step_ratio=None if prev is None else med / prev)
    rows.append([name, f"{med:.2f} [{min(secs):.2f}, {max(secs):.2f}]", f"{docs * seeds / med:,.0f}", f"{macs:,}",
                 f"{med / base_t:.2f}x", f"{macs / base_m:.2f}x", "" if prev is None else f"{med / prev:.2f}x"])
    prev = med
  md = (f"Training epoch, {docs:,} documents x {seeds} vmapped seeds (synthetic, Web30k scale x {o.scale:g}, {d} "
        f"regular features), RankBCE on all groups, median [min, max] of {o.repeats} interleaved timings; the "
        f"modern ranker's options added one at a time (modern = {MODERN}), then the modern ranker with the input "
        f"norm's scale and bias off (--noinput_affine). Floor: the step's matrix multiply-adds "
        f"per document against the paper's MLP's.\n\n" +
        tabulate.markdown_table(["model", "epoch seconds", "documents/s (all seeds)", "multiply-adds / document",
                                 "time vs paper MLP", "floor vs paper MLP", "vs the step above"], rows))
  return res, md


def modern(o) -> tuple:
  """The ablation ladder and the exported query's latency."""
  step, md1 = ladder(o)
  exp, md2 = export_latency(o)
  return dict(env=rundir.environment(), ladder=step, export=exp), md1 + "\n" + md2
