r"""Speed and scale of training and serving, measured side by side in one run.

  python -m experiments.bench.benchmark                          # the headline, in minutes (below)
  python -m experiments.bench.benchmark --case=throughput        # Web30k size: every loss and seed count, torch, peers
  /usr/bin/time -v python -m experiments.bench.benchmark --case=memory   # RankNet, 1,300-document lists, batch 300

**headline** (the default; a small synthetic set, --headline_scale of Web30k's query counts): the modern ranker's
ablation ladder (the paper's MLP; a plain MLP of the modern shape; + batch norm; + dropout; + noise = the modern
ranker; the modern ranker without its input norm's scale and bias), each architecture's training epoch with 5 vmapped
seeds against the paper's MLP beside its multiply-add floor (bench_modern.training_macs); one-seed documents/s of
both models and their 5-seed / 1-seed time ratio; the paper's MLP's roofline (its step's useful FLOP/s against the
measured rate of the same matmul chain); the p50 / p99 latency of one exported 100-document query (ONNX Runtime,
StableHLO, jax.jit). The long cases are behind --case: throughput (the same at Web30k size, both losses, the torch
reference, the peers), peers, memory, streamed, export (every query size), modern (the ladder and export at --scale).

The throughput case, per loss (RankBCE, RankNet; the paper's model, batch size and learning rate):

* **throughput**: one training epoch over every training group (data loss on all groups) after a warm-up
  epoch that compiles; documents/s counts real documents (padding excluded), a vmapped run each seed's;
* **seeds**: the same epoch with S vmapped seeds, and the S-seed / 1-seed time ratio;
* **roofline** (RankBCE): the step's FLOPs (fwd + bwd of the MLP's matmuls, 3x the forward's
  2 * sum(in * out) per document; the loss and optimizer are O(parameters + documents)) per second,
  against this device's measured rate for the same matmul chain at the same shapes (a jitted forward +
  backward of bias-free Dense layers over one batch's rows), both in the same run;
* **torch reference** (where torch is importable): the identical model, loss (summed RankBCE), optimizer
  (Adam with coupled L2, torch.optim.Adam(weight_decay)), batches and batch order in PyTorch eager, over
  --torch_batches batches after a warm-up, as the "what users would pick instead" comparison;
* **evaluation**: NDCG@8/16/32 of one model on the whole test split, one jitted call.

The memory case trains RankNet (all pairs, blocked: pfd_jax.ops.losses.PAIR_BLOCK) on lists of --memory_len
documents at batch --memory_batch for two steps and reports the process's peak resident memory (the figure
`/usr/bin/time -v` prints as "Maximum resident set size"). Writes results/benchmark/<case>.json and .md.
A script, never a timed test.
"""
import dataclasses
import os
import time
from typing import Tuple

import jax
import jax.numpy as jnp
import numpy as np
from absl import logging

from experiments.framework.records import RunRecord
from experiments.framework import lifecycle, protocol, rundir, schema, tabulate
from experiments import peers
from experiments.bench import draws as bench_draws, memory as bench_memory, modern as bench_modern
from experiments.bench import roofline as bench_roofline
from pfd_jax import data as data_lib
from pfd_jax.data.config import DataConfig
from pfd_jax import training as training_lib
from pfd_jax.config import option



