"""The resume store: every trained row of a run saved as it ends and loaded instead of trained when the run
is started again (and, with --save_models, written as a saved ranker)."""
from __future__ import annotations

import hashlib
import json
import os
import pickle
from typing import Callable, Optional

import flax.serialization
import jax
import jax.numpy as jnp
import numpy as np
from absl import logging

from experiments.framework import guards
from pfd_jax import config as config_lib
from pfd_jax import data as data_lib
from pfd_jax import distributed, registry
from pfd_jax.methods import gbdt
from pfd_jax.methods import rows as rows_lib
from pfd_jax.ops import losses as losses_lib
from pfd_jax.methods.ranker import make_ranker
from pfd_jax import training as training_lib
from pfd_jax.training import TrainConfig
from pfd_jax.training import teaching as teaching_lib
from experiments.framework.monitor import PROGRESS
from experiments.framework.outputs import write_atomic
from experiments.framework.schema import Config, RESULTS
from experiments.framework.fold_data import folds_of


class RowStore:
  """The trained rows of one (loss, fold) of a run: each is trained once, saved atomically as soon as it
  ends (``<run folder>/runs/<loss>/fold<k>/<row>.msgpack``: parameters of every seed, curves, losses, best
  epochs), and loaded instead of trained when a saved one exists (an interrupted run resumes; --restart
  trains again). A saved row keeps the :func:`fingerprint` of what trained it: a row whose registered code,
  overrides or teaching changed since it was saved is trained again (the log says which and why), never loaded.
  With --save_models each row is also written as a :class:`pfd_jax.serving.Ranker` to
  ``models/[<loss>/][fold<k>/]<row>/`` (the loss level when the run trains both losses, the fold level for
  multi-fold runs). Outside a driver's main (no run folder) rows are trained and never saved."""

  def __init__(self, cfg: Config, ds: data_lib.Dataset, fold: int = 1, loss: Optional[str] = None,
               folder: Optional[str] = None):
    """folder: the store's folder under runs/<loss>/ (default fold<k>; a chunk of draws trained side by side:
    draws<first>-<last>)."""
    self.cfg, self.ds, self.fold = cfg, ds, fold
    self.loss = loss or cfg.losses[0]
    root = cfg.output.run_dir or os.path.join(cfg.output.out_dir or RESULTS, ds.name)
    self.store = (os.path.join(root, "runs", self.loss, folder or f"fold{fold}") if cfg.output.run_dir else None)
    parts = [root, "models"]
    if len(cfg.losses) > 1:
      parts.append(self.loss)
    if ds.name in data_lib.specs.REGISTRY and len(folds_of(cfg.data)) > 1:
      parts.append(f"fold{fold}")
    self.models = os.path.join(*parts)

  def __call__(self, row: str, view: str, tc: TrainConfig, train: Callable[[], training_lib.TrainResult],
               servable: bool = True) -> training_lib.TrainResult:
    """The result of `train()` for `row` (input `view`, config `tc`): loaded if saved, else trained and saved.
    servable=False: never written as a model (its inputs exist in no file, e.g. Figure 5's synthetic z)."""
    return self.many([(row, view, tc)], lambda: [train()], servable)[0]

  def fit(self, prefix: str = "", servable: bool = True) -> Callable:
    """The ``fit(row, config, train)`` of :mod:`pfd_jax.methods.distill`'s run functions: each row (a
    :class:`pfd_jax.methods.rows.Row`) loaded or trained and saved as ``<prefix><row name>`` with its own view and
    config, written as a model when a service can run it (and `servable`)."""
    return lambda row, config, train: self.many([(prefix + row.name, row.recipe.view, config, row)], lambda: [train()],
                                                servable and row.servable)[0]

  def many(self, rows: list, train: Callable[[], list], servable: bool = True) -> list:
    """RowStore trained together by one call (e.g. an alpha sweep in one program): [(row, view, tc[, entry])] ->
    their results, all loaded when all are saved with the fingerprint they would have now, else all trained by
    `train()` and each saved (entry: the row's registered :class:`pfd_jax.methods.rows.Row`, whose code the
    fingerprint covers)."""
    rows = [(r[0], r[1], r[2], r[3] if len(r) > 3 else None) for r in rows]
    names = [row.replace(" ", "_").replace("/", "_") for row, _, _, _ in rows]
    prints = [fingerprint(view, tc, entry) for _, view, tc, entry in rows]
    paths = [os.path.join(self.store, n + ".msgpack") for n in names] if self.store else None
    comm = distributed.comm()
    guards.checkpoint(comm)  # a safe point: every earlier row is saved
    guards.release_compiled()
    PROGRESS.begin_row()
    saved = bool(paths) and all(map(os.path.exists, paths)) and not self.cfg.run.restart
    loaded = [_read(p) for p in paths] if saved else []
    if saved:
      changed = [row for (row, _, _, _), d, now in zip(rows, loaded, prints) if d.get("fingerprint") not in (None, now)]
      if changed:
        logging.warning("%s: trained again, not loaded: its registered code, overrides or teaching changed since it "
                        "was saved (pfd_jax.registry)", ", ".join(changed))
      saved = not changed
    if comm.count > 1:  # load only if every process sees the saved rows, else all train (they must agree)
      saved = int(comm.sum(int(saved))) == comm.count
    if saved:
      results = [_result(d) for d in loaded]
      logging.info("%s %s: loaded from %s", PROGRESS.of(), ", ".join(r[0] for r in rows), os.path.dirname(paths[0]))
    else:
      results = train()  # the progress line shows the first row until they all end together
      for p, r, f in zip((paths or ()) if comm.index == 0 else (), results, prints):  # one writer: process 0
        save_result(p, r, f)
    PROGRESS.end_rows(len(rows), trained=not saved,
                      loaded_seconds=sum(float(r.seconds) for r in results) if saved else 0.0)
    if self.cfg.run.save_models and servable and comm.index == 0:
      for (row, view, tc, _), name, r in zip(rows, names, results):
        make_ranker(r, tc, view, self.ds.config, dataset=self.ds.name, data_dir=self.cfg.data.data_dir,
                            fold=self.fold, row=row).save(os.path.join(self.models, name))
    return results

  def found(self, prefix: str = "") -> Callable:
    """The ``found(row, config, make)`` of :class:`pfd_jax.methods.distill.Context`: what a row's training found
    besides its models (the PFD search's Search: its screening, choice and chosen models), computed by `make()`,
    saved beside the rows as ``<prefix><row>.found.pickle`` with the row's :func:`fingerprint`, and loaded instead
    when a stopped run resumes, as a saved row is (a search costs several PFD rows: about 15 minutes a fold on
    OHSUMED). Pickle, not msgpack: the object is the library's own dataclass of candidates, arrays and trained
    models, written and read only by the run's own folder."""
    def keep(row, config, make):
      path = os.path.join(self.store, prefix + row.name + ".found.pickle") if self.store else None
      now, saved = fingerprint(row.recipe.view, config, row), None
      if path and os.path.exists(path) and not self.cfg.run.restart:
        with open(path, "rb") as f:
          saved = pickle.load(f)
        saved = saved if saved.get("fingerprint") == now else None
      comm = distributed.comm()
      if comm.count > 1 and int(comm.sum(int(saved is not None))) < comm.count:  # all load, or all compute
        saved = None
      if saved is not None:
        logging.info("%s: what its training found loaded from %s", row.name, path)
        PROGRESS.loaded(float(saved["found"].seconds))
        return saved["found"]
      with PROGRESS.counting_programs():
        found = make()
      if path and comm.index == 0:
        write_atomic(path, pickle.dumps(dict(found=found, fingerprint=now)))
      return found
    return keep


