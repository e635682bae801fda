"""Position debiasing: the simulator's truth, IPS unbiasedness, propensity estimation (randomised
sessions, regression-EM) against the known k^-eta, and the two-tower model's served ranking."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import SMALL_GBDT, TINY
from experiments import export_logs
from experiments.paper import table2
from experiments.framework import deploy, fold_data, outputs, position
from pfd_jax import data as data_lib
from pfd_jax.config import ConfigError
from pfd_jax.data import logs
from pfd_jax.data.config import DataConfig
from pfd_jax.methods import debias
from pfd_jax.methods.ranker import make_ranker
from pfd_jax.ops import losses, metrics, scoring
from pfd_jax.ops.models import Arch
from pfd_jax.training.evaluation import eval_buckets

pytestmark = pytest.mark.numeric

SMALL = dict(sessions=(120, 30, 60), min_items=8, max_items=14)


def test_default_recipe_is_untouched_by_the_new_options():
  """random_share draws from its own generator and the truth from no generator: the regular features, the
  truth and the logged labels without randomisation are those of the default recipe."""
  base = logs.simulate(**SMALL, seed=4)
  more = logs.simulate(**SMALL, seed=4, truth=True)
  shuffled = logs.simulate(**SMALL, seed=4, truth=True, random_share=0.5)
  promoted = logs.simulate(**SMALL, seed=4, truth=True, random_share=0.5, promotion=2.0)
  np.testing.assert_array_equal(promoted["truth"].y, more["truth"].y)
  np.testing.assert_array_equal(promoted["train"].x[:, :-1], base["train"].x)
  assert promoted.config["num_regular"] == base.config["num_regular"] + 1
  assert list(base.splits) == ["train", "vali", "test"] and "truth" in more.splits
  for s in base.splits:
    np.testing.assert_array_equal(base[s].x, more[s].x)
    np.testing.assert_array_equal(base[s].y, more[s].y)
    np.testing.assert_array_equal(base[s].x, shuffled[s].x)
  np.testing.assert_array_equal(more["truth"].y, shuffled["truth"].y)
  assert base.config == logs.simulate(**SMALL, seed=4).config and "random_share" not in base.config


def test_truth_is_position_free_and_the_oracle_scores_one():
  """The truth does not move with the bias strength; ranking by it gives NDCG 1 on every test session (all
  are scored: every target is positive), and the logged purchases' ranking does worse on it."""
  a = logs.simulate(**SMALL, seed=2, eta=0.0, truth=True)
  b = logs.simulate(**SMALL, seed=2, eta=2.0, truth=True)
  np.testing.assert_array_equal(a["truth"].y, b["truth"].y)
  assert not np.array_equal(a["test"].y, b["test"].y)
  t = b["truth"]
  assert np.all((t.y > 0) & (t.y < 1)) and t.num_queries == b["test"].num_queries
  buckets = eval_buckets(t, 4)
  assert sum(int(bk.mask.any(-1).sum()) for bk in buckets) == t.num_queries
  logging_ranker = []
  for bk in buckets:
    real = bk.mask.any(-1)
    ndcg = np.asarray(metrics.ndcg_table(jnp.asarray(bk.y), jnp.asarray(bk.y), jnp.asarray(bk.mask), (8, 32)))
    np.testing.assert_allclose(ndcg[:, real], 1.0, rtol=0, atol=1e-6)
    shown = -jnp.asarray(bk.z[..., 0])  # the logging ranker's order: position 1 first
    logging_ranker.append(np.asarray(metrics.ndcg_table(shown, jnp.asarray(bk.y), jnp.asarray(bk.mask), (8,)))[0, real])
  assert np.concatenate(logging_ranker).mean() < 0.95


