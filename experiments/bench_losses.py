r"""Micro-benchmark: loss + gradient throughput (lists/s) of the ranking losses at several list sizes.

  python -m experiments.bench_losses --list_sizes=32,128,512 --batch=256

A script, not a timed test: the numbers depend on the machine. Writes results/bench_losses/results.json.
"""
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import app, flags

from experiments import common
from pfd_jax import losses as L

common.flag(flags.DEFINE_list, "list_sizes", ["32", "128", "512"], "List sizes L.")
common.flag(flags.DEFINE_list, "losses", None, "Losses to time (default: rankbce, ranknet, softmax).")
common.flag(flags.DEFINE_integer, "batch", 256, "Lists per call.")
common.flag(flags.DEFINE_float, "min_seconds", 1.0, "Time each case for at least this long.")
common.flag(flags.DEFINE_string, "out_dir", None, "Output folder (default results/<driver>/).")
FLAGS = flags.FLAGS


def time_case(name, b, l, min_seconds):
  fn = L.get_loss(name)
  rng = np.random.default_rng(0)
  s = jnp.asarray(rng.normal(size=(b, l)), jnp.float32)
  y = jnp.asarray(rng.random((b, l)), jnp.float32)
  m = jnp.asarray(rng.random((b, l)) < 0.9)
  step = jax.jit(jax.value_and_grad(lambda s: fn(s, y, m)))
  jax.block_until_ready(step(s))  # compile
  n, t0 = 0, time.perf_counter()
  while time.perf_counter() - t0 < min_seconds:
    jax.block_until_ready(step(s))
    n += 1
  return n * b / (time.perf_counter() - t0)


def main(argv):
  del argv
  rows, res = [], {"env": common.environment(), "batch": FLAGS.batch, "lists_per_s": {}}
  for name in FLAGS.losses or ["rankbce", "ranknet", "softmax"]:
    for l in map(int, FLAGS.list_sizes):
      rate = time_case(name, FLAGS.batch, l, FLAGS.min_seconds)
      res["lists_per_s"][f"{name}@{l}"] = rate
      rows.append([name, l, f"{rate:,.0f}"])
  md = common.markdown_table(["loss", "L", "lists/s (loss + grad)"], rows)
  common.write_json(os.path.join(common.out_root("bench_losses"), "results.json"), res)
  common.write_text(os.path.join(common.out_root("bench_losses"), "table.md"), md)
  print(md)


if __name__ == "__main__":
  app.run(main)
