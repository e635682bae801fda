r"""The accelerator run: the numeric tests, the decisive protocol sized for a 2% MDE and the benchmark's headline, each
in its turn, in one call on one GPU or, on a machine that limits a command's time (--minutes), over as many calls
as they need; Table 2 at MSLR-WEB30K size and the
paper analogues' calibrations when named (docs/reproducing.md).

  python -m experiments.accelerator                        # on one GPU: every step, in order
  python -m experiments.accelerator --minutes=9.5          # a machine that allows 10 minutes a command: what fits
  python -m experiments.accelerator --steps=decisive_gpu   # one step with the whole call
  python -m experiments.accelerator --steps=web30k         # Table 2 at Web30k size: calls of its own
  python -m experiments.accelerator --dry_run              # the same steps at toy size on CPU, in minutes
  python -m experiments.accelerator --steps=calibrate_web30k_like  # a paper analogue's teachers, at the paper's size
  python -m experiments.accelerator --steps=paper_web30k --data_dir=/data/MSLR-WEB30K  # the paper's files

Each step is a command run as a subprocess. Its need is measured (seconds on one H200, see STEPS): a step starts
where its need fits what is left of the call once the later steps that fit have their needs set aside, runs until
then, and is otherwise left for the next call (the record says so). A table2 run keeps every row it finished (the
drawn decisive run too, on the same machine), so the same command resumes it; the numeric tests and the benchmark
save nothing before they end. At its deadline a step is asked to stop (SIGTERM for a driver, which stops at its next
safe point with every finished row saved; SIGINT for pytest, which then prints its summary), and killed only after a
grace period. A SIGTERM to this command (a caller's ``timeout``) stops the running step the same way, and no later step
starts. The runs land where every run does (``<out_root>/<driver>/<label>/latest``) under table2's presets
'decisive_gpu' and 'web30k', so ``python -m experiments.report`` publishes them beside the CPU runs (another
configuration: the GPU's numerics). The drivers' compilation cache (``cache/jax`` in the working tree) and their
saved rows (``results/``) stay on the machine, so a second call on the same warm machine loads programs and rows.

With $OUT set (a folder to leave the call's record in, small enough to copy off a remote machine), the call leaves
``accelerator.json`` (the device: GPU, driver, JAX and its plugins, the precision; each step's status, rewritten as
each ends), ``numeric.log`` (pytest -v: each test's verdict as it comes, the failures' summary) and, per driver
step, its log and ``<step>.tar.gz``, its runs' folders relative to out_root without TensorBoard events, saved
models or saved rows (``tar xzf <step>.tar.gz -C results`` puts them where the report reads them). The GPU image
this targets has JAX with its CUDA plugin, flax, optax, chex, absl-py, NumPy, SciPy, scikit-learn and pytest but
neither LightGBM nor tensorboardX: no step has a LightGBM row, and every step runs with --notensorboard.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from typing import List, NamedTuple, Optional, Tuple

from absl import flags

from experiments.framework import guards
from experiments.framework import protocol
from pfd_jax.data import analogues

flags.DEFINE_bool("dry_run", False, "The same steps at toy size (tiny data, 2 epochs, 2 draws, one test file) into a "
                  "temporary folder (or --out_root): a check of the command on any machine, not a result.")
flags.DEFINE_float("minutes", None, "The whole call's time, where the machine limits a command (e.g. 9.5 on one that "
                   "allows 10 minutes); default: no limit, every step runs to its end.", lower_bound=1)
flags.DEFINE_list("steps", ["numeric", "decisive_gpu", "headline"], "The steps to consider, in their order: each "
                  "runs if its need fits the time left once the later steps that fit have theirs set aside, and "
                  "until then. web30k and the calibrations are named by hand: each takes calls of its own.")
flags.DEFINE_string("out_root", "", "Where the runs are written (default: results; the dry run: a temporary folder).")
flags.DEFINE_integer("grace", 60, "Seconds a step asked to stop may take to save and exit before it is killed.",
                     lower_bound=1)
flags.DEFINE_string("data_dir", "", "The paper's files that the paper_<dataset> steps read (--preset=paper_<dataset> "
                    "--data_dir=...; docs/paper-datasets.md): a folder on the machine this runs on, never carried with "
                    "the working tree.")
flags.DEFINE_integer("test_workers", 8, "pytest-xdist workers of the numeric tests (each a process on the GPU, "
                     "without preallocation).", lower_bound=0)
FLAGS = flags.FLAGS

# The dry run's overrides (later flags override a preset's): toy data and training, the same code paths.
TOY = ("--synthetic_queries=60,30,40", "--synthetic_mean_docs=16", "--epochs=2", "--max_buckets=2")
RECORD = "accelerator.json"


class Step(NamedTuple):
  name: str
  args: Tuple[str, ...]   # after `python -m`
  need: float             # seconds on one H200 (measured; see STEPS): what it takes, or the least worth starting
  dry: Tuple[str, ...]    # the dry run's extra arguments
  dry_need: float         # seconds its dry run takes on two CPU cores with a cold compilation cache
  outputs: Tuple[str, ...]  # what it writes, relative to out_root (packed into $OUT/<name>.tar.gz)

  @property
  def tests(self) -> bool:
    return self.args[0] == "pytest"


# Needs: floors set from each step's wall time on one H200 (evidence/accelerator-h200-*,
# experiments/device_runs/h200-2026-11-26: the numeric tests, decisive_gpu's loading, training and statistics, the
# benchmark's headline on a warm and on a fresh machine). web30k has no measured need and is named by hand: it
# resumes on the same warm machine, so it takes what a call leaves, if that is at least the 5 minutes that its data
# and a first row take at a guess. The dry needs: each dry step alone on two CPU cores, cold compilation
# cache. A need is a floor, not a cap: a step runs until the later steps' needs are all that is left.
STEPS = (
    Step("numeric", ("pytest", "-m", "numeric and not slow", "-v", "-rfE", "-p", "no:cacheprovider"), 240,
         ("tests/test_precision.py",), 60, ()),
    Step("decisive_gpu", ("experiments.paper.table2", "--preset=decisive_gpu"), 450, TOY + ("--draws=2",), 90,
         ("table2/synthetic-decisive_gpu",)),
    Step("web30k", ("experiments.paper.table2", "--preset=web30k"), 300, TOY + ("--synthetic_web30k=false", "--seeds=2"),
         60, ("table2/synthetic-web30k",)),
    Step("headline", ("experiments.bench.benchmark",), 240, ("--headline_scale=0.005", "--seed_counts=1,2", "--repeats=1"),
         190, ("benchmark",)),
    # The paper analogues' teachers calibrated at the paper's Table 1 sizes (experiments/calibrate.py: the baseline
    # and teacher rows only, each candidate resumable; docs/analogues.md), named with --steps, never by default: a
    # calibration's result is committed before any student of its analogue is trained. Their need on a GPU is not
    # measured: 300 s is a floor at a guess (the data and a first candidate), so a call gives one what is left. The
    # dry run keeps the toy size's own test lists (the default, 5 x Table 1's at any size, is the paper's count).
    *(Step(f"calibrate_{name}", ("experiments.calibrate", f"--dataset={name}",
                                 f"--synthetic_scale={1 / analogues.ANALOGUES[name].fraction:g}"), 300,
           ("--synthetic_scale=0.05", "--test_scale=1", "--epochs=2", "--seeds=1", "--weights=0.5", "--leaks=0",
            "--max_buckets=2"), 60,
           (f"calibrate/{name}",)) for name in analogues.ANALOGUES),
    # The paper's protocol on the paper's own files (--preset=paper_<dataset>, with --data_dir), named by hand: a
    # user's own GPU, where the data are. Not measured on a GPU (nobody here holds the files): 300 s is a floor at a
    # guess (parsing a fold and a first row); docs/paper-datasets.md projects the whole run from the measured rate.
    *(Step(f"paper_{name}", ("experiments.paper.table2", f"--preset=paper_{name}"), 300, ("--epochs=2", "--max_buckets=2"),
           120, (f"table2/{name}-paper",)) for name in protocol.PAPER_RUNS),
)


flags.register_validator("steps", lambda names: bool(names) and set(names) <= {s.name for s in STEPS},
                         f"one or more of {', '.join(s.name for s in STEPS)}")
flags.register_multi_flags_validator(
    ["steps", "data_dir"], lambda f: f["data_dir"] or not any(n.startswith("paper_") for n in f["steps"]),
    "the paper_<dataset> steps read the paper's files: name their folder with --data_dir")


def command(step: Step, out_root: str, dry: bool, data_dir: str = "") -> List[str]:
  """The step's command line: pytest with its workers, or a driver with its preset, output root, the dry run's
  toy flags and (a paper_<dataset> step) the data folder."""
  extra = list(step.dry if dry else ())
  if step.tests:
    workers = ["-n", str(FLAGS.test_workers)] if FLAGS.test_workers and not dry else ["-n", "0"]
    return [sys.executable, "-m", *step.args, *workers, *extra]
  driver = step.args[0].split(".")[-1]
  data = [f"--data_dir={data_dir}"] if step.name.startswith("paper_") else []
  return [sys.executable, "-m", *step.args, f"--out_dir={os.path.join(out_root, driver)}", "--notensorboard"] + data + extra


def plan(steps: List[Step], left: float, dry: bool = False) -> Optional[float]:
  """Seconds for the first of `steps` out of `left`: what is left once the later steps that fit have their needs
  set aside, or None where that is less than its own need (it is left for the next call). dry: the dry run's
  needs."""
  need = lambda s: s.dry_need if dry else s.need
  first, reserved = steps[0], 0.0
  for s in steps[1:]:
    if reserved + need(s) <= left - need(first):
      reserved += need(s)
  return left - reserved if left - reserved >= need(first) else None


def pack(step: Step, out_root: str, out: str) -> None:
  """The step's outputs into `out`/<step>.tar.gz, paths relative to out_root, without TensorBoard events, saved
  models, saved rows (a drawn row holds every draw's models: too large to come back; they stay on the machine for
  the next call's resume) or locks."""
  def keep(t: tarfile.TarInfo):
    if os.path.basename(t.name) in ("tensorboard", "models", ".lock") or t.name.endswith(".msgpack"):
      return None
    return t
  with tarfile.open(os.path.join(out, f"{step.name}.tar.gz"), "w:gz") as tar:
    for rel in step.outputs:
      if os.path.exists(os.path.join(out_root, rel)):
        tar.add(os.path.join(out_root, rel), rel, filter=keep)


class Stopper:
  """The call's own stop request (SIGTERM or SIGINT to this command): the running step is asked to stop at once,
  and no later step starts."""

  def __init__(self, handlers: bool = True):
    """handlers=False: asked by setting `requested` only (a caller with signal handlers of its own, e.g. a test)."""
    self.requested = False
    for sig in (signal.SIGTERM, signal.SIGINT) if handlers else ():
      signal.signal(sig, self._handler)

  def _handler(self, signum, frame):
    self.requested = True
    os.write(2, f"accelerator: signal {signum}: stopping the running step (it saves what it finished)\n".encode())


def supervise(cmd: List[str], log: str, seconds: float, *, grace: float, stop_signal: int, stopper: Stopper,
              env: Optional[dict] = None) -> Tuple[object, str]:
  """Runs `cmd` (output to `log`) for at most `seconds`; then, or when `stopper` asks, sends it `stop_signal` and
  waits `grace` seconds before killing its process group. (exit code, how it ended: 'done', 'stopped at its
  deadline', 'stopped on request', or '... and killed after the grace period')."""
  with open(log, "w") as f:
    p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    deadline, kill_at, how = time.time() + seconds, None, "done"
    while True:
      try:
        return p.wait(timeout=1.0), how
      except subprocess.TimeoutExpired:
        pass
      now = time.time()
      if kill_at is None and (now >= deadline or stopper.requested):
        how = "stopped on request" if stopper.requested else "stopped at its deadline"
        p.send_signal(stop_signal)
        kill_at = now + grace
      elif kill_at is not None and now >= kill_at:
        os.killpg(p.pid, signal.SIGKILL)
        how += " and killed after the grace period"
        kill_at = float("inf")


def device_record() -> dict:
  """The machine the call ran on, taken in a child process (this one never starts JAX: it would hold the GPU's
  memory the steps need): machine.numerics() (CPU, packages; on an accelerator the GPU's kind and count, the
  driver, JAX's plugins and the precision) and nvidia-smi's GPU line where there is one."""
  code = "import json; from experiments.framework import machine; print(json.dumps(machine.numerics()))"
  env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false")
  out = {}
  try:
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    out["numerics"] = json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 else p.stderr[-2000:]
    if isinstance(out["numerics"], dict) and out["numerics"].get("accelerator"):
      del out["numerics"]["accelerator"]["matmul_precision"]  # the child's, not a step's: each run records its own
  except (OSError, subprocess.SubprocessError, ValueError, IndexError) as e:
    out["numerics"] = f"not read: {e}"
  try:
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,compute_cap",
                          "--format=csv,noheader"], capture_output=True, text=True, timeout=30)
    out["nvidia_smi"] = smi.stdout.strip() if smi.returncode == 0 else None
  except (OSError, subprocess.SubprocessError):
    out["nvidia_smi"] = None
  return out