@dataclasses.dataclass(frozen=True)
class Options:
  case: str = option("headline", "What to measure. headline: the modern ranker's ablation ladder, one-seed "
                     "docs/s of both models, the 5-seed ratio, the roofline and the exported latency on a small set "
                     "(1-2 minutes on two cores). The other cases: throughput (Web30k size, both losses, seeds, torch "
                     "reference, peers: the longest, past 25 minutes on two cores), peers (only the peers table: "
                     "about 1.5 minutes), memory (seconds), streamed (1x and 4x Web30k written to disk and trained: "
                     "long, not timed on two cores), export (latency of exported rankers at every size: about a "
                     "minute), modern (the ladder and export at --scale, Web30k size by default: long, not timed on "
                     "two cores), draws (re-drawn datasets one after another against vmapped: --draws_count, "
                     "--draws_scale, --draws_epochs).",
                     choices=("headline", "throughput", "memory", "streamed", "peers", "export", "modern", "draws"))
  headline_scale: float = option(0.01, "Headline case: fraction of the Web30k-size query counts.", lo=0,
                                 lo_open=True)
  draws_count: int = option(8, "Draws case: re-drawn datasets.", lo=2)
  draws_scale: float = option(1.0, "Draws case: fraction of the decisive protocol's query counts per draw.", lo=0,
                              lo_open=True)
  draws_epochs: int = option(20, "Draws case: epochs of each draw's row.", lo=1)
  export_sizes: Tuple[int, ...] = option((10, 100, 1000), "Export case: documents per query.", lo=1)
  export_calls: int = option(2000, "Export case: timed calls per size and runtime.", lo=10)
  stream_scales: Tuple[float, ...] = option((1.0, 4.0), "Streamed case: training split sizes, in Web30k folds "
                                            "(18,919 lists, ~2.35 M documents each).", lo=0, lo_open=True)
  stream_dir: str = option("cache/streamed", "Streamed case: where the shards are written (reused when complete).")
  losses: Tuple[str, ...] = option(("rankbce", "ranknet"), "Losses to time.", choices=("rankbce", "ranknet"))
  seed_counts: Tuple[int, ...] = option((1, 5), "Numbers of vmapped seeds (the first is the reference).", lo=1)
  scale: float = option(1.0, "Fraction of the Web30k-size query counts.", lo=0, lo_open=True)
  max_buckets: int = option(8, "Length buckets.", lo=1)
  torch_batches: int = option(30, "Batches timed in the torch eager reference (0 = skip).", lo=0)
  memory_len: int = option(1300, "Memory case: documents per list.", lo=1)
  memory_batch: int = option(300, "Memory case: lists per batch.", lo=1)
  repeats: int = option(3, "Timings per case, interleaved across cases; medians are reported with their range.",
                        lo=1)
  chunk_steps: int = option(0, "Steps per call of the training program (0 = a whole epoch per call).", lo=0)
  peer_epochs: int = option(5, "Epochs of the peers comparison (LightGBM always; allRank, PT-Ranking when "
                            "installed; 0 = skip).", lo=0)
  peer_trees: int = option(100, "Peers comparison: LightGBM LambdaMART's boosting rounds.", lo=1)
  peer_leaves: int = option(255, "Peers comparison: LightGBM LambdaMART's leaves per tree.", lo=2)
  peer_scale: float = option(0.125, "Fraction of Web30k size written as the peers' LETOR files.", lo=0,
                             lo_open=True)
  peer_losses: Tuple[str, ...] = option(("ranknet", "softmax"), "Losses of the peers comparison.",
                                        choices=("ranknet", "softmax"))


def epoch_seconds(cfg, buckets, eval_set, seeds, chunk_steps=0):
  """(seconds of the second of two epochs (the first compiles), the trained params)."""
  times = training_lib.EpochTimes()
  res = training_lib.train(jax.random.split(jax.random.PRNGKey(0), seeds), cfg, buckets, "x", {"test": eval_set},
                           hooks=training_lib.Hooks(writers=(times,)), chunk_steps=chunk_steps)
  return times[1] - times[0], res.params


