"""The Committee Perceptron scan against a plain-Python reference of the slides' pseudo-code."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pfd_jax.ops import metrics
from pfd_jax.methods import perceptron as P

pytestmark = pytest.mark.numeric


def reference(x, pairs, eta, k):
  """The pseudo-code with a Python list as the priority queue; returns per-step snapshots."""
  w, c, committee, avg, out = np.zeros(x.shape[1]), 0, [], np.zeros(x.shape[1]), []
  for (i, j), e in zip(pairs, eta):
    if x[j] @ w >= x[i] @ w:                                  # a mis-ranking
      c_min = min(m[0] for m in committee) if len(committee) == k else 0  # empty slots count 0
      if c > c_min:
        committee.append((c, w.copy()))
        while len(committee) > k:                             # evict the minimum
          committee.remove(min(committee, key=lambda m: m[0]))
      avg = avg + c * w
      w, c = w + e * (x[i] - x[j]), 0
    else:
      c += 1
    out.append(dict(w=w.copy(), c=c, committee=list(committee), avg=avg.copy()))
  return out


def _stream(seed, n=30, d=4, q=3):
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(n, d)).astype(np.float32)
  rel = rng.integers(0, 3, n)
  offsets = np.linspace(0, n, q + 1).astype(int)
  pairs, eta = P.query_pairs(rel, offsets)
  return x, rel, offsets, pairs, eta


def test_query_pairs_and_balancing():
  rel = np.array([2, 0, 1, 0, 1, 1])
  pairs, eta = P.query_pairs(rel, np.array([0, 3, 6]))
  want = {(0, 1), (0, 2), (2, 1), (4, 3), (5, 3)}
  assert set(map(tuple, pairs.tolist())) == want
  np.testing.assert_allclose(eta, [1 / 3] * 3 + [1 / 2] * 2)  # eta_q = 1/|S_q|


def test_scan_equals_reference_step_by_step():
  x, _, _, pairs, eta = _stream(0)
  for k in (1, 3):
    tr = jax.tree_util.tree_map(np.asarray, P.trace(x, pairs, eta, caps=(k,)))
    ref = reference(x.astype(np.float64), pairs, eta, k)
    evictions = 0
    for t, r in enumerate(ref):
      np.testing.assert_allclose(tr.w[t], r["w"], rtol=1e-5, atol=1e-6)
      assert tr.c[t] == r["c"]
      np.testing.assert_allclose(tr.avg[t], r["avg"], rtol=1e-5, atol=1e-5)
      counters = tr.com_c[0][t]
      assert np.count_nonzero(counters) <= k                         # size never above K
      assert sorted(counters[counters > 0]) == sorted(m[0] for m in r["committee"])
      for cnt, w in r["committee"]:                                  # members with a unique counter match
        if sum(m[0] == cnt for m in r["committee"]) == 1:
          np.testing.assert_allclose(tr.com_w[0][t][list(counters).index(cnt)], w, rtol=1e-5, atol=1e-6)
      if t and len(ref[t - 1]["committee"]) == k and r["committee"] != ref[t - 1]["committee"]:
        evictions += 1
        gone = sorted(m[0] for m in ref[t - 1]["committee"])
        assert gone[0] == min(gone) and max(m[0] for m in r["committee"]) >= gone[0]
    assert evictions > 0 or k == 3  # the stream exercises eviction (K = 1 evicts on every entry)
    assert int(tr.hypotheses[-1]) == sum(1 for t in range(len(ref)) if ref[t]["c"] == 0)


def test_train_passes_equal_reference_on_the_same_order():
  x, _, _, pairs, eta = _stream(1)
  key = jax.random.PRNGKey(3)
  out = jax.tree_util.tree_map(np.asarray, P.train(key, x, pairs, eta, passes=2, caps=(2,)))
  orders = [np.asarray(jax.random.permutation(k, len(eta))) for k in jax.random.split(key, 2)]
  ref = reference(x.astype(np.float64), np.concatenate([pairs[o] for o in orders]),
                  np.concatenate([eta[o] for o in orders]), 2)
  end = ref[-1]
  # the read-out offers the current hypothesis to the committee and adds it to the average
  np.testing.assert_allclose(out.avg[-1], end["avg"] + end["c"] * end["w"], rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(out.w[-1], end["w"], rtol=1e-5, atol=1e-6)
  members = sorted([m[0] for m in end["committee"]] + [end["c"]], reverse=True)[:2]
  assert sorted(out.com_c[0][-1], reverse=True) == [m for m in members if m > 0] + [0] * (2 - sum(
      m > 0 for m in members))


def test_separable_pairs_converge_to_no_mistakes():
  rng = np.random.default_rng(5)
  n, d = 120, 5
  x = rng.normal(size=(n, d)).astype(np.float32)
  u = x @ rng.normal(size=d)
  offsets = np.arange(0, n + 1, 20)
  rel = np.zeros(n, int)
  for lo, hi in zip(offsets[:-1], offsets[1:]):  # grades by the true score within each query: separable
    rel[lo:hi] = np.searchsorted(np.quantile(u[lo:hi], [0.5, 0.8]), u[lo:hi])
  pairs, eta = P.query_pairs(rel, offsets)
  out = P.train(jax.random.PRNGKey(0), x, pairs, eta, passes=200, caps=(5,))
  mistakes = np.diff(np.asarray(out.hypotheses) - 1, prepend=0)  # read-outs count the current one too
  assert mistakes[0] > 0 and np.all(mistakes[-20:] == 0)
  w = np.asarray(out.w[-1])
  assert np.all((x[pairs[:, 0]] - x[pairs[:, 1]]) @ w > 0)  # every training pair ranked right


def test_committee_prediction_forms():
  rng = np.random.default_rng(2)
  com_w = jnp.asarray(rng.normal(size=(3, 4)), jnp.float32)
  com_c = jnp.array([2, 0, 5])
  np.testing.assert_allclose(P.committee_weights(com_w, com_c), 2 * com_w[0] + 5 * com_w[2], rtol=1e-6)
  x = jnp.asarray(rng.normal(size=(2, 6, 4)), jnp.float32)
  mask = jnp.ones((2, 6), bool).at[1, 4:].set(False)
  votes = P.vote_scores(com_w, com_c, x, mask)
  want = np.zeros((2, 6))
  for k in range(3):
    want -= int(com_c[k]) * np.asarray(metrics.ranks(jnp.einsum("qld,d->ql", x, com_w[k]), mask))
  np.testing.assert_allclose(votes, want)
  # a committee of one member votes exactly its own ranking
  one = P.vote_scores(com_w[2:], com_c[2:], x, mask)
  np.testing.assert_array_equal(metrics.ranks(one, mask), metrics.ranks(jnp.einsum("qld,d->ql", x, com_w[2]), mask))


@pytest.mark.slow
def test_committee_perceptron_driver_end_to_end(tmp_path):
  from conftest import tiny, written
  from experiments.related import committee_perceptron as cp
  opts = cp.Options(passes=3, committee_sizes=(2, 3), vote_capacity=4, svm_c=(0.01, 0.1), timing_passes=1, cp_seed=0)
  res = cp.run(tiny(opts, data=dict(min_docs=1)))
  js = written(tmp_path, res, cp.DRIVER)
  rows = js["folds"]["fold1"]["rows"]
  assert set(cp.ROW_ORDER) <= set(rows)
  assert rows["committee (avg), K chosen"]["K"] in (2, 3) and 1 <= rows["vanilla"]["passes"] <= 3
  assert rows["RankSVM (LinearSVC)"]["C"] in (0.01, 0.1)
  assert len(rows["voted"]["test"]) == len(cp.NAMES) and set(js["seconds_per_pass"]) >= {"pocket", "voted"}
  # the selected pass is the argmax of the selection curve
  sel = np.asarray(js["folds"]["fold1"]["curves"]["averaged"]["select"])
  assert rows["averaged"]["passes"] == int(np.argmax(sel)) + 1
