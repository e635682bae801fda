"""Where a run's arrays live and how each epoch's steps reach the one training program
(:func:`pfd_jax.training.program.program`).

* :class:`Resident`: every training group on one device (the default; the numbers of every table).
* :class:`Sharded`: a ``--mesh`` of devices in one process, or N processes (``jax.distributed``), each
  device holding a block of every bucket's groups (in N processes, blocks of that process's own share).
* :class:`Drawn`: the buckets of D re-drawn datasets on one layout (:mod:`pfd_jax.training.draws`), on one
  device, every draw's models trained by one program.
* :class:`Streamed`: the buckets stay on disk (:class:`pfd_jax.data.shards.ShardBucket`); each step gets a
  window holding just the groups it visits, built on a background thread while the device trains the
  previous step (double buffering), so memory holds a few batches, not the data. (On a mesh, Sharded
  streams the same way, a window per chunk of steps and device.)

Every feed runs the same plan, so the same keys give the same batches everywhere; Resident and Streamed
give the same bits, Sharded the same numbers up to float summation order.
"""
from __future__ import annotations

import queue
import threading
from typing import TYPE_CHECKING, Dict, NamedTuple, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from pfd_jax import distributed
from pfd_jax.ops.scoring import features
from pfd_jax.training import program
from pfd_jax.training.draws import Draws
from pfd_jax.training.step import compiled, step_key
from pfd_jax.training.structures import Bucket, by_draw

if TYPE_CHECKING:
  from pfd_jax.training.config import TrainConfig


class State(NamedTuple):
  """What changes during training, seed (model) axis first."""
  params: object
  opt_state: object
  loss_keys: jax.Array  # [S, 2] the teacher loss's samples
  order_keys: jax.Array  # [S, 2] the batch plan's permutations
  alpha: jax.Array  # [S] Eq. 1 weight of each model


@jax.jit
def _fold_in(keys, epoch):
  """Each model's key folded with the epoch."""
  return jax.vmap(lambda k: jax.random.fold_in(k, epoch))(keys)


def split_keys(keys):
  """Per-seed keys -> (init keys, loss keys, order keys): the same streams as every earlier version."""
  init_keys, order_keys = jax.vmap(lambda k: jax.random.split(k))(keys).transpose(1, 0, 2)
  return init_keys, jax.vmap(lambda k: jax.random.fold_in(k, 1))(init_keys), order_keys


