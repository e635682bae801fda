r"""Runs a driver as N cooperating processes on this machine (JAX's multi-process runtime over loopback).

  python -m experiments.launch --num_processes=2 -- experiments.paper.table2 --epochs=20

Starts ``python -m <driver> <its flags> --coordinator=127.0.0.1:<port> --num_processes=N --process_id=i`` for
i = 0 .. N-1 and forwards every process's output line by line with a ``[pI]`` prefix. Each process reads only
its share of the query groups (pfd_jax.distributed); process 0 writes the run folder.

The launcher owns its job:
* the first process that fails (a non-zero exit, or killed by a signal) gets the others SIGTERMed at once and
  SIGKILLed after ``--grace`` seconds (a survivor is normally blocked in a collective with the dead one and
  cannot act on SIGTERM; it ends with one line of its own, saying a collective failed). One line
  names the process, its exit status or signal, where the finished rows are and the command that resumes
  (for exit status 1 or 2, a data or usage error the process has named in its own line, it only points at
  that line); the exit status is the failed process's (128 + N for signal N);
* SIGTERM or Ctrl-C to the launcher is passed to every process (each stops at its next safe point and saves
  what is finished), and the launcher waits for them; a second one SIGKILLs them. Each process also dies with
  the launcher (PR_SET_PDEATHSIG), so even a SIGKILLed launcher leaves no orphan.

On a real cluster, start the same driver command on every host with ``--coordinator=<host 0>:<port>
--num_processes=N --process_id=<i>`` (or ``--coordinator=auto`` under SLURM or on a TPU pod), and leave
``--heartbeat_timeout`` / ``--shutdown_timeout`` at JAX's cluster defaults unless your network is fast and
quiet; the launcher passes short ones (a local run has no slow links).
"""
import ctypes
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time

from absl import app, flags

from experiments.framework import guards

FLAGS = flags.FLAGS
LOCAL_TIMEOUTS = ("--heartbeat_timeout=10", "--shutdown_timeout=10")
_RUN_FOLDER = re.compile(r"run folder (\S+)")


def free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def commands(driver_argv: list, n: int, port: int, extra: tuple = LOCAL_TIMEOUTS) -> list:
  """The N command lines (driver_argv: the module and its flags; extra: flags put before the driver's own,
  so that the user's win)."""
  module, rest = driver_argv[0], driver_argv[1:]
  return [[sys.executable, "-m", module, *extra, *rest, f"--coordinator=127.0.0.1:{port}", f"--num_processes={n}",
           f"--process_id={i}"] for i in range(n)]


def _die_with_parent() -> None:
  """In the child before exec: SIGKILL when the launcher dies (Linux; elsewhere a no-op)."""
  try:
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
  except (OSError, AttributeError):
    pass


def describe(code: int) -> str:
  if code < 0:
    try:
      return f"was killed by {signal.Signals(-code).name}"
    except ValueError:
      return f"was killed by signal {-code}"
  return f"exited with status {code}"


def _culprit(codes: list):
  """The process to blame among those that failed (exit status not None or 0): one killed by a signal (the
  others' failures are their reaction to it), else the first; None if none failed."""
  dead = [i for i, c in enumerate(codes) if c]
  return min(dead, key=lambda i: (codes[i] > 0, i)) if dead else None


def launch(driver_argv: list, n: int, port: int = 0, out=sys.stdout, grace: float = 3.0,
           extra: tuple = LOCAL_TIMEOUTS) -> int:
  """Runs the processes to the end; returns 0, or the failed process's status (128 + N for signal N)."""
  port = port or free_port()
  procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                            preexec_fn=_die_with_parent, start_new_session=True)
           for c in commands(driver_argv, n, port, extra)]
  state = dict(run_folder=None, signals=[])
  threads = _forward(procs, state, out)
  old = {s: signal.signal(s, lambda signum, frame: state["signals"].append(signum))
         for s in (signal.SIGTERM, signal.SIGINT)}
  try:
    failed, forwarded = _supervise(procs, state, grace)
  finally:
    for p in procs:  # an exception in the launcher itself leaves no process behind
      if p.poll() is None:
        p.kill()
        p.wait()
    for s, h in old.items():
      signal.signal(s, h)
  for t in threads:
    t.join(timeout=5)
  return _outcome([p.returncode for p in procs], failed, forwarded, state, driver_argv)