def fingerprint(view: str, tc: TrainConfig, entry=None) -> str:
  """What a row was trained from beyond its run folder's configuration and code (SHA-256, 16 hex digits): its view,
  its own training configuration (the row's overrides, its teaching), and the code of the registered entries it ran
  (:meth:`pfd_jax.registry.Registry.code`): its row entry (a driver's own Row value, not registered: its fields)
  and the registered rows that taught it, its loss, its teacher term's loss and its teaching."""
  parts = dict(view=view, config=config_lib.to_dict(tc), loss=losses_lib.REGISTRY.code(tc.loss))
  if tc.teacher_loss in losses_lib.REGISTRY:
    parts["teacher_loss"] = losses_lib.REGISTRY.code(tc.teacher_loss)
  if tc.teaching:
    parts["teaching"] = teaching_lib.REGISTRY.code(tc.teaching)
  chain, row = [], entry
  while row is not None:
    known = rows_lib.REGISTRY.get(row.name)
    if known is None or row.viewing(known.recipe.view) != known:  # not the registry's entry
      chain.append(registry.canonical(row))
      break
    chain.append(rows_lib.REGISTRY.code(row.name))
    row = rows_lib.REGISTRY.get(row.recipe.teacher) if row.recipe.teacher else None
  parts["rows"] = chain
  return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def save_result(path: str, r, fingerprint: str = "") -> None:
  """A TrainResult (or a LightGBM row's gbdt.Result: its model texts) as one msgpack file (flax.serialization;
  exact bytes) with the row's :func:`fingerprint`, written atomically."""
  if isinstance(r, gbdt.Result):
    write_atomic(path, flax.serialization.msgpack_serialize(dict(
        kind="gbdt", models=list(r.models), best={k: np.asarray(v) for k, v in r.best.items()},
        best_epoch=np.asarray(r.best_epoch), seconds=float(r.seconds), params=json.dumps(r.params), view=r.view,
        fingerprint=fingerprint)))
    return
  blob = flax.serialization.to_bytes(dict(
      params=jax.tree_util.tree_map(np.asarray, r.params), curves=r.curves, loss=np.asarray(r.loss),
      best_epoch=np.asarray(r.best_epoch), best=r.best, seconds=float(r.seconds), fingerprint=fingerprint))
  write_atomic(path, blob)


def load_result(path: str):
  """The result a row's file holds (:func:`save_result`)."""
  return _result(_read(path))


def _read(path: str) -> dict:
  """A saved row's file as written: the result's parts and its fingerprint (absent: saved before rows kept one)."""
  with open(path, "rb") as f:
    return flax.serialization.msgpack_restore(f.read())


def _result(d: dict):
  if d.get("kind") == "gbdt":
    return gbdt.Result(models=list(d["models"]), best=dict(d["best"]), best_epoch=d["best_epoch"],
                       seconds=float(d["seconds"]), params=json.loads(d["params"]), view=d["view"])
  return training_lib.TrainResult(params=jax.tree_util.tree_map(jnp.asarray, d["params"]), curves=dict(d["curves"]),
                                  loss=d["loss"], best_epoch=d["best_epoch"], best=dict(d["best"]),
                                  seconds=float(d["seconds"]))
