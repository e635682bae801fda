"""The page's confirmatory family: every claim of the papers that RESULTS.md tests, declared once, here, with its form,
margin, unit, population and the run that decides it, before those runs are made.

* **The Holm family is this list**, fixed by the declaration, never by what the page holds at build time. A member
  whose deciding run is absent, stale, carried from an older page or not run yet (an accelerator's) is **not
  decided**: it stays in the family at p = 1, so it never drops out and a missing run can never make the others'
  verdicts easier (adding it can, by its own evidence). Runs that decide no member (replicates, diagnostics, ours)
  can be added to or removed from the page without moving any adjusted p.
* **A claim is counted once.** The same claim in another run (the main job, the pilot, the fixed-data decisive run,
  Appendix A.7's grid beside Figure 3's, the practitioner runs) is a diagnostic of it: its raw verdict is shown,
  labelled so, and counted in no tally.
* **Both directions are adjusted** (:func:`experiments.framework.claims.adjust`): a member holds after Holm when its
  test for the claim passes at the adjusted level, does not reproduce when its test against it does.
* Ours (controls, the incumbent, debiasing, the practitioner runs: claims without a source) are exploratory.
* The related papers' claims (SDR, Ranking Distillation, the Committee Perceptron) are members too: the page says
  it reproduces them, so they are judged as the paper's own: SDR's and Ranking Distillation's on the re-drawn
  population with validation selection (their fixed-data runs are diagnostics), the Committee Perceptron's over
  OHSUMED's five folds (real files cannot be re-drawn; its K and RankSVM's C are chosen on validation).

The re-drawn runs: Table 2's decisive preset, protocol.redrawn_preset of the ablation drivers and of SDR and Ranking
Distillation, and table3_logs' 'redrawn' preset (a simulation of its own per draw).
"""
from __future__ import annotations

from typing import Mapping, NamedTuple, Optional, Sequence

import numpy as np

from experiments.framework import claims as claims_lib
from experiments.framework.claims import PFD, Claim

DECISIVE = "table2/synthetic-decisive_redrawn"


class Member(NamedTuple):
  """A declared claim: `text` is how its driver words it (the driver's claim text begins so)."""
  group: str
  run: str           # the run that decides it: driver/label (report --list)
  text: str
  form: str
  margin: float = 0.0
  source: str = PFD
  population: str = "re-drawn"  # re-drawn (each unit its own draw), fixed (one draw), files (a data set's folds),
  unit: str = "draws"           # computed (the theory's checks); the unit its interval generalises over


_TABLE2 = (("PFD student beats no-distillation (paper, Table 2)", "superiority", 0.0),
           ("PFD student beats self-distillation (paper, Table 2)", "superiority", 0.0),
           ("PFD student is better than or as good as the GenD student (within 1%) (paper, Table 2)",
            "non-inferiority", 0.01))
_THEORY = ("Theorem 1 (exact) matches Monte-Carlo", "Theorem 2 matches Monte-Carlo",
           "Figure 6: PFD's error is smallest strictly inside", "Example 1: PFD beats regression")

FAMILY: tuple = (
    *(Member("Table 2", DECISIVE, f"[{loss}] {text}", form, margin)
      for loss in ("rankbce", "ranknet") for text, form, margin in _TABLE2),
    Member("The alpha study (Figure 3, Appendix A.7)", "fig3_alpha/synthetic-redrawn",
           "PFD student beats no-distillation at every alpha", "superiority"),
    Member("The alpha study (Figure 3, Appendix A.7)", "fig3_alpha/synthetic-redrawn",
           "PFD is not sensitive to alpha", "equivalence", 0.02),
    Member("Label sparsity (Figure 4)", "fig4_sparsity/synthetic-redrawn",
           "PFD beats no-distillation at every tau_target", "superiority"),
    Member("Label sparsity (Figure 4)", "fig4_sparsity/synthetic-redrawn",
           "PFD's relative gain over self-distillation grows as the labels get sparser", "trend"),
    Member("Correlation of z with y (Figure 5)", "fig5_correlation/synthetic-redrawn",
           "The PFD student's gain over no-distillation is non-monotone", "shape"),
    Member("Tables 3, 5 and 6", "table3_logs/logs-redrawn", "Multi-teacher PFD beats the baseline", "superiority"),
    Member("Tables 3, 5 and 6", "table3_logs/logs-redrawn", "Each single-feature PFD student beats the baseline",
           "superiority"),
    Member("Tables 3, 5 and 6", "table3_logs/logs-redrawn", "Multi-teacher PFD beats pre-training + fine-tuning",
           "superiority"),
    Member("Tables 3, 5 and 6", "table5_positive_groups/synthetic-redrawn",
           "Data loss on positive groups beats all groups", "superiority"),
    Member("Tables 3, 5 and 6", "table6_imputation/synthetic-redrawn",
           "No-distillation beats the PFD teacher served with mean-imputed z", "superiority"),
    Member("Tables 3, 5 and 6", "table6_imputation/synthetic-redrawn",
           "No-distillation beats the PFD teacher served with zero-imputed z", "superiority"),
    *(Member("The linear theory (Theorems 1 and 2, Figure 6)", "theory/fig6", text, "check", population="computed",
             unit="checks") for text in _THEORY),
    Member("Related systems", "sdr/synthetic-redrawn", "The listwise self-distilled student beats its teacher",
           "superiority", source="SDR"),
    Member("Related systems", "sdr/synthetic-redrawn", "The pointwise-teacher, listwise-student pair beats its teacher",
           "superiority", source="SDR"),
    Member("Related systems", "rank_distill/synthetic-redrawn", "Ranking distillation beats the student trained alone",
           "superiority", source="Ranking Distillation"),
    *(Member("Related systems", "committee_perceptron/ohsumed", f"The committee ({how}), K chosen is within",
             "equivalence", 0.02, source="Committee Perceptron", population="files", unit="folds")
      for how in ("avg", "vote")),
)


