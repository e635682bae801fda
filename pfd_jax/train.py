"""Seed-vmapped training with per-epoch evaluation and best-checkpoint keeping (appendix A.3 protocol).

Shapes: ``S`` seeds lead every per-seed array (parameters, optimizer state, batch order, teacher targets,
results). One jitted step updates all seeds at once (``jax.vmap`` over the seed axis); data lives on the
device as length buckets (:mod:`pfd_jax.data.padding`) and batches are gathered inside the step by index,
so the host only ships integer indices. Each bucket compiles its shapes once, and compiled steps are
shared across runs with the same model and loss.

An epoch visits every training group of every bucket once. Batches hold ``batch_size`` groups of one
bucket (fewer when the bucket is smaller); each seed permutes each bucket on its own, and the order in
which the buckets' batches interleave is shuffled per epoch (shared by the seeds so that they stay in
lock-step). The loss of a batch is the *sum* over its groups of the per-group losses (Eq. 1 sums over
sets; PT-Ranking sums over the batch too).
"""
from __future__ import annotations

import dataclasses
import functools
import time
from typing import Callable, NamedTuple, Optional, Sequence, Tuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from pfd_jax import config
from pfd_jax import losses as losses_lib
from pfd_jax import metrics as metrics_lib
from pfd_jax import data as data_lib
from pfd_jax import rank_distill
from pfd_jax.data.padding import Padded
from pfd_jax.models import MLP


# The paper's batch size and learning rate per loss (appendix A.3): RankNet 300 / 3e-4, the others 500 / 1e-3.
PAPER_BATCH = {"ranknet": (300, 3e-4)}
PAPER_BATCH_DEFAULT = (500, 1e-3)


def parse_mesh(text: str) -> tuple:
  """'seeds:2,data:2' -> (('seeds', 2), ('data', 2)); '' -> () (one device)."""
  out = []
  for part in filter(None, text.split(",")):
    name, _, size = part.partition(":")
    if name not in ("data", "seeds") or not size.isdigit() or int(size) < 1:
      raise config.ConfigError("mesh", f"{text!r}: expected axis:size pairs with axes data and/or seeds, e.g. data:4")
    out.append((name, int(size)))
  return tuple(out)


def format_mesh(mesh: tuple) -> str:
  return ",".join(f"{n}:{s}" for n, s in mesh)


@dataclasses.dataclass(frozen=True)
class TrainConfig:
  """Training hyper-parameters (defaults: the paper's protocol, appendix A.3). Fields with flag=False are
  set by the drivers (which loss a row trains, how its teacher teaches), not by flags."""
  loss: str = config.option("rankbce", "Ranking loss.", choices=tuple(losses_lib.LOSSES), flag=False)
  ranknet_pairs: str = config.option("all", "RankNet pairs: all (paper) or positive.", choices=("all", "positive"))
  batch_size: Optional[int] = config.option(None, "Query groups per batch (default: the paper's, 500; RankNet "
                                            "300).", lo=1)
  lr: Optional[float] = config.option(None, "Learning rate (default: the paper's, 1e-3; RankNet 3e-4).", lo=0,
                                      lo_open=True)
  weight_decay: float = config.option(0.005, "Coupled L2 weight decay (as torch Adam(weight_decay=...)).", lo=0)
  lr_halve_every: int = config.option(20, "Halve the learning rate every this many epochs.", lo=1)
  epochs: int = config.option(100, "Training epochs.", lo=1)
  hidden: int = config.option(100, "Hidden width of the MLP.", lo=1)
  layers: int = config.option(5, "Dense layers of the MLP (layers - 1 hidden ReLU layers).", lo=1)
  alpha: float = config.option(0.5, "Eq. 1 weight of the data loss (1 - alpha: the teacher term).", lo=0, hi=1)
  ks: Tuple[int, ...] = config.option((8, 16, 32), "NDCG cut-offs; the first selects the best epoch.", lo=1, flag=False)
  select_on: str = config.option("test", "Best epoch by NDCG@ks[0] on this split (the paper: test).",
                                 choices=("test", "vali"))
  empty_rule: str = config.option("exclude", "Lists without a positive: excluded from means (paper) or zero.",
                                  choices=("exclude", "zero"))
  data_groups: str = config.option("positive", "Groups of the data loss: positive (paper) or all (Table 5).",
                                   choices=("positive", "all"))
  teacher_transform: str = config.option("sigmoid", "Teacher logits -> targets (paper: sigmoid "
                                         "probabilities).", choices=losses_lib.TRANSFORMS, flag=False)
  teacher_loss: str = config.option("", "The teacher term's loss function ('' = the data loss; topk = Ranking "
                                    "Distillation).", choices=("",) + tuple(losses_lib.LOSSES) + ("topk",),
                                    flag=False)
  transform_a: float = config.option(1.0, "SDR Eq. 10 affine teacher transform slope a (teaching=listwise).",
                                     lo=0, lo_open=True)
  transform_b: float = config.option(0.0, "SDR Eq. 10 affine teacher transform intercept b (teaching=listwise).")
  temperature: float = config.option(1.0, "Softmax teacher transform temperature T (SDR section 5.6).", lo=0,
                                     lo_open=True, flag=False)
  topk: rank_distill.TopK = config.option(rank_distill.TopK(), "Ranking Distillation's top-K teacher loss.")
  mesh: Tuple[Tuple[str, int], ...] = config.option((), "Data-parallel device mesh, e.g. data:4 or seeds:2,data:2 "
                                                     "(default: one device; CPU: "
                                                     "XLA_FLAGS=--xla_force_host_platform_device_count=4).",
                              parse=parse_mesh, fmt=format_mesh)

  def __post_init__(self):
    config.check(self)
    object.__setattr__(self, "mesh", tuple(tuple(p) for p in self.mesh))

  @property
  def effective_batch_size(self) -> int:
    """batch_size, or the paper's for this loss."""
    return self.batch_size or PAPER_BATCH.get(self.loss, PAPER_BATCH_DEFAULT)[0]

  @property
  def effective_lr(self) -> float:
    """lr, or the paper's for this loss."""
    return self.lr or PAPER_BATCH.get(self.loss, PAPER_BATCH_DEFAULT)[1]

  def record(self) -> dict:
    """The configuration as results.json records it, with the batch size and learning rate in force."""
    return dict(config.to_dict(self), batch_size=self.effective_batch_size, lr=self.effective_lr)


