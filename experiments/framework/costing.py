"""A run's cost, said before it runs: a short timed probe of the run itself, extrapolated.

The probe is the run at :data:`PROBE_EPOCHS` epochs on its first fold (or its first program of draws trained side
by side), in a folder of its own that is deleted after it; the progress monitor times every row's epochs
(:attr:`experiments.framework.monitor.Progress.timed`). A row of the probe takes ``c + P e + t``: ``c`` its start
(its data to the device, compiling, the first epoch's extra), ``e`` one epoch (its steps and the epoch's
evaluation, the mean of the probe's later epochs), ``t`` its end (scoring its kept models). The run's row takes
``c + E e + t`` at the run's E epochs, but on the probed fold itself the run reuses the programs the probe compiled
(the same process, the same data, so the same shapes): there a row starts in about an epoch, ``min(c, e)``. Each
later fold has data of its own, so shapes of its own, and compiles again. The rest of the probe (loading and
preparing the fold, its comparisons) comes once per fold:

    expected = rest + sum over rows of (min(c, e) + E e + t)
               + (folds of the run / folds of the probe - 1) x (rest + sum over rows of (c + E e + t))

A row that trained more than P epochs in the probe does not follow --epochs (a LightGBM row's boosting rounds) and
counts as measured. The run compiles again what JAX's persistent cache does not hold, and ``c`` counts it again, so
a short run may end sooner than said. Rows already saved in the run folder are loaded, not trained: the time left
counts the others at the mean row's cost.

A search's programs (the PFD search: many screened models that stop once the selection lists stop improving for
its patience p) are timed in the probe as rows are, but how long each trains in the run is not known before it
runs (anywhere from p + 1 epochs to E): the estimate counts them at p + 1 and says the high at E beside it (the
chosen candidate's teacher and student train as rows do, at E). Just before the search starts, its own line reads
the expected length off this run's rows: the epochs early stopping would have run on each row's validation curve
(models of the same lists level off alike); the progress line's ETA, from the programs trained so far, says where
in that span the run is going.

On the paper's own files (:data:`experiments.framework.protocol.PAPER_RUNS`) the estimate also says what the paper's
whole protocol (``--preset=paper_<dataset>``: its rows, both losses, 100 epochs, its folds or runs) takes at the
probe's rates, and on a CPU the accelerator command that runs it on a GPU (a run of more than a day: said so).
"""
from __future__ import annotations

import glob
import math
import os
import tempfile
import time
from typing import Callable, NamedTuple, Optional, Sequence

import numpy as np
from absl import logging

from experiments.framework import fold_data, protocol
from experiments.framework.monitor import PROGRESS, RowTimes
from experiments.framework.schema import Config, Driver
from pfd_jax.methods import rows as rows_lib
from pfd_jax.methods import search
from pfd_jax.training.loop import epochs_run

PROBE_EPOCHS = 3  # two epochs after the first: the first holds the compiling, the others give e
DAY = 24 * 3600
GRID = "students_grid"  # a refined grid's program the probe did not train, priced by refined_grid
PROBED: list = []  # the last probe's search programs [RowCost]: the search's own line prices them one by one


class RowCost(NamedTuple):
  """One row of the probe (module docstring): start c, epoch e and end t in seconds, its timed epochs, and whether
  they follow --epochs (a row without two timed epochs: its whole time as start, not scaled)."""
  start: float
  epoch: float
  end: float
  epochs: int
  scaled: bool
  screened: bool = False  # a search's program: in the run it stops early, somewhere in [patience + 1, E] epochs
  models: int = 0  # the models it trains side by side (its selection NDCG's size; 0 unknown)
  name: str = ""  # a search program's ("students_z0_cf1")

  @property
  def grid(self) -> bool:
    """A refined grid's program the probe did not train (:func:`refined_grid`)."""
    return self.name.startswith(GRID)

  @property
  def seconds(self) -> float:
    """What it took in the probe."""
    return self.start + self.epochs * self.epoch + self.end

  def at(self, epochs: int, compiled: bool = False) -> float:
    """Its seconds in a run of `epochs` epochs (as in the probe when it does not follow --epochs); compiled: on the
    probed fold, whose programs the probe compiled (a start of about an epoch)."""
    start = min(self.start, self.epoch) if compiled and self.scaled else self.start
    return start + (epochs if self.scaled else self.epochs) * self.epoch + self.end