def host_overhead(repeats: int) -> dict:
  """Seconds per training step where dispatch dominates (64 groups of 8 documents, one group per batch, a
  2-layer width-8 model): one program call per step against one call per epoch."""
  rng = np.random.default_rng(0)
  q, l, dim = 64, 8, 16
  bucket = dict(x=jnp.asarray(rng.normal(size=(q, l, dim)).astype(np.float32)),
                y=jnp.asarray((rng.random((q, l)) < 0.3).astype(np.float32)), mask=jnp.ones((q, l), bool),
                pos=jnp.ones(q))
  es = training_lib.EvalSet([bucket], q)
  cfg = training_lib.TrainConfig(epochs=2, batch_size=1, hidden=8, layers=2)
  out = {}
  for _ in range(repeats):
    for name, chunk in (("steps", 1), ("epoch", 0)):
      sec, _ = epoch_seconds(cfg, [bucket], es, 1, chunk)
      out.setdefault(name, []).append(sec / q)
  return {p: dict(median_s_per_step=float(np.median(v)), min=float(np.min(v)), max=float(np.max(v)))
          for p, v in out.items()}


def matmul_rate(rows: int, dim: int, hidden: int, layers: int, repeats: int = 5) -> float:
  """FLOP/s of a jitted forward + backward of the model's bias-free matmul chain on `rows` documents."""
  shapes = bench_modern.dense_shapes(dim, hidden, layers)
  keys = jax.random.split(jax.random.PRNGKey(1), len(shapes) + 1)
  ws = [jax.random.normal(k, s) * 0.05 for k, s in zip(keys[1:], shapes)]
  x = jax.random.normal(keys[0], (rows, dim))
  fn = jax.jit(jax.grad(bench_modern.matmul_chain))
  jax.block_until_ready(fn(ws, x))
  best = min(bench_modern.timed(lambda: jax.block_until_ready(fn(ws, x))) for _ in range(repeats))
  return 3 * bench_modern.mlp_matmul_flops(dim, hidden, layers) * rows / best


def torch_reference(host_buckets, cfg: training_lib.TrainConfig, n_batches: int, seed: int = 0):
  """docs/s of the identical model, summed RankBCE, Adam(coupled L2) and batch plan in PyTorch eager."""
  try:
    import torch
  except ImportError:
    return None
  torch.manual_seed(seed)
  torch.set_num_threads(os.cpu_count())
  dim = host_buckets[0].x.shape[-1]
  layers = [torch.nn.Linear(dim, cfg.hidden), torch.nn.ReLU()]
  for _ in range(cfg.layers - 2):
    layers += [torch.nn.Linear(cfg.hidden, cfg.hidden), torch.nn.ReLU()]
  model = torch.nn.Sequential(*layers, torch.nn.Linear(cfg.hidden, 1))
  opt = torch.optim.Adam(model.parameters(), lr=cfg.effective_lr, weight_decay=cfg.weight_decay)
  ids, idx, valid = jax.device_get(training_lib.program.plan(jax.random.split(jax.random.PRNGKey(seed), 1), 0,
                                                             tuple(b.x.shape[0] for b in host_buckets),
                                                             cfg.effective_batch_size))
  warm = 3
  plan = [(b, idx[j, :, :min(cfg.effective_batch_size, host_buckets[b].x.shape[0])],
           valid[j, :min(cfg.effective_batch_size, host_buckets[b].x.shape[0])])
          for j, b in enumerate(ids[:n_batches + warm])]
  docs, t0 = 0, None
  for n, (b, idx, valid) in enumerate(plan):
    if n == warm:
      t0 = time.perf_counter()
    hb, i = host_buckets[b], idx[0][valid > 0]
    x, y, m = (torch.from_numpy(np.ascontiguousarray(a[i])) for a in (hb.x, hb.y, hb.mask))
    s = model(x).squeeze(-1)
    loss = torch.where(m, torch.nn.functional.softplus(s) - y * s, torch.zeros(())).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if n >= warm:
      docs += int(m.sum())
  return dict(docs_per_s=docs / (time.perf_counter() - t0), batches=len(plan) - warm, torch=torch.__version__,
              threads=torch.get_num_threads())


