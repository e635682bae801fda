"""pfd_jax.ops.sequential: boundaries against closed forms (one look: the fixed test; two looks: the bivariate
normal), the design's error and power against Monte-Carlo, the graphical procedure against Holm's step-down."""
import math

import numpy as np
import pytest
from scipy import stats as sps

from pfd_jax.ops import sequential as sq
from pfd_jax.ops import stats

pytestmark = pytest.mark.numeric
LOOKS = (6, 10, 15, 20, 30, 40, 60)


@pytest.mark.parametrize("spending", sq.SPENDING)
def test_one_look_is_the_fixed_test(spending):
  d = sq.Design((25,), spending)
  np.testing.assert_allclose(d.bounds(0.025), [sps.norm.ppf(0.975)], atol=1e-9)
  np.testing.assert_allclose(d.power(0.025, 0.5), sps.norm.sf(sps.norm.ppf(0.975) - 0.5 * 5), atol=1e-9)
  # the t statistic at its nominal level is the one-sided t-test at 2.5%
  rng = np.random.default_rng(0)
  for _ in range(20):
    x = rng.normal(0.3, 1, 25)
    t = sps.ttest_1samp(x, 0.0)
    want = 1 if (t.statistic > 0 and t.pvalue / 2 <= 0.025) else -1 if t.pvalue / 2 <= 0.025 else 0
    assert sq.look(d, x, 0.025)[0] == want


def test_the_spending_functions_closed_forms():
  np.testing.assert_allclose(sq.spent([0, 1], 0.025, "hsd", -4), [0, 0.05])
  np.testing.assert_allclose(sq.spent(0.5, 0.025, "hsd", 0), 0.025)
  np.testing.assert_allclose(sq.spent(0.5, 0.025, "hsd", -4), 0.05 * (1 - math.exp(2)) / (1 - math.exp(4)))
  np.testing.assert_allclose(sq.spent([0, 0.25, 1], 0.025, "obf"),
                             [0, 2 - 2 * sps.norm.cdf(sps.norm.ppf(0.975) / 0.5), 0.05], atol=1e-15)
  with pytest.raises(ValueError, match="spending 'pocock'"):
    sq.Design((5, 10), "pocock")
  with pytest.raises(ValueError, match="increasing"):
    sq.Design((10, 10))


@pytest.mark.parametrize("spending", sq.SPENDING)
def test_two_looks_spend_what_the_bivariate_normal_says(spending):
  d = sq.Design((10, 30), spending)
  c1, c2 = d.bounds(0.025)
  inc = d.increments(0.025)
  np.testing.assert_allclose(2 * sps.norm.sf(c1), inc[0], rtol=1e-9)
  r = math.sqrt(10 / 30)
  box = lambda a, b: sps.multivariate_normal([0, 0], [[1, r], [r, 1]]).cdf([a, b], lower_limit=[-a, -b])
  # P(|Z1| < c1, |Z2| >= c2) = P(|Z1| < c1) - P(|Z1| < c1, |Z2| < c2)
  np.testing.assert_allclose((1 - 2 * sps.norm.sf(c1)) - box(c1, c2), inc[1], atol=2e-6)


@pytest.mark.parametrize("spending", sq.SPENDING)
def test_the_designs_error_and_power_match_monte_carlo(spending):
  d, rng, paths = sq.Design(LOOKS, spending), np.random.default_rng(1), 100_000
  looks = np.asarray(LOOKS)
  for theta in (0.0, 0.35):
    z = rng.normal(theta, 1, (paths, LOOKS[-1])).cumsum(1)[:, looks - 1] / np.sqrt(looks)
    b = d.bounds(0.025)
    crossed = np.abs(z) >= b
    first = np.where(crossed.any(1), crossed.argmax(1), -1)
    above = (first >= 0) & (z[np.arange(paths), first] > 0)
    want = d.crossing(0.025, theta)
    for k in range(len(LOOKS)):  # each look's share of first crossings above, within 4 Monte-Carlo errors
      got, p = np.mean(above & (first == k)), want[k, 0]
      assert abs(got - p) < 4 * math.sqrt(p * (1 - p) / paths) + 1e-4, (k, got, p)
    if theta == 0:  # each side spends 2.5% in all
      np.testing.assert_allclose(want.sum(0), [0.025, 0.025], atol=1e-8)
    else:
      np.testing.assert_allclose(d.power(0.025, theta), want[:, 0].sum())


