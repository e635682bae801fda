"""Named datasets (the registry of :mod:`pfd_jax.data.specs`: one spec per name, its folder layout, reader and
defaults) and the full preprocessing pipeline (:func:`prepare`).

=========  ===========================================  ======================================
name       folder layout                                folds
=========  ===========================================  ======================================
ohsumed    DIR/Fold{k}/{train,vali,test}.txt            5 (LETOR 3.0; also trainingset.txt ...)
mq2008     DIR/Fold{k}/{train,vali,test}.txt            5 (LETOR 4.0)
web30k     DIR/Fold{k}/{train,vali,test}.txt            5 (MSLR-WEB30K)
web10k     DIR/Fold{k}/{train,vali,test}.txt            5 (MSLR-WEB10K)
yahoo      DIR/set1.{train,valid,test}.txt              1 (Yahoo! LTR challenge Set 1)
istella    DIR/{full,sample}/{train,vali,test}.txt      1 (Istella LETOR / Istella-S)
letor      DIR/[Fold{k}/]{train,vali,test}.txt          1, or its Fold{k} (any LETOR folder by path)
synthetic  generated in memory, no files                1
=========  ===========================================  ======================================

A folder without ``Fold{k}`` subfolders is read flat (so the staged MQ2008 vali/test pair and the MSLR
5k-line sample load as they are). Splits that are absent are simply not returned; training drivers check
for the splits they need. With no ``data_dir``, named sets are looked for in ``$PFD_DATA_DIR/<sub>`` and
then in ``../shared/data/<sub>`` beside the repository (``DatasetSpec.subdir``).
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
import zlib
from typing import Any, Dict, Mapping, Optional, Sequence

import numpy as np

from pfd_jax import distributed
from pfd_jax.data import analogues
from pfd_jax.data import preprocess as pp
from pfd_jax.data.config import LABEL_MODES, DataConfig
from pfd_jax.config import JsonObject
from pfd_jax.data.groups import DataError, Groups, Splits
from pfd_jax.data.preprocess import file_labels
from pfd_jax.data.letor import pad_features, require_contiguous
from pfd_jax.data.padding import bucketize, padding_ratio
from pfd_jax.data.specs import ALIASES, REGISTRY, SPLITS, DatasetSpec  # noqa: F401 (SPLITS: pfd_jax.data)


def spec(name: str) -> DatasetSpec:
  """The registered dataset `name` (a DataError naming the known ones otherwise)."""
  if name not in REGISTRY:
    raise DataError(f"unknown dataset {name!r}; known: {', '.join(REGISTRY)}")
  return REGISTRY[name]


def num_folds(name: str) -> int:
  return spec(name).folds


def available_folds(name: str, data_dir: Optional[str] = None) -> list:
  """Folds present on disk: Fold{k} subfolders of a multi-fold set, else [1] (a flat folder is one fold)."""
  s = spec(name)
  if s.own_folder:  # your own folder: cross-validated when it holds Fold1, Fold2, ... (any number)
    return _letor_folds(resolve_data_dir(name, data_dir)) or [1]
  if s.folds == 1:
    return [1]
  root = resolve_data_dir(name, data_dir)
  folds = [k for k in range(1, s.folds + 1) if os.path.isdir(os.path.join(root, f"Fold{k}"))]
  return folds or [1]


def _letor_folds(root: str) -> list:
  """The k of the Fold1, Fold2, ... subfolders of a LETOR folder, consecutive from 1."""
  folds = []
  while os.path.isdir(os.path.join(root, f"Fold{len(folds) + 1}")):
    folds.append(len(folds) + 1)
  return folds


def default_num_privileged(name: str, num_features: int) -> int:
  n = REGISTRY[name].num_privileged if name in REGISTRY else None
  return int(round(0.3 * num_features)) if n is None else n


def default_tau(max_grade: float) -> float:
  """tau_target = top grade + 0.8, the paper's 4.8 on 0-4 labels.

  It keeps P(y = 1 | top grade) = sigmoid(-0.8 t) (3.9% at t = 4) on any grade scale; the paper's 4.8 on
  0-2 labels (OHSUMED, MQ2008) would give P(y = 1 | r = 2) = 1.4e-5, i.e. almost no positives.
  """
  return float(max_grade) + 0.8


def shared_data_root() -> str:
  return os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "data"))


def resolve_data_dir(name: str, data_dir: Optional[str]) -> str:
  """The folder of a named dataset: `data_dir`, else $PFD_DATA_DIR/<sub>, else ../shared/data/<sub>."""
  if data_dir:
    if not os.path.isdir(data_dir):
      raise FileNotFoundError(f"--data_dir {data_dir!r} for dataset {name!r} is not a folder")
    return data_dir
  sub = spec(name).subdir or name
  for root in (os.environ.get("PFD_DATA_DIR"), shared_data_root()):
    if root and os.path.isdir(os.path.join(root, sub)):
      return os.path.join(root, sub)
  raise FileNotFoundError(f"dataset {name!r}: no data_dir given and no {sub}/ under $PFD_DATA_DIR or "
                          f"{shared_data_root()}; see third_party/DATASETS.md for where to download it")


def _find_split(folders, split):
  for folder in folders:
    for alias in ALIASES[split]:
      for ext in (".txt", ".txt.gz", "", ".gz"):
        p = os.path.join(folder, alias + ext)
        if os.path.isfile(p):
          return p
  return None


def split_files(name: str, data_dir: Optional[str], fold: int = 1) -> Dict[str, str]:
  """{split: path} for the splits of `name` found on disk (FileNotFoundError if none)."""
  s = spec(name)
  root = resolve_data_dir(name, data_dir)
  own = _letor_folds(root) if s.own_folder else []
  if not 1 <= fold <= max(s.folds, len(own)):
    raise DataError(f"dataset {name!r} has folds 1..{max(s.folds, len(own))}, got fold={fold}")
  folders = [os.path.join(root, f"Fold{fold}")] if s.folds > 1 or own else []
  folders += [os.path.join(root, f) for f in s.folders]
  folders.append(root)
  holding = [f for f in folders if any(_find_split([f], split) for split in SPLITS)]
  if not holding:
    raise FileNotFoundError(f"dataset {name!r}: no train/vali/test file in {folders}")
  alternatives = [f for f in holding if os.path.basename(f) in s.folders]
  if len(alternatives) > 1:  # e.g. Istella's full/ and sample/, unpacked side by side: two datasets, not one
    raise DataError(f"dataset {name!r}: {' and '.join(alternatives)} both hold split files, and one run's splits "
                    f"never come from two of them: point --data_dir at the one to use")
  # every split from the first folder that holds any (never a split of another folder beside it)
  return {split: p for split in SPLITS if (p := _find_split(holding[:1], split))}


def load_raw(name: str, data_dir: Optional[str] = None, fold: int = 1, cache_dir: Optional[str] = None,
             synthetic_kwargs: Optional[Mapping[str, Any]] = None, comm=None) -> Splits:
  """Raw splits {split: Groups} of a named dataset (files parsed by its spec's reader, nothing transformed).

  comm (:class:`pfd_jax.distributed.Comm`): in a multi-process run each process reads only its share of
  every file (the spec's ``read_shard``; LETOR's: :func:`pfd_jax.data.letor.load_letor_shard`, the queries that
  start in its N-th of the bytes); data made in memory is made by its spec's ``generate`` for this process's share.
  The union over processes, in process order, is the one-process data."""
  s = spec(name)
  index, count = (0, 1) if comm is None else (comm.index, comm.count)
  if s.in_memory:
    return s.generate(synthetic_kwargs or {}, (index, count))
  files = split_files(name, data_dir, fold)
  if count == 1:
    splits = {split: s.read(p, cache_dir) for split, p in files.items()}
    return _declared_width(s, files, splits, max(g.x.shape[1] for g in splits.values()))
  if s.read_shard is None:
    raise DataError(f"dataset {name!r} has no reader of a process's share of a file: run it in one process")
  # Every process checks what one process would: an error in any shard stops all of them with its words, and a
  # qid whose lines fall in two shards (not contiguous) is found among all the processes' qids.
  splits, error = {}, None
  try:
    splits = {split: s.read_shard(p, index, count) for split, p in files.items()}
  except (DataError, OSError) as e:
    error = str(e)
  error = comm.first_error(error)
  if error is not None:
    raise DataError(error)
  for split, p in files.items():  # the same whole-file check in every process: the same line named everywhere
    require_contiguous(p, comm.concat(splits[split].qid))
  return _declared_width(s, files, splits, int(comm.max(max(g.x.shape[1] for g in splits.values()))))


def _declared_width(s, files: Dict[str, str], splits: Splits, widest: int) -> Splits:
  """`splits` zero-filled to the spec's declared width, else to the `widest` split's (a feature id no file mentions
  is a column of zeros, as an absent SVMlight feature is 0); a file with an id past the declared width is refused,
  naming it (in a multi-process run, the process that read it)."""
  if s.num_features and widest > s.num_features:
    split = next((k for k, g in splits.items() if g.x.shape[1] == widest), None)
    where = files[split] if split else f"dataset {s.name}'s files"
    raise DataError(f"{where}: feature id {widest} past dataset {s.name}'s {s.num_features} features")
  return pad_features(splits, s.num_features or widest)


def read_serving(path: str, num_features: Optional[int] = None, dataset: Optional[str] = None) -> tuple:
  """A file to score, read by its dataset's serving reader (default and for a name not registered: LETOR's):
  (Groups, the sorted 1-based feature ids present on at least one line)."""
  reader = REGISTRY[dataset].read_serving if dataset in REGISTRY else REGISTRY["letor"].read_serving
  return reader(path, num_features)


@dataclasses.dataclass(frozen=True)
class Dataset:
  """A preprocessed dataset: splits with x (regular), z (privileged), rel, y, g0, g1; and its recipe."""
  name: str
  splits: Splits
  privileged: np.ndarray  # column indices (in the raw feature order) moved to z
  config: JsonObject

  def __getitem__(self, split: str) -> Groups:
    if split not in self.splits:
      raise DataError(f"dataset {self.name!r} has no {split!r} split (has: {', '.join(self.splits)})")
    return self.splits[split]


def privileged_indices(ids: Sequence[int], num_features: int) -> np.ndarray:
  """0-based columns of 1-based feature ids (as written in LETOR files), checked against the data's width."""
  ids = [int(i) for i in ids]
  bad = [i for i in ids if not 1 <= i <= num_features]
  if bad:
    raise DataError(f"--privileged: feature ids {bad} are out of range; the data has features 1..{num_features}")
  if len(set(ids)) != len(ids):
    raise DataError(f"--privileged: duplicate feature ids in {ids}")
  return np.asarray(ids, np.int64) - 1


