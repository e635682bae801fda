"""Registries: one ordered table per extension point (losses, rows, datasets), each entry declared once, where
it is defined, and read by everything that needs it (flags, checks, tables, saved models).

A new loss, row or dataset is one ``register(...)`` call, from this package or from a user's own module::

  from pfd_jax.ops import losses
  losses.REGISTRY.register(losses.Loss("my_loss", my_loss_fn, params={"scale": 1.0}))
  # a driver run from the same script sees it: lifecycle.main(table2.DRIVER) -> --loss=my_loss --loss_params=scale=2

A configuration field whose choices are a registry's (``option(..., choices=REGISTRY.names)``) accepts what is
registered when it is checked, so entries registered after the configuration classes were defined are flags and
values like any other.
"""
from __future__ import annotations

from typing import Dict, Generic, Iterator, Mapping, Tuple, TypeVar

T = TypeVar("T")


class Registry(Mapping[str, T], Generic[T]):
  """An ordered mapping name -> entry (entries have a ``name``), filled by :meth:`register`."""

  def __init__(self, kind: str):
    self.kind = kind
    self._entries: Dict[str, T] = {}

  def register(self, entry: T, *, replace: bool = False) -> T:
    """Adds `entry` under ``entry.name`` (after the entries registered before it) and returns it. A name
    registered already is an error unless `replace` (then the entry keeps its place)."""
    name = entry.name
    if name in self._entries and not replace:
      raise ValueError(f"{self.kind} {name!r} is registered already (pass replace=True to redefine it)")
    self._entries[name] = entry
    return entry

  def unregister(self, name: str) -> T:
    """Removes and returns the entry `name` (a test's temporary entry)."""
    return self._entries.pop(name)

  def names(self) -> Tuple[str, ...]:
    """The registered names, in order (a configuration field's ``choices``)."""
    return tuple(self._entries)

  def __getitem__(self, name: str) -> T:
    try:
      return self._entries[name]
    except KeyError:
      raise KeyError(f"unknown {self.kind} {name!r}; known: {', '.join(self._entries)}") from None

  def __iter__(self) -> Iterator[str]:
    return iter(self._entries)

  def __len__(self) -> int:
    return len(self._entries)
