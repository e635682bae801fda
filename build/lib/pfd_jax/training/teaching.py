"""How a teacher teaches: Eq. 1's teacher term as one value, :class:`Teaching`, and the registry of the ways a run
may choose (``--teaching``).

A teaching is what the student's teacher term needs besides the student's scores:

* ``overrides``: the TrainConfig fields it sets (the term's loss, the transform of the teacher's logits and its
  parameters), applied by :meth:`Teaching.apply`;
* ``targets(cfg, logits, labels, mask)``: what the term consumes, from the teacher's logits [S, (K,) Q, L] (the
  paper's: sigmoid probabilities; SDR's: max(a t + b, 0); Ranking Distillation's: the teacher's top-K ranks);
* ``loss(cfg, key, labels, phase)``: the term's loss, called like a registered loss (scores, targets, mask,
  reduce_fn=...); key: the step's random key, labels: the batch's, phase: :attr:`phase`'s value this epoch;
* ``phase(cfg, epoch)``: state the term reads each epoch as a traced value (Ranking Distillation's warm-up is over),
  so that a schedule never recompiles the step.

The built-in ways: ``pointwise`` and ``pairwise`` (the paper's PFD with RankBCE / RankNet on sigmoid(t)),
``listwise`` (SDR Eq. 8, 10) and ``topk`` (Ranking Distillation). A new way is one registered value::

  from pfd_jax.training import teaching
  teaching.REGISTRY.register(teaching.Teaching("softened", "PFD, softened (sigmoid(t / 2))",
                                               overrides=(("temperature", 2.0),)))
  # --teaching=softened: the student's loss against sigmoid(t / 2)

A run's TrainConfig names its teaching (``teaching``, set by :meth:`Teaching.apply` with its overrides); one that
names none is found by :func:`of` through ``teacher_loss`` (a teaching with a term of its own, e.g. ``topk``) or
teaches with the plain term (the configured transform of the logits and the registered loss ``teacher_loss``, or
the data loss).
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Tuple, Union

import jax.numpy as jnp

from pfd_jax.registry import Registry, resolve

if TYPE_CHECKING:
  from pfd_jax.training.config import TrainConfig


def transform_targets(cfg: TrainConfig, logits, labels, mask):
  """The plain targets: the configured transform g of the teacher's logits (TrainConfig.teacher_transform)."""
  return cfg.make_transform()(logits, mask)


def registered_loss(cfg: TrainConfig, key, labels, phase) -> Callable:
  """The plain term's loss: the registered loss ``teacher_loss`` (or the data loss), hyper-parameters bound."""
  return cfg.make_loss(cfg.teacher_loss or cfg.loss)


def always(cfg: TrainConfig, epoch: int) -> bool:
  """A term without a schedule."""
  return True


@dataclasses.dataclass(frozen=True)
class Teaching:
  """One way a teacher teaches (see the module docstring). term: the name of its own term for TrainConfig's
  ``teacher_loss`` ('' = the plain term, named by a registered loss); title: its name in tables."""
  name: str
  title: str = ""
  overrides: Tuple[Tuple[str, Any], ...] = ()
  targets: Union[str, Callable] = transform_targets
  loss: Union[str, Callable] = registered_loss
  phase: Union[str, Callable] = always
  term: str = ""

  def part(self, which: str) -> Callable:
    """Its function `which` ('targets', 'loss' or 'phase'), an import path ``module:function`` imported (the
    built-in top-K teaching's live with its loss, :mod:`pfd_jax.ops.topk`)."""
    return resolve(getattr(self, which))

  def apply(self, cfg: TrainConfig) -> TrainConfig:
    """`cfg` taught this way (its overrides set, and its name: TrainConfig.teaching)."""
    return dataclasses.replace(cfg, teaching=self.name, **dict(self.overrides))


# The plain term: the configured transform and the registered loss (a configuration no teaching named).
PLAIN = Teaching("plain")

REGISTRY: Registry[Teaching] = Registry("teaching")
for _teaching in (
    Teaching("pointwise", "PFD, pointwise (RankBCE on sigmoid t)",
             (("teacher_loss", "rankbce"), ("teacher_transform", "sigmoid"))),
    Teaching("pairwise", "PFD, pairwise (RankNet on sigmoid t)",
             (("teacher_loss", "ranknet"), ("teacher_transform", "sigmoid"))),
    Teaching("listwise", "PFD, listwise (SDR softmax on max(a t + b, 0))",
             (("teacher_loss", "softmax"), ("teacher_transform", "affine"))),
    Teaching("topk", "PFD, top-K (Ranking Distillation)", (("teacher_loss", "topk"),),
             targets="pfd_jax.ops.topk:teaching_targets", loss="pfd_jax.ops.topk:teaching_loss",
             phase="pfd_jax.ops.topk:teaching_phase", term="topk")):
  REGISTRY.register(_teaching)


def terms() -> Tuple[str, ...]:
  """The names of the registered teachings' own terms (values of TrainConfig.teacher_loss besides the losses)."""
  return tuple(t.term for t in REGISTRY.values() if t.term)


def of(cfg: TrainConfig) -> Teaching:
  """The teaching a configuration trains with: the registered one it names (TrainConfig.teaching), else the one
  whose own term its teacher_loss names, else :data:`PLAIN`."""
  if cfg.teaching:
    return REGISTRY[cfg.teaching]
  return next((t for t in REGISTRY.values() if t.term and t.term == cfg.teacher_loss), PLAIN)


def teacher_inputs(cfg: TrainConfig, logits, bucket: Mapping[str, Any]):
  """What the teacher term consumes for one bucket, from teacher logits [S, (K,) Q, L]."""
  return of(cfg).part("targets")(cfg, logits, jnp.asarray(bucket["y"]), jnp.asarray(bucket["mask"]))


def teacher_term(cfg: TrainConfig, key, labels, phase: Optional[Any]) -> Callable:
  """The teacher term's loss for one step, called like a loss of :mod:`pfd_jax.ops.losses` (scores, targets,
  mask)."""
  return of(cfg).part("loss")(cfg, key, labels, phase)
