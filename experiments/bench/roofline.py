"""The benchmark's roofline of the paper MLP's training step (RankBCE, one seed): the step's useful FLOP/s (the
forward, weight-gradient and input-gradient products of its Dense layers on the real documents) against the rate
of its own matmul chain, the same bias-free products at the step's own batch shapes (every bucket's rows,
padding included) in a program shaped like the epoch's (a scan over its steps, a switch over its buckets), timed
interleaved with the epochs in the same process.

Why interleaved and at its own shapes: on a 2-core VM one matmul shape's rate moved between 285 and
394 GFLOP/s within an hour, and one process's training epoch between ~26 and ~41 ms against another's (where the
allocator puts the program's buffers: it stays for the life of a process), so a ratio of two numbers taken apart
measures the machine's state as much as the step. What the fraction leaves out, it splits: padding (the
chain's rows that are no document) and the rest of an epoch (biases and activations, the loss, the gathers, Adam).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from experiments.bench import modern as bench_modern
from pfd_jax import data as data_lib
from pfd_jax import training as training_lib
from pfd_jax.training import feed as feed_lib


def _chain(shapes: list, rows: list, ids: np.ndarray):
  """A jitted program shaped like an epoch's (a scan over the steps, a switch over the buckets) whose steps are the
  fwd + bwd of the bias-free matmul chain on their bucket's batch shape (rows[b] rows), and its inputs."""
  keys = jax.random.split(jax.random.PRNGKey(1), len(shapes) + len(rows))
  ws = [jax.random.normal(k, s) * 0.05 for k, s in zip(keys, shapes)]
  xs = [jax.random.normal(k, (r, shapes[0][0])) for k, r in zip(keys[len(shapes):], rows)]
  grad = jax.grad(bench_modern.matmul_chain)

  def run(ws, xs):
    def body(acc, b):
      g = jax.lax.switch(b, [lambda ws, x=x: grad(ws, x) for x in xs], ws)
      return jax.tree_util.tree_map(jnp.add, acc, g), None
    return jax.lax.scan(body, jax.tree_util.tree_map(jnp.zeros_like, ws), jnp.asarray(ids))[0]
  return jax.jit(run), ws, xs


def roofline(groups, cfg: training_lib.TrainConfig, max_buckets: int, repeats: int = 20) -> dict:
  """The roofline of `cfg`'s step (the paper's MLP) on the training groups `groups`, bucketed as training does."""
  host = data_lib.bucketize(groups, max_buckets)
  dim = int(groups.x.shape[1])
  batch = cfg.effective_batch_size
  rows = [min(batch, b.x.shape[0]) * b.x.shape[1] for b in host]
  steps = [-(-b.x.shape[0] // min(batch, b.x.shape[0])) for b in host]
  padded = sum(r * n for r, n in zip(rows, steps))
  flops = 3 * bench_modern.mlp_matmul_flops(dim, cfg.hidden, cfg.layers)
  keys = jax.random.split(jax.random.PRNGKey(0), 1)
  feed = feed_lib.make_feed(cfg, training_lib.device_buckets(host), "x", None, keys)
  state = [feed.init(keys, jnp.ones(1))]

  def epoch():
    state[0], loss = feed.epoch(state[0], 0, False)
    jax.block_until_ready(loss)
  grad, ws, xs = _chain(bench_modern.dense_shapes(dim, cfg.hidden, cfg.layers), rows,
                        np.repeat(np.arange(len(rows)), steps))
  chain = lambda: jax.block_until_ready(grad(ws, xs))
  epoch(), chain()  # compile
  t_epoch, t_chain = np.inf, np.inf
  for _ in range(repeats):  # interleaved: a slow spell hits both
    t_epoch, t_chain = min(t_epoch, bench_modern.timed(epoch)), min(t_chain, bench_modern.timed(chain))
  useful, executed = flops * groups.num_docs / t_epoch, flops * padded / t_chain
  return dict(epoch_seconds=t_epoch, chain_seconds=t_chain, useful_flops_per_s=useful, chain_flops_per_s=executed,
              fraction=useful / executed, fill=groups.num_docs / padded, steps=int(sum(steps)),
              rows=[int(r) for r in rows], docs=int(groups.num_docs))


def markdown(name: str, r: dict) -> str:
  other = r["chain_seconds"] / r["epoch_seconds"]
  return (f"Roofline, {name} (the paper's MLP, RankBCE, 1 seed; {r['docs']:,} training documents in {r['steps']} "
          f"steps of {min(r['rows']):,}-{max(r['rows']):,} rows): the training epoch's "
          f"{r['useful_flops_per_s'] / 1e9:.1f} GFLOP/s on real documents against {r['chain_flops_per_s'] / 1e9:.1f} "
          f"GFLOP/s of its own matmul chain at its own batch shapes, timed interleaved: **{100 * r['fraction']:.0f}%** "
          f"(the chain {1e3 * r['chain_seconds']:.1f} ms, the epoch {1e3 * r['epoch_seconds']:.1f} ms). The rest: "
          f"padding (the batches hold {100 * r['fill']:.0f}% real documents) and {100 * (1 - other):.0f}% of the epoch "
          f"outside the products (biases and ReLUs, the loss, the gathers, Adam).\n")