def throughput(o: Options) -> tuple:
  """Training docs/s of every loss and seed count on the Web30k-sized synthetic set, the roofline of the step,
  the evaluation's time, the host overhead of a program call and the peers: (results, markdown)."""
  kw = data_lib.web30k_scale()
  kw["num_queries"] = tuple(max(1, int(q * o.scale)) for q in kw["num_queries"])
  t0 = time.time()
  ds = data_lib.prepare(DataConfig(tau=4.8), data_lib.synthetic.generate(**kw))  # the paper's tau on 0-4 grades
  host = data_lib.bucketize(ds["train"], o.max_buckets)
  train_b = training_lib.device_buckets(host)
  test = ds["test"].take(np.arange(min(200, ds["test"].num_queries)))
  eval_set = training_lib.eval_set(test, 2)
  docs = ds["train"].num_docs
  padded = sum(int(np.prod(b.mask.shape)) for b in host)
  dim = int(ds["train"].x.shape[1])
  logging.info("data ready in %.1fs: %d train groups, %d docs, padding ratio %.3f", time.time() - t0,
               ds["train"].num_queries, docs, padded / docs)
  res = {"env": rundir.environment(), "train_docs": docs, "padded_docs": padded, "train_groups":
         ds["train"].num_queries, "features": dim, "scale": o.scale, "cases": {}}
  timings, params = {}, {}
  for _ in range(o.repeats):  # interleaved, so that a slow spell of a shared machine hits every case
    for loss in o.losses:
      cfg = training_lib.TrainConfig(loss=loss, epochs=2, data_groups="all")
      for s in o.seed_counts:
        sec, params[loss, s] = epoch_seconds(cfg, train_b, eval_set, s, o.chunk_steps)
        timings.setdefault((loss, s), []).append(sec)
  rows = []
  for loss in o.losses:
    rows += _cases(res, o, loss, timings, host)
    if loss == "rankbce":
      sec = _roofline(res, o, host, params[loss, o.seed_counts[-1]], training_lib.eval_set(ds["test"], o.max_buckets))
      res["evaluation"] = dict(seconds=sec, lists=ds["test"].num_queries, docs=ds["test"].num_docs)
  return res, _throughput_markdown(res, o, rows)


def _cases(res: dict, o: Options, loss: str, timings: dict, host: list) -> list:
  """One loss's cases into res['cases'] (and the torch reference's); their table rows."""
  cfg = training_lib.TrainConfig(loss=loss, epochs=2, data_groups="all")
  docs, padded, dim = res["train_docs"], res["padded_docs"], res["features"]
  base = float(np.median(timings[loss, o.seed_counts[0]]))  # the first seed count is the reference
  rows = []
  for s in o.seed_counts:
    t = timings[loss, s]
    sec = float(np.median(t))
    rate = docs * s / sec
    case = dict(epoch_seconds=sec, epoch_seconds_all=t, docs_per_s=rate, time_ratio=sec / base)
    if loss == "rankbce":
      flops = 3 * bench_modern.mlp_matmul_flops(dim, cfg.hidden, cfg.layers)
      case.update(useful_flops_per_s=flops * docs * s / sec, executed_flops_per_s=flops * padded * s / sec)
    res["cases"][f"{loss}/seeds={s}"] = case
    rows.append([loss, s, f"{sec:.2f} ({min(t):.2f}-{max(t):.2f})", f"{rate:,.0f}", f"{sec / base:.2f}"])
    logging.info("%s seeds=%d: %.2fs/epoch, %.0f docs/s", loss, s, sec, rate)
  ref = torch_reference(host, cfg, o.torch_batches) if o.torch_batches and loss == "rankbce" else None
  if ref is not None:
    res["cases"][f"{loss}/torch"] = ref
    jax_rate = res["cases"][f"{loss}/seeds=1"]["docs_per_s"]
    rows.append([f"{loss} (torch {ref['torch']} eager)", 1, "", f"{ref['docs_per_s']:,.0f}",
                 f"JAX / torch = {jax_rate / ref['docs_per_s']:.2f}x docs/s"])
  return rows


