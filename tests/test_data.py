import gzip
import json
import os

import numpy as np
import pytest
from scipy import stats

from conftest import shared
from pfd_jax import data as data_lib, files
from pfd_jax.data.config import DataConfig
from pfd_jax.data import letor, parse_cache, preprocess as pp


def _write(tmp_path, text, name="f.txt"):
  p = tmp_path / name
  p.write_text(text)
  return str(p)


# ---------------------------------------------------------------- parsing

def test_load_letor_dense_sparse_and_comments(tmp_path):
  p = _write(tmp_path, "2 qid:7 1:0.5 3:2 # doc a\n0 qid:7 2:1\n# a comment line\n\n1 qid:3 1:-1.5\n")
  g = data_lib.load_letor(p)
  np.testing.assert_array_equal(g.x, [[0.5, 0, 2], [0, 1, 0], [-1.5, 0, 0]])
  np.testing.assert_array_equal(g.rel, [2, 0, 1])
  np.testing.assert_array_equal(g.qid, [7, 3])
  np.testing.assert_array_equal(g.offsets, [0, 2, 3])
  np.testing.assert_array_equal(g.position, [0, 1, 0])  # each document's place within its query


def test_load_letor_gz_and_cache(tmp_path):
  p = str(tmp_path / "f.txt.gz")
  with gzip.open(p, "wt") as f:
    f.write("1 qid:1 1:1 2:2\n0 qid:1 1:3 2:4\n")
  cache = str(tmp_path / "cache")
  a = data_lib.load_letor(p, cache_dir=cache)
  names = sorted(os.listdir(cache))  # the file's list of chunks, and its one chunk
  assert len(names) == 2 and names[0] == "chunks" and names[1].startswith("f_txt_gz-")
  assert len(os.listdir(os.path.join(cache, "chunks"))) == 1
  b = data_lib.load_letor(p, cache_dir=cache)  # from the .npz
  for k in ("x", "rel", "qid", "offsets"):
    np.testing.assert_array_equal(getattr(a, k), getattr(b, k))


@pytest.mark.parametrize("text,line,what", [
    ("1 qid:1 1:0.5\n1 qid:1 1-0.5\n", 2, "malformed"),
    ("1 qid:1 1:0.5\n\n1 qid:1 1:abc\n", 3, "'abc' is not a number"),
    ("1 qid:abc 1:0.5\n", 1, "qid 'abc' is not an integer"),
    ("1 qid:1 1:0.5\n1 qid:q0 1:0.5\n", 2, "qid 'q0' is not an integer"),
    ("1 qid:1 1:0.5\n0 qid:1 1:1e39\n", 2, "'1e39' overflows float32"),
    ("1e39 qid:1 1:0.5\n", 1, "label '1e39' overflows float32"),
    ("1 qid:1 1:0.5\r\n0 qid:1 x:1\r\n", 2, "non-numeric feature id"),
    ("1 qid:1 1:0.5\n" * 2999 + "0 qid:1 1000000000:1\n", 3000, "feature id 1000000000 needs a dense array"),
    ("1 qid:1 0:0.5\n", 1, "1-based"),
    ("1 qid:1 1:0.5\n0 qid:1 1:nan\n", 2, "non-finite"),
    ("1 qid:1 1:inf\n", 1, "non-finite"),
    ("x qid:1 1:1\n", 1, "label"),
    ("1 qid:1 1:1\n1 1:2\n", 2, "qid"),
    ("1 qid:1 1:1\n1 qid:2 1:2\n1 qid:1 1:3\n", 3, "contiguous"),
])
def test_bad_lines_name_file_and_line(tmp_path, text, line, what):
  p = _write(tmp_path, text)
  with pytest.raises(ValueError, match=rf"{p}:{line}: .*{what}"):
    data_lib.load_letor(p)


def test_non_utf8_byte_names_line(tmp_path):
  p = tmp_path / "f.txt"
  p.write_bytes(b"1 qid:1 1:0.5\n0 qid:1 1:0.\xe95\n")
  with pytest.raises(data_lib.DataError, match=rf"{p}:2: not UTF-8 text \(byte 0xe9 at column 13\)"):
    data_lib.load_letor(str(p))
  with pytest.raises(data_lib.DataError, match=rf"{p}:2: not UTF-8"):
    data_lib.load_serving(str(p))


