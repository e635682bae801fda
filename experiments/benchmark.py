r"""Training throughput at MSLR-WEB30K scale on the synthetic generator, 1 seed vs S vmapped seeds.

  python -m experiments.benchmark                 # RankBCE and RankNet, 1 and 5 seeds
  python -m experiments.benchmark --scale=0.25    # a quicker look

Times one training epoch over every training group (data loss on all groups, the paper's model, batch and
learning rate per loss) after a warm-up epoch that includes compilation, and reports documents/s (real
documents, padding excluded; a vmapped run counts each seed's documents) and the S-seed / 1-seed time ratio.
Writes results/benchmark/results.json and table.md. A script, not a timed test.
"""
import os
import time

import jax
import numpy as np
from absl import app, flags, logging

from experiments import common
from pfd_jax import data as D
from pfd_jax import train as T

common.flag(flags.DEFINE_list, "losses", None, "Losses to time (default: rankbce, ranknet).")
common.flag(flags.DEFINE_list, "seed_counts", ["1", "5"], "Numbers of vmapped seeds.")
common.flag(flags.DEFINE_float, "scale", 1.0, "Fraction of the Web30k-size query counts.")
common.flag(flags.DEFINE_integer, "max_buckets", 8, "Length buckets.")
common.flag(flags.DEFINE_string, "out_dir", None, "Output folder (default results/<driver>/).")
FLAGS = flags.FLAGS


def epoch_seconds(cfg, buckets, eval_set, seeds):
  """Seconds of the second of two epochs (the first compiles)."""
  times = []
  T.train(jax.random.split(jax.random.PRNGKey(0), seeds), cfg, buckets, "x", {"test": eval_set},
          log_fn=lambda e, l, n, s: times.append(s))
  return times[1] - times[0]


def main(argv):
  del argv
  kw = D.web30k_scale()
  kw["num_queries"] = tuple(max(1, int(q * FLAGS.scale)) for q in kw["num_queries"])
  t0 = time.time()
  ds = D.prepare("synthetic", D.generate_synthetic(**kw))
  train_b = T.device_buckets(D.bucketize(ds["train"], FLAGS.max_buckets))
  test = ds["test"].take(np.arange(min(200, ds["test"].num_queries)))
  eval_set = T.eval_set(test, 2)
  docs = ds["train"].num_docs
  logging.info("data ready in %.1fs: %d train groups, %d docs, padding ratio %.3f", time.time() - t0,
               ds["train"].num_queries, docs, D.padding_ratio(D.bucketize(ds["train"], FLAGS.max_buckets)))
  res = {"env": common.environment(), "train_docs": docs, "train_groups": ds["train"].num_queries,
         "features": int(ds["train"].x.shape[1]), "scale": FLAGS.scale, "cases": {}}
  rows = []
  for loss in FLAGS.losses or ["rankbce", "ranknet"]:
    cfg = T.TrainConfig.paper(loss, epochs=2, data_groups="all")
    base = None
    for s in map(int, FLAGS.seed_counts):
      sec = epoch_seconds(cfg, train_b, eval_set, s)
      base = sec if base is None else base
      rate = docs * s / sec
      res["cases"][f"{loss}/seeds={s}"] = dict(epoch_seconds=sec, docs_per_s=rate, time_ratio=sec / base)
      rows.append([loss, s, f"{sec:.2f}", f"{rate:,.0f}", f"{sec / base:.2f}"])
      logging.info("%s seeds=%d: %.2fs/epoch, %.0f docs/s", loss, s, sec, rate)
  md = (f"{docs:,} training documents, {res['features']} regular features, 5-layer width-100 MLP, "
        f"{res['env']['backend']} ({res['env']['cpus']} CPUs)\n\n" +
        common.markdown_table(["loss", "seeds", "s / epoch", "docs/s (all seeds)", "time / 1-seed time"], rows))
  common.write_json(os.path.join(common.out_root("benchmark"), "results.json"), res)
  common.write_text(os.path.join(common.out_root("benchmark"), "table.md"), md)
  print(md)


if __name__ == "__main__":
  app.run(main)