def roofline_peak(host: list, dim: int, cfg: training_lib.TrainConfig) -> tuple:
  """(rows of a mean batch, the measured FLOP/s of cfg's matmul chain on that many rows)."""
  rows = int(np.mean([min(cfg.effective_batch_size, b.x.shape[0]) * b.x.shape[1] for b in host]))
  return rows, matmul_rate(rows, dim, cfg.hidden, cfg.layers)


def _roofline(res: dict, o: Options, host: list, params, full_test) -> float:
  """RankBCE's step against the measured matmul rate (into res); returns the whole test split's evaluation
  time in seconds."""
  cfg = training_lib.TrainConfig(loss="rankbce", epochs=2, data_groups="all")
  rows_per_batch, peak = roofline_peak(host, res["features"], cfg)
  first = o.seed_counts[0]
  one = res["cases"][f"rankbce/seeds={first}"]
  res["roofline"] = dict(matmul_flops_per_s=peak, rows=rows_per_batch, seeds=first,
                         useful_fraction=one["useful_flops_per_s"] / peak,
                         executed_fraction=one["executed_flops_per_s"] / peak)
  one_seed = jax.tree_util.tree_map(lambda a: a[:1], params)
  training_lib.evaluate(cfg, one_seed, full_test, "x")  # compile
  return bench_modern.timed(lambda: training_lib.evaluate(cfg, one_seed, full_test, "x"))


def _throughput_markdown(res: dict, o: Options, rows: list) -> str:
  docs, padded, dim = res["train_docs"], res["padded_docs"], res["features"]
  calls = f"one per {o.chunk_steps} steps" if o.chunk_steps else "one per epoch"
  md = (f"{docs:,} training documents ({padded / docs:.3f} padded / real), {dim} regular features, 5-layer "
        f"width-100 MLP, {res['env']['backend']} ({res['env']['cpus']} CPUs); program calls: {calls}; "
        f"median (range) of {o.repeats} interleaved timings\n\n" +
        tabulate.markdown_table(["loss", "seeds", "s / epoch", "docs/s (all seeds)", "vs 1 seed"], rows))
  res["host_overhead"] = ho = host_overhead(o.repeats)
  loop, prog = ho["steps"]["median_s_per_step"], ho["epoch"]["median_s_per_step"]
  md += ("\nHost overhead (64 one-group batches of 8 documents, width-8 model; median s per step): one program "
         f"call per step {1e6 * loop:.0f} us, one per epoch {1e6 * prog:.0f} us ({loop / prog:.1f}x).\n")
  if "roofline" in res:  # measured with RankBCE
    rf, ev = res["roofline"], res["evaluation"]
    one = res["cases"][f"rankbce/seeds={rf['seeds']}"]
    md += (f"\nRoofline (RankBCE, {rf['seeds']} seed(s)): the step achieves {one['useful_flops_per_s'] / 1e9:.1f} "
           f"GFLOP/s on real documents ({one['executed_flops_per_s'] / 1e9:.1f} executed, padding included) "
           f"against {rf['matmul_flops_per_s'] / 1e9:.1f} GFLOP/s measured for the same matmul chain (fwd + bwd, "
           f"{rf['rows']:,} rows): {100 * rf['useful_fraction']:.0f}% ({100 * rf['executed_fraction']:.0f}% "
           f"executed).\n\nEvaluation: NDCG@8/16/32 of the whole test split ({ev['lists']:,} lists, "
           f"{ev['docs']:,} documents) in one jitted call: {ev['seconds']:.2f} s.\n")
  res["peers"], peer_md = peer_rows(o)
  return md + peer_md