def test_crlf_file_reads_as_lf(tmp_path):
  text = "1 qid:1 1:0.5 2:1\n0 qid:1 1:0.2\n0 qid:7 2:3\n"
  a, b = tmp_path / "lf.txt", tmp_path / "crlf.txt"
  a.write_text(text)
  b.write_bytes(text.replace("\n", "\r\n").encode())
  for load in (data_lib.load_letor, data_lib.load_serving):
    ga, gb = load(str(a)), load(str(b))
    for k in ("x", "rel", "qid", "offsets"):
      np.testing.assert_array_equal(getattr(ga, k), getattr(gb, k))


def test_cache_is_keyed_by_content_and_survives_damage(tmp_path):
  """A file edited in place with the same size and modification time is parsed again (not served from the old
  cache); a truncated cache file is parsed again and rewritten."""
  p = tmp_path / "f.txt"
  p.write_text("1 qid:1 1:0.5\n0 qid:1 1:0.2\n")
  st = os.stat(p)
  cache = str(tmp_path / "cache")
  assert data_lib.load_letor(str(p), cache_dir=cache).rel.tolist() == [1, 0]
  p.write_text("0 qid:1 1:0.5\n1 qid:1 1:0.2\n")  # same size
  os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))  # same mtime
  assert os.stat(p).st_size == st.st_size and os.stat(p).st_mtime_ns == st.st_mtime_ns
  assert data_lib.load_letor(str(p), cache_dir=cache).rel.tolist() == [0, 1]
  for folder, _, names in os.walk(cache):
    for f in names:
      with open(os.path.join(folder, f), "r+b") as fh:
        fh.truncate(40)
  assert data_lib.load_letor(str(p), cache_dir=cache).rel.tolist() == [0, 1]
  assert data_lib.load_letor(str(p), cache_dir=cache).rel.tolist() == [0, 1]  # the rewritten cache reads back
  assert not [f for _, _, names in os.walk(cache) for f in names if f.endswith(".tmp")]
  (tmp_path / "afile").write_text("")
  with pytest.raises(NotADirectoryError, match="cache folder"):
    data_lib.load_letor(str(p), cache_dir=str(tmp_path / "afile"))


def test_empty_and_missing_files(tmp_path):
  p = _write(tmp_path, "# only a comment\n")
  with pytest.raises(ValueError, match="empty file"):
    data_lib.load_letor(p)
  with pytest.raises(FileNotFoundError):
    data_lib.load_letor(str(tmp_path / "nope.txt"))
  with pytest.raises(ValueError, match="unknown dataset"):
    data_lib.load_raw("web40k")
  with pytest.raises(FileNotFoundError, match="not a folder"):
    data_lib.load_raw("letor", data_dir=str(tmp_path / "missing"))
  with pytest.raises(FileNotFoundError, match="no train/vali/test"):
    data_lib.load_raw("letor", data_dir=str(tmp_path))


def test_feature_width_differs_between_splits_is_zero_filled(tmp_path):
  _write(tmp_path, "1 qid:1 1:1 5:2\n", "train.txt")
  _write(tmp_path, "1 qid:2 1:1\n", "test.txt")
  raw = data_lib.load_raw("letor", data_dir=str(tmp_path))
  assert raw["train"].x.shape == (1, 5) and raw["test"].x.shape == (1, 5)
  np.testing.assert_array_equal(raw["test"].x, [[1, 0, 0, 0, 0]])


def test_trec_against_hand_parse():
  path = os.path.join(shared("trec_news_2018_fastrank"), "train.txt.gz")
  g = data_lib.load_letor(path)
  rel, x = [], np.zeros_like(g.x)
  with gzip.open(path, "rt") as f:
    for i, line in enumerate(f):
      tok = line.split("#")[0].split()
      rel.append(float(tok[0]))
      for t in tok[2:]:
        j, v = t.split(":")
        x[i, int(j) - 1] = float(v)
  np.testing.assert_array_equal(g.rel, rel)
  np.testing.assert_array_equal(g.x, x)
  assert g.num_queries == 45 and g.num_docs == 782