VIEWS = ("x", "z", "xz")


class EvalSet(NamedTuple):
  """An evaluation split on the device: buckets of its lists that have a positive, and how many lists
  the split has in all. Lists without a positive have NDCG 0 under every rule, so they are not scored;
  they only enter the denominator under empty_rule='zero'."""
  buckets: list
  num_lists: int


def eval_set(groups, max_buckets: int = 8) -> EvalSet:
  """Buckets the lists of a labelled split that have at least one y = 1."""
  keep = np.flatnonzero(data_lib.positive_groups(groups))
  return EvalSet(device_buckets(data_lib.bucketize(groups, max_buckets, keep)), groups.num_queries)


def device_buckets(buckets: Sequence[Padded]) -> list:
  """Host buckets -> dicts of device arrays: x, z, y, mask, pos (f32[Q], group has a y = 1)."""
  out = []
  for b in buckets:
    d = dict(x=jnp.asarray(b.x), y=jnp.asarray(b.y), mask=jnp.asarray(b.mask),
             pos=jnp.asarray((b.y * b.mask).max(-1) > 0, jnp.float32))
    if b.z is not None:
      d["z"] = jnp.asarray(b.z)
    out.append(d)
  return out


def features(bucket: dict, view: str, z_override=None):
  """The model input of a bucket: 'x' (regular), 'z' (privileged) or 'xz' (both, concatenated).

  A suffix ':i,j' keeps only those privileged columns ('xz:0' = regular + the first privileged feature).
  z_override (broadcastable to z) replaces the privileged features, e.g. by an imputed constant (Table 6).
  """
  base, _, cols = view.partition(":")
  if base not in VIEWS:
    raise ValueError(f"view must be one of {VIEWS} (optionally ':i,j'), got {view!r}")
  if base == "x":
    return bucket["x"]
  if "z" not in bucket:
    raise ValueError(f"view {view!r} needs privileged features z")
  z = bucket["z"] if z_override is None else jnp.broadcast_to(z_override, bucket["z"].shape)
  if cols:
    z = z[..., [int(c) for c in cols.split(",")]]
  return z if base == "z" else jnp.concatenate([bucket["x"], z], axis=-1)


def make_model(cfg: TrainConfig) -> MLP:
  return MLP(hidden=cfg.hidden, layers=cfg.layers)


def _loss_fn(cfg: TrainConfig) -> Callable:
  fn = losses_lib.get_loss(cfg.loss)
  return functools.partial(fn, pairs=cfg.ranknet_pairs) if cfg.loss == "ranknet" else fn


def teacher_inputs(cfg: TrainConfig, logits, bucket: dict):
  """What the teacher term consumes for one bucket, from teacher logits [S, (K,) Q, L]: g(logits) (the
  configured transform) or, for teacher_loss='topk', the teacher's top-K ranks among unlabelled documents."""
  if cfg.teacher_loss == "topk":
    return rank_distill.teacher_ranks(logits, bucket["y"], bucket["mask"], cfg.topk.k)
  g = losses_lib.get_transform(cfg.teacher_transform, a=cfg.transform_a, b=cfg.transform_b,
                               temperature=cfg.temperature)
  return g(logits, bucket["mask"])


def _teacher_loss_fn(cfg: TrainConfig, key, labels, hybrid_on):
  """The teacher term's loss, called like a loss of :mod:`pfd_jax.losses` (scores, targets, mask)."""
  name = cfg.teacher_loss or cfg.loss
  if name == "topk":
    return lambda s, t, m, reduce_fn=None: rank_distill.topk_loss(s, t, m, labels, key=key, cfg=cfg.topk,
                                                                 hybrid_on=hybrid_on, reduce_fn=reduce_fn)
  fn = losses_lib.get_loss(name)
  return functools.partial(fn, pairs=cfg.ranknet_pairs) if name == "ranknet" else fn


# Settings a sweep may vary inside one program (train(variants=...)): the per-model alpha and the teacher
# transform, which turns teacher logits into targets before training. _step_key normalises them away.
SWEEPABLE = ("alpha", "teacher_transform", "transform_a", "transform_b", "temperature")


def _step_key(cfg: TrainConfig) -> TrainConfig:
  """The settings a training step is compiled for: those it does not need at trace time (alpha, epochs,
  selection, the teacher transform, the top-K warm-up) normalised away, so an alpha or temperature sweep
  compiles once."""
  return dataclasses.replace(cfg, alpha=0.0, epochs=1, select_on="test", empty_rule="exclude",
                             teacher_loss=cfg.teacher_loss or cfg.loss, teacher_transform="sigmoid", transform_a=1.0,
                             transform_b=0.0, temperature=1.0, topk=dataclasses.replace(cfg.topk, warmup=0))


