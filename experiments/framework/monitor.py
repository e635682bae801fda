"""What a running driver shows: a progress line per epoch with the run's ETA and TensorBoard scalars of
every model, both metric writers of :func:`pfd_jax.training.loop.train`, and the signal guard's safe point."""
from __future__ import annotations

import contextlib
import json
import re
import time
from typing import Callable, NamedTuple, Optional

import numpy as np
from absl import logging

from experiments.framework import guards
from pfd_jax import config as config_lib
from pfd_jax import distributed
from pfd_jax.training.loop import EpochScalars, Hooks


class ProgressLine(NamedTuple):
  """A metric writer: one absl log line per epoch of a row, with the run's progress and its ETA."""
  prefix: str
  row: str

  def write_epoch(self, s: EpochScalars) -> None:
    PROGRESS.epoch_ended(s.epoch + 1, s.epochs, s.metrics[s.select_on][:, 0])
    loss = float(s.loss.mean())  # a LightGBM row reports no loss
    logging.info("%s %-13s %s %s %3d/%d  loss %10s  select NDCG %.4f  %s", self.prefix, self.row,
                 PROGRESS.of(), s.unit, s.epoch + 1, s.epochs, f"{loss:.3f}" if np.isfinite(loss) else "-",
                 float(np.mean(s.metrics[s.select_on][:, 0])), PROGRESS.eta((s.epoch + 1) / s.epochs))


class BoardWriter(NamedTuple):
  """A metric writer: a row's per-model scalars to the run's TensorBoard files (:data:`TENSORBOARD`)."""
  tag: str

  def write_epoch(self, s: EpochScalars) -> None:
    TENSORBOARD.epoch(self.tag, s.epoch, s.loss, s.metrics, s.ks, s.first_model)


def stops_early(name: str) -> bool:
  """Whether the model of hooks `name` is one the PFD search screens, which stops early: its name ends in a part's
  tag (:class:`pfd_jax.methods.search.Screening`'s "_screened" or "_cf<i>"), not in the chosen candidate's "_chosen"
  (trained as its row is) or a row's name."""
  return re.search(r"_(screened|cf\d+)$", name) is not None


def progress(prefix: str) -> Callable[[str], Hooks]:
  """The hooks of every row of a fold: its progress line, its TensorBoard scalars when the run writes them,
  and the signal guard's safe point after every epoch (each epoch's scalars carry the run's length)."""

  def make(row: str) -> Hooks:
    PROGRESS.program_started(screened=stops_early(row), name=row)
    writers = [ProgressLine(prefix, row)]
    if TENSORBOARD.writer is not None:
      writers.append(BoardWriter("/".join(filter(None, [prefix.strip("[]").replace(" ", "/"), row.replace(" ", "_")]))))
    return Hooks(writers=tuple(writers), safe_point=lambda: guards.checkpoint(distributed.comm()))
  return make


class TensorBoard:
  """The run's TensorBoard event files (tensorboardX): <run folder>/tensorboard, one scalar per row, model
  (seed, or variant x seed) and epoch: ``<loss>/<fold>/<row>/seed<s>/loss`` and ``.../<split>_ndcg<k>``; the
  configuration as text (``config``). Flushed every epoch, so a running job can be watched."""

  def __init__(self):
    self.writer = None

  def open(self, folder: str, config: dict) -> None:
    try:
      from tensorboardX import SummaryWriter  # deferred on purpose: the drivers' optional extra
    except ImportError:
      raise config_lib.ConfigError("tensorboard", "needs tensorboardX: pip install -e \".[experiments]\" (or "
                                   "--notensorboard)") from None
    self.writer = SummaryWriter(folder, flush_secs=3600)
    self.writer.add_text("config", "```\n" + json.dumps(config, indent=1) + "\n```", 0)
    self.writer.flush()

  def epoch(self, tag: str, epoch: int, loss, metrics: dict, ks, first: int = 0) -> None:
    """Scalars of models first, first + 1, ... (a LightGBM row: one seed's boosting round, no loss)."""
    for s, value in enumerate(np.asarray(loss), first):
      if np.isfinite(value):
        self.writer.add_scalar(f"{tag}/seed{s}/loss", float(value), epoch + 1)
    for split, vals in metrics.items():
      for s, row in enumerate(np.asarray(vals), first):
        for k, v in zip(ks, row):
          self.writer.add_scalar(f"{tag}/seed{s}/{split}_ndcg{k}", float(v), epoch + 1)
    self.writer.flush()

  def close(self) -> None:
    if self.writer is not None:
      self.writer.close()
      self.writer = None


TENSORBOARD = TensorBoard()