# ---------------------------------------------------------------- named datasets

# (queries, docs) per fold and split, from ../shared/data/README.md
_OHSUMED = {1: {"train": (63, 9219), "vali": (21, 3538), "test": (22, 3383)},
            2: {"train": (63, 10187), "vali": (22, 3383), "test": (21, 2570)},
            3: {"train": (64, 10494), "vali": (21, 2570), "test": (21, 3076)},
            4: {"train": (64, 9491), "vali": (21, 3076), "test": (21, 3573)},
            5: {"train": (64, 9029), "vali": (21, 3573), "test": (21, 3538)}}


def test_ohsumed_five_folds_match_readme(tmp_path):
  root = shared("ohsumed_letor3")
  assert data_lib.num_folds("ohsumed") == 5
  for fold, expect in _OHSUMED.items():
    raw = data_lib.load_raw("ohsumed", data_dir=root, fold=fold, cache_dir=str(tmp_path))
    got = {s: (g.num_queries, g.num_docs) for s, g in raw.items()}
    assert got == expect, fold
    assert all(g.x.shape[1] == 45 for g in raw.values())


def test_sparse_lightgbm_example_loads():
  raw = data_lib.load_raw("letor", data_dir=shared("lightgbm_lambdarank_example"))
  assert raw["train"].num_queries == 201 and raw["test"].num_queries == 50
  assert raw["train"].x.shape[1] == raw["test"].x.shape[1] <= 300


# ---------------------------------------------------------------- preprocessing

def test_gumbel_label_probability_is_sigmoid():
  rng = np.random.default_rng(0)
  n = 200_000
  for r, tau, t in [(4.0, 4.8, 4.0), (3.0, 3.5, 2.0), (1.0, 0.4, 1.0)]:
    g0, g1 = pp.draw_gumbel(rng, n)
    y = pp.gumbel_labels(np.full(n, r, np.float32), g0, g1, t=t, tau=tau)
    p = 1 / (1 + np.exp(-t * (r - tau)))
    # two-sided exact binomial test at 1e-4
    assert stats.binomtest(int(y.sum()), n, p).pvalue > 1e-4, (r, tau, y.mean(), p)


def test_privileged_feature_reuses_draws():
  rng = np.random.default_rng(1)
  rel = rng.integers(0, 5, 10_000).astype(np.float32)
  g0, g1 = pp.draw_gumbel(rng, rel.size)
  y = pp.gumbel_labels(rel, g0, g1, tau=3.0)
  np.testing.assert_array_equal(pp.gumbel_labels(rel, g0, g1, tau=3.0), y)  # z = y at tau_priv = tau
  z = pp.gumbel_labels(rel, g0, g1, tau=2.0)
  assert np.all(z >= y)  # same draws, lower threshold: z dominates y document by document


def test_same_seed_same_bits_and_different_seed_differs():
  raw = data_lib.load_raw("synthetic", synthetic_kwargs=dict(num_queries=(40, 10, 20), seed=3))
  raw2 = data_lib.load_raw("synthetic", synthetic_kwargs=dict(num_queries=(40, 10, 20), seed=3))
  a, b = data_lib.prepare(DataConfig(label_seed=5), raw), data_lib.prepare(DataConfig(label_seed=5), raw2)
  c = data_lib.prepare(DataConfig(label_seed=6), raw)
  for s in a.splits:
    for k in ("x", "z", "rel", "y", "g0", "g1"):
      assert getattr(a[s], k).tobytes() == getattr(b[s], k).tobytes()
  assert not np.array_equal(a["train"].g0, c["train"].g0)


