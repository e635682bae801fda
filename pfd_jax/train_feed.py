"""Where a run's arrays live and how each epoch's steps reach the one training program
(:func:`pfd_jax.train_program.program`).

* :class:`Resident`: every training group on one device (the default; the numbers of every table).
* :class:`Sharded`: a ``--mesh`` of devices in one process, or N processes (``jax.distributed``), each
  device holding a block of every bucket's groups (in N processes, blocks of that process's own share).
* :class:`Streamed`: the buckets stay on disk (:class:`pfd_jax.data.shards.ShardSet`); each chunk of steps
  gets a window holding just the groups it visits, built on a background thread while the device trains
  the previous chunk (double buffering), so memory holds two windows, not the data.

Every feed runs the same plan, so the same keys give the same batches everywhere; Resident and Streamed
give the same bits, Sharded the same numbers up to float summation order.
"""
from __future__ import annotations

import queue
import threading
from typing import NamedTuple, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from pfd_jax import distributed
from pfd_jax import train_program
from pfd_jax.train_config import TrainConfig
from pfd_jax.train_step import compiled, features, step_key


class State(NamedTuple):
  """What changes during training, seed (model) axis first."""
  params: object
  opt_state: object
  loss_keys: jax.Array  # [S, 2] the teacher loss's samples
  order_keys: jax.Array  # [S, 2] the batch plan's permutations
  alpha: jax.Array  # [S] Eq. 1 weight of each model


def split_keys(keys):
  """Per-seed keys -> (init keys, loss keys, order keys): the same streams as every earlier version."""
  init_keys, order_keys = jax.vmap(lambda k: jax.random.split(k))(keys).transpose(1, 0, 2)
  return init_keys, jax.vmap(lambda k: jax.random.fold_in(k, 1))(init_keys), order_keys


class Resident:
  """Every training group on one device; one program call per epoch (or per `chunk_steps` steps)."""
  shards = None

  def __init__(self, cfg: TrainConfig, buckets: Sequence, view: str, teacher: Optional[list], keys,
               chunk_steps: int = 0):
    self.cfg, self.view, self.chunk = cfg, view, chunk_steps
    self.batch = cfg.effective_batch_size
    self.sizes = self._sizes(buckets)
    self.num_steps = train_program.steps_per_epoch(self.sizes, self.batch)
    self.teacher_ndim = 0 if teacher is None else int(teacher[0].ndim)
    self._setup(buckets, teacher, keys)
    self.run = train_program.program(step_key(cfg), self.teacher_ndim, self.num_steps, self.sizes, self.shards)

  def _sizes(self, buckets) -> tuple:
    return tuple(int(b["x"].shape[0]) for b in buckets)

  def _setup(self, buckets, teacher, keys):
    self.dim = int(features(buckets[0], self.view).shape[-1])
    self.buckets = tuple(self._bucket(b, None if teacher is None else teacher[i]) for i, b in enumerate(buckets))

  def _bucket(self, b: dict, teacher):
    """(features, y, mask, data weight, teacher inputs) of one bucket, as the program takes them."""
    w = b["pos"] if self.cfg.data_groups == "positive" else jnp.ones_like(b["pos"])
    return features(b, self.view), b["y"], b["mask"], w, teacher

  def put(self, tree, seeds: bool = True):
    """Per-model arrays (seed axis first; seeds=False: replicated) where the program takes them."""
    return tree

  def local(self, tree):
    """A tree of the program's arrays as arrays on this process's first device (evaluation, results)."""
    return tree

  def init(self, keys, alpha, init_params=None) -> State:
    init_keys, loss_keys, order_keys = split_keys(keys)
    params, opt_state = compiled(step_key(self.cfg), self.teacher_ndim > 0, self.num_steps)["init"](init_keys, self.dim)
    if init_params is not None:
      params = jax.tree_util.tree_map(jnp.copy, init_params)  # ours to donate; the caller's stay intact
    params, opt_state, loss_keys, alpha = self.put((params, opt_state, loss_keys, alpha))
    return State(params, opt_state, loss_keys, order_keys, alpha)

  def steps(self, state: State, epoch: int) -> tuple:
    """The epoch's plan as the program takes it: (bucket, idx, valid, step number) per step."""
    ids, idx, valid = train_program.plan(state.order_keys, jnp.int32(epoch), self.sizes, self.batch)
    return ids, idx, valid, jnp.arange(ids.shape[0], dtype=jnp.int32)

  def chunks(self, steps: tuple):
    """(steps of a chunk, the buckets they read) for each chunk of the epoch."""
    n = int(steps[0].shape[0])
    size = self.chunk or n
    for a in range(0, n, size):
      yield tuple(s[a:a + size] for s in steps) if size < n else steps, self.buckets

  def epoch(self, state: State, epoch: int, hybrid_on: bool) -> tuple:
    """Trains one epoch: (new state, loss sums [S, 3] on the device)."""
    ep_keys = self.put(jax.vmap(lambda k: jax.random.fold_in(k, epoch))(state.loss_keys))
    params, opt_state = state.params, state.opt_state
    loss = self.put(jnp.zeros((state.order_keys.shape[0], 3), jnp.float32))
    hybrid_on = self.put(jnp.asarray(hybrid_on), seeds=False)
    for steps, buckets in self.chunks(self.steps(state, epoch)):
      params, opt_state, loss = self.run(params, opt_state, loss, ep_keys, self.put(steps, seeds=False), buckets,
                                         state.alpha, hybrid_on)
    return state._replace(params=params, opt_state=opt_state), loss


