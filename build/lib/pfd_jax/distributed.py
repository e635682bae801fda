r"""Multi-process runs on JAX's own multi-controller runtime: one process per host (or per slice of one),
each holding only its share of the query groups.

* :func:`initialize` starts ``jax.distributed`` (explicit coordinator / process count / id, or the
  cluster's environment: SLURM, TPU pods, as JAX detects them) and, on the CPU backend, selects the gloo
  collectives so that a CPU run can all-reduce across processes (loopback on one machine).
* :func:`shard_bytes` is the deterministic split of a LETOR file: process i of N reads the lines that
  start in the i-th N-th of the file's bytes (scikit-learn's ``offset``/``length`` reading), and a query
  belongs to the process that reads its first line; :mod:`pfd_jax.data.letor` completes the boundary queries.
* :class:`Comm` is the small set of host-level collectives the data pipeline needs for statistics that must
  be global (sums, maxima, concatenations, a process's offset among the others); :data:`LOCAL` is the
  one-process identity. Everything else stays per process: a process never holds another's groups.

Training (``pfd_jax.training.program`` under ``shard_map``, fed by ``pfd_jax.training.feed.Sharded``) uses a global
``jax.sharding.Mesh`` over every process's devices: each device holds a block of its process's groups,
keeps the one-process batch plan's groups it owns, and the gradient is all-reduced, so the summed loss and
gradient equal the one-process run's up to float summation order.
"""
from __future__ import annotations

from typing import Optional

import jax
import numpy as np


def initialize(coordinator: str = "", num_processes: int = 1, process_id: int = 0, *,
               heartbeat_timeout: int = 100, shutdown_timeout: int = 300) -> tuple:
  """Starts the multi-process runtime; returns (process index, process count).

  coordinator: ``host:port`` of process 0, or ``auto`` to let JAX read the cluster's environment; '' with
  num_processes == 1 is a plain one-process run (nothing started). heartbeat_timeout / shutdown_timeout:
  JAX's seconds before a silent process is declared dead, and that a finishing process waits for the others.
  """
  if not coordinator and num_processes == 1:
    return 0, 1
  # CPU collectives across processes (gloo over TCP); the setting is read by the CPU backend only, GPU and TPU
  # use their own (NCCL, ICI).
  jax.config.update("jax_cpu_collectives_implementation", "gloo")
  timeouts = dict(heartbeat_timeout_seconds=heartbeat_timeout, shutdown_timeout_seconds=shutdown_timeout)
  if coordinator == "auto":
    jax.distributed.initialize(**timeouts)
  else:
    jax.distributed.initialize(coordinator, num_processes, process_id, **timeouts)
  return jax.process_index(), jax.process_count()


def shard_bytes(size: int, index: int, count: int) -> tuple:
  """(offset, length) of process `index`'s share of a `size`-byte file (the last one reads to the end)."""
  start = size * index // count
  end = size * (index + 1) // count
  return start, end - start


class Comm:
  """Host-level collectives over processes (this class: one process, every operation the identity)."""
  index, count = 0, 1

  def sum(self, x):
    return np.asarray(x)

  def max(self, x):
    return np.asarray(x)

  def concat(self, x) -> np.ndarray:
    """Every process's 1-D array, concatenated in process order."""
    return np.asarray(x)

  def gather(self, x) -> np.ndarray:
    """[count, ...]: every process's same-shape array."""
    return np.asarray(x)[None]

  def offset(self, n: int) -> tuple:
    """(sum of n over the processes before this one, sum over all): where this process's items start."""
    return 0, int(n)

  def first_error(self, message: Optional[str]) -> Optional[str]:
    """The first (in process order) of the processes' error messages (None where a process had none), the
    same in every process: so that an error one process meets stops all of them, with the same words."""
    return message


_MESSAGE_BYTES = 2048


class ProcessComm(Comm):
  """Collectives over the processes of an initialised ``jax.distributed`` runtime."""

  def __init__(self):
    self.index, self.count = jax.process_index(), jax.process_count()

  def gather(self, x) -> np.ndarray:
    from jax.experimental import multihost_utils
    return np.asarray(multihost_utils.process_allgather(np.asarray(x)))

  def sum(self, x):
    return self.gather(x).sum(0)

  def max(self, x):
    return self.gather(x).max(0)

  def concat(self, x) -> np.ndarray:
    x = np.asarray(x)
    sizes = self.gather(np.int64(x.shape[0]))
    width = int(sizes.max())
    padded = np.zeros((width,) + x.shape[1:], x.dtype)
    padded[:x.shape[0]] = x
    return np.concatenate([a[:n] for a, n in zip(self.gather(padded), sizes)])

  def offset(self, n: int) -> tuple:
    counts = self.gather(np.int64(n))
    return int(counts[:self.index].sum()), int(counts.sum())

  def first_error(self, message: Optional[str]) -> Optional[str]:
    buf = np.zeros(_MESSAGE_BYTES + 1, np.uint8)  # [has message, utf-8 bytes...]
    if message is not None:
      raw = message.encode()[:_MESSAGE_BYTES]
      buf[0], buf[1:1 + len(raw)] = 1, np.frombuffer(raw, np.uint8)
    for row in self.gather(buf):
      if row[0]:
        return bytes(row[1:]).rstrip(b"\0").decode(errors="replace")
    return None


LOCAL = Comm()


def comm() -> Comm:
  """The collectives of this run: :class:`ProcessComm` when several processes take part, else LOCAL."""
  return ProcessComm() if jax.process_count() > 1 else LOCAL


def local_copy(tree):
  """A replicated global array (every process holds all of it) as this process's own single-device array."""
  def one(a):
    if isinstance(a, jax.Array) and not a.is_fully_addressable:
      return a.addressable_data(0)
    return a
  return jax.tree_util.tree_map(one, tree)


def global_mesh() -> Optional[jax.sharding.Mesh]:
  """One 'data' axis over every process's devices (None in a one-process run)."""
  if jax.process_count() == 1:
    return None
  return jax.sharding.Mesh(np.asarray(jax.devices()), ("data",))