def test_privileged_split_takes_most_correlated_columns():
  rng = np.random.default_rng(0)
  n = 5000
  y = (rng.random(n) < 0.3).astype(np.float32)
  noise = rng.normal(size=(n, 6))
  strength = np.array([0.0, 2.0, 0.1, 1.0, 0.5, -3.0])  # column 5 strongest (negative), then 1, 3
  x = (noise + strength * y[:, None]).astype(np.float32)
  g = data_lib.Groups(x=x, rel=y, y=y, qid=np.arange(1), offsets=np.array([0, n]))
  cols = pp.privileged_columns(g, 3)
  np.testing.assert_array_equal(cols, [5, 1, 3])
  expect = np.abs([np.corrcoef(x[:, j], y)[0, 1] for j in range(6)])
  np.testing.assert_allclose(pp.abs_correlation(x, y), expect, rtol=1e-6)
  s = pp.split_features(g, cols)
  np.testing.assert_array_equal(s.z, x[:, [5, 1, 3]])
  np.testing.assert_array_equal(s.x, x[:, [0, 2, 4]])


def test_filter_log1p_and_query_norm():
  x = np.array([[0.0], [3.0], [-2.0], [5.0], [5.0]], np.float32)
  g = data_lib.Groups(x=x, rel=np.array([0, 1, 0, 0, 0], np.float32), qid=np.array([1, 2]),
                      offsets=np.array([0, 3, 5]))
  f = pp.filter_groups(g, min_docs=2)
  np.testing.assert_array_equal(f.qid, [1])  # group 2 has no positive relevance
  assert pp.filter_groups(g, min_docs=3, require_positive=False).num_queries == 1
  np.testing.assert_allclose(pp.log1p_transform(x)[:, 0], np.sign(x[:, 0]) * np.log1p(np.abs(x[:, 0])))
  np.testing.assert_allclose(pp.query_level_minmax(x, g.offsets)[:, 0], [0.4, 1, 0, 0, 0])


def test_default_tau_gives_positives_on_three_grade_data():
  raw = data_lib.load_raw("ohsumed", data_dir=shared("ohsumed_letor3"))
  ds = data_lib.prepare(DataConfig(dataset="ohsumed"), raw)
  assert ds.config["tau"] == pytest.approx(2.8)
  assert 0.2 < pp.positive_groups(ds["train"]).mean() < 0.8


# ---------------------------------------------------------------- padding

def test_bucket_cuts_are_optimal_against_brute_force():
  import itertools
  rng = np.random.default_rng(0)
  sizes = rng.integers(1, 30, 60)
  lengths = np.unique(sizes)

  def slots(cuts):
    which = np.searchsorted(cuts, sizes)
    return sum(cuts[b] * np.sum(which == b) for b in range(len(cuts)))

  for k in (1, 2, 3):
    best = min(slots(np.array(sorted(c) + [lengths[-1]]))
               for c in itertools.combinations(lengths[:-1], k - 1))
    cuts = data_lib.bucket_cuts(sizes, k)
    assert len(cuts) <= k and cuts[-1] == sizes.max()
    assert slots(cuts) == best


def test_padding_never_enters_statistics():
  raw = data_lib.load_raw("synthetic", synthetic_kwargs=dict(num_queries=(60, 20, 40), seed=1))
  ds = data_lib.prepare(DataConfig(tau=4.0), raw)
  one, many = data_lib.summary(ds, max_buckets=1), data_lib.summary(ds, max_buckets=6)
  for s in ds.splits:
    for k in ("docs", "docs_per_query", "positive_groups_pct", "positive_docs_pct"):
      assert one["splits"][s][k] == many["splits"][s][k]
    assert many["splits"][s]["padding_ratio"] <= one["splits"][s]["padding_ratio"]
  # round trip: the real slots of the buckets are exactly the flat documents
  g = ds["train"]
  buckets = data_lib.bucketize(g, 4)
  rows = []
  for b in buckets:
    assert not b.x[~b.mask].any() and not b.y[~b.mask].any()
    for i, q in enumerate(b.index):
      np.testing.assert_array_equal(b.x[i][b.mask[i]], g.x[g.offsets[q]:g.offsets[q + 1]])
      rows.append(q)
  assert sorted(rows) == list(range(g.num_queries))