class Sharded(Resident):
  """A mesh of devices: one process's (``--mesh=data:D`` or ``seeds:S,data:D``) or every process's (N
  processes, one 'data' axis over all their devices). Each device holds a block of every bucket: in one
  process the bucket cut in D contiguous blocks, in N processes each process's own share cut in its devices'
  blocks; blocks are padded to the longest and the program's batch is the one-device plan over global
  group indices (:class:`pfd_jax.train_program.Shards`)."""

  def __init__(self, cfg, buckets, view, teacher, keys, chunk_steps: int = 0):
    self.comm = distributed.comm()
    if self.comm.count > 1:
      if cfg.mesh:
        raise ValueError("a multi-process run has its own mesh (every process's devices on 'data'): no --mesh")
      self.mesh, self.seed_axis = distributed.global_mesh(), None
    else:
      self.mesh, self.seed_axis = _mesh(cfg.mesh, keys.shape[0])
    super().__init__(cfg, buckets, view, teacher, keys, chunk_steps)

  def _sizes(self, buckets) -> tuple:
    local = np.asarray([int(b["x"].shape[0]) for b in buckets], np.int64)
    self.per_process = self.comm.gather(local)  # [processes, buckets]
    return tuple(int(q) for q in self.per_process.sum(0))

  def _setup(self, buckets, teacher, keys):
    host = [{k: np.asarray(v) for k, v in b.items()} for b in buckets]
    self.dim = int(features(host[0], self.view).shape[-1])
    blocks = self.mesh.shape["data"] // self.comm.count  # this process's devices on the data axis
    local = self.per_process[self.comm.index]
    start = self.per_process[:self.comm.index].sum(0)
    lo = np.stack([local * i // blocks for i in range(blocks + 1)])  # [blocks + 1, buckets] local cut points
    offset = self.comm.gather(start + lo[:-1]).reshape(-1, len(buckets))  # [D, buckets] global first group
    count = self.comm.gather(np.diff(lo, axis=0)).reshape(-1, len(buckets))
    self.block_len = count.max(0)
    self.cuts = lo
    self.shards = train_program.Shards(
        self.mesh, self.seed_axis, tuple(map(tuple, offset.tolist())), tuple(map(tuple, count.tolist())),
        train_program.own_widths(split_keys(keys)[2], self.cfg.epochs, self.sizes, self.batch, offset, count))
    self.buckets = tuple(self._bucket_blocks(b, host[b], None if teacher is None else np.asarray(teacher[b]))
                         for b in range(len(buckets)))

  def _bucket_blocks(self, b: int, bucket: dict, teacher):
    feats, y, mask, w, _ = self._bucket(bucket, None)
    block = lambda a, axis=0: self._global(self._blocks(a, b, axis), axis)
    t = None if teacher is None else self._global(self._blocks(teacher, b, teacher.ndim - 2), teacher.ndim - 2,
                                                  seeds=True)
    return block(feats), block(y), block(mask), block(np.asarray(w)), t

  def _blocks(self, a: np.ndarray, b: int, axis: int) -> np.ndarray:
    """This process's blocks of bucket b along `axis`, each padded to the longest block anywhere."""
    parts = []
    for lo, hi in zip(self.cuts[:-1, b], self.cuts[1:, b]):
      part = np.take(a, np.arange(lo, hi), axis=axis)
      pad = [(0, 0)] * a.ndim
      pad[axis] = (0, int(self.block_len[b]) - (hi - lo))
      parts.append(np.pad(part, pad))
    return np.concatenate(parts, axis=axis)

  def _global(self, local: np.ndarray, axis: int, seeds: bool = False):
    spec = [None] * local.ndim
    spec[axis] = "data"
    if seeds:
      spec[0] = self.seed_axis
    return jax.make_array_from_process_local_data(NamedSharding(self.mesh, P(*spec)), local)

  def put(self, tree, seeds: bool = True):
    sharding = NamedSharding(self.mesh, P(self.seed_axis) if seeds else P())
    return jax.tree_util.tree_map(lambda a: jax.make_array_from_process_local_data(sharding, np.asarray(a)), tree)

  def local(self, tree):
    if self.comm.count > 1:
      return distributed.local_copy(tree)
    return jax.device_put(tree, jax.devices()[0])


def _mesh(mesh_axes: tuple, num_seeds: int) -> tuple:
  """(Mesh, seeds axis name or None) of a one-process ``--mesh``."""
  names, sizes = zip(*mesh_axes)
  if set(names) - {"data", "seeds"} or len(set(names)) != len(names):
    raise ValueError(f"mesh axes must be 'data' and/or 'seeds', got {mesh_axes}")
  n = int(np.prod(sizes))
  if n > len(jax.devices()):
    raise ValueError(f"mesh {mesh_axes} needs {n} devices; {len(jax.devices())} available "
                     "(CPU: XLA_FLAGS=--xla_force_host_platform_device_count=N)")
  shape = dict(mesh_axes)
  if num_seeds % shape.get("seeds", 1):
    raise ValueError(f"{num_seeds} seeds do not split over a 'seeds' mesh axis of {shape['seeds']}")
  if "data" not in shape:
    names, sizes = names + ("data",), sizes + (1,)
  return Mesh(np.asarray(jax.devices()[:n]).reshape(sizes), names), ("seeds" if "seeds" in shape else None)


class Streamed(Resident):
  """Training groups on disk (:class:`pfd_jax.data.shards.ShardSet`): each chunk of `chunk_steps` steps
  reads just the groups it visits into a window (one per bucket, a fixed capacity: the most distinct groups
  any chunk of the run visits) and the plan's indices are renumbered into it. Windows are read and put on
  the device by a background thread, `prefetch` chunks ahead of the one training. Teacher inputs are kept
  on the host (models x padded documents x 4 bytes) and windowed alike."""

  def __init__(self, cfg, buckets, view, teacher, keys, chunk_steps: int = 8, prefetch: int = 2):
    self.prefetch = prefetch
    super().__init__(cfg, buckets, view, teacher, keys, chunk_steps or 8)

  def _sizes(self, buckets) -> tuple:
    return tuple(int(b.num_groups) for b in buckets)

  def _setup(self, buckets, teacher, keys):
    self.store = buckets
    self.dim = int(features(buckets[0].read(np.arange(1)), self.view).shape[-1])
    self.teacher = None if teacher is None else [np.asarray(t) for t in teacher]
    self.capacity = self._capacity(split_keys(keys)[2])
    self.buckets = None

  def _needed(self, ids, idx, b: int) -> np.ndarray:
    return np.unique(idx[ids == b][:, :, :min(self.batch, self.sizes[b])])

  def _capacity(self, order_keys) -> list:
    cap = np.ones(len(self.sizes), np.int64)
    for epoch in range(self.cfg.epochs):
      ids, idx, _ = jax.device_get(train_program.plan(order_keys, jnp.int32(epoch), self.sizes, self.batch))
      for a in range(0, ids.shape[0], self.chunk):
        for b in range(len(self.sizes)):
          cap[b] = max(cap[b], self._needed(ids[a:a + self.chunk], idx[a:a + self.chunk], b).size)
    return cap.tolist()

  def _window(self, steps: tuple) -> tuple:
    """(the chunk's steps with indices into the window, the window's buckets on the device)."""
    ids, idx, valid, js = steps
    idx = idx.copy()
    out = []
    for b, store in enumerate(self.store):
      need = self._needed(ids, idx, b)
      rows = ids == b
      w = min(self.batch, self.sizes[b])
      idx[rows, :, :w] = np.searchsorted(need, idx[rows, :, :w])
      pad = lambda a: np.concatenate([a, np.zeros((self.capacity[b] - a.shape[0],) + a.shape[1:], a.dtype)])
      host = store.read(need)
      feats, y, mask, wt, _ = self._bucket(host, None)
      t = None if self.teacher is None else np.moveaxis(pad(np.moveaxis(self.teacher[b][..., need, :], -2, 0)), 0, -2)
      out.append(jax.device_put((pad(feats), pad(y), pad(mask), pad(np.asarray(wt)), t)))
    return jax.device_put((ids, idx, valid, js)), tuple(out)

  def chunks(self, steps: tuple):
    steps = jax.device_get(steps)
    n = int(steps[0].shape[0])
    parts = [tuple(s[a:a + self.chunk] for s in steps) for a in range(0, n, self.chunk)]
    yield from _background(map(self._window, parts), self.prefetch)


def _background(items, ahead: int):
  """Iterates `items` computed on a thread, up to `ahead` items before the consumer."""
  q = queue.Queue(maxsize=max(ahead, 1))
  done = object()

  def work():
    try:
      for item in items:
        q.put(item)
    except BaseException as e:  # raised again in the consumer
      q.put(e)
    q.put(done)

  threading.Thread(target=work, daemon=True).start()
  while (item := q.get()) is not done:
    if isinstance(item, BaseException):
      raise item
    yield item


def make_feed(cfg: TrainConfig, buckets, view: str, teacher, keys, chunk_steps: int = 0):
  """The feed of a run: Streamed for on-disk buckets, Sharded on a mesh or across processes, else Resident."""
  from pfd_jax.data.shards import ShardBucket
  if buckets and isinstance(buckets[0], ShardBucket):
    if cfg.mesh or jax.process_count() > 1:
      raise ValueError("streamed data trains on one device of one process in this version (no --mesh, no "
                       "multi-process): see the README")
    return Streamed(cfg, buckets, view, teacher, keys, chunk_steps)
  if cfg.mesh or jax.process_count() > 1:
    return Sharded(cfg, buckets, view, teacher, keys, chunk_steps)
  return Resident(cfg, buckets, view, teacher, keys, chunk_steps)
