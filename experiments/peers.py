r"""The frameworks users would pick instead, trained side by side with pfd_jax on the same LETOR files.

  pip install -e ".[peers]"                     # allRank 1.4.3 and PT-Ranking 0.0.5 (--no-deps: see below)
  python -m experiments.bench.benchmark --peer_epochs=5

:func:`write_letor` writes the synthetic generator at a fraction of MSLR-WEB30K size as a LETOR folder: the
prepared regular features (the privileged ones left out) and 0/1 labels (:data:`POSITIVE_GRADE`), so every
framework reads identical inputs and labels. Each framework then trains the same model (4 hidden ReLU layers of 100 + a
linear output), with Adam and coupled weight decay 0.005 (torch ``Adam(weight_decay=...)``, our optax chain),
the learning rate halved every 20 epochs, the paper's batch size and learning rate per loss (RankNet 300 /
3e-4, softmax = ListNet 500 / 1e-3, RankBCE 500 / 1e-3), on this process's thread count, for the same
epochs. Reported: training documents per second over the epochs after the first (the first compiles, for
JAX; for torch it warms the allocator) and test NDCG@8 of the last epoch's model, computed for every
framework by the same function (:func:`pfd_jax.ops.metrics.ndcg_at_k` over test lists with a positive).

The recipes, the import shim and every way a peer's setup differs from ours are in
``third_party/peers/README.md``; the recipes themselves are ``third_party/peers/*.json``. Nothing of the
peers' code is copied here: they are installed packages, driven through their own classes.
"""
from __future__ import annotations

import json
import os
import sys
import time
import types

import numpy as np

from pfd_jax import files
from pfd_jax import data as data_lib
from pfd_jax.data.config import DataConfig
from pfd_jax import training as training_lib
from pfd_jax.ops import metrics

PEERS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "third_party", "peers")
# The paper's batch size and learning rate per loss (appendix A.3), as pfd_jax.training.PAPER_BATCH.
# allRank's bce loss fails on current torch (its padded targets, -1, reach BCELoss, which now checks targets
# lie in [0, 1]), so RankBCE has no peer row; PT-Ranking 0.0.5 has no BCE loss.
PEER_LOSSES = {"allrank": ("ranknet", "softmax"), "ptranking": ("ranknet", "softmax")}


def recipe(peer: str) -> dict:
  """The peer's recipe (third_party/peers/<peer>.json)."""
  with open(os.path.join(PEERS_DIR, f"{peer}.json")) as f:
    return json.load(f)


# Labels of the peers' files: y = 1[grade >= 4] of the generator's 0-4 grades (2% of documents, 81% of lists
# with a positive), not the Gumbel labels, which at this size give about one positive per ten lists and so
# an NDCG@8 over a few dozen test lists.
POSITIVE_GRADE = 4.0


def write_letor(folder: str, scale: float, seed: int = 0) -> dict:
  """The synthetic Web30k-shape data at `scale` as ``folder/{train,vali,test}.txt`` (0/1 labels, regular
  features 1..d); kept and reused while ``folder/sizes.json`` (written last) exists. Returns {split: [lists,
  documents]}."""
  from sklearn.datasets import dump_svmlight_file
  done = os.path.join(folder, "sizes.json")
  if os.path.exists(done):
    with open(done) as f:
      return json.load(f)
  kw = data_lib.web30k_scale()
  kw["num_queries"] = tuple(max(1, int(q * scale)) for q in kw["num_queries"])
  ds = data_lib.prepare(DataConfig(labels="file", positive_grade=POSITIVE_GRADE, label_seed=seed),
                        data_lib.synthetic.generate(**kw))
  os.makedirs(folder, exist_ok=True)
  out = {}
  for split in ("train", "vali", "test"):
    g = ds[split]
    files.write_atomic(os.path.join(folder, f"{split}.txt"), lambda f: dump_svmlight_file(
        g.x, g.y, f, zero_based=False, query_id=np.repeat(np.arange(g.num_queries), g.sizes)))
    out[split] = [g.num_queries, g.num_docs]
  files.write_atomic(done, json.dumps(out))
  return out


def read_letor(folder: str):
  """Our reading of the folder (file labels, no further transform): {split: Groups}."""
  return data_lib.prepare(DataConfig(dataset="letor", labels="file", log1p=False, min_docs=1, num_privileged=0),
                          data_lib.load_raw("letor", folder))


def test_ndcg8(score_fn, test) -> float:
  """NDCG@8 of `score_fn(x [Q, L, d] float32) -> [Q, L]` over the test lists with a positive (pfd_jax's metric,
  the same for every framework)."""
  import jax.numpy as jnp
  total, lists = 0.0, 0
  for b in data_lib.bucketize(test, 8):
    s = np.asarray(score_fn(b.x), np.float32)
    nd = metrics.ndcg_at_k(jnp.asarray(s), jnp.asarray(b.y), jnp.asarray(b.mask), 8)
    has = np.asarray(b.y * b.mask).sum(-1) > 0
    total += float(np.asarray(nd)[has].sum())
    lists += int(has.sum())
  return total / max(lists, 1)