def prepare(cfg: DataConfig, raw: Splits, *, comm=None, require_positive: Optional[bool] = None) -> Dataset:
  """The paper's pipeline on raw splits, as the recipe `cfg` says: filter, (query-level min-max), log1p,
  labels, privileged split.

  Args:
    cfg: the recipe (:class:`pfd_jax.data.config.DataConfig`): the dataset's name (per-dataset defaults),
      t and tau (Eq. 2; tau None: the spec's (4.4 for the synthetic default), else :func:`default_tau` of the reference
      split's top grade), labels (gumbel, the paper's protocol, or file: :func:`file_labels` with
      positive_grade), privileged (1-based ids, in this order, or auto: the num_privileged reference
      columns most |correlated| with y, default the paper's per-dataset k), min_docs, query_norm and log1p
      (query_norm = LETOR QueryLevelNorm, before log1p), label_seed (the Gumbel draws of a dataset read from
      files are keyed by (label_seed, query id, position in the query), so a document has one label in every
      split and fold that holds it (:func:`pfd_jax.data.preprocess.document_gumbel`); a generated dataset's
      split draws from its own stream derived from (label_seed, split name), as each split is new data).
    raw: {split: Groups} from :func:`load_raw`. Label defaults and the privileged split are computed on
      'train'; a set without train (the staged MQ2008 vali/test pair) uses its first split instead and
      records that as config['reference_split'].
    require_positive: drop groups with no rel > 0 (default: True for Gumbel labels, the paper's filter;
      False for file labels, whose groups without a positive are the ones only the teacher term teaches).
    comm: in a multi-process run (:class:`pfd_jax.distributed.Comm`), `raw` is this process's share and the
      statistics that must be global come from collectives: the top grade (default tau), the emptiness
      checks, each document's Gumbel draws (this process's documents' positions in the split) and the
      privileged columns' correlations. The union of the processes' results is the one-process result.

  The recipe (config) records the label mode and the 1-based regular and privileged feature ids, whichever
  way they were chosen, so that a saved model can rebuild its inputs from a raw file.
  """
  name, labels, tau = cfg.dataset, cfg.label_mode, cfg.tau
  if tau is None and name in REGISTRY:
    tau = REGISTRY[name].tau
  return _prepare(name, raw, t=cfg.t, tau=tau, num_privileged=cfg.num_privileged, min_docs=cfg.min_docs,
                  require_positive=labels == "gumbel" if require_positive is None else require_positive,
                  log1p=cfg.log1p, query_norm=cfg.query_norm, seed=cfg.label_seed, labels=labels,
                  positive_grade=cfg.positive_grade, privileged=cfg.privileged_ids, comm=comm or distributed.LOCAL,
                  by_document=not (name in REGISTRY and REGISTRY[name].in_memory) or _scored(cfg),
                  held_only=name in REGISTRY and REGISTRY[name].own_data)


