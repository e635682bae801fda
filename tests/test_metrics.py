import jax
import jax.numpy as jnp
import numpy as np
import pytest
import rax

from pfd_jax.ops import metrics as M

pytestmark = pytest.mark.numeric


def _lists(seed, b=50, l=12):
  rng = np.random.default_rng(seed)
  s = np.round(rng.normal(size=(b, l)), 1).astype(np.float32)  # rounding makes many ties
  y = rng.integers(0, 3, (b, l)).astype(np.float32)
  y[rng.random((b, l)) < 0.5] = 0
  m = rng.random((b, l)) < 0.8
  m[:, 0] = True
  y[:3] = 0  # lists with no relevant document
  return s, y, m


def test_ndcg_closed_form():
  s = jnp.array([3.0, 2.0, 1.0])
  y = jnp.array([0.0, 1.0, 2.0])
  dcg = 1 / np.log2(3) + 3 / np.log2(4)
  idcg = 3 + 1 / np.log2(3)
  assert float(M.ndcg_at_k(s, y)) == pytest.approx(dcg / idcg, rel=1e-6)
  assert float(M.ndcg_at_k(s, y, k=1)) == 0.0
  assert float(M.ndcg_at_k(s, y, k=100)) == pytest.approx(dcg / idcg, rel=1e-6)  # k > L: whole list


@pytest.mark.parametrize("k", [1, 3, 8, 20])
def test_ndcg_matches_rax(k):
  s, y, m = _lists(0)
  ours = M.ndcg_at_k(s, y, m, k)
  ref = rax.ndcg_metric(s, y, where=m, topn=k, reduce_fn=None)
  np.testing.assert_allclose(ours, ref, atol=1e-6)
  # the mean: rax averages over all lists with 0 for empty ones = our rule 'zero'
  valid = M.has_relevant(y, m)
  assert float(M.mean_over_lists(ours, valid, "zero")) == pytest.approx(
      float(rax.ndcg_metric(s, y, where=m, topn=k)), abs=1e-6)
  assert float(M.mean_over_lists(ours, valid, "exclude")) == pytest.approx(
      float(np.asarray(ref)[np.asarray(valid)].mean()), abs=1e-6)


def test_map_mrr_precision_match_rax():
  s, y, m = _lists(1)
  np.testing.assert_allclose(M.average_precision(s, y, m), rax.ap_metric(s, y, where=m, reduce_fn=None), atol=1e-6)
  np.testing.assert_allclose(M.reciprocal_rank(s, y, m), rax.mrr_metric(s, y, where=m, reduce_fn=None), atol=1e-6)
  for k in (1, 5):
    np.testing.assert_allclose(M.precision_at_k(s, y, m, k),
                               rax.precision_metric(s, y, where=m, topn=k, reduce_fn=None), atol=1e-6)


def test_ties_are_stable_and_deterministic():
  s = jnp.array([1.0, 1.0, 1.0])
  np.testing.assert_array_equal(M.ranks(s), [1, 2, 3])
  # the relevant document last among equal scores ranks last
  assert float(M.reciprocal_rank(s, jnp.array([0.0, 0.0, 1.0]))) == pytest.approx(1 / 3)


@pytest.mark.parametrize("fn", [lambda s, y, m: M.ndcg_at_k(s, y, m, 5), M.average_precision,
                                M.reciprocal_rank, lambda s, y, m: M.precision_at_k(s, y, m, 3)])
def test_metric_padding_invariance(fn):
  s, y, m = _lists(2)
  base = fn(s, y, m)
  rng = np.random.default_rng(0)
  s2 = np.concatenate([s, rng.normal(size=(s.shape[0], 4)).astype(np.float32) * 50], -1)
  y2 = np.concatenate([y, np.full((s.shape[0], 4), 2.0, np.float32)], -1)
  m2 = np.concatenate([m, np.zeros((s.shape[0], 4), bool)], -1)
  np.testing.assert_allclose(fn(s2, y2, m2), base, atol=1e-7)
  s3, y3 = s.copy(), y.copy()
  s3[~m], y3[~m] = 99.0, 2.0
  np.testing.assert_allclose(fn(s3, y3, m), base, atol=1e-7)


def test_empty_list_rule():
  v = jnp.array([0.5, 0.0, 1.0])
  valid = jnp.array([True, False, True])
  assert float(M.mean_over_lists(v, valid, "exclude")) == 0.75
  assert float(M.mean_over_lists(v, valid, "zero")) == pytest.approx(0.5)
  with pytest.raises(ValueError):
    M.mean_over_lists(v, valid, "ignore")


def test_ndcg_table_and_vmap_jit():
  s, y, m = _lists(3)
  tab = M.ndcg_table(s, y, m, (2, 4))
  np.testing.assert_allclose(tab[1], M.ndcg_at_k(s, y, m, 4), atol=1e-7)
  seeds = np.stack([s, -s])
  f = jax.jit(jax.vmap(lambda s: M.ndcg_table(s, y, m, (2, 4))))
  np.testing.assert_allclose(f(seeds)[1], M.ndcg_table(-s, y, m, (2, 4)), atol=1e-7)
