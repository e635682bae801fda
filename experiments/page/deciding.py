"""Table 2 decided on the paper analogues, declared before any of its runs: per analogue and loss one run on the
sized population, whose draws are committed as they end, and per claim a group-sequential member.

* **Population**: pfd_jax.data.analogues.sizing (a draw's training split holds about 150 groups with a positive;
  validation 300 lists with a positive), validation and test generated as lists with a positive only (scored=1),
  the population calibrated for the loss at that size (calibrated_for), Table 1's test lists x ANALOGUE_TEST_LISTS.
* **Training**: the paper's rows and 100 epochs as the cap, one seed a draw, the best epoch on validation, and
  early stopping after PATIENCE epochs without a better validation NDCG@8: one learning-rate stage (the rate
  halves every 20 epochs) that brought nothing; the epoch it keeps is the one a full run selects unless a later
  stage beats that plateau (the page says how often a selected epoch lies in the first 5% or the last 10%).
* **Draws**: ``--draw_store`` commits each (experiments/framework/drawstore.py); the run's first draws are its
  pilot (no separate pilot: a look reads the same draws), and a run continues from what is committed.
* **Test**: each claim's per-draw paired difference of test NDCG@8 (PFD student - the compared row), looked at
  after DESIGN.looks draws (the first n committed, in draw order) with Hwang-Shih-DeCani spending (gamma -4), two
  one-sided tests (holds above, does not reproduce below), stopping at its cap undecided with its MDE at the level
  it was tested at; the family's error kept by the graphical procedure over the page's whole family
  (:func:`experiments.page.claims.adjust`): a member decided passes its level on, as Holm's step-down does.
"""
from __future__ import annotations

import math
from typing import Callable, NamedTuple, Optional

import numpy as np
from scipy import stats as sps

from experiments.framework import drawstore
from experiments.framework.sequential_runs import COST, DESIGN, preset, run_key, store  # noqa: F401 (the page's names)
from experiments.page.claims import AGAINST, HOLDS, UNDECIDED, Claim
from pfd_jax.data import analogues
from pfd_jax.ops import sequential


class Look(NamedTuple):
  """A sequential member's committed draws: its per-draw differences (row - compared row) and the compared row's
  per-draw means, the first n draws in order (a draw missing from the sequence ends it)."""
  diff: np.ndarray
  reference: np.ndarray
  seconds: np.ndarray  # each draw's training and scoring, on the machine that made it
  epochs: np.ndarray   # [draws, 2]: the epoch (0-based) each of the two rows selected

  def edges(self, epochs: int = 100) -> str:
    """How often a selected epoch lies in the first 5% or the last 10% of the epochs (a selection at the edge: a
    validation split that cannot tell epochs apart, or a row still rising at its cap)."""
    e = self.epochs.ravel()
    return (f"selected epochs: {int(np.sum(e < 0.05 * epochs))} of {e.size} in the first 5%, "
            f"{int(np.sum(e >= 0.9 * epochs))} in the last 10%")

  @property
  def draws(self) -> int:
    return int(self.diff.size)

  def cost(self, design: sequential.Design = DESIGN) -> str:
    """What the draws to its cap cost at the committed draws' seconds (their spread: one draw's sd)."""
    if not self.draws:
      return "no draw committed yet"
    left = max(design.cap - self.draws, 0) * float(self.seconds.mean()) / 3600
    sd = f" (sd {self.seconds.std(ddof=1):.0f} s)" if self.draws > 1 else ""
    return f"a draw {self.seconds.mean():.0f} s{sd}; its cap {left:.1f} more hours of such draws"


def look_of(records: dict, row: str, versus: str) -> Look:
  """The Look of `row` against `versus` over committed draw records ({draw: record}, drawstore.committed)."""
  diff, ref, seconds, epochs = [], [], [], []
  for k in range(1, len(records) + 1):
    r = records.get(k)
    if r is None or row not in r["rows"] or versus not in r["rows"]:
      break
    a, b = (float(r["rows"][n]["best"]["test"][0][0]) for n in (row, versus))
    diff.append(a - b)
    ref.append(b)
    seconds.append(float(r["seconds"]))
    epochs.append([int(np.ravel(r["rows"][n]["best_epoch"])[0]) for n in (row, versus)])
  return Look(np.asarray(diff), np.asarray(ref), np.asarray(seconds), np.asarray(epochs, np.int64).reshape(-1, 2))