def _scored(cfg: DataConfig) -> bool:
  """A paper analogue generated with scored lists (pfd_jax.data.analogues.generate): its labels keyed by document,
  the ones its generator chose the lists by."""
  return bool(cfg.analogue) and bool(analogues.parse_settings(cfg.analogue).get("scored"))


def _prepare(name: str, raw: Splits, *, t, tau, num_privileged, min_docs, require_positive, log1p, query_norm,
             seed, labels, positive_grade, privileged, comm, by_document=False, held_only=False) -> Dataset:
  if not raw:
    raise DataError(f"dataset {name!r} has no split")
  if labels not in LABEL_MODES:
    raise DataError(f"labels must be one of {LABEL_MODES}, got {labels!r}")
  ref = "train" if "train" in raw else next(iter(raw))
  if labels == "gumbel" and tau is None:
    tau = default_tau(comm.max(raw[ref].rel.max(initial=-np.inf)))
  num_features = raw[ref].x.shape[1]
  given = None if privileged is None else privileged_indices(privileged, num_features)
  # the columns a reference (training) line holds a value in: a given privileged id on none of them is refused; a
  # user's own folder (held_only) has only those as columns, so an id its files never write (a gap in its ids) is no
  # model input (SVMlight writes no zero; a column zero on every training line would teach nothing)
  held = np.flatnonzero(comm.max(np.any(raw[ref].x != 0, axis=0)))
  if given is not None and (empty := [int(i) + 1 for i in given if i not in set(held.tolist())]):
    raise DataError(f"--privileged: feature ids {empty} hold no value on any line of dataset {name!r}'s {ref} split: "
                    "name ids its files hold")
  out, dropped = {}, {}
  for split, whole in raw.items():
    g = pp.filter_groups(whole, min_docs=min_docs, require_positive=require_positive)
    if (lost := int(comm.sum(whole.num_queries)) - int(comm.sum(g.num_queries))) > 0:
      dropped[split] = [lost, int(comm.sum(whole.num_queries))]  # [lists dropped, lists read]
    if comm.sum(g.num_queries) == 0:
      raise DataError(f"dataset {name!r}: no {split} group left after filtering "
                       f"(min_docs={min_docs}, require_positive={require_positive})")
    g = dataclasses.replace(g, x=pp.transform_features(g.x, g.offsets, log1p=log1p, query_norm=query_norm))
    if labels == "gumbel" and by_document:
      out[split] = pp.with_document_labels(g, seed, t=t, tau=tau)
    elif labels == "gumbel":
      seed_seq = [seed, zlib.crc32(split.encode())]
      if comm.count == 1:
        out[split] = pp.with_labels(g, np.random.default_rng(seed_seq), t=t, tau=tau)
      else:  # this process's documents' draws: their positions in the whole split's stream
        out[split] = pp.with_labels_at(g, seed_seq, *comm.offset(g.num_docs), t=t, tau=tau)
    else:
      out[split] = dataclasses.replace(g, y=file_labels(g.rel, positive_grade, f"dataset {name!r} {split}: "))
  if given is None:
    k = default_num_privileged(name, num_features) if num_privileged is None else num_privileged
    priv = pp.privileged_columns(out[ref], k, comm)
  else:
    priv = given
  regular = np.setdiff1d(held if held_only else np.arange(num_features), priv)
  out = {s: pp.split_features(g, priv, regular) for s, g in out.items()}
  config = dict(name=name, labels=labels, positive_grade=positive_grade,
                t=t if labels == "gumbel" else None, tau=tau if labels == "gumbel" else None,
                num_privileged=int(priv.size), privileged_choice="auto" if given is None else "given",
                privileged_ids=[int(i) + 1 for i in priv], regular_ids=[int(i) + 1 for i in regular],
                num_features=int(num_features), min_docs=min_docs, require_positive=require_positive,
                log1p=log1p, query_norm=query_norm, seed=seed, reference_split=ref,
                data_fingerprint=fingerprint(out))
  if dropped:  # recorded where a filter dropped lists (a table counts them with the rule)
    config["dropped_lists"] = dropped
  if by_document and labels == "gumbel":
    config["labels_keyed_by"] = "document"  # recorded where it applies: a generated dataset's record is as it was
  return Dataset(name=name, splits=out, privileged=priv, config=config)