def _compiled(cfg: TrainConfig, has_teacher: bool, steps_per_epoch: int):
  """Jitted, seed-vmapped init and step for one configuration, cached across runs (see :func:`_step_key`)."""
  return _compiled_cached(_step_key(cfg), has_teacher, steps_per_epoch)


@functools.lru_cache(maxsize=None)
def _compiled_cached(cfg: TrainConfig, has_teacher: bool, steps_per_epoch: int):
  model = make_model(cfg)
  loss_fn = _loss_fn(cfg)
  schedule = lambda step: cfg.effective_lr * 0.5 ** (step // (cfg.lr_halve_every * steps_per_epoch))
  tx = optax.chain(optax.add_decayed_weights(cfg.weight_decay), optax.adam(schedule))

  def init(key, dim):
    params = model.init(key, jnp.zeros((1, dim)))
    return params, tx.init(params)

  def step(params, opt_state, key, idx, valid, feats, y, mask, data_w, teacher, alpha, j, hybrid_on):
    """One update of one seed. idx, valid: [B] groups of this batch; teacher: [(K,) Q, L] or None;
    key, j: the seed's epoch key and the step number (the teacher loss's samples); hybrid_on: top-K warm-up
    is over."""
    return step_on(params, opt_state, key, feats[idx], y[idx], mask[idx], data_w[idx] * valid, valid,
                   None if teacher is None else (teacher, idx), alpha, j, hybrid_on)

  def step_on(params, opt_state, key, f, yb, mb, w, valid, teacher, alpha, j, hybrid_on):
    """The update on a gathered batch: f, yb, mb [B, ...]; w, valid [B] data weights and validity; teacher
    None, (teacher [(K,) Q, L], idx) to gather from, or the batch's teacher [(K,) B, L]."""

    def objective(p):
      s = model.apply(p, f)
      data = loss_fn(s, yb, mb, reduce_fn=None) * w
      if teacher is None:
        return jnp.sum(data), (jnp.sum(data), jnp.zeros(()))
      t = teacher[0][..., teacher[1], :] if isinstance(teacher, tuple) else teacher
      t_fn = _teacher_loss_fn(cfg, jax.random.fold_in(key, j), yb, hybrid_on)
      _, teach = losses_lib.distillation_terms(loss_fn, s, yb, t, mb, teacher_loss_fn=t_fn)
      teach = teach * valid
      return jnp.sum(alpha * data + (1 - alpha) * teach), (jnp.sum(data), jnp.sum(teach))

    (total, (data, teach)), grads = jax.value_and_grad(objective, has_aux=True)(params)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, jnp.stack([total, data, teach])

  t_axes = 0 if has_teacher else None
  # alpha is per model (in_axes 0): an alpha sweep trains its students side by side in one program.
  vstep = jax.vmap(step, in_axes=(0, 0, 0, 0, None, None, None, None, None, t_axes, 0, None, None))
  # Multi-process: every per-seed argument already gathered (each process's groups in its block of the data
  # axis, see _Processes), so nothing is gathered inside the step from data another process holds.
  batch_step = jax.vmap(step_on, in_axes=(0, 0, 0, 0, 0, 0, 0, 0, t_axes, 0, None, None))
  return dict(init=jax.jit(jax.vmap(init, in_axes=(0, None)), static_argnums=1), vstep=vstep,
              step=jax.jit(vstep, donate_argnums=(0, 1)), batch_step=jax.jit(batch_step, donate_argnums=(0, 1)))


def _epoch_plan(order_keys, epoch, sizes: Sequence[int], batch: int):
  """:func:`_epoch_batches` inside a compiled program (the same keys, so the same batches): bucket of each
  step [J], group indices [J, S, Bmax] (bucket b's batches in the first min(batch, Q_b) columns) and their
  validity [J, Bmax], in the epoch's shuffled interleaving."""
  ep_keys = jax.vmap(lambda k: jax.random.split(jax.random.fold_in(k, epoch), len(sizes)))(order_keys)
  width = max(min(batch, q) for q in sizes)
  ids, idx, valid = [], [], []
  for b, q in enumerate(sizes):
    bb = min(batch, q)
    nb = -(-q // bb)
    perm = jax.vmap(lambda k: jax.random.permutation(k, q))(ep_keys[:, b])
    perm = jnp.concatenate([perm, jnp.zeros((perm.shape[0], nb * bb - q), perm.dtype)], 1)
    idx.append(jnp.pad(perm.reshape(-1, nb, bb), ((0, 0), (0, 0), (0, width - bb))))
    valid.append(jnp.pad((jnp.arange(nb * bb) < q).astype(jnp.float32).reshape(nb, bb), ((0, 0), (0, width - bb))))
    ids.append(jnp.full((nb,), b, jnp.int32))
  order = jax.random.permutation(jax.random.PRNGKey(epoch), sum(-(-q // min(batch, q)) for q in sizes))
  return (jnp.concatenate(ids)[order], jnp.concatenate(idx, 1)[:, order].transpose(1, 0, 2),
          jnp.concatenate(valid)[order])


@functools.lru_cache(maxsize=None)
def _epoch_program(step_key: TrainConfig, has_teacher: bool, steps_per_epoch: int, sizes: tuple):
  """One jitted call trains a whole epoch: the batch plan, then every batch of every bucket in the shuffled
  interleaving (``lax.scan`` over the steps, ``lax.switch`` over the buckets, each branch the step loop's
  vmapped step on its bucket's own batch shape, so the arithmetic and the bits are the step loop's).

  The evaluation and best-checkpoint keeping are dispatched right after it as their own compiled calls,
  with no host sync in between (the host reads each epoch once). Fused into this program, the evaluation
  summed NDCG in another order (test NDCG means differed by up to 9e-8), which could move a best epoch;
  kept apart, every reproduced number stays bit-identical."""
  vstep = _compiled_cached(step_key, has_teacher, steps_per_epoch)["vstep"]
  batch = step_key.effective_batch_size
  widths = [min(batch, q) for q in sizes]

  def epoch_fn(params, opt_state, loss_keys, order_keys, epoch, buckets, alpha, hybrid_on):
    ids, idx, valid = _epoch_plan(order_keys, epoch, sizes, batch)
    ep_keys = jax.vmap(lambda k: jax.random.fold_in(k, epoch))(loss_keys)

    def body(carry, x):
      params, opt_state, acc = carry
      b, i, v, j = x
      branches = [functools.partial(lambda k, p, o: vstep(p, o, ep_keys, i[:, :widths[k]], v[:widths[k]],
                                                          *buckets[k], alpha, j, hybrid_on), k)
                  for k in range(len(sizes))]
      params, opt_state, l = jax.lax.switch(b, branches, params, opt_state)
      return (params, opt_state, acc + l), None

    zero = jnp.zeros((idx.shape[1], 3), jnp.float32)
    (params, opt_state, loss), _ = jax.lax.scan(body, (params, opt_state, zero),
                                                (ids, idx, valid, jnp.arange(ids.shape[0], dtype=jnp.int32)))
    return params, opt_state, loss

  return jax.jit(epoch_fn, donate_argnums=(0, 1))


@functools.lru_cache(maxsize=None)
def _scoring(hidden: int, layers: int, ks: tuple):
  """Jitted, seed-vmapped predict and whole-split NDCG sums for one model shape (shared by every run)."""
  model = MLP(hidden=hidden, layers=layers)
  predict = lambda params, feats: model.apply(params, feats)
  per_list = jax.vmap(lambda params, f, y, m: metrics_lib.ndcg_table(model.apply(params, f), y, m, ks),
                      in_axes=(0, None, None, None))

  def ndcg_sums(params, triples):
    """(sum over lists with a positive [S, K], their count) over every bucket: one call per split."""
    tot, cnt = 0.0, 0
    for f, y, m in triples:
      valid = metrics_lib.has_relevant(y, m)
      tot = tot + jnp.sum(jnp.where(valid, per_list(params, f, y, m), 0.0), -1)
      cnt = cnt + jnp.sum(valid)
    return tot, cnt

  return dict(predict=jax.jit(jax.vmap(predict, in_axes=(0, None))), ndcg_sums=jax.jit(ndcg_sums),
              per_list=jax.jit(per_list))


def _mean_ndcg(cfg: TrainConfig, params, triples, num_lists: int) -> jax.Array:
  """[S, len(ks)] NDCG averaged over lists of (features, y, mask) buckets, cfg.empty_rule applied.

  Lists without a positive score 0; 'exclude' leaves them out of the mean, 'zero' counts them among the
  `num_lists` lists of the split. The whole split is scored in one jitted call.
  """
  tot, cnt = _scoring(cfg.hidden, cfg.layers, tuple(cfg.ks))["ndcg_sums"](params, tuple(map(tuple, triples)))
  return tot / (num_lists if cfg.empty_rule == "zero" else cnt)


@dataclasses.dataclass
class TrainResult:
  """Everything one seed-vmapped run produced (numpy, seed axis first).

  params: best-epoch parameters [S, ...] (device pytree); curves: {split: [S, E, len(ks)]} mean NDCG per
  epoch; loss: [S, E, 3] summed (total, data term, teacher term) per epoch; best_epoch: [S] (0-based);
  best: {split: [S, len(ks)]} metrics at the best epoch; seconds: wall time.
  """
  params: object
  curves: dict
  loss: np.ndarray
  best_epoch: np.ndarray
  best: dict
  seconds: float


@jax.jit
def _keep_best(improved, new, old):
  """Per seed: `new` where improved[s], else `old` (pytrees with a leading seed axis)."""
  return jax.tree_util.tree_map(
      lambda a, b: jnp.where(improved.reshape((-1,) + (1,) * (a.ndim - 1)), a, b), new, old)


def _epoch_batches(seed_keys, epoch: int, sizes: Sequence[int], batch: int, multiple: int = 1):
  """One epoch's batch plan: a list of (bucket, idx [S, B], valid [B]); B is rounded up to a multiple of
  `multiple` (the data-parallel devices) with invalid entries, which carry no weight.

  Seed s permutes each bucket with its own key folded with the epoch, so a seed's batches do not depend on
  which other seeds run beside it (a vmapped run equals separate runs). The interleaving of the buckets'
  batches is shuffled per epoch with a key of the epoch alone, shared by all seeds (they stay in lock-step).
  """
  plan = []
  ep_keys = jax.vmap(lambda k: jax.random.split(jax.random.fold_in(k, epoch), len(sizes)))(seed_keys)
  for b, q in enumerate(sizes):
    bb = min(batch, q)
    nb = -(-q // bb)
    perm = np.asarray(jax.vmap(lambda k: jax.random.permutation(k, q))(ep_keys[:, b]))
    perm = np.concatenate([perm, np.zeros((perm.shape[0], nb * bb - q), perm.dtype)], 1)
    valid = np.arange(nb * bb) < q
    extra = -bb % multiple
    for j in range(nb):
      idx, val = perm[:, j * bb:(j + 1) * bb], valid[j * bb:(j + 1) * bb].astype(np.float32)
      if extra:
        idx, val = np.pad(idx, ((0, 0), (0, extra))), np.pad(val, (0, extra))
      plan.append((b, idx, val))
  order = np.asarray(jax.random.permutation(jax.random.PRNGKey(epoch), len(plan)))
  return [plan[i] for i in order]


class _Placement:
  """Where a run's arrays live: one device, or a ``jax.sharding.Mesh`` with axes 'data' (a batch's groups
  split across devices; XLA all-reduces the gradient sum) and optionally 'seeds' (each device trains a
  share of the seeds). Data buckets are replicated; the step is the same jitted function either way (jit
  follows its inputs' shardings), so a mesh run equals a one-device run up to float summation order."""

  def __init__(self, mesh_axes: tuple, num_seeds: int):
    self.mesh = None
    self.data = 1
    if mesh_axes:
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
      self.mesh = Mesh(np.asarray(jax.devices()[:n]).reshape(sizes), names)
      self.data = shape.get("data", 1)
      self.seed_axis = "seeds" if "seeds" in shape else None

  def _put(self, tree, spec):
    if self.mesh is None:
      return tree
    return jax.device_put(tree, NamedSharding(self.mesh, spec))

  def replicated(self, tree):
    return tree if self.mesh is None else self._put(tree, PartitionSpec())

  def per_seed(self, tree):
    """Arrays with a leading seed axis: split over 'seeds' (replicated without that axis)."""
    return tree if self.mesh is None else self._put(tree, PartitionSpec(self.seed_axis))

  def batch(self, idx, valid):
    if self.mesh is None:
      return jnp.asarray(idx), jnp.asarray(valid)
    return self._put(idx, PartitionSpec(self.seed_axis, "data")), self._put(valid, PartitionSpec("data"))

  def gather(self, tree):
    """Back on the default device (prediction and evaluation outside training use one device)."""
    return tree if self.mesh is None else jax.device_put(tree, jax.devices()[0])


class _Processes:
  """A multi-process run (``jax.distributed``): each process holds its share of every training bucket (the
  buckets share their list lengths across processes, :func:`pfd_jax.data.bucketize` with a comm). The batch
  plan is the one-process run's, over the global group indices of each bucket (process p's groups of bucket
  b are global indices offset[p, b] ..); each process gathers the plan's groups that it owns into its block
  of a global batch (the others masked with weight 0) and the step sums over the whole global batch, so the
  loss and the all-reduced gradient are the one-process run's up to summation order. Parameters and
  optimizer state are replicated; evaluation is per process, its NDCG sums and counts added across them."""

  def __init__(self, sizes: Sequence[int]):
    from pfd_jax import distributed
    self.comm = distributed.comm()
    per = self.comm.gather(np.asarray(sizes, np.int64))  # [processes, buckets]
    self.sizes = [int(q) for q in per.sum(0)]
    self.offset, self.local = per[:self.comm.index].sum(0), per[self.comm.index]
    self.mesh = distributed.global_mesh()
    self.local_copy = distributed.local_copy

  def replicated(self, tree):
    put = lambda a: jax.make_array_from_process_local_data(NamedSharding(self.mesh, PartitionSpec()), np.asarray(a))
    return jax.tree_util.tree_map(put, tree)

  def _global(self, a, axis: int):
    spec = PartitionSpec(*([None] * axis + ["data"]))
    return jax.make_array_from_process_local_data(NamedSharding(self.mesh, spec), np.asarray(a))

  def batch(self, b: int, idx: np.ndarray, valid: np.ndarray, feats, y, mask, data_w, teacher):
    """This process's block of the global batch (f, y, mask, weight, valid, teacher), seed axis first."""
    loc = idx - self.offset[b]
    mine = (loc >= 0) & (loc < self.local[b]) & (valid[None, :] > 0)  # [S, B]
    loc = np.where(mine, loc, 0)
    if self.local[b] == 0:  # no group of this bucket here: an all-masked block of the same shape
      pick = lambda a: np.zeros(loc.shape + a.shape[1:], a.dtype)
      t = None if teacher is None else np.zeros(teacher.shape[:-2] + loc.shape[1:] + teacher.shape[-1:],
                                                 teacher.dtype)
    else:
      pick = lambda a: a[loc]
      t = None if teacher is None else np.take_along_axis(  # seed s's groups of teacher [S, (K,) Q, L]
          teacher, loc.reshape(loc.shape[:1] + (1,) * (teacher.ndim - 3) + loc.shape[1:] + (1,)), axis=teacher.ndim - 2)
    v = mine.astype(np.float32)
    out = [self._global(pick(a), 1) for a in (feats, y, mask)] + [self._global(pick(data_w) * v, 1),
                                                                  self._global(v, 1)]
    return out + [None if t is None else self._global(t, t.ndim - 2)]

  def ndcg(self, tot, cnt, num_lists: int, rule: str):
    tot, cnt, n = self.comm.sum(np.asarray(tot, np.float64)), self.comm.sum(np.asarray(cnt)), self.comm.sum(num_lists)
    return tot / (n if rule == "zero" else np.maximum(cnt, 1))


def train(key, cfg: TrainConfig, train_buckets: list, view: str, eval_sets: dict, *,
          teacher: Optional[list] = None, num_seeds: Optional[int] = None,
          log_fn: Optional[Callable] = None, init_params=None, program: Optional[str] = None,
          variants: Optional[Sequence[dict]] = None, _alpha=None):
  """Trains `S` models (one per seed) and keeps each one's best epoch. Returns a :class:`TrainResult`
  (a list of them with `variants`).

  Args:
    key: PRNG key [S] (one per seed) from ``jax.random.split``; the same keys give the same bits.
    cfg: hyper-parameters.
    train_buckets: :func:`device_buckets` of the groups an epoch visits.
    view: model input, see :func:`features`.
    eval_sets: {split name: :class:`EvalSet`} evaluated after every epoch; must contain ``cfg.select_on``.
    teacher: per train bucket, teacher logits ``[S, Q, L]`` or ``[S, K, Q, L]`` (K teachers, multi-teacher
      PFD); None trains on the data loss alone. Teacher seed s teaches student s.
    log_fn: called as ``log_fn(epoch, loss_mean, ndcg_select_mean, seconds)`` after every epoch.
    init_params: seed-stacked parameters to start from (fine-tuning a pre-trained model); the optimizer
      state starts fresh. None initialises from the keys.
    program: 'epoch' (one compiled call per epoch: :func:`_epoch_program`; the default on one device) or
      'steps' (one call per batch from a host loop; the default, and the only form, on a device mesh).
    variants: a sweep of the teacher term trained in one program: V dicts of :data:`SWEEPABLE` settings
      (e.g. ``[{"alpha": 0.2}, {"alpha": 0.9}]`` or ``[{"teacher_transform": "softmax", "temperature": t}]``)
      give V x S models (variant v with seed s's key and teacher), and a list of V :class:`TrainResult` is
      returned, each equal to the run with ``dataclasses.replace(cfg, **variants[v])``. Alpha is a traced
      per-model argument of the step and each variant's teacher targets are computed before training, so
      every variant shares one compiled program.
  """
  if variants is not None:
    if teacher is None:
      raise ValueError("variants change the teacher term: give a teacher")
    bad = sorted({k for v in variants for k in v} - set(SWEEPABLE))
    if bad:
      raise ValueError(f"variants may set only {SWEEPABLE} (the settings one compiled step serves), got {bad}")
    cfgs = [dataclasses.replace(cfg, **v) for v in variants]
    keys = key if num_seeds is None else jax.random.split(key, num_seeds)
    s, a = keys.shape[0], len(cfgs)
    tile = lambda t: jnp.concatenate([t] * a, axis=0)
    inputs = [jnp.concatenate([teacher_inputs(c, t, b) for c in cfgs], axis=0) for t, b in zip(teacher, train_buckets)]
    alpha = jnp.repeat(jnp.asarray([c.alpha for c in cfgs], jnp.float32), s)
    res = train(tile(keys), cfg, train_buckets, view, eval_sets, teacher=inputs, log_fn=log_fn,
                init_params=None if init_params is None else jax.tree_util.tree_map(tile, init_params),
                program=program, _alpha=alpha)
    part = lambda x, i: x[i * s:(i + 1) * s]
    return [TrainResult(params=jax.tree_util.tree_map(lambda x: part(x, i), res.params),
                        curves={k: part(v, i) for k, v in res.curves.items()}, loss=part(res.loss, i),
                        best_epoch=part(res.best_epoch, i), best={k: part(v, i) for k, v in res.best.items()},
                        seconds=res.seconds) for i in range(a)]
  procs = jax.process_count() > 1
  if procs and cfg.mesh:
    raise ValueError("a multi-process run has its own mesh (every process's devices on 'data'): no --mesh")
  program = program or ("steps" if cfg.mesh or procs else "epoch")
  if program not in ("epoch", "steps") or (program == "epoch" and (cfg.mesh or procs)):
    raise ValueError(f"program must be 'epoch' (one device) or 'steps', got {program!r} with mesh {cfg.mesh}")
  if cfg.select_on not in eval_sets:
    raise ValueError(f"select_on={cfg.select_on!r} but eval_sets has {list(eval_sets)}")
  if not train_buckets:
    raise ValueError("no training group (is there any positive query group?)")
  if procs:
    return _train_processes(key, cfg, train_buckets, view, eval_sets, teacher=teacher, num_seeds=num_seeds,
                            log_fn=log_fn, init_params=init_params, alpha=_alpha)
  keys = key if num_seeds is None else jax.random.split(key, num_seeds)
  s_count = keys.shape[0]
  place = _Placement(cfg.mesh, s_count)
  train_buckets = place.replicated(train_buckets)
  eval_sets = {n: EvalSet(place.replicated(es.buckets), es.num_lists) for n, es in eval_sets.items()}
  if teacher is not None:
    teacher = place.per_seed(teacher)
  sizes = [int(b["x"].shape[0]) for b in train_buckets]
  batch_size = cfg.effective_batch_size
  steps_per_epoch = sum(-(-q // min(batch_size, q)) for q in sizes)
  fns = _compiled(cfg, teacher is not None, steps_per_epoch)
  feats = [features(b, view) for b in train_buckets]
  data_w = [b["pos"] if cfg.data_groups == "positive" else jnp.ones_like(b["pos"]) for b in train_buckets]
  if teacher is not None and _alpha is None:  # (a sweep's targets come ready, one variant's per model)
    teacher = [teacher_inputs(cfg, t, b) for t, b in zip(teacher, train_buckets)]
  if _alpha is None:
    _alpha = jnp.full((s_count,), cfg.alpha if teacher is not None else 1.0, jnp.float32)
  alpha = place.per_seed(_alpha)
  warmup = cfg.epochs // 2 if cfg.topk.warmup is None else cfg.topk.warmup
  init_keys, order_key = jax.vmap(lambda k: jax.random.split(k))(keys).transpose(1, 0, 2)
  loss_keys = jax.vmap(lambda k: jax.random.fold_in(k, 1))(init_keys)  # a stream apart from the init's
  params, opt_state = fns["init"](init_keys, feats[0].shape[-1])
  if init_params is not None:
    params = jax.tree_util.tree_map(jnp.copy, init_params)  # ours to donate; the caller's stay intact
  params, opt_state, loss_keys = place.per_seed((params, opt_state, loss_keys))
  best_params = jax.tree_util.tree_map(jnp.copy, params)  # params' buffers are donated to the step
  best_val = jnp.full((s_count,), -jnp.inf)
  curves = {name: np.zeros((s_count, cfg.epochs, len(cfg.ks))) for name in eval_sets}
  loss_hist = np.zeros((s_count, cfg.epochs, 3))
  best_epoch = np.zeros(s_count, np.int64)
  eval_feats = {name: ([(features(b, view), b["y"], b["mask"]) for b in es.buckets], es.num_lists)
                for name, es in eval_sets.items()}
  if program == "epoch":
    run_epoch = _epoch_program(_step_key(cfg), teacher is not None, steps_per_epoch, tuple(sizes))
    buckets = tuple((feats[b], train_buckets[b]["y"], train_buckets[b]["mask"], data_w[b],
                     None if teacher is None else teacher[b]) for b in range(len(sizes)))

  def step_loop(params, opt_state, epoch, hybrid_on):
    """The epoch as one call per batch from the host (the mesh path, and the reference of the program)."""
    loss = jnp.zeros((s_count, 3))
    ep_keys = jax.vmap(lambda k: jax.random.fold_in(k, epoch))(loss_keys)
    for j, (b, idx, valid) in enumerate(_epoch_batches(order_key, epoch, sizes, batch_size, place.data)):
      idx, valid = place.batch(idx, valid)
      params, opt_state, l = fns["step"](params, opt_state, ep_keys, idx, valid, feats[b], train_buckets[b]["y"],
                                         train_buckets[b]["mask"], data_w[b], None if teacher is None else teacher[b],
                                         alpha, jnp.int32(j), hybrid_on)
      loss = loss + l
    return params, opt_state, loss

  t0 = time.time()
  for epoch in range(cfg.epochs):
    hybrid_on = jnp.asarray(epoch >= warmup)
    if program == "epoch":
      params, opt_state, l = run_epoch(params, opt_state, loss_keys, order_key, jnp.int32(epoch), buckets, alpha,
                                       hybrid_on)
    else:
      params, opt_state, l = step_loop(params, opt_state, epoch, hybrid_on)
    m = {name: _mean_ndcg(cfg, params, triples, n) for name, (triples, n) in eval_feats.items()}
    improved = m[cfg.select_on][:, 0] > best_val
    best_val = jnp.where(improved, m[cfg.select_on][:, 0], best_val)
    best_params = _keep_best(improved, params, best_params)
    improved, l, m = jax.device_get((improved, l, m))  # the epoch's one host sync
    for name, v in m.items():
      curves[name][:, epoch] = v
    best_epoch = np.where(improved, epoch, best_epoch)
    loss_hist[:, epoch] = l
    if log_fn is not None:
      log_fn(epoch, float(loss_hist[:, epoch, 0].mean()), float(np.mean(m[cfg.select_on][:, 0])), time.time() - t0)
  best = {name: c[np.arange(s_count), best_epoch] for name, c in curves.items()}
  return TrainResult(params=place.gather(best_params), curves=curves, loss=loss_hist, best_epoch=best_epoch, best=best,
                     seconds=time.time() - t0)


def _train_processes(key, cfg: TrainConfig, train_buckets: list, view: str, eval_sets: dict, *, teacher, num_seeds,
                     log_fn, init_params, alpha) -> TrainResult:
  """:func:`train` as one of several processes (see :class:`_Processes`): the step loop over the
  one-process batch plan, each process feeding its own groups; returns the same TrainResult on every process
  (parameters as this process's local arrays)."""
  keys = key if num_seeds is None else jax.random.split(key, num_seeds)
  s_count = keys.shape[0]
  sizes = [int(b["x"].shape[0]) for b in train_buckets]
  procs = _Processes(sizes)
  batch_size = cfg.effective_batch_size
  steps_per_epoch = sum(-(-q // min(batch_size, q)) for q in procs.sizes if q)
  fns = _compiled(cfg, teacher is not None, steps_per_epoch)
  feats = [features(b, view) for b in train_buckets]
  data_w = [b["pos"] if cfg.data_groups == "positive" else jnp.ones_like(b["pos"]) for b in train_buckets]
  if teacher is not None and alpha is None:
    teacher = [teacher_inputs(cfg, t, b) for t, b in zip(teacher, train_buckets)]
  if alpha is None:
    alpha = jnp.full((s_count,), cfg.alpha if teacher is not None else 1.0, jnp.float32)
  host = lambda arrays: [np.asarray(a) for a in arrays]  # batches are gathered on the host, then globalised
  feats_h, y_h, mask_h, w_h = (host(feats), host(b["y"] for b in train_buckets), host(b["mask"] for b in train_buckets),
                               host(data_w))
  teacher_h = None if teacher is None else host(teacher)
  warmup = cfg.epochs // 2 if cfg.topk.warmup is None else cfg.topk.warmup
  init_keys, order_key = jax.vmap(lambda k: jax.random.split(k))(keys).transpose(1, 0, 2)
  loss_keys = jax.vmap(lambda k: jax.random.fold_in(k, 1))(init_keys)
  params, opt_state = fns["init"](init_keys, feats[0].shape[-1])
  if init_params is not None:
    params = init_params
  params, opt_state, alpha_g = procs.replicated((params, opt_state, alpha))
  best_params = jax.tree_util.tree_map(jnp.copy, procs.local_copy(params))  # params' buffers are donated
  best_val = np.full((s_count,), -np.inf)
  curves = {name: np.zeros((s_count, cfg.epochs, len(cfg.ks))) for name in eval_sets}
  loss_hist = np.zeros((s_count, cfg.epochs, 3))
  best_epoch = np.zeros(s_count, np.int64)
  scoring = _scoring(cfg.hidden, cfg.layers, tuple(cfg.ks))["ndcg_sums"]
  order = [b for b, q in enumerate(procs.sizes) if q]  # buckets that exist anywhere, in the global order
  t0 = time.time()
  for epoch in range(cfg.epochs):
    hybrid_on = np.asarray(epoch >= warmup)
    ep_keys = procs.replicated(jax.vmap(lambda k: jax.random.fold_in(k, epoch))(loss_keys))
    loss = np.zeros((s_count, 3), np.float32)
    plan = _epoch_batches(order_key, epoch, [procs.sizes[b] for b in order], batch_size)
    for j, (pos, idx, valid) in enumerate(plan):
      b = order[pos]
      f, y, m, w, v, t = procs.batch(b, idx, valid, feats_h[b], y_h[b], mask_h[b], w_h[b],
                                     None if teacher is None else teacher_h[b])
      params, opt_state, l = fns["batch_step"](params, opt_state, ep_keys, f, y, m, w, v, t, alpha_g, np.int32(j),
                                               hybrid_on)
      loss = loss + np.asarray(procs.local_copy(l))
    local = procs.local_copy(params)
    m = {}
    for name, es in eval_sets.items():
      tot, cnt = np.zeros((s_count, len(cfg.ks))), 0
      if es.buckets:
        tot, cnt = scoring(local, tuple((features(b, view), b["y"], b["mask"]) for b in es.buckets))
      m[name] = procs.ndcg(tot, cnt, es.num_lists, cfg.empty_rule)
    improved = m[cfg.select_on][:, 0] > best_val
    best_val = np.where(improved, m[cfg.select_on][:, 0], best_val)
    best_params = _keep_best(jnp.asarray(improved), local, best_params)
    for name, v in m.items():
      curves[name][:, epoch] = v
    best_epoch = np.where(improved, epoch, best_epoch)
    loss_hist[:, epoch] = loss
    if log_fn is not None:
      log_fn(epoch, float(loss_hist[:, epoch, 0].mean()), float(np.mean(m[cfg.select_on][:, 0])), time.time() - t0)
  best = {name: c[np.arange(s_count), best_epoch] for name, c in curves.items()}
  return TrainResult(params=best_params, curves=curves, loss=loss_hist, best_epoch=best_epoch, best=best,
                     seconds=time.time() - t0)


def predict(cfg: TrainConfig, params, buckets: list, view: str, z_override=None) -> list:
  """Logits [S, Q, L] per bucket of S seed-stacked models."""
  fn = _scoring(cfg.hidden, cfg.layers, tuple(cfg.ks))["predict"]
  return [fn(params, features(b, view, z_override)) for b in buckets]


def full_metrics(cfg: TrainConfig, params, es: EvalSet, view: str, ks=(3, 5, 10)) -> dict:
  """{name: [S]} NDCG@k, P@k and MAP (:func:`pfd_jax.metrics.metric_table`) of S seed-stacked models on an
  :class:`EvalSet`, averaged over lists by cfg.empty_rule."""
  fn = _table_fn(cfg.hidden, cfg.layers, tuple(ks))
  tot, cnt = 0.0, 0.0
  for b in es.buckets:
    valid = metrics_lib.has_relevant(b["y"], b["mask"])
    tot = tot + jnp.sum(jnp.where(valid, fn(params, features(b, view), b["y"], b["mask"]), 0.0), -1)
    cnt = cnt + jnp.sum(valid)
  mean = np.asarray(tot / (es.num_lists if cfg.empty_rule == "zero" else cnt))  # [S, M]
  return dict(zip(metrics_lib.metric_names(ks), mean.T))


@functools.lru_cache(maxsize=None)
def _table_fn(hidden: int, layers: int, ks: tuple):
  model = MLP(hidden=hidden, layers=layers)
  fn = lambda params, f, y, m: metrics_lib.metric_table(model.apply(params, f), y, m, ks)
  return jax.jit(jax.vmap(fn, in_axes=(0, None, None, None)))


def per_list_ndcg(cfg: TrainConfig, params, es: EvalSet, view: str) -> tuple:
  """(NDCG@ks[0] of every list [S, Q], has-a-positive [Q]) of S seed-stacked models on an :class:`EvalSet`,
  lists in bucket order (the same order for every model on the same set: rows pair by position)."""
  from pfd_jax import distributed
  fn = _scoring(cfg.hidden, cfg.layers, tuple(cfg.ks))["per_list"]
  s_count = jax.tree_util.tree_leaves(params)[0].shape[0]
  vals, valid = [np.zeros((s_count, 0), np.float32)], [np.zeros(0, bool)]
  for b in es.buckets:
    vals.append(np.asarray(fn(params, features(b, view), b["y"], b["mask"]))[:, 0])  # [S, K, Q_b] -> [S, Q_b]
    valid.append(np.asarray(metrics_lib.has_relevant(b["y"], b["mask"])))
  comm = distributed.comm()  # several processes: every process's lists, in process order
  return comm.concat(np.concatenate(vals, -1).T).T, comm.concat(np.concatenate(valid))


def evaluate(cfg: TrainConfig, params, es: EvalSet, view: str, z_override=None) -> np.ndarray:
  """[S, len(ks)] mean NDCG (cfg.empty_rule) of S seed-stacked models on an :class:`EvalSet`."""
  return np.asarray(_mean_ndcg(cfg, params, [(features(b, view, z_override), b["y"], b["mask"])
                                             for b in es.buckets], es.num_lists))
