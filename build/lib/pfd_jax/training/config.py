"""Training hyper-parameters (:class:`TrainConfig`): the paper's protocol (appendix A.3) as defaults, each
field a flag of the training drivers (:mod:`pfd_jax.config`), and the top-K teacher loss's (:class:`TopK`)."""
from __future__ import annotations

import dataclasses
from typing import Callable, Dict, Optional, Tuple, Union

from pfd_jax import config
from pfd_jax.ops import losses as losses_lib
from pfd_jax.ops import teacher as teacher_lib
from pfd_jax.ops.models import DEFAULT_PRECISION, MATMUL_PRECISIONS, NORMS, Arch
from pfd_jax.ops.topk import SCHEMES


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


def parse_params(text: str) -> tuple:
  """'temperature=0.1,mu=2' -> (('mu', 2.0), ('temperature', 0.1)) (sorted: one spelling per setting)."""
  out = {}
  for part in filter(None, text.split(",")):
    name, eq, value = part.partition("=")
    try:
      out[name.strip()] = float(value)
    except ValueError:
      eq = ""
    if not eq or not name.strip():
      raise config.ConfigError("loss_params", f"{text!r}: expected name=number pairs, e.g. temperature=0.1")
  return tuple(sorted(out.items()))


def format_params(params: tuple) -> str:
  return ",".join(f"{n}={v:g}" for n, v in params)


# The modern ranker of a run on the team's own data (experiments' --dataset=letor default; each flag overrides its
# field): DASALC's recipe (Qin et al., ICLR 2021: batch norm on the input and every hidden layer, Gaussian input
# noise, dropout, a wider net), each choice made on the validation split of the simulated logs, one at a time
# (docs/modern-ranker.md says how): batch norm over layer norm (which normalises a document across its own features
# and so erases the absolute values a ranker needs) and over none, 3 x 256 over the paper's 100 x 4, dropout 0.3
# with input noise 0.2, lr 1e-3; the input norm's scale and bias kept (removing them did not raise validation NDCG).
MODERN = dict(norm="batch", hidden=256, layers=4, dropout=0.3, noise=0.2)
# Its loss, chosen the same way: ApproxNDCG over LambdaLoss, RankBCE, softmax and ListMLE.
MODERN_LOSS = "approxndcg"


@dataclasses.dataclass(frozen=True)
class TopK:
  """Hyper-parameters of the top-K distillation loss (:func:`pfd_jax.ops.topk.topk_loss`; the paper tunes all
  of them on validation data)."""
  k: int = config.option(10, "Ranking Distillation: the teacher's top-K unlabelled documents per list.", lo=1)
  scheme: str = config.option("hybrid", "Ranking Distillation weighting scheme.", choices=SCHEMES)
  lam: float = config.option(5.0, "Ranking Distillation Eq. 8 sharpness lambda (large = uniform).", lo=0,
                             lo_open=True)
  mu: float = config.option(0.1, "Ranking Distillation Eq. 9 sharpness mu.", lo=0, lo_open=True)
  eps: int = config.option(10, "Ranking Distillation Algorithm 1 samples per document.", lo=1)
  warmup: Optional[int] = config.option(None, "Ranking Distillation warm-up epochs with w^a only (default: half "
                                        "the epochs).", lo=0)

  def __post_init__(self):
    config.check(self)

  def loss_settings(self) -> Dict[str, Union[int, float, str]]:
    """The keyword settings of :func:`pfd_jax.ops.topk.topk_loss` and ``topk_weights``."""
    return dict(k=self.k, scheme=self.scheme, lam=self.lam, mu=self.mu, eps=self.eps)


