"""The benchmark's model cases (python -m experiments.benchmark --case=export / --case=modern): what the modern
ranker (:data:`pfd_jax.training.config.MODERN`) costs against the paper's MLP, in training (documents per second
of the seed-vmapped step) and in serving (p50 / p99 latency of one exported query)."""
from __future__ import annotations

import os
import tempfile

import jax
import jax.numpy as jnp
import numpy as np

from experiments.framework import deploy, rundir, tabulate
from pfd_jax import data as D
from pfd_jax import serving
from pfd_jax import training as T
from pfd_jax.data.config import DataConfig
from pfd_jax.ops.models import Arch
from pfd_jax.serving import export
from pfd_jax.training.config import MODERN

ARCHS = {"paper MLP": Arch(), "modern": Arch(**MODERN)}


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


def export_latency(o) -> tuple:
  """Each architecture (and the modern one's 5-seed ensemble) exported to ONNX, scored by ONNX Runtime on one
  thread, one query of n documents per call, against the deserialised StableHLO export and JAX's jitted scoring of
  the same function: p50 / p99 microseconds per query (96 regular features, log1p in the graph)."""
  import onnxruntime as ort
  d, rng = 96, np.random.default_rng(0)
  res, rows = dict(env=rundir.environment(), calls=o.export_calls, models={}), []
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
    for n in o.export_sizes:
      x = np.abs(rng.normal(size=(n, d))).astype(np.float32)
      runs = {"onnxruntime": lambda: sess.run(None, {inp: x}), "stablehlo": lambda: np.asarray(call(x)),
              "jax.jit": lambda: jitted(x).block_until_ready()}
      per = out["sizes"][n] = {label: _percentiles(fn, o.export_calls) for label, fn in runs.items()}
      rows += [[name, n, label, f"{v['p50_us']:.0f}", f"{v['p99_us']:.0f}"] for label, v in per.items()]
  md = (f"Exported rankers (96 features, log1p in the graph; modern = {MODERN}): one query per call, "
        f"{o.export_calls} timed calls per size; ONNX Runtime {ort.__version__} on 1 thread, the StableHLO artifact "
        f"deserialised and JAX's jitted function on {jax.default_backend()}.\n\n" +
        tabulate.markdown_table(["model", "documents", "runtime", "p50 us", "p99 us"], rows))
  return res, md


def step_throughput(o) -> tuple:
  """Training documents per second of the paper's MLP and the modern ranker (5 seeds vmapped, RankBCE, all
  groups), the second of two epochs (the first compiles), medians of o.repeats interleaved timings."""
  kw = D.web30k_scale()
  kw["num_queries"] = tuple(max(1, int(q * o.scale)) for q in kw["num_queries"])
  ds = D.prepare(DataConfig(tau=4.8), D.synthetic.generate(**kw))
  buckets = T.device_buckets(D.bucketize(ds["train"], o.max_buckets))
  eval_set = T.eval_set(ds["test"].take(np.arange(min(200, ds["test"].num_queries))), 2)
  docs, seeds = ds["train"].num_docs, o.seed_counts[-1]
  timings = {}
  for _ in range(o.repeats):
    for name, arch in ARCHS.items():
      cfg = T.TrainConfig(epochs=2, data_groups="all", **{k: v for k, v in arch._asdict().items()})
      times = T.EpochTimes()
      T.train(jax.random.split(jax.random.PRNGKey(0), seeds), cfg, buckets, "x", {"test": eval_set},
              hooks=T.Hooks(writers=(times,)))
      timings.setdefault(name, []).append(times[1] - times[0])
  res = dict(env=rundir.environment(), train_docs=docs, seeds=seeds, scale=o.scale, cases={})
  rows = []
  for name, secs in timings.items():
    med = float(np.median(secs))
    res["cases"][name] = dict(seconds=secs, docs_per_s=docs * seeds / med)
    rows.append([name, f"{med:.2f} [{min(secs):.2f}, {max(secs):.2f}]", f"{docs * seeds / med:,.0f}"])
  md = (f"Training step, {docs:,} documents x {seeds} vmapped seeds per epoch (synthetic, Web30k scale x {o.scale}), "
        f"RankBCE on all groups; modern = {MODERN}.\n\n" +
        tabulate.markdown_table(["model", "epoch seconds, median [min, max]", "documents/s (all seeds)"], rows))
  return res, md


def modern(o) -> tuple:
  """Both: the step's throughput and the exported query's latency."""
  step, md1 = step_throughput(o)
  exp, md2 = export_latency(o)
  return dict(step=step, export=exp), md1 + "\n" + md2