class Estimate(NamedTuple):
  """What the probe measured and what it gives: the run's seconds (the probe's own apart); high: the same if no
  screened program stops early (= seconds without a search)."""
  seconds: float
  probe_seconds: float
  rest: float  # the probe's time outside its rows (per probed fold group)
  rows: tuple  # RowCost
  folds: float  # the run's folds over the probe's
  epochs: int
  high: float = 0.0


def row_cost(t: RowTimes, now: float) -> RowCost:
  """The cost of one row of the probe from its times (`now`: its end, if the row did not say it ended)."""
  ends, end = [when for _, _, when in t.epochs], t.end[0] or now
  models = int(np.size(t.select[-1][-1])) if t.select and t.select[-1] else 0
  if len(ends) < 2:
    return RowCost(end - t.begin, 0.0, 0.0, 0, False, t.screened, models, t.name)
  epoch = (ends[-1] - ends[0]) / (len(ends) - 1)
  start = max(ends[0] - t.begin - epoch, 0.0)
  return RowCost(start, epoch, end - ends[-1], len(ends), len(ends) <= PROBE_EPOCHS, t.screened, models,
                 t.name)


def probe_folds(driver: Driver, cfg: Config) -> tuple:
  """(the probe's folds, the run's folds over the probe's): the first fold (the first program of draws with
  --draws_per_program); (None, 1) for a driver without folds."""
  if "data" not in driver.groups:
    return None, 1.0
  folds = fold_data.folds_of(cfg.data)
  k = max(int(getattr(cfg.options, "draws_per_program", 0) or 0), 1)
  return tuple(folds[:k]), math.ceil(len(folds) / k)


def skipped(driver: Driver, cfg: Config) -> str:
  """'' when a probe applies, else why none does."""
  if "train" not in driver.groups:
    return "it trains no network"
  if cfg.output.num_processes > 1 or cfg.output.coordinator:
    return "a multi-process run"
  if cfg.train.epochs <= PROBE_EPOCHS:
    return f"{cfg.train.epochs} epochs: the probe would be the run"
  return ""


def extrapolate(rows: tuple, probe_seconds: float, folds: float, epochs: int,
                screened: Optional[int] = None, unprobed: tuple = ()) -> Estimate:
  """The run's seconds from the probe's rows (module docstring's formula). A driver whose training times no row
  (no progress hooks) has its probe's whole time scaled by epochs. screened: the fewest epochs a search's screened
  program trains (its patience + 1); the estimate counts them at that, its high at every epoch. unprobed: programs
  the run may train that the probe did not (:func:`refined_grid`), counted as its rows are."""
  if not rows:
    whole = folds * probe_seconds * epochs / PROBE_EPOCHS
    return Estimate(whole, probe_seconds, probe_seconds, (), folds, epochs, whole)
  rest = max(probe_seconds - sum(c.seconds for c in rows), 0.0)
  rows = tuple(rows) + tuple(unprobed)

  def total(short: int) -> float:
    at = lambda c, **kw: c.at(min(short, epochs) if c.screened else epochs, **kw)
    first = rest + sum(at(c, compiled=True) for c in rows)
    again = rest + sum(at(c) for c in rows)
    return min(folds, 1.0) * first + max(folds - 1.0, 0.0) * again

  return Estimate(total(screened or epochs), probe_seconds, rest, rows, folds, epochs, total(epochs))