def test_promotion_confounds_the_logged_labels_only():
  """The promotion score (the last regular feature) moves items up the logging ranker's order, so it predicts
  logged purchases; the truth does not depend on it."""
  ds = logs.simulate(sessions=(1500, 10, 1500), seed=0, promotion=2.0, truth=True)
  g, t = ds["train"], ds["truth"]
  assert np.corrcoef(g.x[:, -1], logs.positions(g.z))[0, 1] < -0.3
  assert np.corrcoef(g.x[:, -1], g.y)[0, 1] > 0.05 > abs(np.corrcoef(t.x[:, -1], t.y)[0, 1])


def test_randomized_sessions_are_shown_in_random_order():
  """In randomised sessions position is independent of the latent relevance (here: of the truth), elsewhere
  the logging ranker puts the relevant items on top."""
  ds = logs.simulate(sessions=(600, 10, 10), seed=1, random_share=0.5, truth=True)
  g = ds["train"]
  assert ds.config["privileged"][-1] == logs.RANDOMIZED and 0.4 < g.z[:, 3].mean() < 0.6
  relevance = g.x @ np.ones(g.x.shape[1])  # a proxy correlated with relevance
  pos = logs.positions(g.z)
  r = g.z[:, 3] > 0
  assert abs(np.corrcoef(pos[r], relevance[r])[0, 1]) < 0.05 < -np.corrcoef(pos[~r], relevance[~r])[0, 1]


@pytest.mark.parametrize("loss", debias.IPS_LOSSES)
def test_ips_loss_is_unbiased(loss):
  """E over examinations of the loss on IPS labels = the full-information loss, within Monte-Carlo error
  (padded lists: the padding holds garbage labels and positions that must not count)."""
  rng = np.random.default_rng(0)
  q, n, draws = 3, 7, 20000
  positions = np.tile(np.arange(1, n + 1), (q, 1))
  propensity = debias.examination(n, 1.3)
  r = (rng.random((q, n)) < 0.4).astype(np.float32)
  mask = np.ones((q, n), bool)
  mask[1, 5:] = False
  scores = jnp.asarray(rng.normal(size=(q, n)), jnp.float32)
  fn = jax.jit(jax.vmap(lambda y: losses.get_loss(loss)(scores, y, jnp.asarray(mask))))
  full = float(losses.get_loss(loss)(scores, jnp.asarray(r), jnp.asarray(mask)))
  e = rng.random((draws, q, n)) < propensity[positions]
  y = np.where(mask, e * r, 7.0)  # garbage in the padding
  weighted = debias.ips_labels(y.reshape(draws, -1), np.tile(positions.reshape(-1), (draws, 1)), propensity,
                               clip=0.01).reshape(draws, q, n)
  vals = np.asarray(fn(jnp.asarray(weighted)), np.float64)
  se = vals.std() / np.sqrt(draws)
  assert abs(vals.mean() - full) < 4 * se, (vals.mean(), full, se)
  naive = np.asarray(fn(jnp.asarray(y, jnp.float32)), np.float64).mean()  # the logged labels: biased
  assert abs(naive - full) > 10 * se


def test_ips_labels_check_their_input():
  p = debias.examination(4, 1.0)
  np.testing.assert_allclose(debias.ips_labels(np.array([1, 1, 0]), np.array([1, 4, 2]), p, 0.3), [1, 1 / 0.3, 0])
  with pytest.raises(ValueError, match="positions must lie in 1..4"):
    debias.ips_labels(np.array([1.0]), np.array([5]), p, 0.1)
  with pytest.raises(ValueError, match="clip"):
    debias.ips_labels(np.array([1.0]), np.array([1]), p, 0.0)


def _clicks(seed, lists=3000, n=20, eta=1.0):
  """Lists ordered by a noisy logging score; relevance gamma = logistic in 4 features; clicks = e * r."""
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(lists * n, 4))
  logit = x @ np.array([1.0, -0.5, 0.5, 0.3]) - 1.0
  order = np.argsort(-(logit + rng.normal(size=logit.shape)).reshape(lists, n), axis=1)
  pos = np.empty((lists, n), np.int64)
  np.put_along_axis(pos, order, np.arange(1, n + 1)[None], axis=1)
  pos = pos.reshape(-1)
  theta = debias.examination(n, eta)
  c = (rng.random(pos.shape) < theta[pos]) & (rng.random(pos.shape) < 1 / (1 + np.exp(-logit)))
  return x, pos, c.astype(np.float32), theta