def peer_rows(o: Options) -> tuple:
  """pfd_jax, allRank, PT-Ranking (when installed) and LightGBM LambdaMART trained on the same LETOR files
  (experiments.peers): (results, markdown)."""
  have = peers.available()
  if not o.peer_epochs:
    return None, "\nPeers: not run (--peer_epochs=0).\n"
  folder = os.path.join("cache", "peers", f"synthetic-{o.peer_scale:g}")
  sizes = peers.write_letor(folder, o.peer_scale)
  splits = peers.read_letor(folder)
  threads = len(os.sched_getaffinity(0))
  res, rows = dict(folder=folder, sizes=sizes, threads=threads, versions=have, epochs=o.peer_epochs), []
  logging.info("peers: LightGBM lambdarank")
  gb = res["lambdarank/LightGBM"] = peers.lightgbm(splits["train"], splits["test"], threads, o.peer_trees,
                                                    o.peer_leaves)
  reached = []
  for loss in o.peer_losses:
    runs = {"pfd_jax": lambda: peers.ours(splits["train"], loss, o.peer_epochs, splits["test"])}
    if "allrank" in have:
      runs[f"allRank {have['allrank']}"] = lambda: peers.allrank(folder, loss, o.peer_epochs, splits["test"],
                                                                 threads)
    if "ptranking" in have:
      runs[f"PT-Ranking {have['ptranking']}"] = lambda: peers.ptranking(splits["train"], loss, o.peer_epochs,
                                                                        splits["test"], threads)
    for name, fn in runs.items():
      logging.info("peers: %s %s", name, loss)
      r = res[f"{loss}/{name}"] = fn()
      lo, hi = r["docs_per_s_range"]
      rows.append([loss, name, r["backend"], f"{r['docs_per_s']:,.0f} ({lo:,.0f}-{hi:,.0f})",
                   f"{r['docs_per_s'] / res[f'{loss}/pfd_jax']['docs_per_s']:.2f}", f"{r['ndcg8']:.3f}"])
    hit = res[f"{loss}/pfd_jax"]["reach_lightgbm"] = peers.reach(res[f"{loss}/pfd_jax"], gb["ndcg8"])
    reached.append(f"{loss}: " + (f"after epoch {hit[0]} ({hit[1]:.1f} s of training, compiling included)" if hit
                                  else f"not within {o.peer_epochs} epochs (best "
                                       f"{max(res[f'{loss}/pfd_jax']['ndcg8_curve']):.3f})"))
  rows.append(["lambdarank", "LightGBM", gb["backend"], f"{gb['docs_per_s']:,.0f}", "", f"{gb['ndcg8']:.3f}"])
  missing = "" if len(have) == 2 else (" allRank / PT-Ranking not installed (pip install -e \".[peers]\", "
                                       "third_party/peers/README.md).")
  md = (f"\nPeers on the same LETOR files (synthetic at {o.peer_scale:g} of Web30k: {sizes['train'][1]:,} training "
        f"documents in {sizes['train'][0]:,} lists; {threads} threads; one seed; docs/s of the median of epochs "
        f"2-{o.peer_epochs} (range); test NDCG@8 after epoch {o.peer_epochs}, same metric function for all; "
        "recipes and differences: third_party/peers/README.md). LightGBM LambdaMART: "
        f"{o.peer_trees} trees of {o.peer_leaves} leaves fitted in {gb['fit_s']:.1f} s (binning included), "
        f"docs/s = documents x rounds per second of fitting.{missing}\n\n" +
        tabulate.markdown_table(["loss", "framework", "backend", "docs/s", "vs pfd_jax", "NDCG@8"], rows) +
        f"\npfd_jax reaches LightGBM's test NDCG@8 ({gb['ndcg8']:.3f}): " + "; ".join(reached) + ".\n")
  return res, md