class Resident:
  """Every training group on one device; one program call per epoch (or per `chunk_steps` steps)."""
  shards = None
  draws, draw_batching = 0, "vmap"

  def __init__(self, cfg: TrainConfig, buckets: Sequence, view: str, teacher: Optional[list], keys,
               chunk_steps: int = 0):
    self.cfg, self.view, self.chunk = cfg, view, chunk_steps
    self.batch = cfg.effective_batch_size
    self.sizes = self._sizes(buckets)
    self.num_steps = program.steps_per_epoch(self.sizes, self.batch)
    self.teacher_ndim = 0 if teacher is None else int(teacher[0].ndim)
    self._setup(buckets, teacher, keys)
    fns = compiled(step_key(cfg), self.teacher_ndim > 0, self.num_steps, None if self.shards is None else "data")
    self.run = program.program(fns.vstep, self.batch, self.teacher_ndim, self.sizes, self.shards,
                               draws=self.draws, draw_batching=self.draw_batching)

  def _sizes(self, buckets) -> tuple:
    return tuple(_num_groups(b) for b in buckets)

  def _setup(self, buckets, teacher, keys):
    self.dim = int(features(buckets[0], self.view).shape[-1])
    self.buckets = tuple(self._bucket(b, None if teacher is None else teacher[i]) for i, b in enumerate(buckets))

  def _bucket(self, b: Dict[str, jax.Array], teacher) -> Bucket:
    """One bucket as the program takes it."""
    w = b["pos"] if self.cfg.data_groups == "positive" else jnp.ones_like(b["pos"])
    return Bucket(features(b, self.view), b["y"], b["mask"], w, teacher)

  def put(self, tree, seeds: bool = True):
    """Per-model arrays (seed axis first; seeds=False: replicated) where the program takes them."""
    return tree

  def local(self, tree):
    """A tree of the program's arrays as arrays on this process's first device (evaluation, results)."""
    return tree

  def init(self, keys, alpha, init_params=None) -> State:
    init_keys, loss_keys, order_keys = split_keys(keys)
    params, opt_state = compiled(step_key(self.cfg), self.teacher_ndim > 0, self.num_steps).init(init_keys, self.dim)
    if init_params is not None:
      params = jax.tree_util.tree_map(jnp.copy, init_params)  # ours to donate; the caller's stay intact
    params, opt_state, loss_keys, alpha = self.put((params, opt_state, loss_keys, alpha))
    return State(params, opt_state, loss_keys, order_keys, alpha)

  def steps(self, state: State, epoch: int) -> tuple:
    """The epoch's plan as the program takes it: (bucket, idx, valid, step number) per step."""
    ids, idx, valid = program.plan(state.order_keys, jnp.int32(epoch), self.sizes, self.batch, self.cfg.order_stream)
    return ids, idx, valid, jnp.arange(ids.shape[0], dtype=jnp.int32)

  def chunks(self, steps: tuple):
    """(the program, the steps of a chunk, the buckets they read) for each chunk of the epoch."""
    n = int(steps[0].shape[0])
    size = self.chunk or n
    for a in range(0, n, size):
      yield self.run, tuple(s[a:a + size] for s in steps) if size < n else steps, self.buckets

  def epoch(self, state: State, epoch: int, phase: bool) -> tuple:
    """Trains one epoch: (new state, loss sums [S, 3] on the device)."""
    ep_keys = self.put(_fold_in(state.loss_keys, jnp.int32(epoch)))
    params, opt_state = state.params, state.opt_state
    loss = self.put(jnp.zeros((state.order_keys.shape[0], 3), jnp.float32))
    phase = self.put(jnp.asarray(phase), seeds=False)
    for run, steps, buckets in self.chunks(self.steps(state, epoch)):
      params, opt_state, loss = run(params, opt_state, loss, ep_keys, self.put(steps, seeds=False), buckets,
                                    state.alpha, phase)
    return state._replace(params=params, opt_state=opt_state), loss


