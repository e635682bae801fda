r"""The accelerator run: the decisive protocol sized for a 2% MDE, Table 2 at MSLR-WEB30K size and the benchmark's
headline, in one call of at most 10 minutes on one GPU (docs/reproducing.md).

  python -m experiments.accelerator                        # on one GPU
  python -m experiments.accelerator --steps=decisive_gpu   # one step with the whole call
  python -m experiments.accelerator --dry_run              # the same steps at toy size on CPU, in under five minutes

Each step is a driver's own command, run as a subprocess with its share of --minutes: a step that outruns its share
is stopped at its deadline (its share, plus what the steps before it left unused; a table2 run keeps every row it
finished, so the same command resumes it) and the steps after it still run.
The runs land where every run does (``<out_root>/<driver>/<label>/latest``) under table2's presets 'decisive_gpu' and
'web30k', so ``python -m experiments.report`` publishes them beside the CPU runs (another configuration: the GPU's
numerics). With $OUT set (the device tool's output folder, which returns at most 8 files), each step leaves two
files there: its log and ``<step>.tar.gz``, its runs' folders relative to out_root (``tar xzf <step>.tar.gz -C
results`` puts it where the report reads it; TensorBoard events and saved models left out). The GPU image this
targets has JAX with its CUDA plugin, flax, optax, chex, absl-py, NumPy, SciPy and scikit-learn but neither
LightGBM nor tensorboardX: no step has a LightGBM row, and every step runs with --notensorboard.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tempfile
import time
from typing import List, NamedTuple, Tuple

from absl import flags

from experiments import guards

flags.DEFINE_bool("dry_run", False, "The same steps at toy size (tiny data, 2 epochs, 2 draws) into a temporary "
                  "folder: a check of the command on any machine, not a result.")
flags.DEFINE_float("minutes", 9.5, "The whole call's time (the device tool allows 10 minutes a command).",
                   lower_bound=1)
flags.DEFINE_list("steps", ["decisive_gpu", "web30k", "headline"], "The steps to run, in their order, the call's "
                  "time shared among them in proportion to their shares (--steps=decisive_gpu: the whole call).")
flags.DEFINE_string("out_root", "results", "Where the runs are written (the dry run: a temporary folder).")
FLAGS = flags.FLAGS

# The dry run's overrides (later flags override a preset's): toy data and training, the same code paths.
TOY = ("--synthetic_queries=60,30,40", "--synthetic_mean_docs=16", "--epochs=2", "--max_buckets=2")


class Step(NamedTuple):
  name: str
  args: Tuple[str, ...]   # after `python -m`
  share: float            # of the call's minutes
  dry: Tuple[str, ...]    # the dry run's extra flags
  outputs: Tuple[str, ...]  # what it writes, relative to out_root (packed into $OUT/<name>.tar.gz)


# The decisive protocol first (the page's claims) with most of the time: it trains every draw in one program per row
# and saves nothing before it ends, so a share it outruns is lost, while web30k keeps each row it finishes and the
# same command resumes it (its 4 h on two cores fit no single call). The benchmark last: it takes what the others left.
STEPS = (
    Step("decisive_gpu", ("experiments.table2", "--preset=decisive_gpu"), 0.7, TOY + ("--draws=2",),
         ("table2/synthetic-decisive_gpu",)),
    Step("web30k", ("experiments.table2", "--preset=web30k"), 0.1, TOY + ("--synthetic_web30k=false", "--seeds=2"),
         ("table2/synthetic-web30k",)),
    Step("headline", ("experiments.benchmark",), 0.2, ("--headline_scale=0.005", "--seed_counts=1,2", "--repeats=1"),
         ("benchmark",)),
)


flags.register_validator("steps", lambda names: bool(names) and set(names) <= {s.name for s in STEPS},
                         f"one or more of {', '.join(s.name for s in STEPS)}")


def command(step: Step, out_root: str, dry: bool) -> List[str]:
  """The step's command line: its driver and preset, its output root, and the dry run's toy flags."""
  driver = step.args[0].split(".")[-1]
  return [sys.executable, "-m", *step.args, f"--out_dir={os.path.join(out_root, driver)}", "--notensorboard"] + list(
      step.dry if dry else ())


def pack(step: Step, out_root: str, out: str) -> None:
  """The step's outputs into `out`/<step>.tar.gz, paths relative to out_root (a stopped run's saved rows too),
  without TensorBoard events, saved models or locks."""
  def keep(t: tarfile.TarInfo):
    return None if os.path.basename(t.name) in ("tensorboard", "models", ".lock") else t
  with tarfile.open(os.path.join(out, f"{step.name}.tar.gz"), "w:gz") as tar:
    for rel in step.outputs:
      if os.path.exists(os.path.join(out_root, rel)):
        tar.add(os.path.join(out_root, rel), rel, filter=keep)


def run_step(step: Step, out_root: str, dry: bool, seconds: float, out: str) -> dict:
  """Runs one step within `seconds`; its log (and, with `out`, its outputs) copied to `out`."""
  cmd = command(step, out_root, dry)
  t0 = time.time()
  log = os.path.join(out or out_root, f"{step.name}.log")
  os.makedirs(os.path.dirname(log), exist_ok=True)
  with open(log, "w") as f:
    try:
      rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=seconds).returncode
    except subprocess.TimeoutExpired:
      rc = "stopped at its share"
  if out:
    pack(step, out_root, out)
  return dict(step=step.name, rc=rc, seconds=round(time.time() - t0, 1), command=" ".join(cmd[1:]), log=log)


def main(argv) -> None:
  del argv
  out = os.environ.get("OUT", "")
  out_root = tempfile.mkdtemp(prefix="pfd_dry_") if FLAGS.dry_run else FLAGS.out_root
  steps = [s for s in STEPS if s.name in FLAGS.steps]
  total = sum(s.share for s in steps)  # the steps run share the whole call
  budget, start, done, share = 60 * FLAGS.minutes, time.time(), [], 0.0
  for step in steps:  # each step until its deadline: its share, and what the steps before it left unused
    share += step.share / total
    done.append(run_step(step, out_root, FLAGS.dry_run, max(start + share * budget - time.time(), 1), out))
    print(f"{step.name}: rc={done[-1]['rc']} in {done[-1]['seconds']} s ({done[-1]['command']})", flush=True)
  failed = [d["step"] for d in done if d["rc"] != 0]
  print(f"accelerator run: {len(done) - len(failed)} of {len(done)} steps done in {time.time() - start:.0f} s into "
        f"{out_root}" + (f"; not done: {', '.join(failed)} (their logs: {done[0]['log'].rsplit('/', 1)[0]})"
                         if failed else ""), flush=True)
  if failed:
    sys.exit(1)


if __name__ == "__main__":
  guards.run_app(main)
