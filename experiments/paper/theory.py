r"""Section 5 of the paper: Theorems 1-2 against Monte-Carlo, Example 1 / Figure 6, and a scaling table.

  python -m experiments.paper.theory                   # < 2 minutes on 2 CPU cores
  python -m experiments.paper.theory --x64 --trials=16384

Writes results/theory/{results.json, table.md, fig6.png}.
"""
import dataclasses
import time

import jax
import numpy as np

from experiments.framework.records import RunRecord
from experiments.framework import lifecycle, plots, rundir, schema, tabulate
from experiments.framework.schema import Preset
from pfd_jax.config import option


@dataclasses.dataclass(frozen=True)
class Options:
  trials: int = option(4096, "Monte-Carlo designs per cell with n <= 100 (n = 300: 1/4, n = 3000: 1/32).", lo=1)
  design_seed: int = option(0, "PRNG seed of the designs.")
  w_seed: int = option(0, "Seed of w* ~ N(0, I) in Example 1.")
  x64: bool = option(False, "Run the Monte-Carlo in float64.")
  reduce_noise: bool = option(True, "Average each design's error over the label noise analytically.")

GRID = [(30, 200, 2), (30, 200, 6), (30, 200, 10), (100, 1000, 5), (100, 1000, 10), (300, 3000, 10)]
SCALING = [(30, 300), (300, 3000), (3000, 30000)]


