"""A claim as declared, once, before any run: for the driver whose runs state it, by the driver's name
(:mod:`experiments.page.judged`) or, for Table 2, by the row it is about
(:class:`pfd_jax.methods.rows.RowClaim`). A run judges each claim through its declaration (:meth:`Declared.judged`),
so its form, margin and source are the declared ones; the page's family lists claims by id and reads the rest from
here (:mod:`experiments.page.family`). Its verdict is :mod:`experiments.page.claims`' work."""
from __future__ import annotations

from typing import Any, Callable, Dict, NamedTuple, Optional

from experiments.page.claims import Claim

TESTED = ("superiority", "non-inferiority", "equivalence")  # the forms a builder is told (the others it computes)


class DeclarationError(Exception):
  """A claim judged in another form or margin than its declaration says."""


class Declared(NamedTuple):
  """A claim's declaration: its id ('<driver>:<what>': what the family and the other runs that state the same claim
  know it by, whatever its words), its words, form, margin and source ('' = ours)."""
  id: str
  text: str
  form: str = "superiority"
  margin: float = 0.0
  source: str = ""

  def judged(self, build: Callable[..., Optional[Claim]], *args, **kw) -> Optional[Claim]:
    """build(text, *args, source=, **kw) (beats, sweep, claim, trend, shape, check), told the declared form and
    margin where the builder tests one: the claim with this id, or None when a row it needs is absent."""
    terms = dict(form=self.form, margin=self.margin) if self.form in TESTED else {}
    c = build(self.text, *args, source=self.source, **terms, **kw)
    if c is not None and (c.form, c.margin) != (self.form, self.margin):
      raise DeclarationError(f"{self.id} is declared {self.form}, margin {self.margin:g}; its builder judged it "
                             f"{c.form}, margin {c.margin:g}")
    return None if c is None else c._replace(id=self.id)


def declare(*declared: Declared) -> Dict[str, Declared]:
  """{id: declaration} of a driver's claims, in order; an id declared twice is an error."""
  out = {d.id: d for d in declared}
  if len(out) != len(declared):
    raise DeclarationError(f"a claim id declared twice: {sorted(d.id for d in declared)}")
  return out


def row_claim(loss: str, row: str, versus: str) -> str:
  """The id of table2's claim about `row` against `versus` under `loss` (pfd_jax.methods.rows.Row.claims)."""
  return f"table2:{loss}:{row}-vs-{versus}"


def row_declared(loss: str, row: str, c: Any) -> Declared:
  """Table 2's claim `c` (a :class:`pfd_jax.methods.rows.RowClaim`, the row's declaration) about `row` under
  `loss`: its id (:func:`row_claim`), its words after the loss."""
  return Declared(row_claim(loss, row, c.versus), f"[{loss}] {c.text}", c.form, c.margin, c.source)