def _torch_setup(threads: int, seed: int):
  import torch
  torch.manual_seed(seed)
  torch.set_num_threads(threads)
  return torch


def _torch_scores(torch, fn):
  def score(x):
    with torch.no_grad():
      return fn(torch.from_numpy(np.ascontiguousarray(x, np.float32))).numpy()
  return score


def _allrank_imports():
  """allRank 1.4.3 imports, at module level, packages its training step never uses (torchvision for a
  two-function Compose, gcsfs and tensorboardX for cloud paths and logging, pkg_resources (gone from current
  setuptools) for packaged config files) and pins torch <= 1.8. Rather than installing those (torchvision
  would pull another torch build), stand-ins are registered for these imports: ``transforms.Compose``
  composes callables exactly as torchvision's does; the others are never called on local files. See
  third_party/peers/README.md."""
  if "torchvision" not in sys.modules:
    tv, tr = types.ModuleType("torchvision"), types.ModuleType("torchvision.transforms")

    class Compose:
      def __init__(self, fns):
        self.fns = list(fns)

      def __call__(self, sample):
        for f in self.fns:
          sample = f(sample)
        return sample
    tr.Compose, tv.transforms = Compose, tr
    sys.modules.update({"torchvision": tv, "torchvision.transforms": tr})
  for name, attrs in (("gcsfs", ("GCSFileSystem",)), ("tensorboardX", ("SummaryWriter",)),
                      ("pkg_resources", ("Requirement", "resource_filename"))):
    try:
      __import__(name)
    except ImportError:
      sys.modules[name] = types.ModuleType(name)
      for a in attrs:
        setattr(sys.modules[name], a, None)


def allrank(folder: str, loss: str, epochs: int, test, threads: int, seed: int = 0) -> dict:
  """allRank: its LibSVMDataset (lists padded or sampled to the recipe's slate_length), DataLoader, model
  (make_model: FCModel + OutputLayer), loss function and training step (train_utils.loss_batch)."""
  torch = _torch_setup(threads, seed)
  _allrank_imports()
  from allrank.data.dataset_loading import load_libsvm_dataset_role
  from allrank.models import losses
  from allrank.models.model import make_model
  from allrank.training.train_utils import loss_batch
  r = recipe("allrank")
  lr_cfg = r["losses"][loss]
  ds = load_libsvm_dataset_role("train", folder, r["slate_length"])
  dl = torch.utils.data.DataLoader(ds, batch_size=lr_cfg["batch_size"], shuffle=True, num_workers=0)
  model = make_model(fc_model=dict(r["fc_model"], sizes=list(r["fc_model"]["sizes"])), transformer=None,
                     post_model=lr_cfg["post_model"], n_features=ds.shape[-1])
  opt = torch.optim.Adam(model.parameters(), lr=lr_cfg["lr"], weight_decay=r["weight_decay"])
  sched = torch.optim.lr_scheduler.StepLR(opt, step_size=r["lr_halve_every"], gamma=0.5)
  loss_fn = getattr(losses, lr_cfg["name"])
  # Real documents an epoch trains on: FixLength samples lists longer than slate_length down to it.
  docs = sum(min(len(y), r["slate_length"]) for y in ds.y_by_qid)
  stamps = [time.perf_counter()]
  for _ in range(epochs):
    model.train()
    for xb, yb, idx in dl:
      loss_batch(model, loss_fn, xb, yb, idx, None, opt)
    sched.step()
    stamps.append(time.perf_counter())
  model.eval()

  def fn(x):
    q, l, _ = x.shape
    return model.score(x, torch.zeros((q, l), dtype=torch.bool), torch.arange(l).expand(q, l))
  return _summary(stamps, docs, test_ndcg8(_torch_scores(torch, fn), test), f"torch {torch.__version__}")