def _forward(procs: list, state: dict, out) -> list:
  """Threads copying each process's output to `out` as '[p<i>] <line>' (noting process 0's run folder)."""
  lock = threading.Lock()

  def forward(i, p):
    for line in p.stdout:
      if i == 0 and state["run_folder"] is None and (m := _RUN_FOLDER.search(line)):
        state["run_folder"] = m.group(1)
      with lock:
        out.write(f"[p{i}] {line}")
        out.flush()

  threads = [threading.Thread(target=forward, args=(i, p), daemon=True) for i, p in enumerate(procs)]
  for t in threads:
    t.start()
  return threads


def _supervise(procs: list, state: dict, grace: float) -> tuple:
  """Watches the processes until all have ended: passes each signal on (the second one kills), and when one
  fails stops the others (terminate, then kill after `grace` seconds). Returns (the failed process or None,
  how many signals were passed on)."""
  failed, forwarded, kill_at = None, 0, None
  while any(p.poll() is None for p in procs):
    if len(state["signals"]) > forwarded:  # pass each signal on; the second one kills
      sig = state["signals"][forwarded]
      forwarded += 1
      for p in procs:
        if p.poll() is None:
          p.send_signal(sig if forwarded == 1 else signal.SIGKILL)
    if failed is None and not forwarded:
      failed = _culprit([p.poll() for p in procs])
      if failed is not None:  # one died: the others would wait for it at the next collective
        for p in procs:
          if p.poll() is None:
            p.terminate()
        kill_at = time.monotonic() + grace
    if kill_at is not None and time.monotonic() >= kill_at:
      for p in procs:
        if p.poll() is None:
          p.kill()
      kill_at = None
    time.sleep(0.05)
  return failed, forwarded


def _outcome(codes: list, failed, forwarded: int, state: dict, driver_argv: list) -> int:
  """The launcher's exit status, with one line on stderr saying what happened and how to resume."""
  n = len(codes)
  where = state["run_folder"]
  resume = ((f"the finished rows are saved in {where}; " if where else "") + "the same command resumes: " +
            shlex.join(["python", "-m", "experiments.launch", f"--num_processes={n}", "--", *driver_argv]))
  if forwarded:
    sig = state["signals"][0]
    print(f"error: stopped by {signal.Signals(sig).name}{' twice' if forwarded > 1 else ''}; {resume}",
          file=sys.stderr, flush=True)
    return 130 if sig == signal.SIGINT else 143
  failed = _culprit(codes) if failed is None else failed  # all may have ended between two looks
  if failed is None:
    return 0
  code = codes[failed]
  if code in (1, 2):  # a user error the process has just named in its own one line: rerunning will not help
    print(f"error: process {failed} {describe(code)} (its error is above); stopped the other {n - 1} process(es)",
          file=sys.stderr, flush=True)
  else:
    print(f"error: process {failed} {describe(code)}; stopped the other {n - 1} process(es); {resume}",
          file=sys.stderr, flush=True)
  return code if code > 0 else 128 - code


def main(argv):
  if len(argv) < 2 or argv[1].startswith("-"):
    raise app.UsageError("give the driver after --, e.g. python -m experiments.launch --num_processes=2 -- "
                         "experiments.paper.table2 --epochs=20")
  sys.exit(launch(argv[1:], FLAGS.num_processes, FLAGS.port, grace=FLAGS.grace))


if __name__ == "__main__":
  flags.DEFINE_integer("num_processes", 2, "Processes to start.", lower_bound=1)
  flags.DEFINE_integer("port", 0, "Coordinator port on 127.0.0.1 (0 = a free one).", lower_bound=0)
  flags.DEFINE_float("grace", 3.0, "Seconds the other processes get to stop after one fails, before SIGKILL.",
                     lower_bound=0)
  guards.run_app(main)