def of_preset(preset_name: str) -> Optional[tuple]:
  """(analogue, loss) of a sequential run's preset; None for another preset."""
  return next(((n, l) for n in analogues.ANALOGUES for l in analogues.LOSSES if preset(store(n, l)) == preset_name),
              None)


COMPLETE = "every member decided or at its cap"  # next_draws: the run has nothing left to draw


def next_draws(name: str, loss: str, level: float, versus=("no_distill", "self_distill", "gend"),
               settled=()) -> tuple:
  """(what is committed, the flags its next draws add) of the sequential run of `name`/`loss`: the rows of the
  members its committed draws have not decided at `level` (the least level the family's graph gives a member: a
  rejection there stands at every level the graph raises it to) nor the graph has (`settled`: the versus rows of
  its members decided after the graph; a level the graph passed on never falls, so such a verdict stands), PFD's
  and its teacher's with them."""
  records = drawstore.committed(drawstore.ROOT, store(name, loss), loss)
  looks = {v: look_of(records, "pfd", v) for v in versus}
  done = [v for v, lk in looks.items() if v in settled or
          lk.draws >= DESIGN.looks[0] and sequential.look(DESIGN, lk.diff, level)[0]]
  capped = [v for v, lk in looks.items() if v not in done and lk.draws >= DESIGN.cap]
  left = [v for v in versus if v not in done + capped]
  if not records:
    return "no draw committed yet", ""
  if not left:
    return f"{len(records)} draws committed; {COMPLETE}", ""
  # the cost to the cap of the open member with the fewest draws (a decided member's rows stopped with it)
  state = f"{len(records)} draws committed ({min((looks[v] for v in left), key=lambda lk: lk.draws).cost()})"
  if not done + capped:
    return state, ""
  return (state + f"; decided against {', '.join(done)}" * bool(done) + f"; at its cap against {', '.join(capped)}"
          * bool(capped) + f": its next draws train {', '.join(left)} and PFD",
          f" --methods={','.join(left + ['pfd'])}" + ("" if "no_distill" in left else " --nobaseline"))


def rejects(look: Look, design: sequential.Design = DESIGN) -> Callable[[float], int]:
  """The member's test as the graphical procedure asks it: level -> +1 holds, -1 does not reproduce, 0 neither."""
  return lambda level: sequential.look(design, look.diff, level)[0]


def claim_of(text: str, look: Look, level: float, *, source: str, claim_id: str,
             design: sequential.Design = DESIGN) -> Optional[Claim]:
  """The member's Claim at `level` (its unadjusted word; the family's decides its verdict): None without a look's
  worth of draws. Its interval: the paired t over the draws it has (a diagnostic beside the sequential test)."""
  if look.draws < design.looks[0]:
    return None
  direction, k = sequential.look(design, look.diff, level)
  n = design.looks[k] if k >= 0 else look.draws
  d, ref = look.diff[:n], float(look.reference[:n].mean())
  sd = float(d.std(ddof=1))
  half = float(sps.t.ppf(0.975, n - 1) * sd / math.sqrt(n))
  interval = ((d.mean() - half) / ref, (d.mean() + half) / ref) if ref else ()
  t = sequential.t_statistic(d)
  p_up = float(sps.t.sf(t, n - 1)) if np.isfinite(t) else float(t < 0)
  word = HOLDS if direction > 0 else AGAINST if direction < 0 else UNDECIDED
  mde = design.mde(level, sd) / ref if ref and sd > 0 else math.nan
  capped = look.draws >= design.cap
  where = (f"decided at look {k + 1} ({n} draws)" if direction else
           f"undecided at its cap ({design.cap} draws)" if capped else
           f"{look.draws} draws committed, next look at {next(x for x in design.looks if x > look.draws)}")
  detail = (f"{100 * d.mean() / ref:+.1f}% [{100 * interval[0]:+.1f}%, {100 * interval[1]:+.1f}%] t={t:.2f} (draws); "
            f"sequential, {where}; MDE {100 * mde:.1f}% at level {level:.2g}; {look.edges()}" +
            ("" if direction or capped else f"; {look.cost(design)}"))
  return Claim(text, word, detail, source=source, p=p_up, p_against=1 - p_up, unit="draws", mde=mde,
               interval=interval, at=(f"{design.cap} draws (cap)" if capped else f"{look.draws} draws, running")
               if not direction else "", id=claim_id)