def probe(driver: Driver, cfg: Config) -> Estimate:
  """Runs the probe (the run at PROBE_EPOCHS epochs on its first fold, in a folder deleted after) and
  extrapolates it; the monitor's state and the log's verbosity as they were after it."""
  folds, ratio = probe_folds(driver, cfg)
  saved, verbosity = dict(vars(PROGRESS)), logging.get_verbosity()
  with tempfile.TemporaryDirectory(prefix="pfd_probe_") as folder:
    # a probe's few epochs are no draw of the run's store (--draw_store): it keeps nothing there
    keeps = {"options": dict(draw_store="")} if getattr(cfg.options, "draw_store", "") else {}
    small = cfg.replace(train=dict(epochs=PROBE_EPOCHS), output=dict(run_dir=folder, tensorboard=False),
                        **({"data": dict(folds=folds)} if folds else {}), **keeps)
    PROGRESS.start(None)
    logging.set_verbosity(logging.WARNING)
    t0 = time.time()
    try:
      driver.run(small)
      now = time.time()
      seconds, rows = now - t0, tuple(row_cost(t, now) for t in PROGRESS.timed)
    finally:
      logging.set_verbosity(verbosity)
      vars(PROGRESS).update(saved)
  PROBED[:] = [c for c in rows if c.screened]
  if not getattr(cfg.options, "search", False):
    return extrapolate(rows, seconds, ratio, cfg.train.epochs)
  o = cfg.options.searching()
  return extrapolate(rows, seconds, ratio, cfg.train.epochs, o.patience + 1 if o.patience else None,
                     unprobed=tuple(refined_grid(PROBED, o, cfg.train.alpha)))


def paper_dataset(cfg: Config) -> str:
  """The paper's dataset whose protocol the run's data stand for: its files, or web30k for --synthetic_web30k (a
  generated fold of Web30k's size); else the run's dataset (not one of the paper's)."""
  return "web30k" if cfg.data.synthetic_web30k else cfg.data.dataset


def paper_protocol(cfg: Config, e: Estimate) -> Optional[float]:
  """Seconds of the paper's whole protocol on this run's dataset (--preset=paper_<name>) at the probe's rates: its
  rows at the mean timed row's start, epoch and end (epochs x its seeds over the run's: the seeds are vmapped,
  about linear on a CPU), both losses at the probed losses' mean, its folds or runs; None unless the run is on the
  paper's files or on a generated fold of their size (:func:`paper_dataset`)."""
  name = paper_dataset(cfg)
  timed = [c for c in e.rows if c.scaled and not c.screened]
  if name not in protocol.PAPER_RUNS or not timed:
    return None
  _, seeds, units, _ = protocol.PAPER_RUNS[name]
  rows = len(rows_lib.plan(("no_distill", "self_distill", "gend", "pfd")))
  mean = lambda f: sum(map(f, timed)) / len(timed)
  per_row = mean(lambda c: c.start + c.end) + 100 * mean(lambda c: c.epoch) * seeds / cfg.run.seeds
  per_fold_rest = e.rest / len(cfg.losses)  # the probe's rest covered its losses on one fold
  return units * 2 * (per_fold_rest + rows * per_row)


def hms(seconds: float) -> str:
  """'3 h 05 min', '12 min 40 s', '35 s'."""
  s = int(round(seconds))
  if s >= DAY:
    return f"{s / DAY:.1f} days ({s // 3600} h)"
  if s >= 3600:
    return f"{s // 3600} h {s % 3600 // 60:02d} min"
  return f"{s // 60} min {s % 60:02d} s" if s >= 60 else f"{s} s"


def saved_rows(run_dir: Optional[str]) -> int:
  """How many rows a run folder holds saved (they load instead of training)."""
  return len(glob.glob(os.path.join(run_dir, "runs", "**", "*.msgpack"), recursive=True)) if run_dir else 0


