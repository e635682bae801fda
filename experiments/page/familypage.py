"""How RESULTS.md shows the declared family (:mod:`experiments.page.family`): the conclusion and 'The paper's
claims' table at the top of the page, and each claim's 'After Holm' cell in its run's section (a member's adjusted
verdict, a diagnostic of a member, or ours: exploratory)."""
from __future__ import annotations

from typing import Mapping

import numpy as np

from experiments.page import claims as claims_lib
from experiments.framework import tabulate
from experiments.page import family, frozen
from experiments.page.claims import MARGIN, Claim


def adjusted_cell(d: family.Decided) -> str:
  """A member's verdict after Holm with its adjusted p (why, when not decided)."""
  if d.claim is None:
    return f"not decided: {d.why}"
  p, said = d.adjusted.p, d.adjusted.verdict
  return said if not np.isfinite(p) else f"{said} (p={p:.2g})"


def page_verdict(key: str, c: Claim, decided: list) -> tuple:
  """(the claim's 'After Holm' cell, the word it counts as in the runs table): a member's adjusted verdict, a
  diagnostic (a paper's claim another run decides) or exploratory (ours)."""
  d = family.member_of(decided, key, c)
  if d is not None:
    return adjusted_cell(d), d.adjusted.word
  if c.confirmatory:
    # the member that states this claim, on this run's population where several do (Table 2's on each population)
    deciders = [d for d in decided if c.id and c.id == d.member.claim]
    decider = next((d for d in deciders if family.population_of(d.member.run) == family.population_of(key)),
                   deciders[0] if deciders else None)
    if decider is not None and decider.member.run == key:  # this run's member, not decided (a stale run)
      return adjusted_cell(decider), claims_lib.NOT_DECIDED
    return (f"diagnostic: decided by {decider.member.run}" if decider else "diagnostic: no member of the family",
            "diagnostic")
  return "exploratory", "exploratory"


def population(res: dict) -> str:
  """Which data the run's runs saw: re-drawn per run (--draws) or one fixed draw; a file's folds."""
  data = res.get("config", {}).get("data", {})
  if data.get("draws"):
    return f"re-drawn: {data['draws']} draws"
  if not data:
    return "-"
  return "fixed (one draw)" if tabulate.generated(data.get("dataset", "synthetic")) else "the files' folds"


def selection(res: dict) -> str:
  """The split a run chose its models on: the one its folds recorded (a driver that chooses by hand, as the
  Committee Perceptron's K and C), else its training configuration's best-epoch split."""
  folds = res.get("folds")
  chosen = {f.get("selected_on") for f in folds.values() if isinstance(f, dict)} if isinstance(folds, dict) else set()
  chosen.discard(None)
  return chosen.pop() if len(chosen) == 1 else res.get("config", {}).get("train", {}).get("select_on", "-")


def declared(decided: list, runs: Mapping[str, dict]) -> list:
  """[frozen.Frozen] of each member against the run that decides it (status '-' without one)."""
  return [frozen.frozen(d.member, runs[d.member.run]["prov"]) if d.member.run in runs else frozen.Frozen("-", "", False)
          for d in decided]


def declared_sentence(states: list) -> str:
  """The conclusion's line on when each member was declared: the count of each status (experiments/framework/
  frozen.py), the members amended after their runs and any changed unmarked."""
  counts = {}
  for f in states:
    counts[f.status] = counts.get(f.status, 0) + 1
  amended = sorted({f.detail for f in states if f.status == "amended after its run"})
  return ("**When each claim was declared** (experiments/page/frozen.py): " +
          ", ".join(f"{n} {s.replace('its run', 'their runs' if n > 1 else 'its run')}" for s, n in counts.items()) +
          (f" ({'; '.join(amended)})" if amended else "") + ". Frozen: its run recorded the member's hash; declared "
          "before its run: family.py at the run's commit declared it so (the run predates recorded hashes); "
          "declared after its run: family.py did not yet exist at the run's commit.")


def paper_claims(decided: list, runs: Mapping[str, dict], conclusion: list, anchors: Mapping[str, str]) -> str:
  """'The paper's claims': the conclusion, then one row per declared member (experiments/page/family.py) with
  the run that decides it, its population, selection, raw and adjusted verdicts, power and MDE, and when it was
  declared (experiments/page/frozen.py)."""
  table, states = [], declared(decided, runs)
  for d, state in zip(decided, states):
    m, c, anchor = d.member, d.claim, anchors.get(d.member.run)
    run = runs.get(m.run)
    link = f"[{m.run}](#{anchor})" if anchor else m.run
    when = f"**{state.status}** ({state.detail})" if state.unmarked or state.status.startswith("amended") else \
        state.status
    table.append([m.group, m.text if c is None else c.text, m.source, c.form_text if c else m.form, link,
                  population(run["res"]) if run and c and m.population != "computed" else m.population,
                  selection(run["res"]) if run and c and m.population != "computed" else "-", f"**{c.verdict}**" if c else "-",
                  f"**{adjusted_cell(d)}**", "-" if c is None or not np.isfinite(c.power) else f"{c.power:.2f}",
                  "-" if c is None or not np.isfinite(c.mde) else f"{100 * c.mde:.1f}%", when])
  conclusion = [*conclusion, declared_sentence(states)]
  return ("## Conclusion\n\n" + "\n".join(f"- {c}" for c in conclusion) + "\n\n## The paper's claims\n\n"
          f"Every claim of the papers on this page, declared once with its form, margin, unit, population and the run "
          "that decides it (experiments/page/family.py; Declared: whether before that run was made, and any "
          "amendment since, experiments/page/frozen.py): the page's family, "
          f"whatever runs the page holds. Each is tested in the form its paper states it (one-sided tests at "
          f"{100 * claims_lib.ALPHA:g}%: a claim holds when its 95% interval lies inside the region it claims, does "
          "not reproduce when the interval lies outside it) and adjusted with the others by Holm's step-down method "
          "in both directions (claims.adjust: a wrong verdict of either kind in the family at most "
          f"{200 * claims_lib.ALPHA:g}%). A member whose run is missing, stale, carried from an older page or not "
          "run is **not decided** and counts at p = 1. The same claim in any other run is a diagnostic of it "
          "(labelled so there, counted nowhere). Population: re-drawn (each unit its own draw of the data and "
          "labels), fixed (one draw: its verdicts speak of that draw), files (a data set's folds), computed (the "
          "theory's checks). Selection: the split of the best epoch. Power: the achieved power of the claim's test "
          f"to find a true {100 * MARGIN:.0f}% gain at its measured spread (the smallest over a sweep's points). "
          "MDE: the smallest true change beyond the claim's threshold that its test finds with 80% power at that "
          "spread (equivalence: the smallest margin it could establish; the largest over a sweep's points; a trend or a "
          "shape: the gain's change across the sweep at the smallest slope its test finds, experiments/framework/"
          "sweeps.py).\n\n" +
          tabulate.markdown_table(["Group", "Claim", "Source", "Form", "Decided by", "Population", "Selection",
                                   "Verdict (raw)", "After Holm", "Power", "MDE", "Declared"], table) +
          "\nThe sentences the members test (the main paper's unless the source says otherwise):\n\n" +
          "".join(f"- {d.member.text}: {d.member.quote}\n" for d in decided if d.member.quote) +
          "".join(f"\nWithdrawn after its run, and in no tally: {m.text} ({m.run}; {m.form}"
                  f"{f', margin {100 * m.margin:g}%' if m.margin else ''}): {why}.\n" for m, why in family.WITHDRAWN
                  if m.run in runs))