def fingerprint(splits: Splits) -> str:
  """SHA-256 (16 hex digits) of prepared splits' bits (features, labels, grades, list boundaries, in split order):
  two runs saw the same data iff their fingerprints agree (in a multi-process run: this process's share)."""
  h = hashlib.sha256()
  for split, g in splits.items():
    h.update(split.encode())
    for a in (g.x, g.z, g.y, g.rel, g.offsets):
      if a is not None:
        h.update(np.ascontiguousarray(a).tobytes())
  return h.hexdigest()[:16]


def with_graded_labels(ds: Dataset) -> Dataset:
  """The dataset with y = the graded relevance label rel (SDR and the perceptrons train and evaluate on it)."""
  splits = {s: dataclasses.replace(g, y=g.rel.astype(np.float32)) for s, g in ds.splits.items()}
  return Dataset(name=ds.name, splits=splits, privileged=ds.privileged, config=dict(ds.config, labels="graded"))


def with_synthetic_privileged(ds: Dataset, tau_priv: float) -> Dataset:
  """Figure 5's setting: every dataset feature regular, and one privileged feature
  z = 1[t r + G1 > t tau_priv + G0] drawn with the *same* Gumbel draws as y (so z = y at tau_priv = tau)."""
  t = ds.config["t"]
  out = {}
  for split, g in ds.splits.items():
    x = g.x if g.z is None else np.concatenate([g.x, g.z], axis=1)
    z = pp.gumbel_labels(g.rel, g.g0, g.g1, t=t, tau=tau_priv)[:, None]
    out[split] = dataclasses.replace(g, x=x, z=z)
  ids = ds.config.get("regular_ids", []) + ds.config.get("privileged_ids", [])  # x's columns, in order
  return Dataset(name=ds.name, splits=out, privileged=np.zeros(0, np.int64),
                 config=dict(ds.config, num_privileged=0, tau_priv=tau_priv, regular_ids=ids, privileged_ids=[],
                             privileged_choice=f"synthetic z = 1[t r + G1 > t {tau_priv} + G0]"))


