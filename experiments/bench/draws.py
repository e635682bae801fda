"""The benchmark's draws case (python -m experiments.bench.benchmark --case=draws): D re-drawn datasets of the decisive
protocol's shapes (protocol.DRAW_QUERIES), a row (RankBCE, the paper's MLP, validation scored every epoch)
trained three ways, each timed whole (compilation included, as a run pays it):

* one draw after another on its own buckets (what ``table2 --draws`` does: every draw its own shapes, so its
  own compilation);
* one draw after another on the draws' shared layout (:mod:`pfd_jax.training.draws`: one compilation);
* the D draws in one program on that layout (looped inside it on a CPU, batched on an accelerator).

Run it with ``--compile_cache=`` for what a fresh machine pays: with the persistent cache on, a draw's own programs
may be loaded from an earlier run instead of compiled.
"""
from __future__ import annotations

import jax
import numpy as np

from experiments.bench import modern as bench_modern
from experiments.framework import protocol, rundir, tabulate
from pfd_jax import data as data_lib
from pfd_jax import training as training_lib
from pfd_jax.data.config import DataConfig
from pfd_jax.training import draws as draws_lib


def _dataset(k: int, scale: float):
  queries = tuple(max(2, int(int(q) * scale)) for q in protocol.DRAW_QUERIES.split(","))
  return data_lib.prepare(DataConfig(), data_lib.synthetic.generate(num_queries=queries, seed=1000 + k))


def _timed_train(keys, cfg, buckets, evs) -> float:
  return bench_modern.timed(lambda: jax.block_until_ready(training_lib.train(keys, cfg, buckets, "x", evs).params))


def draws(o) -> tuple:
  """(results, markdown) of o.draws_count draws of o.draws_epochs epochs at o.draws_scale of the decisive shapes."""
  n, sets = o.draws_count, [_dataset(k, o.draws_scale) for k in range(o.draws_count)]
  cfg = training_lib.TrainConfig(loss="rankbce", epochs=o.draws_epochs, select_on="vali", curves="select")
  keys = [jax.random.split(jax.random.PRNGKey(k), 1) for k in range(n)]
  train = [s["train"] for s in sets]
  layout = draws_lib.layout(train, o.max_buckets)
  ev_layout = {p: draws_lib.layout([s[p] for s in sets], o.max_buckets, draws_lib.positive([s[p] for s in sets]))
               for p in ("vali", "test")}
  jax.clear_caches()
  own = sum(_timed_train(keys[k], cfg, training_lib.device_buckets(data_lib.bucketize(s["train"], o.max_buckets)),
                         {p: training_lib.eval_set(s[p], o.max_buckets) for p in ("vali", "test")})
            for k, s in enumerate(sets))
  jax.clear_caches()
  shared = sum(_timed_train(keys[k], cfg, draws_lib.draws([s["train"]], **layout),
                            {p: draws_lib.eval_set([s[p]], **ev_layout[p]) for p in ("vali", "test")})
               for k, s in enumerate(sets))
  jax.clear_caches()
  together = _timed_train(np.concatenate(keys), cfg, draws_lib.draws(train, **layout),
                          {p: draws_lib.eval_set([s[p] for s in sets], **ev_layout[p]) for p in ("vali", "test")})
  real = sum(s["train"].num_docs for s in sets)
  slots = int(sum(c * length for c, length in zip(layout["capacity"], layout["cuts"]))) * n
  cache = bool(jax.config.jax_compilation_cache_dir)
  res = dict(env=rundir.environment(), draws=n, epochs=o.draws_epochs, scale=o.draws_scale,
             queries=protocol.DRAW_QUERIES, seconds=dict(own_buckets=own, shared_layout=shared, one_program=together),
             layout_fill=real / slots, persistent_compile_cache=cache)
  rows = [["one after another, own buckets (table2 --draws)", f"{own:.1f}", f"{own / n:.2f}", "1.00"],
          ["one after another, shared layout", f"{shared:.1f}", f"{shared / n:.2f}", f"{own / shared:.2f}"],
          [f"{n} draws in one program, shared layout", f"{together:.1f}", f"{together / n:.2f}",
           f"{own / together:.2f}"]]
  how = "looped inside the program" if jax.default_backend() == "cpu" else "batched"
  compiled = ("programs loaded from the persistent compilation cache where it held them" if cache else
              "the persistent compilation cache off: every program compiled")
  md = (f"Draws in one program ({jax.devices()[0].platform}: {how}): {n} draws of {protocol.DRAW_QUERIES} queries x "
        f"{o.draws_scale:g}, RankBCE, the paper's MLP, {o.draws_epochs} epochs, validation scored every epoch; wall "
        f"time of the whole row, compilation included ({compiled}). The shared layout's training slots hold "
        f"{100 * real / slots:.0f}% real documents.\n\n" +
        tabulate.markdown_table(["how", "seconds", "seconds / draw", "speed-up"], rows))
  return res, md