def test_regression_em_recovers_the_propensities():
  """Regression-EM on 60,000 logged items recovers k^-1 within 0.05 at every position 1..20 (measured:
  0.031 at worst; the naive CTR ratio is off by 0.078, more than twice that, since the logging ranker puts
  relevant items on top)."""
  x, pos, c, theta = _clicks(0)
  r = debias.em_propensities(c, pos, x, 20)
  assert r.propensity[1] == 1.0
  err = np.max(np.abs(r.propensity[1:] - theta[1:]))
  assert err < 0.05
  naive = debias.randomized_propensities(c, pos, np.ones_like(c, bool), 20)  # CTR ratio without randomisation
  assert np.max(np.abs(naive[1:] - theta[1:])) > 2 * err


def test_randomized_propensities_recover_the_propensities():
  """Random order: CTR_k / CTR_1 estimates theta_k (within 0.05 on 60,000 items); a position never shown
  takes the estimate above it; no top click is refused."""
  x, pos, c, theta = _clicks(1, eta=0.7)
  rng = np.random.default_rng(2)
  lists = pos.reshape(-1, 20)
  shuffled = np.argsort(rng.random(lists.shape), axis=1) + 1  # a random order per list
  e = rng.random(shuffled.shape) < theta[shuffled]
  relevance = rng.random(shuffled.shape) < 1 / (1 + np.exp(-(x @ np.array([1.0, -0.5, 0.5, 0.3]) - 1.0))).reshape(
      lists.shape)
  est = debias.randomized_propensities((e & relevance).reshape(-1), shuffled.reshape(-1), np.ones(c.shape, bool), 22)
  assert np.max(np.abs(est[1:21] - theta[1:21])) < 0.05
  assert est[21] == est[22] == est[20]
  with pytest.raises(ValueError, match="no click at position 1"):
    debias.randomized_propensities(np.zeros(4), np.array([1, 2, 1, 2]), np.ones(4, bool), 2)


def test_two_tower_served_at_a_constant_ranks_by_the_item_tower():
  """score = f(x) + g(position): at any constant position every item moves by the same amount, so the
  ranking is f's; the paper-shaped parameters are untouched by the option (tower=0)."""
  arch = Arch(hidden=8, layers=3, tower=1)
  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.normal(size=(2, 6, 5)), jnp.float32)
  params = arch.module().init(jax.random.PRNGKey(0), x)
  at = lambda v: arch.module().apply(params, x.at[..., -1].set(v))
  d = np.asarray(at(1.0) - at(3.0))
  np.testing.assert_allclose(d, d.flat[0], atol=1e-5)
  assert not np.allclose(np.asarray(arch.module().apply(params, x) - at(1.0)), d.flat[0], atol=1e-3)
  plain = Arch(hidden=8, layers=3).module().init(jax.random.PRNGKey(0), x[..., :-1])
  assert sorted(plain["params"]) == ["Dense_0", "Dense_1", "Dense_2"]
  assert sorted(params["params"]) == ["Dense_0", "Dense_1", "Dense_2", "Dense_3", "Dense_4"]


