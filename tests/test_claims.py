"""Verdicts in the form each claim is stated (experiments.page.claims): runs that re-draw their data, the
crossed seeds x queries interval, the claim forms on cases with a known answer, Holm's adjustment and TOST against
statsmodels."""
import json
import math

import jax
import numpy as np
import pytest

from experiments.framework import fold_data, tabulate
from experiments.page import claims, declared, family, pageplan, sweeps
from pfd_jax.data.config import DataConfig
from pfd_jax.ops import stats
from pfd_jax.training import program
from pfd_jax.config import ConfigError

SMALL = dict(synthetic_queries=(60, 30, 40))


# --- runs that sample the population ---------------------------------------------------------------------------

def test_each_draw_sees_its_own_data_and_fixed_data_stays_fixed():
  drawn = DataConfig(draws=2, **SMALL)
  assert fold_data.folds_of(drawn) == [1, 2]
  a, b = (fold_data.load_dataset(drawn, k) for k in (1, 2))
  assert a.config["data_fingerprint"] != b.config["data_fingerprint"]
  assert a.config["draw"] == 1 and b.config["draw"] == 2 and a.config["seed"] != b.config["seed"]
  assert a["train"].x.shape != b["train"].x.shape or not np.array_equal(a["train"].x, b["train"].x)
  again = fold_data.load_dataset(drawn, 1)  # a draw is a function of (label_seed, k): the same bits again
  assert again.config["data_fingerprint"] == a.config["data_fingerprint"]
  np.testing.assert_array_equal(again["train"].y, a["train"].y)
  fixed = DataConfig(**SMALL)  # the fixed population: one draw, whatever the fold or run
  f1, f2 = fold_data.load_dataset(fixed, 1), fold_data.load_dataset(fixed, 1)
  assert f1.config["data_fingerprint"] == f2.config["data_fingerprint"] and "draw" not in f1.config
  assert f1.config["data_fingerprint"] not in (a.config["data_fingerprint"], b.config["data_fingerprint"])
  with pytest.raises(ConfigError, match="draws"):
    DataConfig(dataset="letor", data_dir="x", privileged="1", draws=2)


