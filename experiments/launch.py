r"""Runs a driver as N cooperating processes on this machine (JAX's multi-process runtime over loopback).

  python -m experiments.launch --num_processes=2 -- experiments.table2 --epochs=20

Starts ``python -m <driver> <its flags> --coordinator=127.0.0.1:<port> --num_processes=N --process_id=i`` for
i = 0 .. N-1, forwards every process's output line by line with a ``[pI]`` prefix, and exits with the first
non-zero exit code (stopping the others), else 0. Each process reads only its share of the query groups
(pfd_jax.distributed); process 0 writes the run folder. On a real cluster, start the same driver command on
every host with ``--coordinator=<host 0>:<port> --num_processes=N --process_id=<i>`` (or
``--coordinator=auto`` under SLURM or on a TPU pod, where JAX reads the rest from the environment).
"""
import socket
import subprocess
import sys
import threading

from absl import app, flags

FLAGS = flags.FLAGS


def free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def commands(driver_argv: list, n: int, port: int) -> list:
  """The N command lines (driver_argv: the module and its flags)."""
  module, rest = driver_argv[0], driver_argv[1:]
  return [[sys.executable, "-m", module, *rest, f"--coordinator=127.0.0.1:{port}", f"--num_processes={n}",
           f"--process_id={i}"] for i in range(n)]


def launch(driver_argv: list, n: int, port: int = 0, out=sys.stdout) -> int:
  """Runs the processes to the end; returns the first non-zero exit code, else 0."""
  port = port or free_port()
  procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
           for c in commands(driver_argv, n, port)]
  lock = threading.Lock()

  def forward(i, p):
    for line in p.stdout:
      with lock:
        out.write(f"[p{i}] {line}")
        out.flush()

  threads = [threading.Thread(target=forward, args=(i, p), daemon=True) for i, p in enumerate(procs)]
  for t in threads:
    t.start()
  rc = 0
  pending = list(procs)
  while pending:
    for p in list(pending):
      try:
        code = p.wait(timeout=0.2)
      except subprocess.TimeoutExpired:
        continue
      pending.remove(p)
      if code and not rc:
        rc = code
        for q in pending:  # one failed: the others would wait for it forever at the next collective
          q.terminate()
  for t in threads:
    t.join()
  return rc


def main(argv):
  if len(argv) < 2 or not argv[1].startswith("experiments."):
    raise app.UsageError("give the driver after --, e.g. python -m experiments.launch --num_processes=2 -- "
                         "experiments.table2 --epochs=20")
  sys.exit(launch(argv[1:], FLAGS.num_processes, FLAGS.port))


if __name__ == "__main__":
  flags.DEFINE_integer("num_processes", 2, "Processes to start.", lower_bound=1)
  flags.DEFINE_integer("port", 0, "Coordinator port on 127.0.0.1 (0 = a free one).", lower_bound=0)
  app.run(main)