def run(trials: int, seed: int, w_seed: int, reduce_noise: bool, x64: bool) -> dict:
  from pfd_jax.ops import theory as th  # after the x64 flag is set
  dtype = jax.numpy.float64 if x64 else jax.numpy.float32
  key = jax.random.PRNGKey(seed)
  mc = lambda p, method, t=trials: th.monte_carlo(key, p, method, trials=t, reduce_noise=reduce_noise,
                                                   dtype=dtype)
  base = th.Problem.example1(w_seed)
  v2 = float(np.sum(base.v ** 2))
  res = {"setup": dict(trials=trials, seed=seed, w_seed=w_seed, reduce_noise=reduce_noise, x64=x64,
                        d_x=10, d_u=10, sigma=base.sigma, v=base.v, w=base.w), "env": rundir.environment()}
  t0 = time.time()
  cells = lambda n: trials if n <= 100 else max(64, trials // (4 if n <= 300 else 32))
  grid, reg_cache = [], {}
  for n, m, dz in GRID:
    p = base._replace(n=n, m=m, d_z=dz)
    if (n, m) not in reg_cache:  # regression ignores z: one Monte-Carlo per (n, m)
      reg_cache[n, m] = mc(p, "regression", cells(n))
    reg, pfd = reg_cache[n, m], mc(p, "pfd", cells(n))
    cf = th.theorem2_pfd(n, m, 10, dz, base.sigma, base.v)
    grid.append(dict(n=n, m=m, d_z=dz, regression_mc=reg.mean, regression_se=reg.stderr,
                     regression_cf=th.theorem1_regression(n, 10, base.sigma, v2), pfd_mc=pfd.mean, pfd_se=pfd.stderr,
                     pfd_cf=cf.total, pfd_cf_labelled=cf.labelled, pfd_cf_all=cf.all_data))
  res["grid"] = grid
  fig6 = []
  no_z = {method: mc(base, method) for method in ("regression", "self")}  # independent of d_z
  for dz in range(0, 11):
    p = base._replace(d_z=dz)
    row = dict(d_z=dz, pfd_cf=th.theorem2_pfd(p.n, p.m, 10, dz, base.sigma, base.v).total,
               placebo_cf=th.theorem2_placebo(p.n, p.m, 10, dz, base.sigma, base.v).total,
               regression_cf=th.theorem1_regression(p.n, 10, base.sigma, v2))
    for method in th.METHODS:
      if method == "gend" and dz == 0:
        continue
      r = no_z[method] if method in no_z else mc(p, method)
      row[f"{method}_mc"], row[f"{method}_se"] = r.mean, r.stderr
    fig6.append(row)
  res["fig6"] = fig6
  scaling = []
  for n, m in SCALING:
    p = base._replace(n=n, m=m, d_z=10)
    t = cells(n)
    r = mc(p, "pfd", t)
    cf = th.theorem2_pfd(n, m, 10, 10, base.sigma, base.v).total
    scaling.append(dict(n=n, m=m, trials=t, pfd_mc=r.mean, pfd_se=r.stderr, pfd_cf=cf,
                        rel_gap=(r.mean - cf) / cf, rel_se=r.stderr / cf))
  res["scaling"] = scaling
  res["seconds"] = time.time() - t0
  return res


def to_markdown(res: RunRecord) -> str:
  c = res["setup"]
  out = [f"# Linear theory (section 5): Monte-Carlo vs closed form\n\nd_x = d_u = 10, sigma = {c['sigma']}, "
         f"v* = [10, ..., 1], w* ~ N(0, I) (seed {c['w_seed']}); {c['trials']} designs per cell, "
         f"{'noise-averaged' if c['reduce_noise'] else 'plain'} estimator, {'float64' if c['x64'] else 'float32'}; "
         f"{res['seconds']:.0f} s on {res['env']['backend']}. MC = mean +- standard error; CF = closed form "
         "(Theorem 1 exact; Theorem 2 without its O(1/(nm)) term).\n\n## Grid (Example 1 is n = 30, m = 200)\n\n"]
  rows = [[g["n"], g["m"], g["d_z"], f"{g['regression_mc']:.3f} ± {g['regression_se']:.3f}", f"{g['regression_cf']:.3f}",
           f"{g['regression_mc'] / g['regression_cf']:.3f}", f"{g['pfd_mc']:.3f} ± {g['pfd_se']:.3f}",
           f"{g['pfd_cf']:.3f} ({g['pfd_cf_labelled']:.3f} + {g['pfd_cf_all']:.3f})", f"{g['pfd_mc'] / g['pfd_cf']:.3f}"]
          for g in res["grid"]]
  out.append(tabulate.markdown_table(["n", "m", "d_z", "regression MC", "Thm 1 CF", "MC/CF", "PFD MC",
                                    "Thm 2 CF (labelled + all)", "MC/CF"], rows))
  out.append("\n## Example 1 / Figure 6: error against d_z (n = 30, m = 200)\n\n")
  rows = []
  for r in res["fig6"]:
    g = f"{r['gend_mc']:.1f} ± {r['gend_se']:.1f}" if "gend_mc" in r else "-"
    pl = ([f"{r['placebo_mc']:.1f} ± {r['placebo_se']:.1f}", f"{r['placebo_cf']:.1f}"] if "placebo_mc" in r
          else [])
    rows.append([r["d_z"], f"{r['regression_mc']:.1f} ± {r['regression_se']:.1f}", f"{r['regression_cf']:.1f}",
                 f"{r['pfd_mc']:.1f} ± {r['pfd_se']:.1f}", f"{r['pfd_cf']:.1f}",
                 f"{r['self_mc']:.1f} ± {r['self_se']:.1f}", g] + pl)
  placebo = "placebo_mc" in res["fig6"][0]
  out.append(tabulate.markdown_table(["d_z", "regression MC", "Thm 1", "PFD MC", "Thm 2", "self-distillation MC",
                                    "GenD MC"] + (["placebo MC", "placebo CF"] if placebo else []), rows))
  if placebo:
    out.append("\nPlacebo: the PFD teacher with d_z independent N(0, 1) noise columns in place of z "
               "(`pfd_jax.ops.theory.theorem2_placebo`: Theorem 2 with v_z* = 0, d_x (sigma^2 + ||v*||^2) / "
               "(n - d_x - d_z - 1)). The linear theory predicts the control is never better than regression: "
               "distillation alone brings nothing here (the self-distilled student is the regression), and the "
               "noise columns cost d_z degrees of freedom.\n")
  best = min(res["fig6"], key=lambda r: r["pfd_mc"])
  out.append(f"\nMonte-Carlo PFD error is smallest at d_z = {best['d_z']} ({best['pfd_mc']:.1f}); at d_z = 10 "
             f"it is {res['fig6'][-1]['pfd_mc']:.1f}.\n\n## Scaling: PFD gap to Theorem 2 as n and m grow (d_z = 10)\n\n")
  rows = [[s["n"], s["m"], s["trials"], f"{s['pfd_mc']:.4f} ± {s['pfd_se']:.4f}", f"{s['pfd_cf']:.4f}",
           f"{100 * s['rel_gap']:+.2f}% ± {100 * s['rel_se']:.2f}%"] for s in res["scaling"]]
  out.append(tabulate.markdown_table(["n", "m", "trials", "PFD MC", "Thm 2", "(MC - CF) / CF"], rows))
  return "".join(out)


def plot(res: RunRecord, path: str) -> None:
  plt = plots.pyplot()
  f6 = res["fig6"]
  dz = np.array([r["d_z"] for r in f6])
  fig, ax = plt.subplots(figsize=(6, 4))
  ax.errorbar(dz, [r["regression_mc"] for r in f6], yerr=[2 * r["regression_se"] for r in f6], fmt="o",
              color="C0", label="regression, Monte-Carlo (±2 SE)")
  ax.plot(dz, [r["regression_cf"] for r in f6], "-", color="C0", label="regression, Theorem 1")
  ax.errorbar(dz, [r["pfd_mc"] for r in f6], yerr=[2 * r["pfd_se"] for r in f6], fmt="s", color="C3",
              label="PFD, Monte-Carlo (±2 SE)")
  ax.plot(dz, [r["pfd_cf"] for r in f6], "-", color="C3", label="PFD, Theorem 2")
  if "placebo_mc" in f6[0]:
    ax.errorbar(dz, [r["placebo_mc"] for r in f6], yerr=[2 * r["placebo_se"] for r in f6], fmt="^", color="C7",
                label="placebo (noise for z), Monte-Carlo")
    ax.plot(dz, [r["placebo_cf"] for r in f6], ":", color="C7", label="placebo, Theorem 2 with $v_z^*=0$")
  ax.set_xlabel("$d_z$ (privileged coordinates of u revealed)")
  ax.set_ylabel(r"$E\|\hat w - w^*\|^2$")
  ax.set_title("Figure 6: Example 1 (n=30, m=200, $\\sigma$=15)")
  ax.legend(fontsize=8)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


def run_config(cfg: schema.Config) -> RunRecord:
  o = cfg.options
  if o.x64:
    jax.config.update("jax_enable_x64", True)
  return RunRecord(**run(o.trials, o.design_seed, o.w_seed, o.reduce_noise, o.x64), config=cfg)


# The runs of RESULTS.md this driver makes (python -m experiments.paper.theory --preset=<name>).
PRESETS = (
    Preset('default', 'fig6', '',
           'Linear theory: Theorems 1-2, Figure 6'),
)


DRIVER = schema.Driver("theory", run_config, to_markdown, plot, "fig6.png", options=Options, groups=("output",),
                       folder=lambda cfg: "fig6", presets=PRESETS)

if __name__ == "__main__":
  lifecycle.main(DRIVER)