def headline(o: Options) -> tuple:
  """The default case (module docstring): (results, markdown)."""
  t0 = time.time()
  stage = lambda name: logging.info("headline: %s at %.1fs", name, time.time() - t0)  # where a stopped call was
  ds = bench_modern.synthetic(o.headline_scale)
  docs, first, last = ds["train"].num_docs, o.seed_counts[0], o.seed_counts[-1]
  stage(f"data ready ({docs:,} training documents); the ladder")
  small = dataclasses.replace(o, scale=o.headline_scale)
  lad, md = bench_modern.ladder(small, ds)
  stage("the ladder done; one seed per model")
  one = bench_modern.epoch_times(bench_modern.ARCHS, ds, first, o.repeats, o.max_buckets)
  stage("one seed done; the rooflines")
  rows, res = [], dict(env=rundir.environment(), ladder=lad, one_seed={})
  for name, secs in one.items():
    rung = next(k for k, a in bench_modern.LADDER.items() if a == bench_modern.ARCHS[name])
    sec, many = float(np.median(secs)), float(np.median(lad["cases"][rung]["seconds"]))
    res["one_seed"][name] = dict(seconds=secs, docs_per_s=docs * first / sec, seeds_ratio=many / sec)
    rows.append([name, f"{docs * first / sec:,.0f}", f"{many / sec:.2f}"])
  md += (f"\nOne seed ({first}) against {last} vmapped seeds, the same epoch (median of {o.repeats}):\n\n" +
         tabulate.markdown_table(["model", f"documents/s, {first} seed", f"{last} seeds / {first} seed, time"], rows))
  host = data_lib.bucketize(ds["train"], o.max_buckets)
  cfg, dim = training_lib.TrainConfig(loss="rankbce", epochs=2, data_groups="all"), int(ds["train"].x.shape[1])
  rows_per_batch, peak = roofline_peak(host, dim, cfg)
  useful = 3 * bench_modern.mlp_matmul_flops(dim, cfg.hidden, cfg.layers) * res["one_seed"]["paper MLP"]["docs_per_s"]
  res["roofline"] = dict(matmul_flops_per_s=peak, rows=rows_per_batch, useful_flops_per_s=useful,
                         useful_fraction=useful / peak)
  md += (f"\nThe one-seed epoch above (evaluation included) against the matmul chain at one shape, the mean batch's "
         f"{rows_per_batch:,} rows ({peak / 1e9:.1f} GFLOP/s): {useful / 1e9:.1f} GFLOP/s, {100 * useful / peak:.0f}%.\n\n")
  decisive = data_lib.prepare(DataConfig(),
                              data_lib.synthetic.generate(num_queries=(int(protocol.DRAW_QUERIES.split(",")[0]), 4, 4)))
  for name, groups in (("this set", ds["train"]), ("the decisive protocol's draw", decisive["train"])):
    r = res.setdefault("rooflines", {})[name] = bench_roofline.roofline(groups, cfg, o.max_buckets)
    md += bench_roofline.markdown(name, r) + "\n"
  stage("the rooflines done; the exported latency")
  try:  # the exported latency needs ONNX Runtime and jax2onnx, which an accelerator's image may lack
    res["export"], md_exp = bench_modern.export_latency(o, sizes=(100,), calls=500)
  except ImportError as e:
    res["export"], md_exp = None, f"Exported latency: not measured here ({e}).\n"
  return res, md + md_exp


def peers_only(o: Options) -> tuple:
  res, md = peer_rows(o)
  return dict(env=rundir.environment(), peers=res), md


def run(cfg: schema.Config) -> RunRecord:
  o = cfg.options
  res, md = {"headline": headline, "throughput": throughput, "memory": bench_memory.memory, "streamed": bench_memory.streamed,
              "peers": peers_only, "export": bench_modern.export_latency, "modern": bench_modern.modern, "draws": bench_draws.draws}[o.case](o)
  return RunRecord(**res, config=cfg, markdown=md)


DRIVER = schema.Driver("benchmark", run, lambda res: res["markdown"], options=Options, groups=("output",),
                       folder=lambda cfg: cfg.options.case)

if __name__ == "__main__":
  lifecycle.main(DRIVER)