def test_padding_ratio_on_mslr_like_lengths():
  rng = np.random.default_rng(0)
  sizes = np.clip(np.round(rng.lognormal(np.log(124) - 0.18, 0.6, 18000)), 10, 1300).astype(int)
  assert sizes.max() > 1000
  offsets = np.concatenate([[0], np.cumsum(sizes)])
  g = data_lib.Groups(x=np.zeros((offsets[-1], 1), np.float32), rel=np.zeros(offsets[-1], np.float32),
                      qid=np.arange(sizes.size), offsets=offsets)
  assert data_lib.padding_ratio(data_lib.bucketize(g, 8)) < 1.5
  assert data_lib.padding_ratio(data_lib.bucketize(g, 1)) > 5  # one bucket would waste most slots


def test_summary_columns_for_staged_sets():
  for name in ("ohsumed", "mq2008", "web10k"):
    shared(data_lib.spec(name).subdir)
    s = data_lib.summary(data_lib.prepare(DataConfig(dataset=name), data_lib.load_raw(name)))
    assert s["regular_features"] + s["privileged_features"] in (45, 46, 136)
    for row in s["splits"].values():
      assert row["query_groups"] > 0 and 0 <= row["positive_groups_pct"] <= 100


def test_letor_conversion_in_byte_ranges_equals_the_whole_parse(tmp_path):
  """A LETOR file converted in small byte ranges (many queries cross a range boundary) gives the whole-file
  parse when its ranges are read back in order; a second conversion reuses every finished range."""
  from pfd_jax.data import letor, shards
  rng = np.random.default_rng(5)
  lines = []
  for q in range(40):
    for _ in range(int(rng.integers(1, 9))):
      feats = " ".join(f"{j}:{rng.normal():.4f}" for j in range(1, 7) if rng.random() < 0.8)
      lines.append(f"{int(rng.integers(0, 3))} qid:{500 + q} {feats}\n")
  path = tmp_path / "train.txt"
  path.write_text("".join(lines))
  whole = letor.load_letor(str(path))
  count = shards.convert_letor(str(path), str(tmp_path / "conv"), chunk_bytes=300)
  assert count > 5
  parts = list(shards.converted_chunks(str(tmp_path / "conv"), count, whole.x.shape[1]))
  np.testing.assert_array_equal(np.concatenate([g.qid for g in parts]), whole.qid)
  np.testing.assert_array_equal(np.concatenate([g.x for g in parts]), whole.x)
  np.testing.assert_array_equal(np.concatenate([g.rel for g in parts]), whole.rel)
  np.testing.assert_array_equal(np.concatenate([g.sizes for g in parts]), whole.sizes)
  stamp = os.path.getmtime(tmp_path / "conv" / "r0" / "x.npy")
  assert shards.convert_letor(str(path), str(tmp_path / "conv"), chunk_bytes=300) == count
  assert os.path.getmtime(tmp_path / "conv" / "r0" / "x.npy") == stamp  # resumed, not redone


def test_chunked_synthetic_is_deterministic_shared_and_streams():
  """--synthetic_chunk (the large presets' recipe): the same bits every time, other bits with another seed, the
  union of the processes' shares is the one-process data, and the memory beyond the data is one chunk's work,
  flat in the data's size (numpy reports its buffers to tracemalloc), where the one-piece recipe's grows."""
  import tracemalloc
  from pfd_jax.data import synthetic
  kw = dict(num_queries=(90, 20, 50), mean_docs=12.0, chunk=16, seed=4)
  a, b = synthetic.generate_chunked(**kw), synthetic.generate_chunked(**kw)
  other = synthetic.generate_chunked(**dict(kw, seed=5))
  shares = [synthetic.generate_chunked(**kw, share=(k, 3)) for k in range(3)]
  for s in a:
    for f in ("x", "rel", "qid", "offsets"):
      np.testing.assert_array_equal(getattr(a[s], f), getattr(b[s], f))
    assert not np.array_equal(a[s].x[:50], other[s].x[:50])
    np.testing.assert_array_equal(np.concatenate([p[s].x for p in shares]), a[s].x)
    np.testing.assert_array_equal(np.concatenate([p[s].qid for p in shares]), a[s].qid)
  raw = data_lib.load_raw("synthetic",
                          synthetic_kwargs=DataConfig(synthetic_queries=(90, 20, 50), synthetic_mean_docs=12.0,
                                                            synthetic_chunk=16).synthetic_kwargs())
  assert raw["train"].num_queries == 90 and raw["test"].qid[0] == 2 * 10 ** 6

  def beyond_data(fn, n):
    tracemalloc.start()
    out = fn(num_queries=(n, 1, 1), mean_docs=40.0, seed=0)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak - sum(g.x.nbytes + g.rel.nbytes + g.offsets.nbytes + g.qid.nbytes for g in out.values())

  chunked = lambda **k: synthetic.generate_chunked(chunk=50, **k)
  small, large = beyond_data(chunked, 200), beyond_data(chunked, 800)
  assert large < 1.5 * small, (small, large)  # 4x the data, about the same working memory (one chunk)
  assert beyond_data(synthetic.generate, 800) > 3 * beyond_data(synthetic.generate, 200)  # the contrast