PLACEBO_STREAM = 0x9ACEB0  # a fixed entropy word: the placebo permutation never reuses another stream's draws


def with_placebo_privileged(ds: Dataset, within: str = "query", seed: int = 0) -> Dataset:
  """The placebo control's dataset (:func:`pfd_jax.data.preprocess.permute_privileged` on every split, each
  with its own stream of `seed`): what a teacher learns from it beyond x is capacity and noise, never the
  privileged information."""
  splits = {s: pp.permute_privileged(g, np.random.default_rng([PLACEBO_STREAM, seed, i]), within)
            for i, (s, g) in enumerate(sorted(ds.splits.items()))}
  return Dataset(name=ds.name, splits=splits, privileged=ds.privileged,
                 config=dict(ds.config, placebo=within, placebo_seed=seed))


def summary(ds: Dataset, max_buckets: int = 8) -> JsonObject:
  """The paper's Table 1 columns (plus padding ratio) for every split of `ds`."""
  rows = {}
  for split, g in ds.splits.items():
    rows[split] = dict(
        query_groups=g.num_queries, docs=g.num_docs, docs_per_query=float(g.sizes.mean()),
        max_docs=int(g.sizes.max()),
        positive_groups_pct=100.0 * float(pp.positive_groups(g).mean()),
        positive_docs_pct=100.0 * float(g.y.mean()),
        padding_ratio=padding_ratio(bucketize(g, max_buckets)))
  ref = ds[ds.config["reference_split"]]
  # A column that is 0 in every document of every split: a declared id that no file holds reads as one (an absent
  # SVMlight feature is 0), so Table 1's feature count says what the files give, not only what the dataset declares.
  zero = lambda part: int(np.sum(~np.any(np.stack([np.any(getattr(g, part) != 0, axis=0)
                                                   for g in ds.splits.values()]), axis=0)))
  return dict(regular_features=int(ref.x.shape[1]), privileged_features=int(ref.z.shape[1]),
              zero_columns=dict(regular=zero("x"), privileged=zero("z")), splits=rows, config=ds.config)
