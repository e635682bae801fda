r"""How far another machine moves the main job: the measurement behind ``report --check``'s tolerance.

  python -m experiments.crossmachine --runs=results/table2/synthetic/latest,avx/table2/synthetic/latest,...

Each run is the main job (``python -m experiments.paper.table2``, same code, seeds and data) under other numerics: another
CPU, ``XLA_FLAGS=--xla_cpu_max_isa=AVX`` (no fused multiply-add), ``--xla_cpu_enable_platform_dependent_math=false``,
another thread count (a run folder, or a results.json / results.json.gz). For every pair of runs whose numerics
differ, :func:`pfd_jax.ops.perturbation.perturbation_ratios` estimates for each value the variance by which the second
configuration moves a run, in units of the runs' seed variance: over the table's cells (row x NDCG@8/16/32, each
run's value) and over the paired differences its claims read (each row minus no-distillation, NDCG@8, per run).
Two runs with the same bits are one configuration, whatever they recorded; a pair compares the rows both have.
It writes ``experiments/crossmachine.json`` (per pair its ratios and their mean, median and maximum; every
ratio pooled), which :mod:`experiments.page.published` reads for the check's tolerance and
:mod:`experiments.page.claims` for fragile verdicts: the measured ratios, as a scale mixture of normals
(:func:`pfd_jax.ops.perturbation.mixture_quantile`), are how far another machine may move a table's means.
"""
from __future__ import annotations

import itertools
import json
from typing import Dict, Tuple

import numpy as np
from absl import app, flags

from experiments.framework import guards, machine, pairs, records
from experiments.framework.records import LossRecord
from experiments.page import published
from pfd_jax.config import JsonObject
from pfd_jax.ops import perturbation

flags.DEFINE_list("runs", [], "The main job's runs under different numerics: run folders or results.json[.gz].")
flags.DEFINE_string("spread_file", published.SPREAD_FILE, "Where the measured spread is written.")
REFERENCE = "no_distill"


def rows_of(res: JsonObject) -> Dict[Tuple[str, str], np.ndarray]:
  """{(loss, row): [runs, 3]} per-run NDCG@8/16/32 of every row of a table2 result."""
  return {(loss, name): np.asarray(v, np.float64) for loss in sorted(res["losses"])
          for name, v in sorted(pairs.aggregate(LossRecord.from_json(res["losses"][loss])).items())}


def values(a: Dict[Tuple[str, str], np.ndarray], b: Dict[Tuple[str, str], np.ndarray]) -> tuple:
  """(cells, differences) of two runs' rows_of over the rows both have: cells [2, 3 x rows, runs] (each row's
  NDCG@8/16/32), differences [2, rows less no-distillation, runs] (each row's NDCG@8 minus no-distillation's)."""
  keys = [k for k in a if k in b and a[k].shape == b[k].shape]
  cells = np.stack([np.concatenate([r[k].T for k in keys]) for r in (a, b)])
  diffs = np.stack([np.stack([r[k][:, 0] - r[(k[0], REFERENCE)][:, 0] for k in keys if k[1] != REFERENCE])
                    for r in (a, b)])
  return cells, diffs


def pair_record(a: np.ndarray, b: np.ndarray, ddof: int) -> JsonObject:
  """The per-value ratios of one pair of runs over one kind of value ([K, n] each; var with `ddof`)."""
  r = perturbation.perturbation_ratios(a, b, (a.var(1, ddof=ddof) + b.var(1, ddof=ddof)) / 2)
  summary = dict(mean=r.mean(), median=np.median(r), max=r.max()) if r.size else dict(mean=0.0, median=0.0, max=0.0)
  return dict(values=int(r.size), **{k: float(v) for k, v in summary.items()}, ratios=[round(float(x), 6) for x in r])


def name(numerics: JsonObject) -> str:
  """A configuration in a few words: 'AMD EPYC (avx512f), 2 threads, XLA_FLAGS=--xla_cpu_max_isa=AVX'."""
  return (f"{numerics.get('cpu', '?')} ({machine.top_isa(numerics)}), {numerics.get('threads', '?')} threads" +
          (f", XLA_FLAGS={numerics['xla_flags']}" if numerics.get("xla_flags") else ""))


def measure(results: list) -> JsonObject:
  """The spread record of runs [results.json] of the main job (module docstring), over the rows each pair of
  runs has in common (a run of the MLP rows alone, --methods=no_distill,self_distill,gend,pfd,placebo, skips the
  LightGBM rows, which no XLA setting moves)."""
  runs = []
  for res in results:  # the same bits twice are one configuration's, whatever it recorded
    numerics, rows = res["env"].get("numerics") or {}, rows_of(res)
    if not any(np.array_equal(*values(rows, seen)[0]) for _, _, seen in runs):
      runs.append((name(numerics), numerics, rows))
  out_pairs = []
  for (sa, na, ra), (sb, nb, rb) in itertools.combinations(runs, 2):
    (ca, cb), (da, db) = values(ra, rb)
    # a table's cells print the std with ddof 0, a claim's record its differences' sd with ddof 1
    out_pairs.append(dict(runs=[sa, sb], differ=machine.differences(na, nb), cells=pair_record(ca, cb, 0),
                          differences=pair_record(da, db, 1)))
  if not out_pairs:
    raise ValueError("fewer than two runs with other bits: nothing to measure")
  pooled = {kind: [x for p in out_pairs for x in p[kind]["ratios"]] for kind in ("cells", "differences")}
  return dict(runs=[dict(name=s, numerics=n) for s, n, _ in runs], pairs=out_pairs, ratios=pooled)


def main(argv):
  del argv
  if len(flags.FLAGS.runs) < 2:
    raise app.UsageError("--runs: give at least two runs of the main job under different numerics")
  results = [records.read_results(p, "runs") for p in flags.FLAGS.runs]
  bad = [p for p, res in zip(flags.FLAGS.runs, results) if "losses" not in res or "numerics" not in res.get("env", {})]
  if bad:
    raise app.UsageError(f"--runs: not a main job's results.json with its numerics (python -m experiments.paper.table2): "
                         f"{', '.join(bad)}")
  rec = measure(results)
  with open(flags.FLAGS.spread_file, "w") as f:
    f.write(json.dumps(rec, indent=1) + "\n")
  for p in rec["pairs"]:
    print(f"{p['runs'][0]} vs {p['runs'][1]} ({'; '.join(p['differ'])}): ratio of the seed variance, cells mean "
          f"{p['cells']['mean']:.3f} median {p['cells']['median']:.3f} max {p['cells']['max']:.3f} "
          f"({p['cells']['values']} cells); differences mean {p['differences']['mean']:.3f}")
  for kind in ("cells", "differences"):
    print(f"{kind}: {len(rec['ratios'][kind])} ratios; a cell's mean moves within lambda * sqrt(2 / runs) * std "
          f"with 95%: lambda {perturbation.mixture_quantile(rec['ratios'][kind], 0.05):.2f}")
  print(f"wrote {flags.FLAGS.spread_file}")


if __name__ == "__main__":
  guards.run_app(main)