def say(e: Estimate, cfg: Config, total_rows: Optional[int], saved: int, backend: str) -> str:
  """The lines a run prints before it trains: its expected wall time here, the probe it came from, what is left
  of a resumed run, and the paper's whole protocol on its files."""
  screened, grid = sum(c.screened for c in e.rows), sum(c.grid for c in e.rows)
  grids = f" ({grid} of them the refined grid, priced from the probe's plain students)" if grid else ""
  span = (f" to {hms(e.high)}: the search's {screened} screened programs{grids} at their patience + 1 epochs, or "
          "at every epoch; the progress line's ETA says as it goes" if e.high > 1.05 * e.seconds else "")
  lines = [f"expected wall time here: about {hms(e.seconds)}{span} ({e.epochs} epochs, {e.folds:g} x the probe's "
           f"folds; probe: {PROBE_EPOCHS} epochs of each of {len(e.rows) - screened} timed rows"
           f"{f' and {screened - grid} search programs' if screened else ''} in {hms(e.probe_seconds)}, "
           f"experiments/framework/costing.py)"]
  if rows := [c for c in e.rows if not c.screened]:
    n = len(rows)
    lines.append(f"the probe's rows on average: start {sum(c.start for c in rows) / n:.1f} s, epoch "
                 f"{sum(c.epoch for c in rows) / n:.2f} s, end {sum(c.end for c in rows) / n:.1f} s; the rest of "
                 f"the probe {e.rest:.1f} s")
  if saved and total_rows:
    left = e.seconds * max(total_rows - saved, 0) / total_rows
    lines.append(f"{saved} of {total_rows} rows saved in the run folder: about {hms(left)} left")
  full, name = paper_protocol(cfg, e), paper_dataset(cfg)
  if full is not None:
    where = "on these files" if name == cfg.data.dataset else "on Web30k's files, at this generated fold's size"
    lines.append(f"the paper's whole protocol {where} (--preset=paper_{name}): about {hms(full)} here at the "
                 "probe's rates")
  days = max(e.seconds, full or 0) > DAY
  if backend == "cpu" and (days or full is not None):
    command = (f"python -m experiments.accelerator --steps=paper_{name} --data_dir=<your folder> "
               "(docs/paper-datasets.md)" if full is not None else "python -m experiments.accelerator "
               "(docs/reproducing.md)")
    lines.append(("that is a multi-day job on this CPU: " if days else "") + f"on a GPU: {command}; its rows "
                 "resume across calls")
  return "\n".join(lines)


def announce(driver: Driver, cfg: Config, total_rows: Optional[int], backend: str) -> str:
  """The estimate's lines for `cfg` (the probe run now), or one line saying why no probe applies."""
  why = skipped(driver, cfg)
  if why:
    return f"expected wall time: not probed ({why})"
  return say(probe(driver, cfg), cfg, total_rows, saved_rows(cfg.output.run_dir), backend)


def programs(o: search.SearchOptions, privileged: int) -> int:
  """The training programs of a search on `privileged` columns (``SearchOptions.programs`` for its subsets of
  these columns, fewer than its top allows where the columns are few): on each part no distillation, a teacher and
  a student per subset and the refined grids; the chosen candidate's teacher and student."""
  n = len(search.subsets(range(privileged), o.top))
  return (1 + o.folds) * (1 + 2 * n + (o.refine or 0)) + 2


