"""Typed configuration: each setting defined once, with its type, default, allowed values and help.

A setting is a field of a frozen dataclass declared with :func:`option`: the default, one line of help,
and optionally its choices or bounds. Checking (:func:`check`) runs when the object is built, so a bad
value fails before any data is loaded, as a :class:`ConfigError` naming the field. The experiment drivers
generate their absl flags from these fields (``experiments/framework/cli.py``), so a flag, its default, its
help and its check are the field's: a new setting is one new field.

The configurations: :class:`pfd_jax.data.config.DataConfig` (the data recipe),
:class:`pfd_jax.training.config.TrainConfig` (the training hyper-parameters) with its
:class:`~pfd_jax.training.config.TopK` (the top-K teacher loss), and the drivers' run settings
(``experiments.framework.schema.RunConfig``). This module imports nothing of the project.
"""
from __future__ import annotations

import dataclasses
import math
import typing
from typing import Any, Dict, Mapping, Optional, Sequence

# A JSON object as read or written (a configuration, a recipe, a results file): named keys, values of any JSON
# type. The name says what a dict is where its values have no single type.
JsonObject = Dict[str, Any]


class ConfigError(ValueError):
  """A bad configuration value; `field` names the setting (the flag of the same name)."""

  def __init__(self, field: str, message: str):
    self.field = field
    super().__init__(f"{field}: {message}")


def option(default, help: str, *, choices: Optional[Sequence] = None, lo=None, hi=None, lo_open: bool = False,
           flag: bool = True, parse=None, fmt=None, omit_default: bool = False, same_numbers: bool = False):
  """A configuration field: default, help, and the checks of :func:`check`.

  choices: allowed values (of each element for a tuple field), or a function returning them (a registry's
  ``names``: read at each check, so entries registered later count); lo / hi: inclusive bounds (lo_open: lo
  excluded); floats must be finite. flag=False keeps a field out of the generated flags (set by code).
  parse / fmt: text <-> value for fields whose flag text is not a plain scalar or comma list.
  omit_default: :func:`to_dict` leaves the field out while it holds its default. For a setting added after
  results were first recorded, off by default: a run that does not use it records exactly what it recorded
  before the setting existed (same results file, same run folder hash), and :func:`from_dict` fills it back in.
  same_numbers: the setting changes how a run is computed, never its numbers (tested bit for bit): a run made
  with another value of it is no other run (:func:`same_numbers`).
  """
  meta = dict(help=help, choices=tuple(choices) if choices is not None and not callable(choices) else choices, lo=lo, hi=hi, lo_open=lo_open,
              flag=flag, parse=parse, fmt=fmt, omit_default=omit_default, same_numbers=same_numbers)
  if isinstance(default, (list, dict, set)):
    raise TypeError("mutable default; use a tuple")
  return dataclasses.field(default=default, metadata=meta)


def _check_value(name: str, value, meta: Mapping[str, Any]) -> None:
  if isinstance(value, float) and not math.isfinite(value):
    raise ConfigError(name, f"must be finite, got {value}")
  choices = choices_of(meta)
  if choices is not None and value not in choices:
    raise ConfigError(name, f"{value!r} is not one of {', '.join(map(str, choices))}")
  lo, hi = meta.get("lo"), meta.get("hi")
  if isinstance(value, (int, float)) and not isinstance(value, bool):
    if lo is not None and (value < lo or (meta.get("lo_open") and value == lo)):
      raise ConfigError(name, f"must be {'>' if meta.get('lo_open') else '>='} {lo}, got {value}")
    if hi is not None and value > hi:
      raise ConfigError(name, f"must be <= {hi}, got {value}")


def choices_of(meta: Mapping[str, Any]) -> Optional[tuple]:
  """A field's allowed values now (a registry's names are read at each call)."""
  choices = meta.get("choices")
  return tuple(choices()) if callable(choices) else choices


def check(obj) -> None:
  """Checks every :func:`option` field of a dataclass instance (elements of tuple fields one by one)."""
  for f in dataclasses.fields(obj):
    if "help" not in f.metadata:
      continue
    value = getattr(obj, f.name)
    if value is None:
      continue
    for v in (value if isinstance(value, tuple) and f.metadata.get("parse") is None else (value,)):
      _check_value(f.name, v, f.metadata)


def same_numbers(obj) -> frozenset:
  """The fields of a configuration (class or instance; anything else has none) declared same_numbers
  (:func:`option`)."""
  if not dataclasses.is_dataclass(obj):
    return frozenset()
  return frozenset(f.name for f in dataclasses.fields(obj) if f.metadata.get("same_numbers"))


def to_dict(obj) -> JsonObject:
  """A configuration as plain data (nested dataclasses as dicts), less the omit_default fields at their
  default (:func:`option`)."""
  return _prune(obj, dataclasses.asdict(obj))


def _prune(obj, d: JsonObject) -> JsonObject:
  for f in dataclasses.fields(obj):
    value = getattr(obj, f.name)
    if f.metadata.get("omit_default") and value == f.default:
      del d[f.name]
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
      _prune(value, d[f.name])
  return d


def from_dict(cls, d: JsonObject, **nested):
  """The instance of dataclass `cls` that :func:`to_dict` wrote (lists back to tuples, nested dataclasses
  rebuilt; `nested` gives the class of fields typed ``Any``)."""
  hints = typing.get_type_hints(cls)
  kw = {}
  for f in dataclasses.fields(cls):
    if f.name not in d:
      continue
    v = d[f.name]
    t = nested.get(f.name) or hints[f.name]
    kw[f.name] = _rebuild(t, v)
  return cls(**kw)


def _rebuild(t, v):
  if v is None:
    return None
  if dataclasses.is_dataclass(t):
    return from_dict(t, v)
  if isinstance(v, list):
    return tuple(_rebuild(Any, x) for x in v)
  return v
