"""The page's confirmatory family: every claim of the papers that RESULTS.md tests, listed once, here, by its id, with
the run that decides it, its population and unit, and the paper's sentence it tests, before those runs are made. A
claim's form, margin and source are declared once, beside the driver or row that makes it
(:mod:`experiments.page.declared`), and read from there.

* **The Holm family is this list**, fixed by the declaration, never by what the page holds at build time. A member
  whose deciding run is absent, stale, carried from an older page or not run yet (an accelerator's) is **not
  decided**: it stays in the family at p = 1, so it never drops out and a missing run can never make the others'
  verdicts easier (adding it can, by its own evidence). Runs that decide no member (replicates, diagnostics, ours)
  can be added to or removed from the page without moving any adjusted p.
* **A claim is counted once.** The same claim in another run (the main job, the pilot, the fixed-data decisive run,
  Appendix A.7's grid beside Figure 3's, the practitioner runs) is a diagnostic of it: its raw verdict is shown,
  labelled so, and counted in no tally.
* **Both directions are adjusted** (:func:`experiments.page.claims.adjust`): a member holds after Holm when its
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

import functools
import hashlib
import json
from typing import Mapping, NamedTuple, Optional, Sequence

import numpy as np

import experiments
from experiments.framework import drawstore, reported
from experiments.page import claims as claims_lib
from experiments.page import declared as declared_lib
from experiments.page import deciding, judged
from experiments.page.claims import Claim
from experiments.page.declared import Declared
from pfd_jax.data import analogues

DECISIVE = "table2/synthetic-decisive_redrawn"


class Member(NamedTuple):
  """A member of the family: the claim `claim` (its id) of the run that decides it, named `text` on the page. Its
  form, margin and source are the claim's declaration (:class:`experiments.page.declared.Declared`), read from
  the run's driver's claims (experiments.page.judged; Table 2's rows declare theirs, pfd_jax.methods.rows.RowClaim);
  `declared` gives it instead (a withdrawn member as it was, a test's)."""
  group: str
  run: str           # the run that decides it: driver/label (report --list)
  claim: str         # the id of the run's claim it is
  text: str
  population: str = "re-drawn"  # re-drawn (each unit its own draw), fixed (one draw), files (a data set's folds),
  unit: str = "draws"           # computed (the theory's checks); the unit its interval generalises over
  quote: str = ""               # the paper's sentence the member tests, and where it stands
  amended: str = ""             # '<commit>: what changed' when its declaration changed after its run was made
  reported: tuple = ()          # the effects the paper reports for it: ((where, % change), ...) (paper.py)
  declared: Optional[Declared] = None
  sequential: tuple = ()        # a group-sequential member: (its draw store, loss, row, compared row), decided by
                                # its committed draws under experiments.page.deciding.DESIGN

  @property
  def declaration(self) -> Declared:
    return self.declared or declared_by(self.run, self.claim)

  @property
  def form(self) -> str:
    return self.declaration.form

  @property
  def margin(self) -> float:
    return self.declaration.margin

  @property
  def source(self) -> str:
    return self.declaration.source


def declared_by(run: str, claim: str) -> Declared:
  """The declaration of the claim `claim` that the driver of `run` (driver/label) states."""
  driver = run.split("/", 1)[0]
  found = _declarations(driver).get(claim)
  if found is None:
    raise declared_lib.DeclarationError(f"{experiments.module(driver)} declares no claim {claim!r} (the family's "
                                      f"member of {run})")
  return found


@functools.lru_cache(maxsize=None)
def _declarations(driver: str) -> Mapping[str, Declared]:
  return judged.of(driver).declared()


# The paper's sentences each member tests (the main paper unless the source says otherwise).
_BEST = ('Table 2, caption: "The results show that PFD has the best performance on all evaluated settings." '
         '(Table 4, with RankNet: "PFD has superior performance on all evaluated settings.")')
_TIE = (" Its own Table 4 has one setting where PFD does not beat GenD: RankNet on Yahoo, the PFD student 0.585 ± "
        "0.007, the GenD student 0.586 ± 0.008.")
_ALPHA = ('Section 4.2: "PFD is not sensitive to alpha. [...] PFD delivers good performance over a large range of '
          'alpha." Appendix A.7: "for all alpha <= 0.95, PFD can deliver an over 2.5% improvement in NDCG@8" '
          '(Istella; "over 2.6%" on Web30k)')
_ALPHA_YAHOO = ('Section 4.2: "PFD is not sensitive to alpha. [...] The experiments here use the Yahoo dataset and '
                'RankBCE loss. From the left-hand side of Figure 3, we see that PFD delivers good performance over a '
                'large range of alpha." Its range read as appendix A.7 states it on the other two datasets: "for all '
                'alpha <= 0.95, PFD can deliver an over 2.5% improvement in NDCG@8"')
_SPARSE = ('Section 4.2: "PFD brings a larger gain when the positive labels are sparse. [...] the relative gain of '
           'PFD over self-distillation also increases as the positive labels become sparser."')
_TABLE3 = ('Table 3, caption: "The results demonstrate that (1) PFD is significantly better than baseline and '
           'pretraining-then-finetuning"')
_IMPUTED = ('Appendix A.6: "both ways of privileged features imputation are significantly worse than the models '
            'trained without privileged features."')
_SDR = ('SDR, section 5.4: "when listwise distillation is used, it always outperforms the corresponding teacher model, '
        'even if the teacher model is a pointwise one."')
# Amendments after the deciding runs were made, with the commit that made each.
_GEND_AMENDED = ("{commit}: 'better than or as good as the GenD student (within 1%)', non-inferiority, became 'beats "
                 "the GenD student', superiority, as Table 2's caption states it (the 1% margin was set after a page "
                 "had shown -3.4%)")
_ALPHA_AMENDED = "{commit}: 'at every alpha' (up to 0.999) became 'at every alpha <= 0.95', appendix A.7's range"
_AMENDING = "8d36c78"  # the commit of the two amendments above, and of the withdrawal below
_TABLE2 = (("PFD student beats no-distillation (paper, Table 2)", "no_distill", ""),
           ("PFD student beats self-distillation (paper, Table 2)", "self_distill", ""),
           ("PFD student beats the GenD student (paper, Table 2)", "gend", _GEND_AMENDED))
_THEORY = (("theory:theorem1", "Theorem 1 (exact) matches Monte-Carlo",
            'Section 5.1, Theorem 1: "For standard linear regression, we have that [its expected estimation error in '
            'closed form]"'),
           ("theory:theorem2", "Theorem 2 matches Monte-Carlo",
            'Section 5.2, Theorem 2: "For privileged features distillation, we have that [its expected estimation '
            'error in closed form]"'),
           ("theory:fig6-interior-minimum", "Figure 6: PFD's error is smallest strictly inside",
            'Figure 6, caption: "The most predictive z does not give the best PFD performance."'),
           ("theory:example1", "Example 1: PFD beats regression",
            'Section 5.2, Example 1, with Figure 6: PFD\'s error against "the standard linear regression" as d_z goes '
            'from 0 to 10'))

# Table 2 on each paper analogue (pfd_jax/data/analogues.py), with the paper's name of the dataset it stands in
# for: decided by the decisive runs of experiments/framework/protocol.py's ANALOGUE_PRESETS.
_ANALOGUES = tuple((name, a.paper) for name, a in analogues.ANALOGUES.items())

FAMILY: tuple = (
    *(Member("Table 2", DECISIVE, declared_lib.row_claim(loss, "pfd", versus), f"[{loss}] {text}",
             quote=_BEST + (_TIE if versus == "gend" else ""), amended=amended.format(commit=_AMENDING),
             reported=reported.table4_change(loss, "pfd", versus))
      for loss in ("rankbce", "ranknet") for text, versus, amended in _TABLE2),
    *(Member(f"Table 2 on the {paper_name} analogue", deciding.run_key(name, loss),
             declared_lib.row_claim(loss, "pfd", versus), f"[{loss}] {text}",
             quote=_BEST + (_TIE if (paper_name, loss, versus) == ("Yahoo", "ranknet", "gend") else ""),
             reported=tuple(r for r in reported.table4_change(loss, "pfd", versus) if r[0] == paper_name),
             sequential=(deciding.store(name, loss), loss, "pfd", versus))
      for name, paper_name in _ANALOGUES for loss in analogues.LOSSES for text, versus, _ in _TABLE2),
    Member("The alpha study (Figure 3, Appendix A.7)", "fig3_alpha/synthetic-redrawn",
           "fig3:pfd-vs-no_distill-every-alpha", "PFD student beats no-distillation at every alpha ≤ 0.95",
           quote=_ALPHA, amended=_ALPHA_AMENDED.format(commit=_AMENDING)),
    Member("The alpha study on the Yahoo analogue (Figure 3)", "fig3_alpha/yahoo_like-redrawn",
           "fig3:pfd-vs-no_distill-every-alpha", "PFD student beats no-distillation at every alpha ≤ 0.95",
           quote=_ALPHA_YAHOO),
    Member("Label sparsity (Figure 4)", "fig4_sparsity/synthetic-redrawn", "fig4:pfd-vs-no_distill-every-tau",
           "PFD beats no-distillation at every tau_target",
           quote='Figure 4, caption: "PFD yields larger improvement when the labeled samples are scarce."'),
    Member("Label sparsity (Figure 4)", "fig4_sparsity/synthetic-redrawn",
           "fig4:gain-over-self-grows-as-labels-sparser",
           "PFD's relative gain over self-distillation grows as the labels get sparser", quote=_SPARSE),
    Member("Correlation of z with y (Figure 5)", "fig5_correlation/synthetic-redrawn",
           "fig5:gain-non-monotone-in-corr", "The PFD student's gain over no-distillation is non-monotone",
           quote='Section 6: "as the predictive power of privileged features increase, the performance of PFD first '
           'increases and then decreases"; Figure 5, caption: "The privileged features with the highest correlation '
           'with y do not yield the best distillation performance."'),
    Member("Tables 3, 5 and 6", "table3_logs/logs-redrawn", "table3:multi-vs-baseline",
           "Multi-teacher PFD beats the baseline",
           quote=_TABLE3 + ' (its multi-teacher row: 1.112 of the baseline\'s NDCG@8)',
           reported=(("Amazon", round(100 * (reported.TABLE3["multi"] - 1), 1)),)),
    Member("Tables 3, 5 and 6", "table3_logs/logs-redrawn", "table3:single-vs-baseline",
           "Each single-feature PFD student beats the baseline",
           quote=_TABLE3 + " (its position, click and add-to-cart students: 1.078, 1.082, 1.073)"),
    Member("Tables 3, 5 and 6", "table3_logs/logs-redrawn", "table3:multi-vs-pretraining",
           "Multi-teacher PFD beats pre-training + fine-tuning", quote=_TABLE3),
    Member("Tables 3, 5 and 6", "table5_positive_groups/synthetic-redrawn", "table5:positive-vs-all-groups",
           "Data loss on positive groups beats all groups",
           quote='Appendix A.5: "using only positive query groups for data loss always leads to better distillation '
           'performance."', reported=reported.mean_change(reported.TABLE5)),
    Member("Tables 3, 5 and 6", "table6_imputation/synthetic-redrawn", "table6:no_distill-vs-mean-imputed",
           "No-distillation beats the PFD teacher served with mean-imputed z", quote=_IMPUTED,
           reported=reported.mean_change({d: (t["baseline"], t["mean"]) for d, t in reported.TABLE6.items()})),
    Member("Tables 3, 5 and 6", "table6_imputation/synthetic-redrawn", "table6:no_distill-vs-zero-imputed",
           "No-distillation beats the PFD teacher served with zero-imputed z", quote=_IMPUTED,
           reported=reported.mean_change({d: (t["baseline"], t["zero"]) for d, t in reported.TABLE6.items()})),
    *(Member("The linear theory (Theorems 1 and 2, Figure 6)", "theory/fig6", key, text, population="computed",
             unit="checks", quote=quote) for key, text, quote in _THEORY),
    Member("Related systems", "sdr/synthetic-redrawn", "sdr:listwise-self-vs-teacher",
           "The listwise self-distilled student beats its teacher", quote=_SDR),
    Member("Related systems", "sdr/synthetic-redrawn", "sdr:pointwise-to-listwise-vs-teacher",
           "The pointwise-teacher, listwise-student pair beats its teacher", quote=_SDR),
    Member("Related systems", "rank_distill/synthetic-redrawn", "rank_distill:distilled-vs-student-alone",
           "Ranking distillation beats the student trained alone",
           quote='Ranking Distillation, Table 2, caption: "The performance of the models with ranking distillation, '
           'Fossil-RD and Caser-RD, always has statistically significant improvements over the student-only models"'),
    *(Member("Related systems", "committee_perceptron/ohsumed", f"committee_perceptron:{how}-within-ranksvm",
             f"The committee ({how}), K chosen is within", population="files", unit="folds",
             quote='The Committee Perceptron, Conclusions: "Comparable or better performance to RankSVM and RankBoost"',
             amended="f51a7e3: its unit, runs -> folds (a method run once a fold is judged over its folds)")
      for how in ("avg", "vote")),
)

# Members withdrawn after their runs were made: (the member as it was declared, when and why), listed on the page.
WITHDRAWN: tuple = (
    (Member("The alpha study (Figure 3, Appendix A.7)", "fig3_alpha/synthetic-redrawn", "fig3:pfd-within-ref-alpha",
            "PFD is not sensitive to alpha", declared=Declared("fig3:pfd-within-ref-alpha", "PFD is not sensitive to "
                                                               "alpha", "equivalence", 0.02, claims_lib.PFD)),
     f"{_AMENDING}: the paper states no equivalence: section 4.2's 'not sensitive to alpha' is 'good performance over "
     "a large range of alpha', and appendix A.7 a gain for every alpha <= 0.95 (the member above); 'every alpha up "
     "to 0.999 within 2% of alpha 0.5' must fail where PFD becomes no-distillation. Kept as ours (exploratory), to "
     "alpha 0.95"),)

# The data each deciding run's label names (its first word): (the conclusion's short name, what it is).
POPULATIONS = {
    "synthetic": ("the synthetic default", "pfd_jax/data/synthetic.py, calibrated to none of the paper's datasets (its "
                  "privileged columns observe its two strongest latent factors)"),
    "logs": ("simulated logs", "pfd_jax/data/logs.py's e-commerce sessions (the paper's Amazon logs are not public)"),
    "ohsumed": ("OHSUMED", "OHSUMED's files, LETOR 3.0's five folds"),
    "fig6": ("computed", "the linear theory's closed forms against Monte-Carlo"),
    **{name: (f"the {a.paper} analogue", f"pfd_jax/data/analogues.py at the paper's Table 1 shape, {a.fraction:g} of "
              f"its groups (the declared fraction on two cores), each loss on a population calibrated at that size to "
              f"that loss's Table 4 teachers for {a.paper} (the page's section on the paper analogues)")
       for name, a in analogues.ANALOGUES.items()}}


def population_of(run: str) -> tuple:
  """(short name, what it is) of the data a deciding run (driver/label) saw."""
  first = run.split("/", 1)[1].split("-")[0]
  return POPULATIONS.get(first, (first, first))


# What a member's verdict depends on, hashed to freeze it: its quote, amendment note and the paper's reported effects
# are what the page says beside it.
FROZEN_FIELDS = ("run", "text", "form", "margin", "source", "population", "unit")


def member_hash(m) -> str:
  """12 hex digits of a member's FROZEN_FIELDS (a field an older declaration lacked counts as its default now)."""
  fields = {k: getattr(m, k, Member._field_defaults.get(k)) for k in FROZEN_FIELDS}
  if getattr(m, "sequential", ()):  # its draws and its design (a member without them hashes as it always did)
    fields.update(sequential=list(m.sequential), design=repr(deciding.DESIGN))
  return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:12]


def family_hash(members: Sequence[Member] = FAMILY) -> str:
  """12 hex digits of the whole declaration, its members' hashes in order."""
  return hashlib.sha256(" ".join(member_hash(m) for m in members).encode()).hexdigest()[:12]


def declaration(run: str, members: Sequence[Member] = FAMILY) -> dict:
  """What a run records in its provenance ('family'), before it trains anything: the family's hash and, by claim id,
  the hash of each member that `run` (driver/label) decides, so that a later change of that member shows
  (:mod:`experiments.page.frozen`)."""
  return dict(hash=family_hash(members), members={m.claim: member_hash(m) for m in members if m.run == run})


class Decided(NamedTuple):
  """A member with the claim its run states (None: not decided, `why`), and its verdict after Holm."""
  member: Member
  claim: Optional[Claim]
  why: str
  adjusted: claims_lib.Adjusted


def resolve(runs: Mapping[str, tuple], family: Sequence[Member] = FAMILY) -> list:
  """[Decided] of every member, in the declaration's order, adjusted together (claims.adjust). runs: {driver/label:
  (its claims, '' when current else why it decides nothing: stale, carried, not run)}; a run absent from `runs` is
  missing; a run that judged a member over another unit than declared (another protocol's) decides nothing. A run's
  claim is judged as its driver declares it (Declared.judged), so in the member's form, margin and source."""
  found, tests = [], {}
  for i, m in enumerate(family):
    if m.sequential:
      claim, why, tests[i] = _sequential(m)
      found.append((m, claim, why))
      continue
    claims, why = runs.get(m.run, ((), f"no run of {m.run}"))
    claim = next((c for c in claims if c.id == m.claim), None)
    if claim is None and not why:
      why = f"{m.run} states no such claim (a row it needs is absent)"
    elif claim is not None and m.form != "check" and claim.unit != m.unit and not why:
      why = f"{m.run} judged it over {claim.unit}, the declaration over {m.unit} (another protocol's run)"
    found.append((m, None if why else claim, why))
  adjusted = claims_lib.adjust([c for _, c, _ in found], tests)
  return [Decided(m, c, why, a) for (m, c, why), a in zip(found, adjusted)]


def _sequential(m: Member) -> tuple:
  """(its Claim or None, why not decided, (its test, at its cap)) of a group-sequential member, from the draws
  committed under its store."""
  name, loss, row, versus = m.sequential
  records = drawstore.committed(drawstore.ROOT, name, loss)
  look = deciding.look_of(records, row, versus)
  claim = deciding.claim_of(m.text, look, claims_lib.ALPHA, source=m.source, claim_id=m.claim)
  why = "" if claim is not None else (
      f"{look.draws} of the {deciding.DESIGN.looks[0]} draws of its first look committed, {look.cost()} "
      f"(--preset={deciding.preset(name)})")
  return claim, why, (deciding.rejects(look), look.draws >= deciding.DESIGN.cap)


def member_of(decided: Sequence[Decided], run: str, claim: Claim) -> Optional[Decided]:
  """The member `claim` of `run` decides, if any (the same claim in another run is a diagnostic of it)."""
  return next((d for d in decided if d.member.run == run and d.claim is claim), None)


def _words(decided: Sequence[Decided]) -> str:
  counts = {}
  for d in decided:
    counts[d.adjusted.word] = counts.get(d.adjusted.word, 0) + 1
  return ", ".join(f"{n} {'hold' if w == claims_lib.HOLDS and n > 1 else w}" for w, n in counts.items())


def beside_reported(d: Decided) -> str:
  """A decided member's 95% interval against each effect the paper reports for it: which it rules out (the
  interval above or below it) and which it contains; '' without an interval or a reported effect."""
  if d.claim is None or len(d.claim.interval) != 2 or not d.member.reported:
    return ""
  lo, hi = (100 * v for v in d.claim.interval)
  sides = {}
  for where, value in d.member.reported:
    side = "lies above" if value < lo else "lies below" if value > hi else "contains"
    sides.setdefault(side, []).append(f"{value:+.1f}% ({where})")
  return (f"{d.member.text.rstrip(' ,')}: [{lo:+.1f}%, {hi:+.1f}%] " +
          "; it ".join(f"{side} {', '.join(v)}" for side, v in sides.items()))


def conclusion(decided: Sequence[Decided]) -> list:
  """One sentence per group of members: its verdicts after Holm, each member that does not hold and why, and the
  smallest effects its evidence could detect (MDE at 80% power)."""
  out = []
  for group in dict.fromkeys(d.member.group for d in decided):
    ds = [d for d in decided if d.member.group == group]
    mdes = [d.claim.mde for d in ds if d.claim is not None and np.isfinite(d.claim.mde)]
    said = {}  # members that do not hold, those with the same words said once
    for d in ds:
      if d.claim is None or d.adjusted.word != claims_lib.HOLDS:
        said.setdefault(d.adjusted.verdict if d.claim is not None else "not decided, " + d.why, []).append(
            d.member.text.rstrip(" ,"))
    others = [f"{', '.join(texts)}: {why}" for why, texts in said.items()]
    checks = all(d.member.form == "check" for d in ds)
    head = f"{len(ds)} {'checks, computed' if checks else 'claim' if len(ds) == 1 else 'claims'}"
    mde = (f"; the smallest effect its evidence detects with 80% power: {100 * min(mdes):.1f}%" +
           (f" to {100 * max(mdes):.1f}%" if max(mdes) > min(mdes) + 5e-4 else "") if mdes else "")
    on = ", ".join(dict.fromkeys(population_of(d.member.run)[0] for d in ds))
    out.append(f"**{group}** ({head}{'' if checks else f'; on {on}'}): {'' if checks else 'after Holm, '}"
               f"{_words(ds)}" +
               (f" ({'; '.join(others)})" if others else "") + mde + ".")
  beside = [t for t in (beside_reported(d) for d in decided) if t]
  if beside:
    out.append("**Beside the effects the paper reports** (its NDCG@8 changes, experiments/framework/reported.py; they "
               "were measured on the paper's datasets and these intervals on the populations below, so an interval "
               "that rules one out says the effect differs here, not that the paper erred). " + ". ".join(beside) + ".")
  used = dict.fromkeys(population_of(d.member.run) for d in decided)
  # no member decided on an analogue (the paper's own files have no member: the project does not hold them)
  none = not {population_of(d.member.run) for d in decided if d.claim is not None} & {
      POPULATIONS[name] for name in analogues.ANALOGUES}
  out.append("**The populations**: " + "; ".join(f"{name}: {what}" for name, what in used) + "." +
             (" No claim is decided on the paper's own datasets (Yahoo, Istella, Web30k) or on data calibrated to "
              "them." if none else ""))
  return out