def search_cost(o: search.SearchOptions, privileged: int, alpha: float, seconds: Sequence[float], *, epochs: int = 0,
                seeds: int = 0, stops: Sequence[int] = (), probed: Sequence[tuple] = ()) -> str:
  """What the PFD search will cost: its candidates, its training programs and their time at `seconds` (what each
  row trained so far took on this machine, at the run's `epochs` and `seeds`). A screened program trains o.seeds of
  the seeds and stops early, after patience + 1 to `epochs` epochs; the chosen candidate's teacher and student train
  as a row does. stops: the epochs early stopping would have run on each of this run's rows (its validation curves,
  :func:`pfd_jax.training.epochs_run`): their mean is the expected length of a screened program (models of the same
  lists, so the same plateau), said beside the span; without them the span alone. probed: [(RowCost, epochs)] of
  the probe's screened programs, each with the epochs its early stopping is expected to run (:func:`program_stops`):
  the screened models priced one program at a time at their own measured start and epoch (a program of many
  candidates' students costs many rows' epochs, and stops later, when the last of its models stops improving)."""
  if not len(seconds):
    pace = "its time unknown: no row trained here yet"
  elif probed and epochs and o.patience:
    chosen = 2 * float(np.mean(seconds))
    at = lambda k=None, grid=True: chosen + sum(c.start + c.end + min(epochs, k or stop) * c.epoch
                                                for c, stop in probed if grid or not c.grid)
    grids = sum(c.grid for c, _ in probed)
    pace = (f"about {hms(at())} on this machine: {len(probed)} screened programs ({grids} of them the refined grid "
            f"priced from the probe's plain students, {hms(at(grid=False))} without it), each at the probe's start "
            f"and epoch for the epochs (mean {np.mean([k for _, k in probed]):.0f}) early stopping at patience "
            f"{o.patience} would have run on this run's rows' validation curves with as many models as it trains, "
            f"{hms(at(o.patience + 1))} if each stopped at {o.patience + 1}, {hms(at(epochs))} at {epochs}; the chosen "
            f"candidate's teacher and student at the {chosen / 2:.0f} s a row of this run has taken")
  else:
    row = float(np.mean(seconds))
    share = min(o.seeds or seeds, seeds) / seeds if seeds else 1.0
    screen, chosen = (programs(o, privileged) - 2) * row * share, 2 * row
    at = lambda k: screen * min(1.0, k / epochs) + chosen if epochs and o.patience else screen + chosen
    low, high = at(o.patience + 1), at(epochs)
    if low < high and len(stops):
      mean = float(np.mean(stops))
      pace = (f"about {hms(at(mean))} on this machine: its screened models (on {o.seeds or 'every'} seed(s)) at the "
              f"{mean:.0f} epochs early stopping at patience {o.patience} would have run on this run's {len(stops)} "
              f"rows here (their validation curves), {hms(low)} if each stopped at {o.patience + 1}, {hms(high)} at "
              f"{epochs}, each at the {row:.0f} s a row of this run has taken; the progress line's ETA says as it "
              "goes")
    else:
      span = f"{hms(low)} to {hms(high)}" if low < high else hms(high)
      stops_at = f", each model stopping after {o.patience + 1} to {epochs} epochs" if low < high else ""
      pace = (f"about {span} on this machine at the {row:.0f} s a row of this run has taken here (screening on "
              f"{o.seeds or 'every'} seed(s){stops_at}; the progress line's ETA says as it goes)")
  return (f"{o.candidates(privileged, alpha)} candidates on {1 + o.folds} parts (validation and {o.folds} "
          f"cross-fitted folds), at most {programs(o, privileged)} training programs: {pace}")


def curve_stops(curves: Sequence[np.ndarray], o: search.SearchOptions, epochs: int) -> list:
  """The epochs a screened program's early stopping (o.patience, on o.seeds models) would have run on each of
  these rows' selection curves [models, epochs] (those of every one of `epochs` epochs, none cut short): the
  search's expected length (:func:`search_cost`)."""
  return [epochs_run(c[:o.seeds or None], o.patience) for c in full_curves(curves, epochs)] if o.patience else []


def full_curves(curves: Sequence[np.ndarray], epochs: int) -> list:
  """The curves of every one of `epochs` epochs, none cut short (an interrupted or early-stopped training's are)."""
  return [np.asarray(c) for c in curves if np.shape(c)[-1] == epochs and np.all(np.isfinite(c))]