class DeclarationError(Exception):
  """A deciding run states a member's claim in another form, margin or source than the declaration."""


class Decided(NamedTuple):
  """A member with the claim its run states (None: not decided, `why`), and its adjusted (p, verdict)."""
  member: Member
  claim: Optional[Claim]
  why: str
  adjusted: tuple


def resolve(runs: Mapping[str, tuple], family: Sequence[Member] = FAMILY) -> list:
  """[Decided] of every member, in the declaration's order, adjusted together (claims.adjust). runs: {driver/label:
  (its claims, '' when current else why it decides nothing: stale, carried, not run)}; a run absent from `runs` is
  missing; a run that judged a member over another unit than declared (another protocol's) decides nothing. Raises
  DeclarationError when a run words a member's claim in another form than declared."""
  found = []
  for m in family:
    claims, why = runs.get(m.run, ((), f"no run of {m.run}"))
    claim = next((c for c in claims if c.text.startswith(m.text)), None)
    if claim is not None and (claim.form, claim.margin, claim.source) != (m.form, m.margin, m.source):
      raise DeclarationError(f"{m.run} states {claim.text!r} as {claim.form_text} ({claim.source or 'ours'}); the "
                             f"family declares it {m.form}, margin {m.margin:g} ({m.source})")
    if claim is None and not why:
      why = f"{m.run} states no such claim (a row it needs is absent)"
    elif claim is not None and m.form != "check" and claim.unit != m.unit and not why:
      why = f"{m.run} judged it over {claim.unit}, the declaration over {m.unit} (another protocol's run)"
    found.append((m, None if why else claim, why))
  adjusted = claims_lib.adjust([c for _, c, _ in found])
  return [Decided(m, c, why, a) for (m, c, why), a in zip(found, adjusted)]


def member_of(decided: Sequence[Decided], run: str, claim: Claim) -> Optional[Decided]:
  """The member `claim` of `run` decides, if any (the same claim in another run is a diagnostic of it)."""
  return next((d for d in decided if d.member.run == run and d.claim is claim), None)


def _words(decided: Sequence[Decided]) -> str:
  counts = {}
  for d in decided:
    word = d.adjusted[1].split(" at ")[0] if d.claim is not None else "not decided"
    counts[word] = counts.get(word, 0) + 1
  return ", ".join(f"{n} {'hold' if w == 'holds' and n > 1 else w}" for w, n in counts.items())


def conclusion(decided: Sequence[Decided]) -> list:
  """One sentence per group of members: its verdicts after Holm, each member that does not hold and why, and the
  smallest effects its evidence could detect (MDE at 80% power)."""
  out = []
  for group in dict.fromkeys(d.member.group for d in decided):
    ds = [d for d in decided if d.member.group == group]
    mdes = [d.claim.mde for d in ds if d.claim is not None and np.isfinite(d.claim.mde)]
    others = [f"{d.member.text.rstrip(' ,')}: {d.adjusted[1] if d.claim is not None else 'not decided, ' + d.why}"
              for d in ds if d.claim is None or d.adjusted[1] != "holds"]
    checks = all(d.member.form == "check" for d in ds)
    head = f"{len(ds)} {'checks, computed' if checks else 'claim' if len(ds) == 1 else 'claims'}"
    mde = (f"; the smallest effect its evidence detects with 80% power: {100 * min(mdes):.1f}%" +
           (f" to {100 * max(mdes):.1f}%" if max(mdes) > min(mdes) + 5e-4 else "") if mdes else "")
    out.append(f"**{group}** ({head}): {'' if checks else 'after Holm, '}{_words(ds)}" +
               (f" ({'; '.join(others)})" if others else "") + mde + ".")
  return out