def test_views_feed_constants_for_served_positions():
  """'xz:0=1' is the input of a model trained with the position and served at the top: the column is the
  constant; such a model is never saved (no file has the constant)."""
  bucket = dict(x=np.arange(6.0).reshape(3, 2), z=np.array([[3.0, 1.0], [1.0, 0.0], [2.0, 1.0]]))
  np.testing.assert_array_equal(scoring.features(bucket, "xz:0=1"), [[0, 1, 1], [2, 3, 1], [4, 5, 1]])
  np.testing.assert_array_equal(scoring.features(bucket, "xz:0"), [[0, 1, 3], [2, 3, 1], [4, 5, 2]])
  assert scoring.input_ids("xz:1=1", [1, 2], [3, 4]) == [1, 2, 4] and scoring.served_constant("xz:1=1")
  with pytest.raises(ValueError, match="feeds constants no file has"):
    make_ranker(None, TINY.train, "xz:0=1", {})


def test_position_ids_read_both_codings():
  np.testing.assert_array_equal(debias.position_ids(np.array([1.0, 3.0, 2.0])), [1, 3, 2])
  np.testing.assert_array_equal(debias.position_ids(np.log2(1 + np.array([1.0, 7.0, 30.0]))), [1, 7, 30])
  coded = np.float32(np.log1p(np.log2(1 + np.array([1.0, 12.0]))))  # log2-coded, then the recipe's log1p
  np.testing.assert_array_equal(debias.position_ids(coded, log1p=True), [1, 12])
  with pytest.raises(ValueError, match="feature 9 holds 0, which is neither"):
    debias.position_ids(np.array([1.0, 0.0]), "feature 9")


@pytest.fixture(scope="module")
def logs_folder(tmp_path_factory):
  out = tmp_path_factory.mktemp("logs_letor_position")
  export_logs.write_folder(str(out), logs.simulate(sessions=(80, 30, 40), min_items=10, max_items=20, seed=5,
                                                   random_share=0.5))
  return str(out)


@pytest.mark.slow
def test_table2_position_rows_on_a_letor_folder(logs_folder, tmp_path):
  """--position adds the debiasing rows to the practitioner's table; bad ids are refused naming the flag."""
  data = DataConfig(dataset="letor", data_dir=logs_folder, privileged="21,22,23,24", min_docs=5, cache_dir="",
                    max_buckets=2)
  cfg = TINY.replace(data=data, output=dict(out_dir=str(tmp_path)),
                     options=table2.Options(methods=("no_distill", "lambdamart"), position=21, randomized=24,
                                            gbdt=SMALL_GBDT))
  res = table2.run(cfg)  # no canary: table2's canaries stay those of its published runs
  fold = res["losses"]["rankbce"].first_fold
  assert {"position_feature", "two_tower", "ips_em", "pfd_position_teacher", "pfd_position", "pfd_position_top",
          "lambdamart", "lambdamart_position"} <= set(fold.rows)
  assert not np.array_equal(fold.rows["lambdamart_position"].best["test"], fold.rows["lambdamart"].best["test"])
  assert fold.debias["position_column"] == 0 and fold.debias["ips_loss"] == "rankbce"
  assert ("ips_randomized" in fold.rows) != ("ips_randomized" in fold.debias)
  # the progress line counts the --position rows (the randomised IPS row even when the data leaves it out)
  assert table2.DRIVER.rows(cfg) == len(fold.rows) + ("ips_randomized" not in fold.rows)
  md = table2.to_markdown(outputs.as_json(res))
  assert "| Position as a feature, served at position 1 |" in md and "Debiasing rows (--position=21" in md
  assert not {"position_feature", "two_tower"} & set(deploy.candidates(fold.rows))  # no saved model serves them
  ds = fold_data.load_dataset(data)
  for options, error, match in (
      (table2.Options(position=5), ConfigError, "position: feature 5 is not among"),
      (table2.Options(position=22), data_lib.DataError, "feature 22 .* holds 0, which is neither"),
      (table2.Options(position=21, randomized=3), ConfigError, "randomized: feature 3 is not among")):
    with pytest.raises(error, match=match):
      position.position_setup(cfg.replace(options=options), ds, cfg.train_config())
  with pytest.raises(ConfigError, match="randomized: the randomised lists serve the --position rows"):
    table2.Options(randomized=24)