def ptranking(train, loss: str, epochs: int, test, threads: int, seed: int = 0) -> dict:
  """PT-Ranking: its NeuralRanker (ini_ffnns scoring function, Adam + StepLR) and loss classes, fed one
  query per step as its own LTRDataset does (`train`: our parse of the same file, :func:`read_letor`)."""
  torch = _torch_setup(threads, seed)
  from ptranking.ltr_adhoc.listwise.listnet import ListNet
  from ptranking.ltr_adhoc.pairwise.ranknet import RankNet
  r = recipe("ptranking")
  lr_cfg = r["losses"][loss]
  sf = {"ffnns": dict(r["ffnns"], num_features=int(train.x.shape[1]))}
  ranker = RankNet(sf_para_dict=sf, model_para_dict=dict(sigma=1.0)) if loss == "ranknet" else \
      ListNet(sf_para_dict=sf)
  for m in ranker.sf.modules():  # ini_ffnns hard-codes Dropout(0.01) between hidden layers: off, as ours
    if isinstance(m, torch.nn.Dropout):
      m.p = 0.0
  ranker.lr, ranker.weight_decay = lr_cfg["lr"], r["weight_decay"]
  ranker.config_optimizer()  # Adam(lr, weight_decay) + StepLR(step_size=20, gamma=0.5), the library's own
  xs = [torch.from_numpy(a[None]) for a in np.split(train.x.astype(np.float32), train.offsets[1:-1])]
  ys = [torch.from_numpy(a[None]) for a in np.split(train.y.astype(np.float32), train.offsets[1:-1])]
  rng = np.random.default_rng(seed)
  stamps = [time.perf_counter()]
  for epoch in range(1, epochs + 1):
    ranker.sf.train()
    for q in rng.permutation(len(xs)):
      ranker.train(xs[q], ys[q], epoch_k=epoch)
    ranker.scheduler.step()
    stamps.append(time.perf_counter())
  ranker.sf.eval()
  return _summary(stamps, train.num_docs, test_ndcg8(_torch_scores(torch, lambda x: ranker.sf(x)[..., 0]), test),
                  f"torch {torch.__version__}")


def lightgbm(train, test, threads: int, trees: int = 100, leaves: int = 255, seed: int = 0) -> dict:
  """LightGBM LambdaMART (``objective="lambdarank"``) on the same file: `trees` rounds of `leaves` leaves, no
  early stopping, LightGBM's other defaults (learning rate 0.1). docs/s counts documents x rounds per second
  of fitting (a round visits every training document once, as an epoch does); fit_s is the whole fit,
  Dataset construction (binning) included."""
  import lightgbm as lgb
  t0 = time.perf_counter()
  data = lgb.Dataset(train.x, label=train.y, group=train.sizes)
  model = lgb.train(dict(objective="lambdarank", num_leaves=leaves, num_threads=threads, seed=seed,
                         deterministic=True, force_row_wise=True, verbosity=-1), data, num_boost_round=trees)
  fit_s = time.perf_counter() - t0
  score = lambda x: model.predict(x.reshape(-1, x.shape[-1])).reshape(x.shape[:-1])
  return dict(docs_per_s=train.num_docs * trees / fit_s, docs_per_s_range=[train.num_docs * trees / fit_s] * 2,
              fit_s=fit_s, trees=trees, leaves=leaves, docs=train.num_docs, ndcg8=test_ndcg8(score, test),
              backend=f"lightgbm {lgb.__version__}")


def reach(ours_result: dict, target: float):
  """(epoch, seconds) at which pfd_jax's test NDCG@8 first reaches `target` (epoch 1-based, seconds from the
  start of training, compiling included), or None when it does not within its epochs."""
  curve = np.asarray(ours_result["ndcg8_curve"])
  hit = np.flatnonzero(curve >= target)
  if hit.size == 0:
    return None
  return int(hit[0]) + 1, float(np.cumsum(ours_result["epoch_s"])[hit[0]])


def ours(train, loss: str, epochs: int, test, seed: int = 0) -> dict:
  """pfd_jax on the same file (one seed, the epoch program; each epoch also evaluates the test split, which
  the peers' timings do not include). ndcg8_curve: test NDCG@8 after every epoch."""
  import jax
  cfg = training_lib.TrainConfig(loss=loss, epochs=epochs, data_groups="all")
  stamps = training_lib.EpochTimes()
  res = training_lib.train(jax.random.split(jax.random.PRNGKey(seed), 1), cfg,
                           training_lib.device_buckets(data_lib.bucketize(train, 8)),
                "x", {"test": training_lib.eval_set(test, 8)}, hooks=training_lib.Hooks(writers=(stamps,)))
  # curves[test][seed 0, last epoch, NDCG@8]: the last epoch's model, as the peers' (not the best epoch's).
  return dict(_summary([0.0] + stamps, train.num_docs, float(res.curves["test"][0, -1, 0]), f"jax {jax.__version__}"),
              ndcg8_curve=np.asarray(res.curves["test"])[0, :, 0].tolist())


def _summary(stamps, docs: int, ndcg8: float, backend: str) -> dict:
  """docs/s of the median epoch after the first (stamps: start, then the end of each epoch), with the range."""
  sec = np.diff(stamps)
  timed = sec[1:] if sec.size > 1 else sec
  return dict(docs_per_s=docs / float(np.median(timed)), docs_per_s_range=[docs / float(timed.max()),
              docs / float(timed.min())], first_epoch_s=float(sec[0]), epoch_s=[float(t) for t in sec],
              docs=docs, ndcg8=ndcg8, backend=backend)


def available() -> dict:
  """{peer: version} of the installed peers."""
  from importlib import metadata
  out = {}
  for peer, dist in (("allrank", "allRank"), ("ptranking", "ptranking")):
    try:
      out[peer] = metadata.version(dist)
    except metadata.PackageNotFoundError:
      pass
  return out