class Sharded(Resident):
  """A mesh of devices: one process's (``--mesh=data:D`` or ``seeds:S,data:D``) or every process's (N
  processes, one 'data' axis over all their devices). Each device holds a block of every bucket: in one
  process the bucket cut in D contiguous blocks, in N processes each process's own share cut in its devices'
  blocks. The program's batch is the one-device plan over global group indices, and each bucket comes
  with the table of which device holds which group where (:class:`pfd_jax.training.program.Shards`).

  On-disk buckets (:class:`pfd_jax.data.shards.ShardBucket`, in N processes each process's own share) are
  streamed: each chunk of steps, each device block is a window holding just its own groups that the chunk
  visits, read on a background thread."""

  def __init__(self, cfg, buckets, view, teacher, keys, chunk_steps: int = 0):
    self.comm = distributed.comm()
    if self.comm.count > 1:
      if cfg.mesh:
        raise ValueError("a multi-process run has its own mesh (every process's devices on 'data'): no --mesh")
      self.mesh, self.seed_axis = distributed.global_mesh(), None
    else:
      self.mesh, self.seed_axis = _mesh(cfg.mesh, keys.shape[0])
    self.streamed = bool(buckets) and not isinstance(buckets[0], dict)
    super().__init__(cfg, buckets, view, teacher, keys, chunk_steps or (8 if self.streamed else 0))

  def _sizes(self, buckets) -> tuple:
    local = np.asarray([_num_groups(b) for b in buckets], np.int64)
    self.per_process = self.comm.gather(local)  # [processes, buckets]
    return tuple(int(q) for q in self.per_process.sum(0))

  def _setup(self, buckets, teacher, keys):
    self.store = buckets if self.streamed else [{k: np.asarray(v) for k, v in b.items()} for b in buckets]
    self.teacher = None if teacher is None else [np.asarray(t) for t in teacher]
    self.dim = int(features(_head(self.store[0]), self.view).shape[-1])
    blocks = self.mesh.shape["data"] // self.comm.count  # this process's devices on the data axis
    local = self.per_process[self.comm.index]
    self.start = self.per_process[:self.comm.index].sum(0)  # global index of this process's first group
    self.cuts = np.stack([local * i // blocks for i in range(blocks + 1)])  # [blocks + 1, buckets] local cuts
    offset = self.comm.gather(self.start + self.cuts[:-1]).reshape(-1, len(buckets))  # [D, buckets]
    count = self.comm.gather(np.diff(self.cuts, axis=0)).reshape(-1, len(buckets))
    width, window = program.plan_stats(split_keys(keys)[2], self.cfg.epochs, self.sizes, self.batch,
                                             offset, chunk=self.chunk if self.streamed else 0,
                                             stream=self.cfg.order_stream)
    self.shards = program.Shards(self.mesh, self.seed_axis, width)
    self.length = window if self.streamed else tuple(int(n) for n in count.max(0))
    if not self.streamed:
      self.buckets = tuple(self._window(b, [np.arange(lo, hi) for lo, hi in zip(self.cuts[:-1, b], self.cuts[1:, b])])
                           for b in range(len(buckets)))
      self.store = self.teacher = None  # the host copies: placed now

  def _window(self, b: int, rows: list) -> Bucket:
    """Bucket b as the program takes it, device block j of this process holding its local groups rows[j]
    (padded to the bucket's block length), with the slot tables."""
    slots = np.full((len(rows), self.sizes[b]), -1, np.int32)
    parts = []
    for j, r in enumerate(rows):
      host = self.store[b].read(r, self.view) if self.streamed else {k: v[r] for k, v in self.store[b].items()}
      feats, y, mask, w, _, _ = self._bucket(host, None)
      t = None if self.teacher is None else self.teacher[b][..., r, :]
      parts.append([_pad(a, self.length[b], 0) for a in (feats, y, mask, np.asarray(w))] +
                   [None if t is None else _pad(t, self.length[b], t.ndim - 2)])
      slots[j, self.start[b] + r] = np.arange(r.size)
    out = [self._global(np.concatenate(f, 0), 0) for f in list(zip(*parts))[:4]]
    t = None if self.teacher is None else np.concatenate([p[4] for p in parts], parts[0][4].ndim - 2)
    out.append(None if t is None else self._global(t, t.ndim - 2, seeds=True))
    return Bucket(*out, slots=self._global(slots, 0))

  def chunks(self, steps: tuple):
    if not self.streamed:
      yield from super().chunks(steps)
      return
    steps = jax.device_get(steps)
    n = int(steps[0].shape[0])
    parts = [tuple(s[a:a + self.chunk] for s in steps) for a in range(0, n, self.chunk)]

    def window(part):
      ids, idx = part[0], part[1]
      out = []
      for b in range(len(self.sizes)):
        need = np.unique(idx[ids == b][:, :, :min(self.batch, self.sizes[b])])
        lo, hi = self.start[b] + self.cuts[:-1, b], self.start[b] + self.cuts[1:, b]
        out.append(self._window(b, [need[(need >= a) & (need < z)] - self.start[b] for a, z in zip(lo, hi)]))
      return self.run, part, tuple(out)

    yield from _background(map(window, parts), 2)

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


class Drawn(Resident):
  """D draws on one layout (:mod:`pfd_jax.training.draws`) on one device: every model's arrays draw-major
  (D x S), the buckets [D, C_b, ...], one program call per epoch (or per `chunk_steps` steps), vmapped over the
  draws on an accelerator, looped over them inside the program on a CPU (`batching` sets it: 'vmap' or 'loop')."""
  batching = None

  def __init__(self, cfg, d: Draws, view, teacher, keys, chunk_steps: int = 0):
    if keys.shape[0] % d.num_draws:
      raise ValueError(f"{keys.shape[0]} models do not split into {d.num_draws} draws (keys: D x S, draw-major)")
    self.draws, self.counts = d.num_draws, jnp.asarray(d.counts, jnp.int32)
    # a CPU trains a draw as fast inside a loop as batched, and then with its alone-run's bits (tests/test_draws.py)
    self.draw_batching = self.batching or ("loop" if jax.default_backend() == "cpu" else "vmap")
    super().__init__(cfg, d.buckets, view, teacher, keys, chunk_steps)

  def _sizes(self, buckets) -> tuple:
    return tuple(int(b["x"].shape[1]) for b in buckets)  # the layout's capacities

  def _setup(self, buckets, teacher, keys):
    self.dim = int(features(buckets[0], self.view).shape[-1])
    self.buckets = tuple(self._bucket(b, None if teacher is None else by_draw(teacher[i], self.draws))
                         for i, b in enumerate(buckets))

  def steps(self, state: State, epoch: int) -> tuple:
    ids, idx, valid = program.draw_plan(by_draw(state.order_keys, self.draws), jnp.int32(epoch), self.sizes,
                                       self.batch, self.cfg.order_stream, self.counts)
    return ids, idx, valid, jnp.arange(ids.shape[0], dtype=jnp.int32)


def _num_groups(b) -> int:
  return int(b["x"].shape[0]) if isinstance(b, dict) else b.num_groups


def _head(b) -> Dict[str, np.ndarray]:
  """The first group of a bucket (its feature width)."""
  return {k: v[:1] for k, v in b.items()} if isinstance(b, dict) else b.read(np.arange(min(1, b.num_groups)))


def _pad(a: np.ndarray, length: int, axis: int) -> np.ndarray:
  """`a` zero-padded to `length` along `axis`."""
  pad = [(0, 0)] * a.ndim
  pad[axis] = (0, length - a.shape[axis])
  return np.pad(a, pad)


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
  """Training groups on disk (:class:`pfd_jax.data.shards.ShardBucket`), on one device: each step reads just
  its batch's groups (every model's, deduplicated) into a window of the bucket it visits, the other buckets
  a one-group stand-in (so the program is compiled once per bucket visited, with the resident program's
  branches), and the plan's indices are renumbered into the window. Windows are read and put on the device
  by a background thread, `prefetch` steps ahead of the one training, so memory holds a few batches, not the
  data. Teacher inputs are kept on the host (models x padded documents x 4 bytes) and windowed alike."""

  def __init__(self, cfg, buckets, view, teacher, keys, chunk_steps: int = 0, prefetch: int = 2):
    self.prefetch = prefetch
    super().__init__(cfg, buckets, view, teacher, keys, 1)

  def _setup(self, buckets, teacher, keys):
    self.store = buckets
    self.dim = int(features(_head(buckets[0]), self.view).shape[-1])
    self.teacher = None if teacher is None else [np.asarray(t) for t in teacher]
    self.capacity = [min(q, keys.shape[0] * min(self.batch, q)) for q in self.sizes]  # every model's batch
    self.stand_in = [self._put_window(b, np.zeros(1, np.int64), 1) for b in range(len(buckets))]
    self.buckets = None

  def _put_window(self, b: int, rows: np.ndarray, cap: int) -> Bucket:
    feats, y, mask, wt, _, _ = self._bucket(self.store[b].read(rows, self.view, cap), None)
    t = None if self.teacher is None else _pad(self.teacher[b][..., rows, :], cap, self.teacher[b].ndim - 2)
    return jax.device_put(Bucket(feats, y, mask, np.asarray(wt), t))

  def _window(self, step: tuple) -> tuple:
    """(the program, the step with indices into the window, the buckets: the window and stand-ins)."""
    ids, idx, valid, js = step
    b = int(ids[0])
    w = min(self.batch, self.sizes[b])
    need = np.unique(idx[:, :, :w])
    idx = idx.copy()
    idx[:, :, :w] = np.searchsorted(need, idx[:, :, :w])
    buckets = list(self.stand_in)
    buckets[b] = self._put_window(b, need, self.capacity[b])
    return self.run, jax.device_put((ids, idx, valid, js)), tuple(buckets)

  def chunks(self, steps: tuple):
    steps = jax.device_get(steps)
    one = [tuple(s[j:j + 1] for s in steps) for j in range(int(steps[0].shape[0]))]
    yield from _background(map(self._window, one), self.prefetch)


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
  """The feed of a run: Sharded on a mesh or across processes (resident or streamed), Streamed for on-disk
  buckets on one device, Drawn for the draws of a layout, else Resident."""
  if isinstance(buckets, Draws):
    if cfg.mesh or jax.process_count() > 1:
      raise ValueError("draws train on one device (no mesh, one process)")
    return Drawn(cfg, buckets, view, teacher, keys, chunk_steps)
  if cfg.mesh or jax.process_count() > 1:
    return Sharded(cfg, buckets, view, teacher, keys, chunk_steps)
  if buckets and not isinstance(buckets[0], dict):
    return Streamed(cfg, buckets, view, teacher, keys, chunk_steps)
  return Resident(cfg, buckets, view, teacher, keys, chunk_steps)
