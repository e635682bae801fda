"""What keeps a run's results safe from the faults a machine or a cluster delivers.

* **Stop requests** (:func:`install_signals`, :func:`checkpoint`): SIGTERM (a scheduler's preemption notice)
  and SIGINT (Ctrl-C) only record a request; the run acts on it at the next safe point, where every finished
  row is saved and nothing is half-written: the end of an epoch, the start of a row, before the results files.
  There :func:`checkpoint` raises :class:`Interrupted` (exit 143, or 130 for Ctrl-C). A second signal exits at
  once. A handler that raised an exception into whatever code the main thread was running (the former
  ``sys.exit`` in the handler) could be swallowed on the way and lose the signal; a flag cannot. In a
  multi-process run the processes agree at every safe point (one small all-gather), so they stop together.
* **One writer per run folder** (:class:`RunLock`): an advisory ``fcntl`` lock on ``<run folder>/.lock``, held
  while the run lives. The kernel drops it when the holder exits, however it exits, so a stale lock cannot
  outlive its process; the file keeps the holder's pid for the message.
* **One-line errors** (:func:`os_error_line`): an OSError as ``<file>: <cause>``.
* **Compiled programs within the process's mapping limit** (:func:`release_compiled`): every program XLA:CPU
  compiles keeps about 3.5 memory mappings until JAX drops its cache entry, and Linux allows a process
  ``vm.max_map_count`` of them (65,530 by default). A long run that compiles as it goes (a multi-fold run with a
  PFD search: about 12,000 mappings a fold on OHSUMED) otherwise dies in LLVM ("Cannot allocate memory", then a
  segmentation fault) hours in, as a five-fold OHSUMED run did in its third fold. At every row's start, past
  half the limit, JAX's caches are cleared: programs are compiled again when next needed, same bits. (A re-drawn
  run clears them at every draw anyway, in ``fold_data.fold_setup``: a draw's shapes are its own.)
"""
from __future__ import annotations

import errno
import fcntl
import os
import signal
from typing import Optional

from absl import logging

_NAMES = {signal.SIGTERM: "SIGTERM", signal.SIGINT: "SIGINT (Ctrl-C)"}
_requested: Optional[int] = None


class Interrupted(BaseException):
  """A stop request acted on at a safe point (a BaseException, like KeyboardInterrupt, so that no
  ``except Exception`` on the way can swallow it). `code`: the exit status, 130 for SIGINT, else 143."""

  def __init__(self, signum: int):
    self.signum = signum
    self.code = 130 if signum == signal.SIGINT else 143
    super().__init__(_NAMES.get(signum, f"signal {signum}"))


def _handler(signum, frame):
  global _requested
  if _requested is not None:  # the second one: stop now (finished rows are already on disk)
    os.write(2, f"error: second signal ({_NAMES.get(signum, signum)}): stopping at once; the rows finished so "
                f"far are saved and the same command resumes from them\n".encode())
    os._exit(130 if signum == signal.SIGINT else 143)
  _requested = signum
  # os.write, not print: a handler that prints while the interrupted code prints raises a reentrancy error.
  os.write(2, f"{_NAMES.get(signum, signum)} received: stopping at the next safe point (end of this epoch); "
              f"a second signal stops at once\n".encode())


def install_signals() -> None:
  """SIGTERM and SIGINT become stop requests (call after jax.distributed.initialize, whose preemption
  notifier would otherwise take SIGTERM for itself; calling it again keeps a pending request)."""
  signal.signal(signal.SIGTERM, _handler)
  signal.signal(signal.SIGINT, _handler)


def requested() -> Optional[int]:
  """The signal of a pending stop request, or None."""
  return _requested


def checkpoint(comm=None) -> None:
  """A safe point: raises :class:`Interrupted` if a stop was requested (in this process or, with a multi-process
  `comm`, in any process: every process must call it at the same points, which it does at epoch ends and row
  starts, as training is collective there)."""
  sig = _requested or 0
  if comm is not None and comm.count > 1:
    sig = int(comm.max(sig))
  if sig:
    raise Interrupted(sig)


def _mappings() -> tuple:
  """(this process's memory mappings, the limit): (0, 0) where /proc does not tell (not Linux)."""
  try:
    with open("/proc/sys/vm/max_map_count") as f:
      limit = int(f.read())
    with open("/proc/self/maps", "rb") as f:
      return sum(1 for _ in f), limit
  except (OSError, ValueError):
    return 0, 0


def release_compiled(fraction: float = 0.5) -> bool:
  """Clears JAX's compiled programs when this process holds more than `fraction` of the memory mappings it may
  (module docstring); True when it did."""
  held, limit = _mappings()
  if not limit or held <= fraction * limit:
    return False
  import jax  # here, not at the top: the launcher (experiments.launch) imports this module and never JAX
  jax.clear_caches()
  logging.info("%d of %d memory mappings (vm.max_map_count) held: JAX's compiled programs released; "
               "they are compiled again when next needed", held, limit)
  return True


class RunLock:
  """An exclusive advisory lock on a run folder; :meth:`acquire` raises :class:`Busy` if another live process
  holds it. Released by :meth:`release` or by the process's exit."""

  class Busy(RuntimeError):
    pass

  def __init__(self, folder: str):
    self.path = os.path.join(folder, ".lock")
    self.fd: Optional[int] = None

  def acquire(self) -> "RunLock":
    fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
      if e.errno not in (errno.EAGAIN, errno.EACCES):
        os.close(fd)
        raise
      holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
      os.close(fd)
      raise RunLock.Busy(f"{os.path.dirname(self.path)} is in use by another run of the same configuration "
                         f"(pid {holder}); wait for it to end (it writes the same results) or stop it") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    self.fd = fd
    return self

  def release(self) -> None:
    if self.fd is not None:
      os.close(self.fd)  # closing drops the flock
      self.fd = None


def os_error_line(e: OSError) -> str:
  """'<file>: <cause>' of an OSError (both files of a rename), with a hint for the common causes; an OSError
  raised with a message of its own (no file name) is that message."""
  if not e.filename:
    return str(e)
  where = " -> ".join(str(f) for f in (e.filename, e.filename2) if f) or "a file"
  cause = e.strerror or str(e)
  hint = {errno.ENOSPC: " (the disk is full: free space, or write elsewhere with --out_dir)",
          errno.EFBIG: " (the file is larger than this file system or the process's limit allows)",
          errno.EACCES: " (no permission: choose a folder you can write, e.g. with --out_dir)",
          errno.EROFS: " (a read-only file system: write elsewhere, e.g. with --out_dir)",
          errno.ENOTDIR: " (a part of the path is a file, not a folder)",
          errno.EEXIST: " (a file is in the way of a folder)"}.get(e.errno, "")
  return f"{where}: {cause}{hint}"


def run_app(main, argv_filter=lambda argv: argv, hint: str = "--help lists the flags") -> None:
  """``absl.app.run(main)`` with a tool's usual exits: --help (and --helpfull) exit 0 after printing the help
  (absl exits 1), a bad flag is one line on stderr and exit 2 (absl prints a page of usage). argv_filter:
  what the flags parse (e.g. a driver's --preset expanded)."""
  import sys

  from absl import app, flags

  def parse(argv):
    try:
      return flags.FLAGS(argv_filter(argv))
    except flags.Error as e:
      print(f"error: {e}\n({hint})", file=sys.stderr, flush=True)
      sys.exit(2)
    except SystemExit as e:  # absl's help flags exit 1 after printing the help that was asked for
      sys.exit(0 if e.code == 1 else e.code)

  app.run(main, flags_parser=parse)