def test_document_draws_are_standard_gumbel_and_independent():
  """document_gumbel against the Gumbel CDF exp(-exp(-x)) (Kolmogorov-Smirnov at n = 200,000: the 0.1% critical
  distance is 1.95 / sqrt(n)), its two draws and neighbouring documents uncorrelated, and a function of the key."""
  n = 200_000
  qid, pos = np.repeat(np.arange(2_000) * 7 + 3, 100), np.tile(np.arange(100), 2_000)
  g0, g1 = pp.document_gumbel(5, qid, pos)
  crit = 1.95 / np.sqrt(n)
  for g in (g0, g1):
    s = np.sort(g.astype(np.float64))
    cdf = np.exp(-np.exp(-s))
    assert max(np.max(np.arange(1, n + 1) / n - cdf), np.max(cdf - np.arange(n) / n)) < crit
  for a, b in ((g0, g1), (g0[:-1], g0[1:]), (g0[:-100], g0[100:])):  # 5 / sqrt(n): a 5-sigma bound on |r|
    assert abs(np.corrcoef(a, b)[0, 1]) < 5 / np.sqrt(n)
  again = pp.document_gumbel(5, qid[::-1], pos[::-1])
  np.testing.assert_array_equal(again[0], g0[::-1])
  assert not np.array_equal(pp.document_gumbel(6, qid, pos)[0], g0)


def test_a_documents_label_is_the_same_in_every_fold_that_holds_it(tmp_path):
  """MSLR-WEB30K's layout (S1-S5 rotated into Fold1-5): every document, keyed by (qid, position), has one Eq. 2
  label in every fold and split that holds it; the label rate is Eq. 2's P(y = 1) = sigmoid(t (r - tau)) within
  5 standard errors; a generated dataset keeps its per-split streams (its recipe records no document key)."""
  from test_paper_presets import write_layout
  data = write_layout("web30k", tmp_path / "web30k")
  seen, rel, y = {}, [], []
  for fold in range(1, 6):
    raw = data_lib.load_raw("web30k", data, fold=fold)
    ds = data_lib.prepare(DataConfig(dataset="web30k", label_seed=3, tau=4.8), raw)
    assert ds.config["labels_keyed_by"] == "document"
    for split, g in ds.splits.items():
      keys = zip(g.qid[g.group_index].tolist(), g.position.tolist())
      for key, label, r in zip(keys, g.y.tolist(), g.rel.tolist()):
        assert seen.setdefault(key, label) == label, (fold, split, key)
        if fold == 1:
          rel.append(r)
          y.append(label)
  assert len(seen) == 200 * 12  # every document of S1-S5 (each group has a 4 and 12 documents: the filter keeps all)
  p = 1 / (1 + np.exp(-4.0 * (np.asarray(rel) - 4.8)))
  assert abs(np.sum(y) - p.sum()) < 5 * np.sqrt(np.sum(p * (1 - p)))
  synthetic = data_lib.prepare(DataConfig(),
                               data_lib.load_raw("synthetic", synthetic_kwargs=dict(num_queries=(40, 10, 20), seed=3)))
  assert "labels_keyed_by" not in synthetic.config