def refined_grid(programs: Sequence[RowCost], o: search.SearchOptions, alpha: float) -> list:
  """The refined grid's programs when the probe trained none (at its few epochs the rule seldom finds a subset's
  plain setting better): the other G - 1 settings of alpha x temperature for the first o.refine subsets, on each
  part, priced from that part's plain student programs at G - 1 times their models and epoch (one step over all
  the models: linear in them where compute is the cost, as on a CPU; an upper bound where a GPU runs them in
  parallel). The grid trains only once a subset passes, so the line says the search without it too."""
  students = [c for c in programs if c.name.startswith("students_")]
  if not (o.refine and students) or len({c.models for c in students}) > 1:  # none, or the probe refined
    return []
  extra, parts = len(search.settings(alpha)) - 1, {}
  for c in students:
    parts.setdefault(c.name.rsplit("_", 1)[-1], []).append(c)
  mean = lambda cs, field: float(np.mean([getattr(c, field) for c in cs]))
  return [RowCost(mean(cs, "start"), extra * mean(cs, "epoch"), mean(cs, "end"), cs[0].epochs, True, True,
                  cs[0].models * extra, f"{GRID}_{tag}")
          for tag, cs in parts.items() for _ in range(min(o.refine, len(cs)))]


def program_stops(programs: Sequence[RowCost], curves: Sequence[np.ndarray], o: search.SearchOptions,
                  epochs: int, draws: int = 256) -> list:
  """[(program, epochs)]: the epochs each screened program's early stopping (o.patience) is expected to run. A
  program of N models (N: its models, or o.seeds where the probe did not say) stops once none of them has improved
  for o.patience epochs: the mean of :func:`epochs_run` over `draws` sets of N models drawn with replacement from
  these rows' models' full curves (a fixed generator: the same rows, the same line). More models, later; [] without
  a full curve."""
  full = full_curves(curves, epochs)
  if not (full and o.patience):
    return []
  pool, rng, stops = np.concatenate(full), np.random.default_rng(0), {}
  for n in sorted({p.models or o.seeds or 1 for p in programs}):
    stops[n] = float(np.mean([epochs_run(pool[rng.integers(0, len(pool), n)], o.patience) for _ in range(draws)]))
  return [(p, stops[p.models or o.seeds or 1]) for p in programs]


def timed_curves(timed: Sequence[RowTimes]) -> list:
  """The selection curves [models, epochs] of the trainings of the rows trained in this process (not the search's
  programs); a curve whose epochs' model counts differ is not one training's and is not read."""
  done = [c for t in timed if not t.screened and t.end[0] is not None for c in t.select or ()]
  return [np.stack(c).T for c in done if c and len({np.shape(e) for e in c}) == 1]


def announce_search(found: Callable, o: search.SearchOptions, privileged: int, alpha: float, epochs: int = 0,
                    seeds: int = 0) -> Callable:
  """A :class:`pfd_jax.methods.distill.Context` ``found`` that logs :func:`search_cost` and the flag that skips
  the search just before it runs (not when an interrupted run's search is loaded)."""
  def said(make: Callable) -> Callable:
    def run():
      timed = [t.end[0] - t.begin for t in PROGRESS.timed if t.end[0] is not None and not t.screened]
      curves = timed_curves(PROGRESS.timed)
      logging.info("the PFD search: %s; --nosearch skips it",
                   search_cost(o, privileged, alpha, timed, epochs=epochs, seeds=seeds,
                               stops=curve_stops(curves, o, epochs),
                               probed=program_stops(PROBED + refined_grid(PROBED, o, alpha), curves, o, epochs)))
      if PROGRESS.total:  # the run's count took the search's most programs; these columns make fewer
        PROGRESS.total -= max(o.programs - programs(o, privileged), 0)
      return make()
    return run
  return lambda row, config, make: found(row, config, said(make))