@dataclasses.dataclass(frozen=True)
class TrainConfig:
  """Training hyper-parameters (defaults: the paper's protocol, appendix A.3). Fields with flag=False are
  set by the drivers (which loss a row trains, how its teacher teaches), not by flags."""
  loss: str = config.option("rankbce", "Ranking loss (a name of pfd_jax.ops.losses.REGISTRY).",
                            choices=losses_lib.REGISTRY.names, flag=False)
  loss_params: Tuple[Tuple[str, float], ...] = config.option(
      (), "The loss's hyper-parameters as name=value pairs (approxndcg: temperature; lambdaloss: mu; default: "
      "each loss's own).", parse=parse_params, fmt=format_params, omit_default=True)
  ranknet_pairs: str = config.option("all", "RankNet pairs: all (paper) or positive.", choices=("all", "positive"))
  batch_size: Optional[int] = config.option(None, "Query groups per batch (default: the paper's, 500; RankNet "
                                            "300).", lo=1)
  lr: Optional[float] = config.option(None, "Learning rate (default: the paper's, 1e-3; RankNet 3e-4).", lo=0,
                                      lo_open=True)
  weight_decay: float = config.option(0.005, "Coupled L2 weight decay (as torch Adam(weight_decay=...)).", lo=0)
  lr_halve_every: int = config.option(20, "Halve the learning rate every this many epochs.", lo=1)
  epochs: int = config.option(100, "Training epochs.", lo=1)
  patience: int = config.option(0, "Early stopping: a row's training ends once none of its models has improved its "
                                "select_on NDCG for this many epochs (0 = every epoch; its best epoch is the one a "
                                "full run selects unless a later epoch beats a plateau this long).", lo=0,
                                omit_default=True)
  hidden: int = config.option(100, "Hidden width of the MLP.", lo=1)
  layers: int = config.option(5, "Dense layers of the MLP (layers - 1 hidden ReLU layers).", lo=1)
  # The modern ranker's options (pfd_jax.ops.models.MLP; the paper's model has none of them).
  norm: str = config.option("none", "Normalisation of the input and of every hidden layer: batch (statistics over "
                            "real documents, running statistics for scoring) or layer.", choices=NORMS,
                            omit_default=True)
  dropout: float = config.option(0.0, "Dropout rate after every hidden layer in training.", lo=0, hi=0.9,
                                 omit_default=True)
  noise: float = config.option(0.0, "Std of Gaussian noise on the (normalised) inputs in training.", lo=0,
                               omit_default=True)
  clip: float = config.option(0.0, "Clip the inputs (sign(x) log1p|x| features) to [-clip, clip] (0 = off).", lo=0,
                              omit_default=True)
  input_affine: bool = config.option(True, "With batch norm: a trainable scale and bias on the normalised input.",
                                     omit_default=True)
  matmul_precision: str = config.option(
      DEFAULT_PRECISION, "Precision of the float32 matrix products of training, scoring and export "
      "(pfd_jax.ops.precision): highest = float32 on every platform (a GPU's numbers are a CPU's up to summation "
      "order); tf32 = TF32 on NVIDIA GPUs (faster, 10 mantissa bits); default = JAX's jax_default_matmul_precision "
      "in force. XLA:CPU computes float32 products in float32 whatever is asked.",
      choices=MATMUL_PRECISIONS, omit_default=True)
  tower: int = config.option(0, "The last columns of the model input that feed an additive shallow tower (the "
                             "two-tower position-bias model; set by experiments.related.debias).", lo=0, flag=False,
                             omit_default=True)
  order_stream: int = config.option(0, "The stream of the epochs' step order (the buckets' interleaving, shared by "
                                    "the seeds run side by side): 0 = PRNGKey(epoch) (the paper's runs here); k > 0 = "
                                    "PRNGKey(epoch) folded with k (set per draw by --draws).", lo=0, flag=False,
                                    omit_default=True)
  alpha: float = config.option(0.5, "Eq. 1 weight of the data loss (1 - alpha: the teacher term).", lo=0, hi=1)
  ks: Tuple[int, ...] = config.option((8, 16, 32), "NDCG cut-offs; the first selects the best epoch.", lo=1, flag=False)
  select_on: str = config.option("test", "Best epoch by NDCG@ks[0] on this split (the paper: test).",
                                 choices=("test", "vali"))
  curves: str = config.option("all", "Splits scored after every epoch: all (the per-epoch curves of every split: "
                              "Figure 2, and the paper's test selection beside a validation selection) or select "
                              "(select_on's only, the others once at each model's best epoch: the same best-epoch "
                              "bits, without scoring the other splits every epoch, which large test sets make the "
                              "bulk of an epoch).",
                              choices=("all", "select"), omit_default=True)
  empty_rule: str = config.option("exclude", "Lists without a positive: excluded from means (paper) or zero.",
                                  choices=("exclude", "zero"))
  data_groups: str = config.option("positive", "Groups of the data loss: positive (paper) or all (Table 5).",
                                   choices=("positive", "all"))
  teacher_transform: str = config.option("sigmoid", "Teacher logits -> targets (paper: sigmoid "
                                         "probabilities).", choices=teacher_lib.TRANSFORMS, flag=False)
  teacher_loss: str = config.option("", "The teacher term's loss function ('' = the data loss; topk = Ranking "
                                    "Distillation).", choices=lambda: ("",) + losses_lib.REGISTRY.names() + ("topk",),
                                    flag=False)
  teaching: str = config.option("", "The registered way of teaching the teacher term follows (a name of "
                                "pfd_jax.training.teaching.REGISTRY, set with its overrides by Teaching.apply; '' = "
                                "the one teacher_loss names: top-K, or the plain term).",
                                flag=False, omit_default=True)
  transform_a: float = config.option(1.0, "SDR Eq. 10 affine teacher transform slope a (teaching=listwise).",
                                     lo=0, lo_open=True)
  transform_b: float = config.option(0.0, "SDR Eq. 10 affine teacher transform intercept b (teaching=listwise).")
  temperature: float = config.option(1.0, "Teacher transform temperature T (softmax: SDR section 5.6; sigmoid: "
                                     "sigmoid(t / T)).", lo=0, lo_open=True, flag=False)
  topk: TopK = config.option(TopK(), "Ranking Distillation's top-K teacher loss.")
  seed_batching: str = config.option("vmap", "How the seeds' gradients are computed: vmap (batched; the reproduced "
                             "tables) or loop (one after another: RankNet's 5 seeds 10% faster on CPU, other "
                             "float summation, so not the vmapped run's bits).", choices=("vmap", "loop"))
  mesh: Tuple[Tuple[str, int], ...] = config.option((), "Data-parallel device mesh, e.g. data:4 or seeds:2,data:2 "
                                                     "(default: one device; CPU: "
                                                     "XLA_FLAGS=--xla_force_host_platform_device_count=4).",
                              parse=parse_mesh, fmt=format_mesh)

  def __post_init__(self):
    config.check(self)
    object.__setattr__(self, "mesh", tuple(tuple(p) for p in self.mesh))
    object.__setattr__(self, "loss_params", tuple(sorted((str(n), float(v)) for n, v in self.loss_params)))

  def check_loss(self) -> "TrainConfig":
    """Itself, once its loss_params are checked against its loss's hyper-parameters (ConfigError naming
    loss_params otherwise). Not done on construction: the flags build a TrainConfig before the loss is chosen."""
    try:
      self.make_loss()
    except ValueError as e:
      raise config.ConfigError("loss_params", str(e)) from None
    return self

  def make_loss(self, name: Optional[str] = None) -> Callable:
    """The registered loss `name` (default: this config's loss), called as (scores, labels, mask, *, reduce_fn[,
    key]), with its configuration fields bound and :attr:`loss_params` (the hyper-parameters of this config's loss:
    of the data term, and of the teacher term where it is the same loss); a ValueError names a hyper-parameter the
    loss does not have."""
    spec = losses_lib.REGISTRY[name or self.loss]
    params = dict(self.loss_params) if spec.name == self.loss else {}
    return spec.bind(params, **{f: getattr(self, f) for f in spec.fields.values()})

  def make_transform(self) -> Callable:
    """The teacher-score transform g(t, mask) of :attr:`teacher_transform`, its parameters bound."""
    return teacher_lib.get_transform(self.teacher_transform, a=self.transform_a, b=self.transform_b,
                                    temperature=self.temperature)

  @property
  def arch(self) -> Arch:
    """The scorer's architecture (:class:`pfd_jax.ops.models.Arch`)."""
    return Arch(**{name: getattr(self, name) for name in Arch._fields})  # each option a field of both

  @property
  def effective_batch_size(self) -> int:
    """batch_size, or the paper's for this loss."""
    return self.batch_size or PAPER_BATCH.get(self.loss, PAPER_BATCH_DEFAULT)[0]

  @property
  def effective_lr(self) -> float:
    """lr, or the paper's for this loss."""
    return self.lr or PAPER_BATCH.get(self.loss, PAPER_BATCH_DEFAULT)[1]

  def record(self) -> config.JsonObject:
    """The configuration as results.json records it, with the batch size and learning rate in force."""
    return dict(config.to_dict(self), batch_size=self.effective_batch_size, lr=self.effective_lr)