def test_the_cache_stores_each_block_of_web30ks_rotated_folds_once(tmp_path, monkeypatch):
  """MSLR-WEB30K's layout (each S-block in three trains, one vali and one test): the 15 files read from the cache
  are the files parsed whole, bit for bit, and their chunks are stored about once (5 blocks, not 15 copies)."""
  from test_paper_presets import write_layout
  monkeypatch.setattr(letor, "CHUNK_EVERY", 4)  # the toy blocks have 40 queries: about 10 chunks each
  data = write_layout("web30k", tmp_path / "web30k")
  cache, used = str(tmp_path / "cache"), 0
  for fold in range(1, 6):
    for split in ("train", "vali", "test"):
      path = os.path.join(data, f"Fold{fold}", f"{split}.txt")
      whole, cached = letor._parse(path), data_lib.load_letor(path, cache_dir=cache)
      for k in ("x", "rel", "qid", "offsets"):
        assert getattr(whole, k).dtype == getattr(cached, k).dtype
        np.testing.assert_array_equal(getattr(whole, k), getattr(cached, k))
      again = data_lib.load_letor(path, cache_dir=cache)  # from the cache
      np.testing.assert_array_equal(again.x, whole.x)
      used += len(json.load(open(parse_cache.manifest_file(path, cache, files.sha256(path)))))
  stored = len(os.listdir(os.path.join(cache, "chunks")))
  blocks = sum(len(list(letor._chunks(os.path.join(data, f"Fold{k}", "vali.txt")))) for k in range(1, 6))
  # the five blocks' chunks, and at most one more at each of the five joins (S1|S2, ..., S5|S1) the trains hold
  assert blocks <= stored <= blocks + 5 and stored < used / 2.5, (blocks, stored, used)


def test_padded_slots_and_resident_bytes_are_what_bucketing_holds():
  """padded_slots from the sizes alone = the slots bucketize pads; resident_bytes = the bytes of the padded x, z,
  rel, y (float32) and mask (a byte) of to_device's bucket sets (training: all groups and the positive ones; each
  eval split's lists with a positive)."""
  from pfd_jax.data.padding import bucketize, padded_slots
  from pfd_jax.training import device
  from pfd_jax.training.evaluation import eval_buckets
  ds = data_lib.prepare(DataConfig(),
                        data_lib.load_raw("synthetic", synthetic_kwargs=dict(num_queries=(60, 20, 30), seed=2)))
  tr = ds["train"]
  for k in (1, 2, 4):
    assert padded_slots(tr.sizes, k) == sum(b.mask.size for b in bucketize(tr, k))
  sets = [bucketize(tr, 4), bucketize(tr, 4, np.flatnonzero(pp.positive_groups(tr)))]
  sets += [eval_buckets(ds[s], 4) for s in ("test", "vali")]
  held = sum(b.x.nbytes + b.z.nbytes + b.rel.nbytes + b.y.nbytes + b.mask.nbytes for bs in sets for b in bs)
  assert device.resident_bytes(ds, 4) == held


def test_a_fold_whose_buckets_exceed_stream_above_of_the_memory_streams():
  from experiments.framework import fold_data
  gib = 2 ** 30
  assert fold_data.streams("streamed", 0.25, lambda: 1, lambda: 100 * gib) == (True, "")
  assert fold_data.streams("resident", 0.0, lambda: 10 * gib, lambda: gib) == (False, "")  # 0: never
  streamed, why = fold_data.streams("resident", 0.25, lambda: 3 * gib, lambda: 8 * gib)
  assert streamed and "3.00 GiB, more than --stream_above=0.25 of the 8.0 GiB available" in why
  streamed, why = fold_data.streams("resident", 0.25, lambda: 2 * gib, lambda: 8 * gib)
  assert not streamed and "no more than" in why