def test_order_stream_zero_is_the_old_order_and_a_stream_reorders():
  keys = jax.random.split(jax.random.PRNGKey(0), 2)
  sizes, batch = (7, 5, 3), 2
  ids0 = np.asarray(program.plan(keys, 3, sizes, batch)[0])
  steps = program.steps_per_epoch(sizes, batch)
  old = np.concatenate([np.full(-(-q // min(batch, q)), b) for b, q in enumerate(sizes)])
  np.testing.assert_array_equal(ids0, old[np.asarray(jax.random.permutation(jax.random.PRNGKey(3), steps))])
  assert not np.array_equal(ids0, np.asarray(program.plan(keys, 3, sizes, batch, 4)[0]))


# --- the crossed interval --------------------------------------------------------------------------------------

def test_crossed_interval_equals_a_float64_anova_reference():
  """Var(grand mean) = (MS_seed + MS_query - MS_res) / (S Q) with statsmodels' two-way ANOVA mean squares, and
  Satterthwaite's df; two folds: their means averaged, variances summed / 4."""
  sm = pytest.importorskip("statsmodels.formula.api")
  anova_lm = pytest.importorskip("statsmodels.stats.anova").anova_lm
  import pandas as pd
  rng = np.random.default_rng(3)
  blocks = [rng.normal(0.02, 0.05, (s, 1)) + rng.normal(0, 0.2, (1, q)) + rng.normal(0, 0.1, (s, q))
            for s, q in ((4, 30), (5, 20))]
  var, terms = 0.0, []
  for d in blocks:
    s, q = d.shape
    frame = pd.DataFrame(dict(y=d.ravel(), seed=np.repeat(np.arange(s), q).astype(str),
                              query=np.tile(np.arange(q), s).astype(str)))
    table = anova_lm(sm.ols("y ~ C(seed) + C(query)", frame).fit())
    ms = table["mean_sq"]
    parts = [(ms["C(seed)"] / (s * q * 4), s - 1), (ms["C(query)"] / (s * q * 4), q - 1),
             (-ms["Residual"] / (s * q * 4), (s - 1) * (q - 1))]
    var += sum(v for v, _ in parts)
    terms += parts
  e = stats.crossed(blocks, reference=0.5)
  np.testing.assert_allclose(e.diff, np.mean([d.mean() for d in blocks]), rtol=1e-12)
  np.testing.assert_allclose(e.se, math.sqrt(var), rtol=1e-10)
  np.testing.assert_allclose(e.df, var ** 2 / sum(v * v / k for v, k in terms), rtol=1e-10)
  assert e.unit == "seeds x queries"
  with pytest.raises(ValueError, match="2 x 2"):
    stats.crossed([np.zeros((1, 5))], 1.0)


def test_crossed_interval_covers_at_its_level_where_the_run_interval_does_not():
  """Monte-Carlo: new seeds and new test queries each replication (sigma_seed 0.03, sigma_query 0.2, residual
  0.1; 5 seeds, 60 queries): the crossed 95% interval covers the true mean about 95% of the time; the run-level
  interval, blind to the test set's draw, far less."""
  rng = np.random.default_rng(11)
  s, q, mu, n = 5, 60, 0.01, 1500
  cover = np.zeros(2)
  for _ in range(n):
    d = mu + rng.normal(0, 0.03, (s, 1)) + rng.normal(0, 0.2, (1, q)) + rng.normal(0, 0.1, (s, q))
    for i, e in enumerate((stats.crossed([d], 1.0), stats.runs_estimate(d.mean(1), 1.0))):
      lo, hi = e.interval()
      cover[i] += lo < mu < hi
  cover /= n
  assert 0.93 < cover[0] < 0.97, cover  # 3.5 Monte-Carlo standard errors (0.0056) around 0.95
  assert cover[1] < 0.8, cover


def test_unclipped_seed_component_is_unbiased_where_clipping_is_not():
  """True seed variance 0: the clipped estimate's mean is biased up, the unclipped one's is 0 (within 4 SE)."""
  rng = np.random.default_rng(2)
  est = np.array([[stats.variance_components(rng.normal(0, 0.2, (1, 40)) + rng.normal(0, 0.1, (5, 40)), clip=c)[0]
                   for c in (True, False)] for _ in range(2000)])
  clipped, unclipped = est[:, 0], est[:, 1]
  assert abs(unclipped.mean()) < 4 * unclipped.std() / math.sqrt(len(unclipped))
  assert clipped.mean() > 4 * clipped.std() / math.sqrt(len(clipped)) and (unclipped < 0).any()


# --- the claim forms -------------------------------------------------------------------------------------------

def _est(rel, half, n=30, ref=0.5):
  """An estimate with relative change `rel` and a 95% interval of half-width `half` (relative)."""
  se = half * ref / stats.sps.t.ppf(0.975, n - 1)
  return stats.Estimate(rel * ref, ref, se, n - 1, "runs", n)


@pytest.mark.parametrize("form,margin,rel,half,expect", [
    ("superiority", 0.0, 0.05, 0.02, "holds"),
    ("superiority", 0.0, -0.05, 0.02, "does not reproduce"),   # the interval excludes every gain
    ("superiority", 0.0, 0.005, 0.01, "undecided"),            # symmetric: a narrow interval around +0.5% is no refutation
    ("superiority", 0.0, 0.01, 0.005, "holds"),                # a true +1% holds once the interval is narrow
    ("non-inferiority", 0.01, -0.005, 0.004, "holds"),         # [-0.9%, -0.1%]: no worse by 1%
    ("non-inferiority", 0.01, -0.03, 0.01, "does not reproduce"),
    ("equivalence", 0.02, 0.003, 0.01, "holds"),               # inside +-2%
    ("equivalence", 0.02, 0.05, 0.01, "does not reproduce"),   # outside: [+4%, +6%]
    ("equivalence", 0.02, 0.015, 0.01, "undecided"),           # straddles the margin
])
def test_forms_on_known_cases(form, margin, rel, half, expect):
  word, p = claims.judge(_est(rel, half), form, margin)
  assert word == expect
  assert (p < claims.ALPHA) == (expect == "holds")  # the one-sided p agrees with the interval


def test_the_per_query_verdict_is_in_its_claims_form():
  """A row that differs from its reference by a constant per run (an exact difference): the claim that it is no
  worse by 1% holds by run and per query alike; a superiority claim on a row below its reference does not
  reproduce, marked reversed."""
  rng = np.random.default_rng(3)
  runs, q = 0.6 + rng.normal(0, 0.01, 5), 0.6 + rng.normal(0, 0.2, 40)
  rows, queries = {"a": runs[:, None] - 0.001, "b": runs[:, None]}, {"a": q - 0.001, "b": q}
  c = claims.beats("a no worse", rows, "a", "b", queries=queries, form="non-inferiority", margin=0.01)
  assert c.verdict == "holds" and c.queries.startswith("inside the claimed region: ")  # a diagnostic: no verdict
  worse = {"a": q - 0.05, "b": q}
  assert "(reversed)" in claims.beats("a beats b", rows, "a", "b", queries=worse).queries


def test_a_row_compared_with_itself_is_vacuous_and_in_no_holm_family():
  """The PFD search that kept no distillation, against no distillation: one model compared with itself. Every
  form's claim on it is vacuous (by run and per query), with no p, so Holm leaves it out of the family; the
  intersection over a sweep of such points too."""
  rng = np.random.default_rng(3)
  runs, q = 0.6 + rng.normal(0, 0.01, 5), 0.6 + rng.normal(0, 0.2, 40)
  rows, queries = {"a": runs[:, None], "b": runs[:, None]}, {"a": q, "b": q}
  for form, margin in (("superiority", 0.0), ("non-inferiority", 0.01), ("equivalence", 0.01)):
    c = claims.beats("a vs b", rows, "a", "b", queries=queries, form=form, margin=margin, source="PFD")
    assert c.verdict == "vacuous" and c.queries.startswith("vacuous") and math.isnan(c.p)
    assert all("no test" in d and "p<" not in d and "p=" not in d for d in (c.detail, c.queries))
  real = claims.Claim("r", "holds", "", source="PFD", p=0.02, p_against=0.98)
  (pv, vv, _), (pr, vr, _) = claims.adjust([c, real])
  assert math.isnan(pv) and vv == "vacuous" and (pr, vr) == (0.02, "holds")  # a family of one
  assert sweeps.every("x", {"p1": c, "p2": c}).verdict == "vacuous"


def test_equivalence_p_is_statsmodels_tost():
  weightstats = pytest.importorskip("statsmodels.stats.weightstats")
  rng = np.random.default_rng(4)
  a, b = 0.5 + rng.normal(0.002, 0.01, 25), np.full(25, 0.5)
  e = stats.runs_estimate(a - b, 0.5)
  _, p = claims.judge(e, "equivalence", 0.02)
  ref = weightstats.ttost_paired(a, b, -0.01, 0.01)[0]  # margin 2% of the reference 0.5
  np.testing.assert_allclose(p, ref, rtol=1e-8)


def test_trend_and_shape_on_constructed_sweeps():
  rng = np.random.default_rng(8)
  x = np.array([5.0, 10.0, 20.0, 40.0, 60.0])
  runs = 12
  falling = 0.08 - 0.001 * x[:, None] + rng.normal(0, 0.005, (5, runs))
  assert sweeps.trend("t", x, falling, decreasing=True).verdict == "holds"
  assert sweeps.trend("t", x, falling).verdict == "does not reproduce"
  flat = rng.normal(0, 0.005, (5, runs))
  assert sweeps.trend("t", x, flat, decreasing=True).verdict.startswith("undecided")
  u = 0.05 - 0.0001 * (x[:, None] - 30) ** 2 + rng.normal(0, 0.003, (5, runs))  # inverted U, peak inside
  assert sweeps.shape("s", x, u).verdict == "holds"
  rising = 0.001 * x[:, None] + rng.normal(0, 0.003, (5, runs))  # monotone: its slope at the top end is > 0
  assert sweeps.shape("s", x, rising).verdict == "does not reproduce"


def _slope_mde(slopes: np.ndarray) -> float:
  """The one-sided t-test's MDE at 80% power and 2.5% for the mean of per-run slopes, from scipy's noncentral t."""
  from scipy import optimize, stats as sps
  n = slopes.size
  se, crit = slopes.std(ddof=1) / math.sqrt(n), sps.t.ppf(0.975, n - 1)
  return se * optimize.brentq(lambda nc: sps.nct.sf(crit, n - 1, nc) - 0.8, 0.0, 20.0)


def test_a_trend_and_a_shape_state_their_mde_across_the_sweep():
  """A slope's MDE reads over x's span: the smallest end-to-end change of the gain (relative) at the slope its test
  finds with 80% power; for a shape the larger of its two end slopes'. Slopes fitted here by numpy alone."""
  rng = np.random.default_rng(3)
  x = np.array([0.1, 0.3, 0.5, 0.8, 1.0])
  gains = 0.02 * x[:, None] + rng.normal(0, 0.01, (5, 15))
  t = sweeps.trend("t", x, gains)
  fits = [np.polyfit(x, gains[:, r], 1)[0] for r in range(15)]
  np.testing.assert_allclose(t.mde, _slope_mde(np.asarray(fits)) * 0.9, rtol=1e-6)
  assert f"MDE {100 * t.mde:.1f}% across x's span of 0.9" in t.detail
  quads = [np.polyder(np.polyfit(x, gains[:, r], 2)) for r in range(15)]
  ends = [np.asarray([np.polyval(q, end) for q in quads]) for end in (0.1, 1.0)]
  s = sweeps.shape("s", x, gains)
  np.testing.assert_allclose(s.mde, max(_slope_mde(e) for e in ends) * 0.9, rtol=1e-6)


def test_every_point_is_an_intersection():
  hold, und = claims.claim("a", _est(0.05, 0.02)), claims.claim("b", _est(0.005, 0.01))
  bad = claims.claim("c", _est(-0.05, 0.02))
  assert sweeps.every("x", {"a": hold, "b": hold}).verdict == "holds"
  c = sweeps.every("x", {"a": hold, "b": und})
  assert c.verdict == "undecided at 1 of 2 points" and "holds at a" in c.detail and c.p == und.p
  # what would decide it: the units for 80% power at a 2% change, not at the observed +0.5% (which needs far more)
  assert c.need == und.need > 0 and "80% power at a 2% change or the observed one" in c.detail
  assert sweeps.every("x", {"a": hold, "b": und, "c": bad}).verdict == "does not reproduce"


def test_holm_in_both_directions_equals_statsmodels_on_a_fixed_list():
  """The family's adjustment (claims.adjust): Holm's step-down over each claim's smaller one-sided p (for it or
  against it), as statsmodels' multipletests(method='holm') computes on the same list; a verdict survives in its
  own direction only; a member without a run counts at p = 1; checks and vacuous claims are no members."""
  multitest = pytest.importorskip("statsmodels.stats.multitest")
  p = np.array([0.01, 0.04, 0.03, 0.005, 0.2, 0.0001, 0.03])
  np.testing.assert_allclose(stats.holm(p), multitest.multipletests(p, method="holm")[1], rtol=1e-12)
  assert np.isnan(stats.holm([0.01, np.nan])[1]) and stats.holm([0.01, np.nan])[0] == 0.01
  C = lambda word, p, against, **k: claims.Claim("c", word, "", source="PFD", p=p, p_against=against, **k)
  listed = [C("holds", 0.001, 0.999), C("holds", 0.012, 0.988), C("does not reproduce", 0.997, 0.003),
            C("does not reproduce", 0.985, 0.015), C("undecided", 0.4, 0.6, at="5 runs"), None,
            C("holds", math.nan, math.nan, form="check"), C("vacuous", math.nan, math.nan)]
  directional = [0.001, 0.012, 0.003, 0.015, 0.4, 1.0]  # the smaller side of each tested member; None at 1
  ref = multitest.multipletests(directional, method="holm")[1]
  out = claims.adjust(listed)
  np.testing.assert_allclose([a.p for a in out[:5]], ref[:5], rtol=1e-12)  # the member without a run: no p shown
  assert [a.verdict for a in out] == ["holds", "undecided after Holm", "does not reproduce",
                                      "undecided after Holm", "undecided at 5 runs", "not decided", "holds", "vacuous"]
  assert [a.word for a in out] == [claims.HOLDS, claims.AFTER_HOLM, claims.AGAINST, claims.AFTER_HOLM,
                                   claims.UNDECIDED, claims.NOT_DECIDED, claims.HOLDS, claims.VACUOUS]
  assert all(math.isnan(a.p) for a in out[5:])
  # the same decisions as statsmodels' reject at 2.5% on the directional p-values
  reject = multitest.multipletests(directional, alpha=claims.ALPHA, method="holm")[0]
  assert [a.word in ("holds", "does not reproduce") for a in out[:6]] == list(reject)


def test_the_family_is_fixed_by_its_declaration():
  """A member whose run is absent is listed as not decided and stays in the family at p = 1; a run that decides no
  member (ours, a replicate of a member's claim) moves no adjusted p when it comes or goes; a claim is judged as
  declared (a builder that judges another form is an error). A member is its run's claim with its id, whatever
  either text says."""
  C = lambda text, p, **k: claims.Claim(text, "holds" if p < claims.ALPHA else "undecided", "",
                                        source=k.pop("source", "PFD"), p=p, p_against=1 - p,
                                        at="" if p < claims.ALPHA else "9 runs", **k)
  members = tuple(family.Member(g, f"{k}/x", k, f"{k.upper()} beats", unit="runs",
                                declared=declared.Declared(k, f"{k.upper()} beats", source="PFD"))
                  for g, k in (("g", "a"), ("g", "b"), ("h", "c")))
  runs = {"a/x": ([C("A beats one", 0.004, id="a"), C("ours beats", 0.001, source="")], ""),
          "b/x": ([C("B beats two", 0.02, id="b")], ""), "c/x": ([C("C beats three", 0.01, id="c")], "")}
  full = family.resolve(runs, members)
  assert [d.adjusted[1] for d in full] == ["holds", "holds", "holds"]
  # matched by id: reworded, A's claim still decides its member; A's words without its id decide nothing
  reworded = family.resolve(dict(runs, **{"a/x": ([C("reworded", 0.004, id="a")], "")}), members)
  assert reworded[0].claim.text == "reworded"
  assert family.resolve(dict(runs, **{"a/x": ([C("A beats one", 0.004)], "")}), members)[0].claim is None
  # a replicate of A's claim in another run, and a run of ours: nothing moves
  more = dict(runs, **{"d/x": ([C("A beats one", 0.3, id="a"), C("ours again", 0.0001, source="")], "")})
  assert [d.adjusted for d in family.resolve(more, members)] == [d.adjusted for d in full]
  # C's run removed, or stale: C is not decided, counted at p = 1 (three members still); the others' adjusted p
  # never fall
  for gone in ({k: v for k, v in runs.items() if k != "c/x"}, dict(runs, **{"c/x": (runs["c/x"][0], "stale (x)")})):
    less = family.resolve(gone, members)
    assert less[2].claim is None and less[2].adjusted[1] == "not decided" and len(less) == 3
    assert less[2].why in ("no run of c/x", "stale (x)")
    assert all(l.adjusted[0] >= f.adjusted[0] for l, f in zip(less[:2], full[:2]))
  np.testing.assert_allclose([d.adjusted[0] for d in less], [3 * 0.004, 2 * 0.02, math.nan])
  assert less[1].adjusted[1] == "undecided after Holm"  # 0.04 >= 2.5%: B no longer holds
  text = " ".join(family.conclusion(less))
  assert "**g** (2 claims; on x): after Holm, 1 holds, 1 undecided after Holm (B beats: undecided after Holm)" in text
  assert "**h** (1 claim; on x): after Holm, 1 not decided (C beats: not decided, stale (x))" in text
  other = family.resolve(dict(runs, **{"c/x": ([C("C beats three", 0.01, unit="draws", id="c")], "")}), members)
  assert other[2].claim is None and "judged it over draws, the declaration over runs" in other[2].why
  # a claim is judged in its declared form, margin and source, with its id; a builder that judges another is an error
  rows = {"a": [[0.52], [0.55], [0.51]], "b": [[0.5], [0.5], [0.5]]}
  within = declared.Declared("a", "A is within 2% of B", "equivalence", 0.02, "PFD").judged(claims.beats, rows, "a",
                                                                                           "b")
  assert (within.id, within.form, within.margin, within.source) == ("a", "equivalence", 0.02, "PFD")
  assert within.word == claims.judge(claims.estimate_of(tabulate.compare(
      {k: np.asarray(v) for k, v in rows.items()}, "b")["a"]), "equivalence", 0.02)[0]
  with pytest.raises(declared.DeclarationError, match="a is declared trend"):
    declared.Declared("a", "A grows", "trend").judged(claims.beats, rows, "a", "b")
  with pytest.raises(declared.DeclarationError, match="declared twice"):
    declared.declare(declared.Declared("a", "A"), declared.Declared("a", "A again"))


def test_every_member_of_the_declared_family_is_a_claim_its_run_states():
  """The family lists claims its runs' drivers declare: each member's run is a preset of the page, and its claim's
  form, margin and source are read from its driver's declaration (no member states them); an id its driver does not
  declare is an error naming the driver."""
  from experiments import report
  keys = {e.key for e in report.EXPECTED}
  assert {m.run for m in family.FAMILY} <= keys
  for m in family.FAMILY:
    d = family.declared_by(m.run, m.claim)
    assert m.declared is None and d.id == m.claim and (m.form, m.margin, m.source) == (d.form, d.margin, d.source)
  with pytest.raises(declared.DeclarationError, match="experiments.paper.fig4_sparsity declares no claim 'fig4:x'"):
    family.declared_by("fig4_sparsity/synthetic-redrawn", "fig4:x")
  assert len({(m.run, m.text) for m in family.FAMILY}) == len(family.FAMILY) == 44  # each claim once
  assert len({(m.run, m.claim) for m in family.FAMILY}) == 44 and all(m.claim for m in family.FAMILY)
  assert sum(m.source == claims.PFD for m in family.FAMILY) == 39  # the main paper's 39 claims
  assert all(m.quote for m in family.FAMILY)  # each quotes the sentence it tests
  assert not {m.text for m, _ in family.WITHDRAWN} & {m.text for m in family.FAMILY}
  # a member declared over the re-drawn population is decided by a preset that re-draws and selects on validation
  flags = {e.key: pageplan._preset(e)[1].flags for e in report.EXPECTED}
  for m in family.FAMILY:
    if m.population == "re-drawn":
      assert "--draws=" in flags[m.run] and "--select_on=vali" in flags[m.run], (m.run, flags[m.run])


def test_table_2_on_an_analogue_is_its_own_members_and_its_pilot_their_diagnostic():
  """Each declared analogue's sequential runs decide Table 2's three comparisons per loss (each member its draw
  store, loss and rows), each member set beside the paper's own effect on that dataset only (Table 4's); a claim of
  the analogue's pilot or decisive run is a diagnostic of the analogue's member, never of the synthetic
  population's member with the same words."""
  from experiments.page import deciding, familypage
  for name in ("yahoo_like", "istella_like", "web30k_like"):  # 3 analogues x 2 losses x 3 comparisons
    members = [m for m in family.FAMILY if m.run.startswith(f"table2/{name}-sequential_")]
    assert len(members) == 6 and {m.sequential[0] for m in members} == {deciding.store(name, l) for l in ("rankbce",
                                                                                                         "ranknet")}
    assert all(m.sequential[2] == "pfd" and m.claim == declared.row_claim(m.sequential[1], "pfd", m.sequential[3])
               for m in members)
  ours = [m for m in family.FAMILY if m.run.startswith("table2/yahoo_like-sequential_")]
  assert all(m.form == "superiority" and m.population == "re-drawn" for m in ours)
  assert all(len(m.reported) == 1 and m.reported[0][0] == "Yahoo" for m in ours)
  gend = {m.run.rsplit("_", 1)[1]: m for m in ours if "GenD" in m.text}
  assert "0.585 ± 0.007" in gend["ranknet"].quote and "0.585" not in gend["rankbce"].quote
  assert gend["ranknet"].reported == (("Yahoo", -0.2),)  # Table 4: 0.585 against 0.586
  assert family.population_of("table2/yahoo_like-pilot_rankbce")[0] == "the Yahoo analogue"
  decided = family.resolve({})
  claim = claims.Claim("[rankbce] PFD student beats no-distillation (paper, Table 2): +9.0%", "holds", "", p=0.01,
                       source="PFD", id=declared.row_claim("rankbce", "pfd", "no_distill"))
  for diagnostic in ("table2/yahoo_like-pilot_rankbce", "table2/yahoo_like-decisive_rankbce"):
    assert familypage.page_verdict(diagnostic, claim, decided)[0] == (
        "diagnostic: decided by table2/yahoo_like-sequential_rankbce")
  assert familypage.page_verdict("table2/synthetic", claim, decided)[0] == (
      f"diagnostic: decided by {family.DECISIVE}")
  assert familypage.page_verdict("table2/synthetic", claim._replace(id=""), decided)[0] == (
      "diagnostic: no member of the family")  # the paper's words without the claim's id


def test_figure_3_is_decided_on_the_yahoo_analogue_with_rankbce_at_appendix_a7s_alphas():
  """Section 4.2: "The experiments here use the Yahoo dataset and RankBCE loss": Figure 3's member on the Yahoo
  analogue runs on the population calibrated to Yahoo's RankBCE teachers, over appendix A.7's alphas, on draws of
  its own (none of Table 2's pilot or decisive run), and a claim of the synthetic sweep stays its own member's."""
  from experiments.page import familypage
  from experiments.paper import fig3_alpha
  m = next(m for m in family.FAMILY if m.run == "fig3_alpha/yahoo_like-redrawn")
  assert m.claim == "fig3:pfd-vs-no_distill-every-alpha" and "Yahoo dataset and RankBCE loss" in m.quote
  assert family.population_of(m.run)[0] == "the Yahoo analogue"
  flags = next(p for p in fig3_alpha.DRIVER.presets if p.label == "yahoo_like-redrawn").flags.split()
  assert {"--dataset=yahoo_like", "--loss=rankbce", "--alphas=0.3,0.5,0.7,0.9,0.95,0.99,0.999",
          "--label_seed=2", "--seed=2", "--select_on=vali"} <= set(flags)
  assert "--analogue=calibrated_for=rankbce,test_scale=20" in flags  # Table 2's analogue runs' test lists
  claim = claims.Claim("PFD student beats no-distillation at every alpha ≤ 0.95", "holds", "", p=0.01,
                       source="PFD", id=m.claim)
  decided = family.resolve({})
  assert familypage.page_verdict("fig3_alpha/yahoo_like-pilot", claim, decided)[0] == (
      "diagnostic: decided by fig3_alpha/yahoo_like-redrawn")
  assert familypage.page_verdict("fig3_alpha/synthetic", claim, decided)[0] == (
      "diagnostic: decided by fig3_alpha/synthetic-redrawn")


def test_an_analogues_decisive_run_is_sized_by_its_published_pilot_by_the_declared_rule(tmp_path):
  """No published pilot: 0 draws (the run fails at once on its --pilot); a published one: plan(pilot,
  mde=ANALOGUE_MDE)'s draws, the fewest at which every comparison's MDE is at most 3%."""
  from experiments.framework import protocol
  assert protocol.decisive_draws("yahoo_like", "rankbce", root=str(tmp_path)) == 0
  folds = {f"fold{k}": dict(seconds=600.0, test_lists_valid=[True] * 4, rows={
      "no_distill": dict(best=dict(test=[[0.5]]), test_lists=[0.5, 0.4, 0.6, 0.5]),
      "pfd": dict(best=dict(test=[[0.52 + 0.01 * k]]), test_lists=[0.52 + 0.01 * k, 0.43, 0.6, 0.53])}) for k in (1, 2, 3)}
  pilot = dict(losses={"rankbce": dict(train_config={}, folds=folds)}, config=dict(data=dict(draws=3)))
  folder = tmp_path / "published" / "table2-yahoo_like-pilot_rankbce"
  folder.mkdir(parents=True)
  (folder / "results.json").write_text(json.dumps(pilot))
  sized = protocol.decisive_draws("yahoo_like", "rankbce", root=str(tmp_path))
  assert sized == protocol.plan(pilot, mde=protocol.ANALOGUE_MDE)["draws"] > 1


def test_redrawn_components_unbiased_and_power_matches_simulation():
  """Runs of their own data: run variance 0.0004, query variance 0.04, 40-80 queries each; the estimators' means
  over 3,000 studies match (4 SE); the one-sided test's power at the measured se matches its Monte-Carlo rate."""
  rng = np.random.default_rng(6)
  est = []
  for _ in range(3000):
    lists = [rng.normal(0, 0.02) + rng.normal(0, 0.2, rng.integers(40, 81)) for _ in range(8)]
    est.append(stats.redrawn_components(lists))
  est = np.array(est)
  for i, truth in enumerate((0.0004, 0.04)):
    assert abs(est[:, i].mean() - truth) < 4 * est[:, i].std() / math.sqrt(len(est)), (i, est[:, i].mean())
  assert (est[:, 0] < 0).any()  # unclipped
  n, sd, effect = 12, 0.03, 0.02
  e = stats.Estimate(0.0, 1.0, sd / math.sqrt(n), n - 1, "runs", n)
  hits = [stats.runs_estimate(rng.normal(effect, sd, n), 1.0).interval()[0] > 0 for _ in range(4000)]
  assert abs(np.mean(hits) - e.power(effect)) < 4 * math.sqrt(e.power(effect) * (1 - e.power(effect)) / 4000)


@pytest.mark.heavy
@pytest.mark.parametrize("form,margin", [("superiority", 0.0), ("superiority", 0.01), ("non-inferiority", 0.01),
                                         ("equivalence", None)])
def test_the_mde_is_the_effect_the_claims_own_test_finds_80_percent_of_the_time(form, margin):
  """The MDE a claim prints, from its estimate's spread (the true sd here): draws of 12 runs whose true relative change
  lies that far beyond the claim's threshold (equivalence: a true zero change, the MDE its margin) give 'holds' from
  the claim's own verdict path (claims.claim) in 80% of 4,000 studies (4 SE; TOST's two sides are not quite
  exclusive, so its rate is at least 80%)."""
  rng = np.random.default_rng(11)
  n, sd, ref = 12, 0.03, 0.25
  mde = claims.detectable(stats.Estimate(0.0, ref, sd / math.sqrt(n), n - 1, "draws", n), form)
  z = 1.96 + (1.28 if form == "equivalence" else 0.84)  # the normal approximation: (z.975 + z.8 or z.9) se
  assert 0 < mde < 1 and math.isclose(mde, z * sd / math.sqrt(n) / ref, rel_tol=0.15)  # t with 11 df: wider
  margin = mde if margin is None else margin
  truth = {"superiority": margin + mde, "non-inferiority": -margin + mde, "equivalence": 0.0}[form] * ref
  hits = [claims.claim("c", stats.runs_estimate(rng.normal(truth, sd, n), ref, "draws"), form=form,
                       margin=margin).verdict == "holds" for _ in range(4000)]
  tol = 4 * math.sqrt(0.8 * 0.2 / 4000)
  assert (0.8 - tol < np.mean(hits) < 0.8 + tol) if form != "equivalence" else (0.8 - tol < np.mean(hits) < 0.86)


def test_a_claims_unit_follows_the_population():
  """pairs.primary: draws when every fold is a draw of its own; seeds x queries crossed with per-seed lists on fixed
  data (its mean the rows' difference); None (the runs' interval) for a file without them."""
  from experiments.framework.pairs import primary
  from experiments.framework.records import FoldRecord, LossRecord, RowRecord
  rng = np.random.default_rng(1)

  def fold(draw, lists=True):
    rows = {}
    for name, shift in (("pfd", 0.02), ("no_distill", 0.0)):
      v = 0.4 + shift + rng.normal(0, 0.1, (3, 20))
      rows[name] = RowRecord(best={"test": v.mean(1)[:, None]}, test_lists=v.mean(0), seed_lists=v if lists else None)
    return FoldRecord(rows=rows, data=dict(draw=draw) if draw else {}, test_lists_valid=np.ones(20, bool))

  drawn = LossRecord(folds={f"fold{k}": fold(k) for k in (1, 2, 3)})
  e = primary(drawn, "pfd", "no_distill")
  assert e.unit == "draws" and e.n == 3
  fixed = LossRecord(folds={"fold1": fold(0)})
  e = primary(fixed, "pfd", "no_distill")
  f = fixed.folds["fold1"].rows
  assert e.unit == "seeds x queries"
  np.testing.assert_allclose(e.diff, f["pfd"].best["test"].mean() - f["no_distill"].best["test"].mean(), rtol=1e-12)
  assert primary(LossRecord(folds={"fold1": fold(0, lists=False)}), "pfd", "no_distill") is None
  assert primary(fixed, "pfd", "gend") is None


def test_per_query_comparisons_are_each_rows_own_bootstrap():
  """pairs.comparisons bootstraps the rows side by side: each row's 'queries' record is stats.per_query of its
  pooled test queries against no-distillation's, bit for bit, and in the rows' order."""
  from experiments.framework import pairs, tabulate
  from experiments.framework.records import FoldRecord, LossRecord, RowRecord
  rng = np.random.default_rng(4)
  names = ("no_distill", "self_distill", "gend", "pfd")
  folds = {}
  for k in (1, 2):
    v = {n: rng.uniform(0, 1, (1, 30)) for n in names}
    folds[f"fold{k}"] = FoldRecord(rows={n: RowRecord(best={"test": x.mean(1)[:, None]}, test_lists=x.mean(0))
                                         for n, x in v.items()},
                                   data=dict(draw=k), test_lists_valid=rng.uniform(size=30) < 0.8)
  rec = LossRecord(folds=folds)
  got = pairs.comparisons(rec)["queries"]
  lists = pairs.query_lists(rec)
  assert list(got) == list(names[1:])
  for n in names[1:]:
    assert got[n] == tabulate.comparison_record(stats.per_query(lists[n], lists["no_distill"]))


def test_the_units_a_test_needs_are_counted_in_the_claims_unit():
  """An undecided superiority claim says how many units would give 80% power: draws and test queries counted
  whole (a run's 16 draws are 16 folds, not 16 x seeds), seeds per fold for runs."""
  from experiments.page import claims as cl
  need = stats.runs_for_power(0.0164, 0.038)  # +9% of 0.182 observed, sd of a draw's difference 0.038
  e = stats.Estimate(0.0164, 0.182, 0.038 / 4, 15, "draws", 16)
  c = cl.claim("x", e, folds=16)
  assert c.verdict == "undecided at 16 draws" and f"~{need} draws would detect the observed change" in c.detail
  e = stats.Estimate(0.0164, 0.182, 0.038 / 4, 15, "runs", 16)
  assert f"~{-(-need // 4)} seeds per fold" in cl.claim("x", e, folds=4).detail
  # a method run once a fold (the Committee Perceptron's): folds, counted whole, and its interval is the run's own
  e = stats.Estimate(0.0164, 0.182, 0.038 / 4, 15, "folds", 16)
  c = cl.claim("x", e, run=dict(n=16, diff=0.0164, reference=0.182, sd=0.038, rel=0.0164 / 0.182))
  assert c.verdict == "undecided at 16 folds" and f"~{need} folds would detect" in c.detail and "runs:" not in c.detail
  # units enough already: the test had 80% power at a 2% change and left a smaller one undecided; it says so,
  # never that fewer units than it has would decide it (a sweep's hardest point likewise)
  e = stats.Estimate(0.0005, 0.182, 0.001, 15, "draws", 16)  # sd of a draw's difference 0.004: 2% needs ~10 draws
  need = stats.runs_for_power(0.02 * 0.182, 0.004)
  assert need < 16
  c = cl.claim("x", e)
  assert c.verdict == "undecided at 16 draws" and (c.need, c.have) == (need, 16)
  assert "its 16 draws already give its test 80% power at a 2% change" in c.detail and "would detect" not in c.detail
  hold = cl.claim("y", stats.Estimate(0.02, 0.182, 0.001, 15, "draws", 16))
  d = sweeps.every("x", {"a": hold, "b": c}).detail
  assert "each undecided point's test already has 80% power at a 2% change or the observed one with its 16 draws" in d
  short = cl.claim("x", stats.Estimate(0.0005, 0.182, 0.004, 15, "draws", 16))  # 4x the spread: ~150 draws
  assert short.need > 16 and "~" in sweeps.every("x", {"a": hold, "b": short}).detail


def test_an_observed_change_against_the_claim_gets_no_count_of_units():
  """Superiority with the observed change at or below 0, non-inferiority below minus its margin, equivalence outside
  its margin: the detail says the change lies against the claim, never that more units 'would detect' it."""
  from experiments.page import claims as cl
  for form, margin, diff in (("superiority", 0.0, -0.004), ("non-inferiority", 0.01, -0.0024),
                             ("equivalence", 0.02, -0.0044)):
    e = stats.Estimate(diff, 0.182, 0.004, 15, "draws", 16)  # wide: undecided
    c = cl.claim("x", e, form=form, margin=margin)
    assert c.verdict.startswith("undecided") and "would detect" not in c.detail, (form, c.detail)
    assert "the observed change lies against the claim" in c.detail and c.need == 0


def test_an_equivalence_count_is_the_two_one_sided_tests_at_the_observed_change():
  from experiments.page import claims as cl
  e = stats.Estimate(0.001, 0.182, 0.003, 15, "draws", 16)  # +0.5% observed, margin 2%
  c = cl.claim("x", e, form="equivalence", margin=0.02)
  need = stats.units_for_tost_power(0.02 * 0.182, 0.001, 0.003 * 4)
  assert c.verdict.startswith("undecided") and c.need == need
  assert f"~{need:,} draws would detect the observed change within the 2% margin" in c.detail
  assert stats.tost_power(need, 0.02 * 0.182, 0.001, 0.012) >= 0.8 > stats.tost_power(need - 1, 0.02 * 0.182,
                                                                                        0.001, 0.012)


def test_a_slope_against_the_claim_gets_no_count_of_runs():
  from experiments.page import sweeps
  x = np.array([0.0, 1.0, 2.0])
  rng = np.random.default_rng(0)
  gains = np.stack([-0.01 * x[i] + rng.normal(0, 0.05, 12) for i in range(3)])  # slope against a growing gain
  c = sweeps.trend("grows", x, gains)
  assert c.verdict.startswith("undecided") and "lies against the claim" in c.detail and "would detect" not in c.detail


def test_the_papers_typed_table_4_agrees_with_itself_and_with_calibration():
  """Each row's printed change over no-distillation against its printed means (3 digits: within their rounding),
  so a mistyped figure fails; the calibration's targets are these figures."""
  from experiments import calibrate
  from experiments.framework import reported
  for (dataset, loss), rows in reported.TABLE4.items():
    base = rows["no_distill"][0]
    for name, (ndcg, printed) in rows.items():
      assert abs(100 * (ndcg / base - 1) - printed) < 100 * 0.001 / base + 0.05, (dataset, loss, name)
    assert reported.table4_change(loss, "pfd") == tuple((d, reported.TABLE4[(d, loss)]["pfd"][1]) for d in reported.DATASETS)
  assert calibrate.TABLE4["web30k_like"]["rankbce"] == (0.241, 3.6, -27.6)
  assert dict(reported.table4_change("ranknet", "pfd", "gend"))["Yahoo"] == -0.2  # the paper's own tie


def test_an_interval_is_set_beside_the_effects_the_paper_reports():
  e = stats.Estimate(0.02, 1.0, 0.005, 39.0, "draws", 40)
  c = claims.claim("X beats Y", e, source=claims.PFD)
  lo, hi = e.interval()
  assert c.interval == pytest.approx((lo, hi))
  m = family.Member("g", "a/x", "x", "X beats Y", reported=(("A", 0.5), ("B", 2.0), ("C", 5.0)),
                    declared=declared.Declared("x", "X beats Y", source=claims.PFD))
  text = family.beside_reported(family.Decided(m, c, "", (c.p, c.verdict)))
  assert text == f"X beats Y: [{100 * lo:+.1f}%, {100 * hi:+.1f}%] lies above +0.5% (A); it contains +2.0% (B); it " \
                "lies below +5.0% (C)"
  assert family.beside_reported(family.Decided(m._replace(reported=()), c, "", (c.p, c.verdict))) == ""
  assert family.beside_reported(family.Decided(m, c._replace(interval=()), "", (c.p, c.verdict))) == ""