def test_the_t_statistic_keeps_the_level_at_six_draws():
  """The significance-level approach with variance estimated: under a null, the rate of 'holds' stays near 2.5%
  with looks from 6 draws (Monte-Carlo; its standard error about 0.0007)."""
  d, rng = sq.Design(LOOKS), np.random.default_rng(2)
  x = rng.normal(0, 1, (50_000, LOOKS[-1]))
  looks = np.asarray(LOOKS)
  n, cum, sq_ = looks, x.cumsum(1)[:, looks - 1], (x ** 2).cumsum(1)[:, looks - 1]
  mean = cum / n
  t = mean / np.sqrt((sq_ - n * mean ** 2) / (n - 1) / n)
  crossed = sps.t.sf(np.abs(t), n - 1) <= d.nominal(0.025)
  first = np.where(crossed.any(1), crossed.argmax(1), -1)
  above = np.mean((first >= 0) & (t[np.arange(t.shape[0]), first] > 0))
  assert 0.020 < above < 0.030, above
  # the vectorised t above is look()'s
  for row in range(5):
    direction, k = sq.look(d, x[row], 0.025)
    assert k == first[row] and (direction != 0) == (first[row] >= 0)


def test_the_mde_is_the_power_curves_inverse():
  d = sq.Design(LOOKS)
  m = d.mde(0.025, sd=0.1)
  np.testing.assert_allclose(d.power(0.025, m / 0.1), 0.8, atol=1e-6)
  fixed = sq.Design((60,)).mde(0.025, sd=0.1)  # one look: the z test's (1.96 + 0.84) sd / sqrt(n)
  np.testing.assert_allclose(fixed, (sps.norm.ppf(0.975) + sps.norm.ppf(0.8)) * 0.1 / math.sqrt(60), rtol=1e-6)
  assert m > fixed  # looking early costs a little power at the cap


def test_the_graph_with_one_look_each_is_holms_step_down():
  rng = np.random.default_rng(3)
  for m in (2, 4, 6, 18):
    w, g = sq.holm_graph(m)
    for _ in range(200):
      p = rng.uniform(0, 0.02, m) ** rng.uniform(0.5, 2)
      decided, _ = sq.graph_test(lambda i, level: p[i] <= level, w, g, 0.025)
      assert set(decided) == set(np.flatnonzero(stats.holm(p) <= 0.025)), p


def test_a_decided_member_passes_its_level_on():
  w, g = sq.holm_graph(3)
  decided, final = sq.graph_test(lambda i, level: i == 0, w, g, 0.03)
  assert decided == {0: pytest.approx(0.01)}
  np.testing.assert_allclose(final, [0, 0.5, 0.5])
  # a chain 0 -> 1 -> 2: the level flows along edges only, so 2 (which would decide) waits on 1 (which does not)
  chain = [[0, 1, 0], [0, 0, 1], [1, 0, 0]]
  decided, final = sq.graph_test(lambda i, level: i != 1 and level >= 0.03 - 1e-12, [1, 0, 0], chain, 0.03)
  assert decided == {0: pytest.approx(0.03)} and final[1] == 1 and final[2] == 0


def test_a_planted_family_stops_early_and_a_planted_null_does_not_reject():
  """Six members, four nulls and two effects of 0.8 sd a draw: over repetitions, a null is decided in no more than
  the family's 2.5% a side (Monte-Carlo), and the effects are decided, most before their caps."""
  rng, designs = np.random.default_rng(4), [sq.Design(LOOKS)] * 6
  w, g = sq.holm_graph(6)
  reps, false, early = 400, 0, []
  for _ in range(reps):
    x = rng.normal(0, 1, (6, LOOKS[-1]))
    x[:2] += 0.8
    v = sq.decide(list(x), designs, w, g, 0.025)
    false += any(v[i].direction != 0 for i in range(2, 6))
    early += [v[i].draws for i in range(2) if v[i].direction == 1]
  assert false / reps <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / reps)
  assert len(early) >= 0.95 * 2 * reps and np.median(early) < LOOKS[-1]


def test_decide_reads_only_the_draws_a_look_reaches():
  d = sq.Design((6, 10))
  rng = np.random.default_rng(5)
  x = rng.normal(0, 1, 9)
  v = sq.decide([x], [d], [1.0], [[0.0]], 0.025)[0]
  assert v.direction == 0 and v.look == -1 and v.draws == 9
  strong = np.r_[rng.normal(3, 0.5, 6), rng.normal(-3, 0.5, 30)]  # decided at 6 draws; later draws never read
  v = sq.decide([strong], [d], [1.0], [[0.0]], 0.025)[0]
  assert (v.direction, v.look, v.draws) == (1, 0, 6)