def _dense_folder(root, folds=(1,), width=136, cut=None):
  """A Web30k layout (Fold<k>/{train,vali,test}.txt, every line writing all `width` features); cut: (fold, split)
  whose last line is cut after a whole token."""
  rng = np.random.default_rng(0)
  for k in folds:
    (root / f"Fold{k}").mkdir(parents=True)
    for split in ("train", "vali", "test"):
      lines = [f"{int(rng.integers(0, 3))} qid:{q} " + " ".join(f"{i}:{v:.3f}" for i, v in
                                                                enumerate(rng.random(width), 1))
               for q in range(4) for _ in range(5)]
      if cut == (k, split):
        lines[-1] = " ".join(lines[-1].split()[:51])  # features 50..136 lost with the line's end
      (root / f"Fold{k}" / f"{split}.txt").write_text("\n".join(lines) + "\n")
  return root


def test_a_dense_formats_line_cut_short_is_refused_by_its_line(tmp_path):
  """Web30k and Istella write every feature on every line: a line cut after a whole token (features 50-136 gone)
  is refused naming file and line, instead of reading them as zeros; a sparse folder's short line is fine."""
  root = _dense_folder(tmp_path / "web30k", cut=(1, "test"))
  with pytest.raises(data_lib.DataError,
                     match=r"Fold1/test.txt:20: 49 features, where every line of this format writes "
                                        r"all 136 \(a line cut short\?\)"):
    data_lib.load_raw("web30k", str(root))
  assert data_lib.load_raw("letor", str(root))["test"].x.shape == (20, 136)  # a sparse format: an absent feature is 0


def test_a_preset_refuses_what_it_cannot_run_before_training(tmp_path, monkeypatch):
  """The paper's Web30k preset needs its five folds: a folder of Fold1 only is refused in one line naming --folds;
  a bad line in a later fold's file stops the run before the first row trains."""
  import shlex
  from absl import flags
  from experiments.framework import cli, fold_data
  from experiments.paper import table2
  from pfd_jax.config import ConfigError
  root = _dense_folder(tmp_path / "MSLR-WEB30K")
  preset = next(p for p in table2.DRIVER.presets if p.name == "paper_web30k")
  fv = flags.FlagValues()
  cli.define_flags(table2.DRIVER, fv, key_module="test")
  fv(["prog", *shlex.split(preset.flags), f"--data_dir={root}"])
  cfg = cli.config_from_flags(table2.DRIVER, fv)
  with pytest.raises(ConfigError, match=r"folds: 1,2,3,4,5: dataset 'web30k' has folds \[1\] on disk"):
    table2.run(cfg)
  own = _dense_folder(tmp_path / "own", folds=(1, 2, 3), width=6)
  bad = own / "Fold3" / "train.txt"
  lines = bad.read_text().splitlines(True)
  bad.write_text("".join(lines[:11] + [lines[11].replace("3:", "3:x")] + lines[12:]))
  from conftest import TINY
  cfg = TINY.replace(data=DataConfig(dataset="letor", data_dir=str(own), privileged="1,2", labels="file",
                                     positive_grade=1, min_docs=1), options=table2.Options(methods=("pfd",)))
  trained = []
  monkeypatch.setattr(table2, "run_fold", lambda *a, **k: trained.append(a))
  with pytest.raises(data_lib.DataError, match="Fold3/train.txt:12: "):
    table2.run(cfg)
  assert not trained


def test_plan_checks_every_fold_s_files_even_when_it_probes_nothing(tmp_path):
  """--plan reads and prepares every file of every fold first: a bad line in Fold2 is found in one line (exit 1),
  also at --epochs=2, where no probe applies (the command line: a run sets process-wide state)."""
  import subprocess
  import sys
  own = _dense_folder(tmp_path / "own", folds=(1, 2), width=6)
  bad = own / "Fold2" / "vali.txt"
  bad.write_text(bad.read_text().replace("2:", "2:x", 1))
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  p = subprocess.run([sys.executable, "-m", "experiments.paper.table2", "--dataset=letor", f"--data_dir={own}",
                      "--privileged=1,2", "--labels=file", "--positive_grade=1", "--min_docs=1", "--methods=pfd",
                      "--epochs=2", "--plan", f"--out_dir={tmp_path / 'out'}", "--cache_dir="], cwd=root,
                     capture_output=True, text=True, timeout=300)
  assert p.returncode == 1 and "Fold2/vali.txt:1: " in p.stderr and "Traceback" not in p.stderr, p.stderr[-1500:]
