r"""Micro-benchmark: loss + gradient throughput (lists/s) of the ranking losses at several list sizes.

  python -m experiments.bench.bench_losses --list_sizes=32,128,512 --batch=256

A script, not a timed test: the numbers depend on the machine. Writes results/bench_losses/results.json.
"""
import dataclasses
import time
from typing import Tuple

import jax
import jax.numpy as jnp
import numpy as np

from experiments.framework.records import RunRecord
from experiments.framework import lifecycle, rundir, schema, tabulate
from pfd_jax.ops import losses as L
from pfd_jax.config import option


@dataclasses.dataclass(frozen=True)
class Options:
  list_sizes: Tuple[int, ...] = option((32, 128, 512), "List sizes L.", lo=1)
  losses: Tuple[str, ...] = option(("rankbce", "ranknet", "softmax"), "Losses to time.", choices=L.REGISTRY.names)
  batch: int = option(256, "Lists per call.", lo=1)
  min_seconds: float = option(1.0, "Time each case for at least this long.", lo=0)


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


def run(cfg: schema.Config) -> RunRecord:
  o = cfg.options
  res = RunRecord(config=cfg, env=rundir.environment(), batch=o.batch, lists_per_s={})
  for name in o.losses:
    for size in o.list_sizes:
      res["lists_per_s"][f"{name}@{size}"] = time_case(name, o.batch, size, o.min_seconds)
  return res


def to_markdown(res: RunRecord) -> str:
  rows = [k.split("@") + [f"{v:,.0f}"] for k, v in res["lists_per_s"].items()]
  return tabulate.markdown_table(["loss", "L", "lists/s (loss + grad)"], rows)


DRIVER = schema.Driver("bench_losses", run, to_markdown, options=Options, groups=("output",),
                       folder=lambda cfg: "lists")

if __name__ == "__main__":
  lifecycle.main(DRIVER)
