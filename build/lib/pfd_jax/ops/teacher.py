r"""Eq. 1's teacher term: the registered teacher-score transforms g(t) (the paper's sigmoid, SDR's affine and
softmax) and the mixture of the data and teacher terms, over padded lists as every loss of
:mod:`pfd_jax.ops.losses` (a list with no real document contributes exactly 0).
"""
from __future__ import annotations

import functools
from typing import Callable, Mapping, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp

from pfd_jax.ops.lists import ReduceFn, real, reduce_lists
from pfd_jax.registry import Registry

# ---------------------------------------------------------------- teacher-score transforms

def transform_identity(t, mask=None):
  """Teacher scores as they are."""
  return t


def transform_sigmoid(t, mask=None, *, temperature: float = 1.0):
  """sigma(t / T): teacher logits -> probabilities in [0, 1] (the paper's soft labels for RankBCE/RankNet at
  T = 1; T > 1 softens a confident teacher's targets towards 1/2, the PFD search's softening)."""
  return jax.nn.sigmoid(t / temperature if temperature != 1.0 else t)


def transform_affine(t, mask=None, *, a: float = 1.0, b: float = 0.0):
  """SDR Eq. 10: max(a * t + b, 0), non-negative labels for the listwise softmax loss."""
  return jnp.maximum(a * t + b, 0.0)


def transform_softmax(t, mask=None, *, temperature: float = 1.0):
  """exp(t_i / T) / sum_j exp(t_j / T) over the real documents of each list (SDR section 5.6)."""
  m = real(t, mask)
  return jnp.where(m, jax.nn.softmax(jnp.where(m, t / temperature, -jnp.inf), axis=-1), 0.0)


class Transform(NamedTuple):
  """A registered teacher-score transform g(t, mask): its function, its keywords (from TrainConfig's transform_a /
  transform_b as a / b, and temperature; one at its `neutral` value is not bound) and a check of their values."""
  name: str
  fn: Callable
  params: Tuple[str, ...] = ()
  neutral: Mapping[str, float] = {}
  check: Callable = lambda **kw: ""

  def bind(self, **values) -> Callable:
    """g(t, mask) with :attr:`params` bound from `values`; ValueError when the check refuses them."""
    kw = {k: values[k] for k in self.params}
    if problem := self.check(**kw):
      raise ValueError(f"{self.name} transform needs {problem}")
    kw = {k: v for k, v in kw.items() if k not in self.neutral or v != self.neutral[k]}
    return functools.partial(self.fn, **kw) if kw else self.fn


_positive_temperature = lambda temperature: "" if temperature > 0 else f"temperature > 0, got {temperature}"
TRANSFORM_REGISTRY: Registry[Transform] = Registry("teacher transform")
for _transform in (Transform("sigmoid", transform_sigmoid, ("temperature",), {"temperature": 1.0},
                             _positive_temperature), Transform("identity", transform_identity),
                   Transform("affine", transform_affine, ("a", "b"),
                             check=lambda a, b: "" if a > 0 else f"slope a > 0 (SDR Eq. 10), got {a}"),
                   Transform("softmax", transform_softmax, ("temperature",), check=_positive_temperature)):
  TRANSFORM_REGISTRY.register(_transform)
TRANSFORMS = TRANSFORM_REGISTRY.names


def get_transform(name: str, *, a: float = 1.0, b: float = 0.0, temperature: float = 1.0) -> Callable:
  """The teacher-score transform g(t, mask) called `name` (of :data:`TRANSFORM_REGISTRY`), parameters bound."""
  if name not in TRANSFORM_REGISTRY:
    raise ValueError(f"unknown teacher transform {name!r}; known: {', '.join(TRANSFORM_REGISTRY)}")
  return TRANSFORM_REGISTRY[name].bind(a=a, b=b, temperature=temperature)


# ---------------------------------------------------------------- Eq. 1

def distillation_terms(loss_fn: Callable, scores, labels, teacher_targets, mask=None, *,
                       data_weight=None, teacher_loss_fn: Optional[Callable] = None):
  r"""Per-list data and teacher terms of Eq. 1, before alpha.

  Args:
    loss_fn: a loss above (called with ``reduce_fn=None``).
    scores, labels, mask: ``[..., L]``.
    teacher_targets: ``[..., L]`` for one teacher or ``[K, ..., L]`` for K teachers (multi-teacher PFD:
      the teacher term is the mean over teachers).
    data_weight: ``[...]`` weight of each list in the data term; the paper restricts the data loss to
      positive query groups, i.e. ``data_weight = any(y == 1)``. None = 1.
    teacher_loss_fn: the loss of the teacher term, called like `loss_fn` (None = `loss_fn`): SDR's
      listwise softmax or MSE, or Ranking Distillation's top-K loss, under another data loss.
  Returns:
    ``(data [...], teacher [...])``.
  """
  data = loss_fn(scores, labels, mask, reduce_fn=None)
  if data_weight is not None:
    data = data * data_weight
  t_fn = loss_fn if teacher_loss_fn is None else teacher_loss_fn
  if teacher_targets.ndim == scores.ndim:
    teacher = t_fn(scores, teacher_targets, mask, reduce_fn=None)
  else:
    teacher = jnp.mean(jax.vmap(lambda t: t_fn(scores, t, mask, reduce_fn=None))(teacher_targets), 0)
  return data, teacher


def distillation_loss(loss_fn: Callable, scores, labels, teacher_targets, mask=None, *, alpha: float = 0.5,
                      data_weight=None, teacher_loss_fn: Optional[Callable] = None,
                      reduce_fn: ReduceFn = jnp.sum):
  r"""Eq. 1: :math:`\alpha \sum_{S_{label}} l(f, y) + (1 - \alpha) \sum_{S_{all}} l(f, g)`, per list then reduced.

  See :func:`distillation_terms` for the arguments; alpha = 1 is training on data alone.
  """
  data, teacher = distillation_terms(loss_fn, scores, labels, teacher_targets, mask, data_weight=data_weight,
                                     teacher_loss_fn=teacher_loss_fn)
  return reduce_lists(alpha * data + (1.0 - alpha) * teacher, reduce_fn)