def run_step(step: Step, out_root: str, dry: bool, seconds: float, out: str, stopper: Stopper) -> dict:
  """Runs one step within `seconds` (then --grace to stop); its log (and, with `out`, its outputs) in `out`."""
  cmd = command(step, out_root, dry, FLAGS.data_dir)
  t0 = time.time()
  log = os.path.join(out or out_root, f"{step.name}.log")
  os.makedirs(os.path.dirname(log), exist_ok=True)
  # the tests share the GPU among their workers: none may preallocate three quarters of it
  env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false", PYTHONUNBUFFERED="1")
  rc, how = supervise(cmd, log, seconds, grace=FLAGS.grace, stop_signal=signal.SIGINT if step.tests else signal.SIGTERM,
                      stopper=stopper, env=env)
  if out and step.outputs:
    pack(step, out_root, out)
  return dict(step=step.name, rc=rc, ended=how, seconds=round(time.time() - t0, 1), allowed=round(seconds),
              command=" ".join(cmd[1:]), log=log)


def _write(record: dict, out: str, out_root: str) -> None:
  path = os.path.join(out or out_root, RECORD)
  with open(path + ".tmp", "w") as f:
    json.dump(record, f, indent=1)
  os.replace(path + ".tmp", path)


def main(argv) -> None:
  del argv
  stopper = Stopper()
  out = os.environ.get("OUT", "")
  out_root = FLAGS.out_root or (tempfile.mkdtemp(prefix="pfd_dry_") if FLAGS.dry_run else "results")
  os.makedirs(out or out_root, exist_ok=True)
  steps = [s for s in STEPS if s.name in FLAGS.steps]
  start = time.time()
  end = start + 60 * FLAGS.minutes if FLAGS.minutes else float("inf")
  record = dict(command=" ".join(sys.argv), started=time.strftime("%Y-%m-%d %H:%M:%S"), steps=[], left=[])
  record["device"] = device_record()
  _write(record, out, out_root)
  for i, step in enumerate(steps):
    # the time a step may run: the call's end less the grace period of its stop and half a minute to pack and write
    left = end - time.time() - FLAGS.grace - 30
    seconds = None if stopper.requested else plan(steps[i:], left, FLAGS.dry_run)
    if seconds is None:
      why = ("the call was asked to stop" if stopper.requested else
             f"needs ~{step.dry_need if FLAGS.dry_run else step.need:.0f} s, {max(left, 0):.0f} s left")
      record["left"].append(dict(step=step.name, why=why))
      print(f"{step.name}: not started ({why}): run it in the next call", flush=True)
    else:
      done = run_step(step, out_root, FLAGS.dry_run, seconds, out, stopper)
      record["steps"].append(done)
      print(f"{step.name}: rc={done['rc']}, {done['ended']}, in {done['seconds']} s of {done['allowed']} s "
            f"({done['command']})", flush=True)
    _write(record, out, out_root)
  failed = [d["step"] for d in record["steps"] if d["rc"] != 0] + [d["step"] for d in record["left"]]
  print(f"accelerator run: {len(steps) - len(failed)} of {len(steps)} steps done in {time.time() - start:.0f} s into "
        f"{out_root}" +
        (f"; not done: {', '.join(failed)} (the record: {os.path.join(out or out_root, RECORD)})" if failed else ""),
        flush=True)
  if failed:
    sys.exit(1)


if __name__ == "__main__":
  guards.run_app(main)
