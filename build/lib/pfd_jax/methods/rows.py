"""The row registry: one typed description per trained row of the tables, read by everything that needs a row (the
training, table2's table, claims and plots, the paired comparisons, the deploy choice, Figure 4, the power study, the
resume store and the saved models).

A row is two things kept apart: its :class:`Recipe`, how it trains (its view, teacher, configuration overrides and
training function, bound as values), and the rest of its :class:`Row`, how a run presents and compares it (title,
columns, notes, claims) and when a run trains it. A new row is one :class:`Row` registered here or from the user's
own module; a new kind of training is one new function (``train(ctx, row, done) -> Trained``,
:mod:`pfd_jax.methods.distill`), never a branch. An MLP row (the default recipe,
:func:`pfd_jax.methods.distill.train_mlp`) trains on data (no ``teacher``), or as a student of the row named by
``teacher`` (Eq. 1), with its own configuration overrides; for example a PFD student with more weight on its
teacher::

  from pfd_jax.methods import rows
  rows.REGISTRY.register(rows.Row("pfd_alpha02", "PFD student, alpha 0.2",
                                  recipe=rows.Recipe(teacher="pfd_teacher", overrides=(("alpha", 0.2),)),
                                  claims=(("pfd", "PFD student at alpha 0.2 beats PFD at alpha 0.5"),)))
  # then, in the same script: from experiments import table2; from experiments.framework import lifecycle
  # lifecycle.main(table2.DRIVER)     ->  python my_rows.py --methods=pfd,pfd_alpha02

A LightGBM row's recipe names ``train="pfd_jax.methods.gbdt:train_lightgbm"`` (or a student's function) and
``one_process=True``; a debiasing row has ``when=("position",)`` (trained when the run names a position column) and
its function (``pfd_jax.methods.distill:train_served``, ``...:train_ips``, ...). A recipe names its function by
import path (``module:function``, resolved when it trains: big_vision's way, so this registry imports no training
code) or gives the function itself, with keyword arguments bound by ``train_args``.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple, TypedDict, Union

from pfd_jax.registry import Registry, resolve

_D, _G, _S = "pfd_jax.methods.distill", "pfd_jax.methods.gbdt", "pfd_jax.methods.search"  # the built-in functions


class RowClaim(NamedTuple):
  """A claim about a row against another, declared before any run (experiments.framework.claims): its form
  (superiority, non-inferiority, equivalence), relative margin and source (the paper that makes it; '' = ours,
  exploratory)."""
  versus: str
  text: str
  form: str = "superiority"
  margin: float = 0.0
  source: str = ""


class RowDescription(TypedDict):
  """What a run records of a row (:meth:`Row.record`; provenance.json's registered rows)."""
  title: str
  short: str
  view: str
  teacher: Optional[str]
  overrides: List[list]
  claims: List[Dict[str, Any]]


@dataclasses.dataclass(frozen=True)
class Recipe:
  """How a row trains, bound as values (a row's presentation is :class:`Row`'s): everything its training function
  reads of it besides its name.

  view: its model input (:func:`pfd_jax.ops.scoring.features`; ``{position}``: the run's position column); teacher:
  the row whose model teaches it (None: trained on data alone); overrides: TrainConfig fields it sets ((field, value)
  pairs: its loss, teaching, alpha, ...; its saved model records them); train: its training function, an import path
  ``module:function`` or the function (``train(ctx, row, done) -> Trained``, :mod:`pfd_jax.methods.distill`);
  train_args: keywords bound to it; placebo: it reads the placebo copy of the data (privileged rows permuted);
  privileged: it reads privileged features through teachers of its own (not rows); one_process: it needs the whole
  training split in one process (LightGBM)."""
  view: str = "x"
  teacher: Optional[str] = None
  overrides: Tuple[Tuple[str, Any], ...] = ()
  train: Union[str, Callable] = f"{_D}:train_mlp"
  train_args: Tuple[Tuple[str, Any], ...] = ()
  placebo: bool = False
  privileged: bool = False
  one_process: bool = False

  @property
  def trainer(self) -> Callable:
    """Its training function, resolved (an import path imported) with :attr:`train_args` bound."""
    fn = resolve(self.train)
    return functools.partial(fn, **dict(self.train_args)) if self.train_args else fn

  def config(self, cfg):
    """Its training configuration: `cfg` (a TrainConfig) with its overrides."""
    return dataclasses.replace(cfg, **dict(self.overrides)) if self.overrides else cfg

  @property
  def distilled(self) -> bool:
    """It learns from a teacher (its teacher row's, or teachers of its own)."""
    return self.teacher is not None or self.privileged

  @property
  def permuted(self) -> bool:
    """It reads the placebo's permuted privileged features (in no file: scored on the placebo data only)."""
    return self.placebo and self.view != "x"


@dataclasses.dataclass(frozen=True)
class Row:
  """One trained row: its name, its :class:`Recipe` (how it trains) and how a run presents and compares it.

  name: its key (results.json, the resume store, saved models' folders); title: its name in tables and plots;
  short: its name inside a sentence (default: the title); recipe: how it trains; method: the --methods choice that
  trains it ('' = its name; None = a teacher, trained when a student needs it); when: the options of a run that add
  it, not a --methods choice ('position': a position column; 'randomized': randomised lists; 'lightgbm': the run
  trains LightGBM rows; 'search': the PFD search); baseline: the row every run trains and compares with; primary:
  the row the paper is about (the power study and the page's notes compare it with the rows its claims name);
  versus: a table column compares other rows with this one ('students': every row but the teachers, the placebo
  control; 'lightgbm': the LightGBM rows; 'every': all, the incumbent), and column_note is its paragraph on the page
  (format fields: k, select_on, within); servable: a service can run it (a file holds its inputs); claims: the run's
  claims about it against other rows (:class:`RowClaim`, or plain (versus, text) pairs: superiority, ours)."""
  name: str
  title: str
  short: str = ""
  recipe: Recipe = Recipe()
  method: Optional[str] = ""
  when: Tuple[str, ...] = ()
  baseline: bool = False
  primary: bool = False
  versus: str = ""
  column_note: str = ""
  servable: bool = True
  claims: Tuple[Any, ...] = ()

  @property
  def row_claims(self) -> Tuple["RowClaim", ...]:
    return tuple(c if isinstance(c, RowClaim) else RowClaim(*c) for c in self.claims)

  @property
  def label(self) -> str:
    """Its name inside a sentence."""
    return self.short or self.title

  @property
  def is_teacher(self) -> bool:
    return self.method is None

  def viewing(self, view: str) -> "Row":
    """The row with its recipe's view set to `view` (a run's position column filled in)."""
    return dataclasses.replace(self, recipe=dataclasses.replace(self.recipe, view=view))

  def compares(self, name: str) -> bool:
    """Whether this row's column (:attr:`versus`) compares the row `name` (a name not registered: a student)."""
    other = REGISTRY.get(name)
    return name != self.name and _VERSUS[self.versus](other)

  @property
  def choice(self) -> Optional[str]:
    """The --methods value that trains it (None for a teacher)."""
    return None if self.method is None else (self.method or self.name)

  def record(self) -> "RowDescription":
    """What a run records of the row (provenance.json's ``registered``): its title, view, teacher, overrides and
    claims, so that a page built in another process reads them without the module that registered it."""
    r = self.recipe
    return dict(title=self.title, short=self.label, view=r.view, teacher=r.teacher,
                overrides=[list(o) for o in r.overrides], claims=[c._asdict() for c in self.row_claims])


REGISTRY: Registry[Row] = Registry("row")

# What a row's column compares (Row.versus), in the tables' column order.
_VERSUS = {"students": lambda r: r is None or not r.is_teacher,
           "lightgbm": lambda r: r is not None and r.recipe.one_process,
           "every": lambda r: True}

_PAPER = "(paper, Table 2)"
_PFD = "PFD"  # the main paper as a claim's source (experiments.framework.claims.PFD)
for _row in (
    # The paper's rows (sections 3.1-3.2) and the placebo control, in the tables' order.
    Row("no_distill", "No-distillation", "no-distillation", baseline=True),
    Row("self_distill", "Self-distillation", "self-distillation", recipe=Recipe(teacher="no_distill"),
        claims=(
            RowClaim("no_distill", "Self-distillation is within ±1% of no-distillation (ours: the paper's Table 2 "
                     "shows it within about 1%, and states no claim)", "equivalence", 0.01),)),
    Row("gend_teacher", "GenD teacher*", recipe=Recipe(view="z"), method=None),
    Row("gend", "GenD student", recipe=Recipe(teacher="gend_teacher")),
    Row("pfd_teacher", "PFD teacher*", recipe=Recipe(view="xz"), method=None),
    Row("pfd", "PFD student", recipe=Recipe(teacher="pfd_teacher"), primary=True, versus="lightgbm", claims=(
        RowClaim("no_distill", f"PFD student beats no-distillation {_PAPER}", source=_PFD),
        RowClaim("self_distill", f"PFD student beats self-distillation {_PAPER}", source=_PFD),
        # "PFD has the best performance on all evaluated settings" (Table 2's caption): better than GenD, no margin
        RowClaim("gend", f"PFD student beats the GenD student {_PAPER}", source=_PFD),
        ("placebo", "PFD student beats the placebo student: the gain is the privileged information (control)"),
        ("lambdamart", "PFD student beats LambdaMART, the incumbent"))),
    # the placebo teacher reads permuted privileged features, which no file has: never saved as a model
    Row("placebo_teacher", "Placebo teacher (z permuted)", "placebo teacher", recipe=Recipe(view="xz", placebo=True),
        method=None, servable=False),
    Row("placebo", "Placebo student", "placebo student", recipe=Recipe(teacher="placebo_teacher", placebo=True),
        versus="students",
        column_note="Placebo rows: the PFD teacher and student with the privileged rows permuted {within} (every value "
        "kept, the link to the label broken); 'vs placebo student' pairs runs by (fold, seed): the PFD student's "
        "column is the gain of the privileged information beyond distillation as regularisation.\n\n"),
    # PFD searched on validation (pfd_jax.methods.search; table2 --search): its own teachers, one per subset
    Row("pfd_searched", "PFD, searched on validation", "the searched PFD student",
        recipe=Recipe(train=f"{_S}:train_row", privileged=True), when=("search",), claims=(
            RowClaim("no_distill", "PFD searched on validation is no worse than no-distillation (within 1%)",
                     "non-inferiority", 0.01),
            ("pfd", "PFD searched on validation beats plain PFD"),
            ("lambdamart", "PFD searched on validation beats LambdaMART, the incumbent"))),
    # LightGBM (pfd_jax.methods.gbdt) and distillation across model families
    Row("lambdamart", "LambdaMART", recipe=Recipe(train=f"{_G}:train_lightgbm", one_process=True), versus="every",
        column_note="LightGBM rows (`pfd_jax.methods.gbdt`): early-stopped on NDCG@{k} of {select_on}. 'vs PFD "
        "student' and 'vs LambdaMART' pair runs by fold and seed index (a LightGBM seed shares no random numbers with "
        "an MLP seed, so across model families the pairing is by fold only).\n\n"),
    Row("lambdamart_teacher", "LambdaMART teacher*",
        recipe=Recipe(view="xz", train=f"{_G}:train_lightgbm", one_process=True), method=None),
    Row("pfd_from_lambdamart", "PFD student (LambdaMART teacher)",
        recipe=Recipe(teacher="lambdamart_teacher", train=f"{_D}:train_mlp_from_lightgbm", one_process=True)),
    Row("gbdt_xent_from_pfd", "GBDT student, cross-entropy (PFD teacher)",
        recipe=Recipe(teacher="pfd_teacher", train=f"{_G}:train_lightgbm_student",
                      train_args=(("objective", "cross_entropy"),), one_process=True),
        method="gbdt_from_pfd",
        claims=(("lambdamart", "GBDT student of the PFD teacher beats LambdaMART (cross-family)"),)),
    Row("lambdamart_from_pfd", "LambdaMART student, teacher grades (PFD teacher)",
        recipe=Recipe(teacher="pfd_teacher", train=f"{_G}:train_lightgbm_student", train_args=(("as_grades", True),),
                      one_process=True),
        method="gbdt_from_pfd"),
    # The debiasing rows of table2 --position (pfd_jax.methods.debias): judged on the file's labels.
    Row("position_feature", "Position as a feature, served at position 1",
        recipe=Recipe(view="xz:{position}", train=f"{_D}:train_served"), when=("position",), servable=False),
    Row("two_tower", "Two-tower (additive position tower), served at position 1",
        recipe=Recipe(view="xz:{position}", overrides=(("tower", 1),), train=f"{_D}:train_served"),
        when=("position",), servable=False),
    Row("ips_randomized", "IPS, propensities from randomised lists",
        recipe=Recipe(train=f"{_D}:train_ips", train_args=(("propensities", "randomized"),)),
        when=("position", "randomized")),
    Row("ips_em", "IPS, regression-EM propensities",
        recipe=Recipe(train=f"{_D}:train_ips", train_args=(("propensities", "em"),)), when=("position",)),
    Row("pfd_position_teacher", "PFD teacher* (x + position)", recipe=Recipe(view="xz:{position}"), method=None,
        when=("position",)),
    Row("pfd_position", "PFD(position) student", recipe=Recipe(teacher="pfd_position_teacher"), when=("position",),
        claims=(
            ("ips_em", "PFD(position) student beats IPS with regression-EM propensities (--position; logged labels)"),
            ("position_feature", "PFD(position) student beats position-aware learning (--position; logged labels)"))),
    Row("pfd_position_top", "PFD(position) student, taught at position 1",
        recipe=Recipe(teacher="pfd_position_teacher", train=f"{_D}:train_mlp", train_args=(("at_top", True),)),
        when=("position",)),
    Row("lambdamart_position", "LambdaMART + LightGBM position-bias model",
        recipe=Recipe(train=f"{_G}:train_lightgbm", train_args=(("position_bias", True),), one_process=True),
        when=("position", "lightgbm")),
):
  REGISTRY.register(_row)


def methods(one_process: bool = True) -> Tuple[str, ...]:
  """The --methods choices, in order: every registered row's that no run option adds (no_distill is the baseline
  every run trains); one_process=False: only those a multi-process run can train (no LightGBM)."""
  out = []
  for r in REGISTRY.values():
    if r.choice and not r.when and (one_process or not r.recipe.one_process) and r.choice not in out:
      out.append(r.choice)
  return tuple(out)


def plan(choices: Sequence[str], offered: Sequence[str] = (), students: bool = True,
         baseline: bool = True) -> Tuple[Row, ...]:
  """The rows a run trains for the --methods `choices` and the run options it `offered` (see :attr:`Row.when`):
  the rows of each choice, the baseline, the rows whose options are all offered ('lightgbm' is offered when a
  chosen row needs one process), and the teachers they need (their teachers' teachers too), in registry order (a
  teacher before its students). students=False: the baseline and those teachers only (a calibration that must
  read no student); baseline=False: the baseline only where a choice needs it (a deciding run whose claims against
  it are decided). A ValueError names an unknown choice."""
  known = methods()
  bad = [c for c in choices if c not in known]
  if bad:
    raise ValueError(f"unknown methods {bad}; known: {known}")
  wanted = {r.name for r in REGISTRY.values()
            if (r.choice in set(choices) and not r.when) or (r.baseline and baseline)}
  offered = set(offered) | ({"lightgbm"} if any(REGISTRY[n].recipe.one_process for n in wanted) else set())
  wanted |= {r.name for r in REGISTRY.values() if r.when and set(r.when) <= offered}
  for name in list(wanted):
    while (teacher := REGISTRY[name].recipe.teacher) is not None:
      wanted.add(teacher)
      name = teacher
  return tuple(r for r in REGISTRY.values() if r.name in wanted and (students or r.baseline or r.is_teacher))


def uses_privileged(name: str) -> bool:
  """Whether a row reads the privileged features: its own view, or its teacher's (at any depth), or teachers of its
  own."""
  r = REGISTRY[name].recipe
  return r.view != "x" or r.privileged or (r.teacher is not None and uses_privileged(r.teacher))


def baseline() -> str:
  """The name of the row every run trains and compares with (no-distillation)."""
  return next(r.name for r in REGISTRY.values() if r.baseline)


def primary() -> Row:
  """The row the paper is about (the PFD student)."""
  return next(r for r in REGISTRY.values() if r.primary)


def compared(paper: bool = False) -> Tuple[str, ...]:
  """The rows the primary row's claims compare it with, less the LightGBM ones (the power study's comparisons);
  paper: only those of the paper's own claims."""
  return tuple(c.versus for c in primary().row_claims if (c.source or not paper) and c.versus in REGISTRY
               and not REGISTRY[c.versus].recipe.one_process)


def columns() -> Tuple[Row, ...]:
  """The rows with a column of their own (:attr:`Row.versus`), in the tables' column order."""
  return tuple(sorted((r for r in REGISTRY.values() if r.versus), key=lambda r: list(_VERSUS).index(r.versus)))


def _anchor(versus: str) -> Optional[str]:
  """The first row whose column compares the rows of kind `versus` (:attr:`Row.versus`), if any."""
  return next((r.name for r in REGISTRY.values() if r.versus == versus), None)


def incumbent() -> Optional[str]:
  """The row every other is compared with in a column of its own (versus 'every': LambdaMART), if any."""
  return _anchor("every")


def control() -> Optional[str]:
  """The row every student is compared with in a column of its own (versus 'students': the placebo), if any."""
  return _anchor("students")


def title(name: str, short: bool = False) -> str:
  """The row `name`'s title (short: its name inside a sentence); a name not registered as it is."""
  return (REGISTRY[name].label if short else REGISTRY[name].title) if name in REGISTRY else name


def is_teacher(name: str) -> bool:
  """Whether the row `name` is a teacher (a name not registered: not one)."""
  return name in REGISTRY and REGISTRY[name].is_teacher


def table_order(names) -> list:
  """`names` in registry order (rows not registered last, as given)."""
  names = list(names)
  return [n for n in REGISTRY if n in names] + [n for n in names if n not in REGISTRY]
