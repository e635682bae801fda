"""The benchmark's memory cases (python -m experiments.bench.benchmark --case=memory / --case=streamed): RankNet's
compiled memory on long lists, and streamed against resident training at growing scales, each in a fresh
process so that its peak memory is its own."""
from __future__ import annotations

import dataclasses
import json
import os
import resource
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from experiments.framework import rundir, tabulate
from pfd_jax import data as data_lib
from pfd_jax.data import preprocess as pp, shards, synthetic
from pfd_jax import training as training_lib


def memory(o) -> tuple:
  """RankNet on [batch, L] lists: two steps (one compiles), peak RSS of this process."""
  rng = np.random.default_rng(0)
  q, l, dim = o.memory_batch, o.memory_len, 96
  bucket = dict(x=jnp.asarray(rng.normal(size=(q, l, dim)).astype(np.float32)),
                y=jnp.asarray((rng.random((q, l)) < 0.05).astype(np.float32)), mask=jnp.ones((q, l), bool),
                pos=jnp.ones(q))
  es = training_lib.EvalSet([bucket], q)
  cfg = training_lib.TrainConfig(loss="ranknet", epochs=2, batch_size=q)
  t0 = time.time()
  times = training_lib.EpochTimes()
  training_lib.train(jax.random.split(jax.random.PRNGKey(0), 1), cfg, [bucket], "x", {"test": es},
                     hooks=training_lib.Hooks(writers=(times,)))
  rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20  # KiB -> GiB on Linux
  res = {"env": rundir.environment(), "lists": q, "docs_per_list": l, "features": dim,
         "peak_rss_gib": rss, "step_seconds": times[1] - times[0], "total_seconds": time.time() - t0}
  md = (f"RankNet (all pairs, blocked) on a batch of {q} lists x {l} documents, {dim} features: peak resident "
        f"memory {rss:.2f} GiB; one epoch (1 step + evaluation) {res['step_seconds']:.1f} s after compiling. "
        f"{res['env']['backend']} ({res['env']['cpus']} CPUs).\n")
  return res, md


def write_synthetic_shards(folder: str, scale: float, max_buckets: int, seed: int = 0) -> dict:
  """A Web30k-shaped synthetic training split of `scale` folds written as a bucket set, chunk by chunk (the
  paper's log1p and Eq. 2 labels per chunk; the 40 privileged columns chosen on the first chunk)."""
  n = int(round(18919 * scale))
  meta = dict(scale=scale, seed=seed, max_buckets=max_buckets)
  if shards.is_done(folder, "train_all", meta):
    return meta
  sizes = synthetic.chunk_sizes(n, seed=seed)
  cuts = data_lib.bucket_cuts(sizes, max_buckets)
  counts = np.bincount(np.searchsorted(cuts, sizes), minlength=len(cuts))
  writer, priv = None, None
  for c, g in enumerate(synthetic.generate_chunks(n, seed=seed)):
    g = dataclasses.replace(g, x=pp.log1p_transform(g.x))
    g = pp.with_labels(g, np.random.default_rng([seed, c, 1]), t=4.0, tau=4.8)
    if priv is None:
      priv = pp.privileged_columns(g, 40)
      writer = shards.BucketWriter(folder, "train_all", counts, cuts, g.x.shape[1] - 40, 40)
    for k, padded in shards.bucket_sets_iter([pp.split_features(g, priv)], cuts):
      writer.add(padded, k)
  writer.close(meta)
  return meta


def stream_child(folder: str, source: str, epochs: int = 2) -> dict:
  """Trains RankBCE (one seed, every group, view x) on a written set, resident or streamed: docs/s of the
  last epoch and this process's peak resident memory."""
  buckets = shards.open_set(folder, "train_all")
  sample = [b.read(np.arange(min(256, b.num_groups))) for b in buckets]
  es = training_lib.EvalSet([{k: jnp.asarray(v) for k, v in b.items()} for b in sample],
                            sum(b["x"].shape[0] for b in sample))
  if source == "resident":
    buckets = [{k: jnp.asarray(v) for k, v in b.read(np.arange(b.num_groups)).items()} for b in buckets]
  docs = sum(int(np.asarray(b.whole(["mask"])["mask"] if source == "streamed" else b["mask"]).sum()) for b in buckets)
  times = training_lib.EpochTimes()
  training_lib.train(jax.random.split(jax.random.PRNGKey(0), 1),
                     training_lib.TrainConfig(epochs=epochs, data_groups="all"), buckets, "x",
          {"test": es}, hooks=training_lib.Hooks(writers=(times,)))
  return dict(docs=docs, seconds=times[-1] - times[-2], docs_per_s=docs / (times[-1] - times[-2]),
              peak_rss_gib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20)


def _child(code: str) -> dict:
  """Runs `code` (an expression of this module) in a fresh interpreter: its own peak memory."""
  r = subprocess.run([sys.executable, "-c", "import json, resource; from experiments.bench.memory import *; r = "
                      f"{code}; r['peak_rss_gib'] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20; "
                      "print('RESULT' + json.dumps(r))"], capture_output=True, text=True)
  if r.returncode:
    raise RuntimeError(f"benchmark child {code!r} failed:\n{r.stderr[-3000:]}")
  return json.loads(r.stdout.rsplit("RESULT", 1)[1])


def streamed(o) -> tuple:
  """Conversion and training at each of `stream_scales` (each in its own process), against resident at the
  first scale."""
  res, rows = {"env": rundir.environment()}, []
  for scale in o.stream_scales:
    folder = os.path.join(o.stream_dir, f"web30k-x{scale:g}")
    t0 = time.time()
    conv = _child(f"write_synthetic_shards({folder!r}, {scale}, {o.max_buckets})")
    conv["seconds"] = time.time() - t0
    runs = {"streamed": _child(f"stream_child({folder!r}, 'streamed')")}
    if scale == o.stream_scales[0]:
      runs["resident"] = _child(f"stream_child({folder!r}, 'resident')")
    res[f"x{scale:g}"] = dict(conversion=conv, **runs)
    for source, r in runs.items():
      rows.append([f"{scale:g}", source, f"{r['docs']:,}", f"{r['docs_per_s']:,.0f}", f"{r['peak_rss_gib']:.2f}",
                   f"{conv['peak_rss_gib']:.2f} ({conv['seconds']:.0f} s)"])
  first = res[f"x{o.stream_scales[0]:g}"]
  md = ("Streamed training (RankBCE, one seed, every group, view x, 5-layer width-100 MLP; docs/s of epoch 2; "
        f"peak RSS of each process; {res['env']['backend']}, {res['env']['cpus']} CPUs). Streamed / resident "
        f"docs/s at {o.stream_scales[0]:g}x: {first['streamed']['docs_per_s'] / first['resident']['docs_per_s']:.2f}."
        "\n\n" + tabulate.markdown_table(["Web30k folds", "data", "training documents", "docs/s", "peak RSS GiB",
                                         "conversion peak RSS GiB (time)"], rows))
  return res, md