class RowTimes(NamedTuple):
  """When a row (or rows trained together) began, each epoch's end [(epoch, of epochs, time)], and [its end];
  screened: one program of a search (:meth:`Progress.counting_programs`) that stops early in a full run; select:
  per training under it (a row may train several in turn: an ensemble's teachers, an out-of-fold teacher, its
  student) each epoch's selection NDCG of its models [[[M]]] (how early stopping would end models like it); name: a
  search program's hooks' name ("students_z0_cf1")."""
  begin: float
  epochs: list
  end: list
  screened: bool = False
  select: Optional[list] = None
  name: str = ""


class Progress:
  """Per-epoch progress of a whole run: row i of n, epoch e of E, elapsed time and an estimate for the run
  (main starts it with the driver's row count; rows loaded from a saved run count as done). The estimate
  is the mean time of the rows trained so far in this process times the rows left; before one has ended it
  says 'estimating' (a first row's early epochs include loading and compiling, so extrapolating them misleads).
  Each row trained in this process keeps its times (:attr:`timed`, what the cost probe measures); the rows loaded
  from a saved run (and a saved search) add their own training seconds to :attr:`loaded_seconds`, so a resumed
  run's record can say what its earlier processes spent."""

  def __init__(self):
    self.start(None)

  def start(self, total: Optional[int]) -> None:
    self.total, self.row, self.t0 = total, 0, time.time()
    self.t_row, self.trained_rows, self.trained_seconds = self.t0, 0, 0.0
    self.loaded_rows, self.loaded_seconds = 0, 0.0
    self.timed: list = []  # [RowTimes] of the rows trained, in order
    self.programs: Optional[int] = None  # while a search runs: the programs it has started

  @contextlib.contextmanager
  def counting_programs(self):
    """While work outside the row store trains many programs that the run's total counts one by one (the PFD
    search, one Trained of many models: ``SearchOptions.programs``), each program advances the row and counts as a
    trained row for the estimate, so the line moves and its ETA is a program's mean time."""
    self.programs = 0
    try:
      yield
    finally:
      self._program_ended()
      self.programs = None

  def program_started(self, screened: bool = True, name: str = "") -> None:
    """A model's training starts (its hooks, `name`, are made): inside :meth:`counting_programs`, the one before it
    ended; screened: it stops early (not the search's chosen candidate, trained as its row)."""
    if self.programs is None:
      return
    self._program_ended()
    self.programs += 1
    self.row = min(self.row + 1, self.total or self.row + 1)
    self.timed.append(RowTimes(self.t_row, [], [None], screened=screened, select=[], name=name))

  def _program_ended(self) -> None:
    now = time.time()
    if self.programs:
      self.trained_rows += 1
      self.trained_seconds += now - self.t_row
      self.timed[-1].end[0] = now
    self.t_row = now

  def begin_row(self) -> None:
    self.row += 1
    self.t_row = time.time()
    self.timed.append(RowTimes(self.t_row, [], [None], select=[]))

  def epoch_ended(self, epoch: int, epochs: int, select=None) -> None:
    """Epoch `epoch` of `epochs` of the current row has ended (its training and its evaluation; select: its models'
    selection NDCG)."""
    if self.timed:
      self.timed[-1].epochs.append((epoch, epochs, time.time()))
      curves = self.timed[-1].select
      if select is not None and curves is not None:
        if epoch == 1 or not curves:  # a training's first epoch: its own curve
          curves.append([])
        curves[-1].append(np.asarray(select))

  def end_rows(self, count: int, trained: bool, loaded_seconds: float = 0.0) -> None:
    """The current `count` rows (trained together, or loaded: their saved training took `loaded_seconds`) have
    ended."""
    if trained:
      self.trained_rows += count
      self.trained_seconds += time.time() - self.t_row
      self.timed[-1].end[0] = time.time()
    else:
      self.loaded_rows += count
      self.loaded(loaded_seconds)
      if self.timed:
        self.timed.pop()  # loaded, not trained: nothing of it measured
    self.row += count - 1

  def loaded(self, seconds: float) -> None:
    """Work loaded from a saved run instead of done (a row's or a search's own seconds when it was done)."""
    self.loaded_seconds += seconds

  def of(self) -> str:
    return f"row {self.row}/{self.total}" if self.total else f"row {self.row}"

  def eta(self, frac_of_row: float) -> str:
    """'elapsed 1m02s, ETA 3m10s' (or 'ETA estimating' until a row has been trained)."""
    el = f"elapsed {_hms(time.time() - self.t0)}"
    if not self.total:
      return el
    if not self.trained_rows:
      return el + ", ETA estimating"
    left = max(self.total - (self.row - 1) - frac_of_row, 0.0)
    return el + f", ETA {_hms(left * self.trained_seconds / self.trained_rows)}"


def _hms(sec: float) -> str:
  sec = int(round(sec))
  return f"{sec // 3600}h{sec % 3600 // 60:02d}m{sec % 60:02d}s" if sec >= 3600 else f"{sec // 60}m{sec % 60:02d}s"


PROGRESS = Progress()
