"""Run folders: one per configuration (a hash of what determines the results), its provenance, its lock
and the 'latest' link; and the environment a run records."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import platform
import subprocess
import time
from typing import Any, Dict, List, Optional, TypedDict

import jax
import numpy as np

import pfd_jax
from experiments.framework import guards, machine
from pfd_jax import data as data_lib
from pfd_jax import files
from pfd_jax.data import analogues
from pfd_jax.data.config import DataConfig
from pfd_jax.methods import rows as rows_lib
from pfd_jax.ops import losses as losses_lib
from pfd_jax.training import teaching as teaching_lib
from experiments.framework.outputs import as_json, write_json
from experiments.framework.schema import Config, Driver, OutputConfig
from experiments.framework.fold_data import folds_of


def prepare_run(cfg: Config, driver: Driver, write: bool = True) -> tuple:
  """(run folder, provenance, lock): <out_dir>/<label>[-<tag>]/<hash>/, where the hash covers everything that
  determines the results (the configuration less where it is written, the data files or generator, the code).
  Different configurations never share a folder; the same one finds its saved rows there. The writing
  process holds the folder's :class:`guards.RunLock` (returned; None for the other processes of a
  multi-process run), so two identical runs never interleave their writes: the second is refused."""
  prov = provenance(cfg, driver)
  # the registered entries' code is checked row by row by the resume store (rowstore), which trains again a row
  # whose entry changed; the folder stays the configuration's
  key = {k: v for k, v in prov.items() if k not in ("registered", "family")}  # a family recorded by older runs
  key["code"] = {k: prov["code"][k] for k in ("pfd_jax", "source_sha256")}
  digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:10]
  run_dir = os.path.join(cfg.output.out_dir, label(cfg, driver), digest)
  if not write:  # another process of a multi-process run writes the folder
    return run_dir, prov, None
  new = not os.path.exists(os.path.join(run_dir, "provenance.json"))
  os.makedirs(run_dir, exist_ok=True)
  lock = guards.RunLock(run_dir).acquire()
  if "data" in driver.groups and cfg.data.data_dir:
    marker = os.path.join(os.path.dirname(run_dir), FOLDER_FILE)
    if not os.path.exists(marker):
      files.write_atomic(marker, _folder_id(cfg.data).encode())
    if new:
      keep_unchanged_folds(run_dir, prov)
  write_json(os.path.join(run_dir, "provenance.json"), prov)
  return run_dir, prov, lock


FOLDER_FILE = "data_folder.txt"  # beside a label's run folders: the data folder they read (_folder_id)


def _folder_id(d: DataConfig) -> str:
  """The resolved data folder and its split files (relative to it), one a line: what a label's runs read."""
  root = os.path.realpath(d.data_dir)
  split = sorted(os.path.relpath(os.path.realpath(p), root) for fold in folds_of(d)
                 for p in data_lib.split_files(d.dataset, d.data_dir, fold).values())
  return "\n".join([root] + split) + "\n"


def _fold_files(prov: Provenance) -> Dict[str, list]:
  """{fold<k>: its split files' SHA-256, in split order} of a run's data provenance."""
  out = {}
  for key, f in sorted(prov.get("data", {}).get("files", {}).items()):
    out.setdefault(key.split("/")[0], []).append(f.get("sha256"))
  return out


def keep_unchanged_folds(run_dir: str, prov: Provenance) -> None:
  """A new run folder whose configuration and code are a sibling's but whose data files differ (a file fixed or
  replaced) takes that sibling's saved rows of every fold whose files are unchanged (each row is still checked
  against its code when it loads); the log says which folds are kept and which train again, or why none is."""
  from absl import logging
  mine = _fold_files(prov)
  same = lambda p: (p.get("driver"), p.get("config"),
                    {k: p.get("code", {}).get(k) for k in ("pfd_jax", "source_sha256")})
  for other in sorted(os.listdir(os.path.dirname(run_dir))):
    path = os.path.join(os.path.dirname(run_dir), other)
    if path == run_dir or not os.path.exists(os.path.join(path, "provenance.json")):
      continue
    theirs = json.load(open(os.path.join(path, "provenance.json")))
    if same(theirs) != same(json.loads(json.dumps(prov))) or not os.path.isdir(os.path.join(path, "runs")):
      continue
    folds = {k for k, v in _fold_files(theirs).items() if mine.get(k) == v}
    if not folds:
      logging.info("no saved row of %s is kept: every fold's files changed since it ran", path)
      continue
    for loss in os.listdir(os.path.join(path, "runs")):
      for fold in folds & set(os.listdir(os.path.join(path, "runs", loss))):
        src, dst = os.path.join(path, "runs", loss, fold), os.path.join(run_dir, "runs", loss, fold)
        os.makedirs(dst, exist_ok=True)
        for name in os.listdir(src):
          if name.endswith(".msgpack") and not os.path.exists(os.path.join(dst, name)):
            files.write_atomic(os.path.join(dst, name), open(os.path.join(src, name), "rb").read())
    logging.info("kept the saved rows of %s from %s (their files unchanged); %s train again", ", ".join(sorted(folds)),
                 path, ", ".join(sorted(set(mine) - folds)) or "no fold")
    return


def point_latest(run_dir: str) -> None:
  """<run folder>/../latest -> the run folder (a symlink replaced atomically through a unique temporary)."""
  latest = os.path.join(os.path.dirname(run_dir), "latest")
  tmp = files.temporary_name(latest)
  os.symlink(os.path.basename(run_dir), tmp)
  os.replace(tmp, latest)


def label(cfg: Config, driver: Driver) -> str:
  """The run folder's label: <dataset>[-<data folder's name>] (or the driver's folder), then -<tag> when tagged;
  where that label's runs read another folder, or other split files of it (FOLDER_FILE), -<6 hex digits of this
  one's _folder_id> after the folder's name, so a copy of another folder named alike never takes its 'latest'."""
  tag = f"-{cfg.output.tag}" if cfg.output.tag else ""
  if "data" not in driver.groups:
    return (driver.folder(cfg) if driver.folder else driver.name) + tag
  out = cfg.data.dataset
  if cfg.data.data_dir:
    out += f"-{os.path.basename(os.path.normpath(cfg.data.data_dir))}"
    marker = os.path.join(cfg.output.out_dir or "", out + tag, FOLDER_FILE)
    if cfg.output.out_dir and os.path.exists(marker) and open(marker).read() != (mine := _folder_id(cfg.data)):
      out += "-" + hashlib.sha256(mine.encode()).hexdigest()[:6]
  return out + tag


class CodeVersion(TypedDict):
  """The code a run ran (:func:`code_version`)."""
  pfd_jax: str
  source_sha256: str
  git_commit: Optional[str]
  git_dirty: Optional[bool]
  git_changed: List[str]  # the paths with uncommitted changes (git status): what the commit alone does not say


class Registered(TypedDict, total=False):
  """The registered entries a run may use (:func:`registered`): per kind {name: {module, code, ...}} (a row's
  record adds its title, view, teacher, overrides and claims), and the modules outside the project that registered
  any (what --registry_modules names to a later process)."""
  rows: Dict[str, Dict[str, Any]]
  losses: Dict[str, Dict[str, str]]
  teaching: Dict[str, Dict[str, str]]
  dataset: Dict[str, Dict[str, str]]
  modules: List[str]


class Provenance(TypedDict, total=False):
  """What determines a run's results (:func:`provenance`; provenance.json): the driver, its configuration less
  where it writes, the code, the registered entries and (a driver that reads data) the data."""
  driver: str
  config: Dict[str, Any]
  code: CodeVersion
  registered: Registered
  matmul_precision: str
  data: Dict[str, Any]


class Environment(TypedDict):
  """Where a run ran (:func:`environment`)."""
  python: str
  jax: str
  flax: Optional[str]
  optax: Optional[str]
  numpy: str
  backend: str
  devices: List[str]
  machine: str
  cpus: Optional[int]
  time: str
  matmul_precision: str
  numerics: Dict[str, Any]
  packages: Dict[str, str]


def provenance(cfg: Config, driver: Driver) -> Provenance:
  """What determines a run's results: its configuration (less output settings, --restart and
  --save_models), its data (files with sizes and SHA-256, or the synthetic generator's arguments) and the
  code (package version, git commit, SHA-256 of the sources), the matrix products' precision (--matmul_precision),
  and every registered row, loss, dataset and teaching it
  may use: where each was registered and a hash of what it runs (:meth:`pfd_jax.registry.Registry.record`; a
  row's title, view, teacher, overrides and claims too), with the --registry_modules that registered them. What
  the page's claims were when it ran is the declaration at its commit, less the paths it names as changed
  (experiments/page/frozen.py)."""
  run = dataclasses.replace(cfg.run, restart=False, save_models=False)
  out = dict(driver=driver.name, config=as_json({"c": cfg.replace(output=OutputConfig(), run=run)})["c"],
             code=code_version(), registered=registered(cfg, driver),
             matmul_precision=cfg.train.matmul_precision)  # said even at its default, which the config omits
  if "data" in driver.groups:
    out["data"] = data_provenance(cfg.data)
    if cfg.data.data_source == "streamed":  # each fold's folder under it is logged: shard_dir/<dataset>-<hash>
      out["data"]["shards"] = os.path.abspath(cfg.data.shard_dir)
  return out


def registered(cfg: Config, driver: Driver) -> Registered:
  """The registered entries a run may use, as provenance records them (see :func:`provenance`)."""
  rows = {n: dict(rows_lib.REGISTRY.record(n), **r.record()) for n, r in rows_lib.REGISTRY.items()}
  out = dict(rows=rows)
  if "train" in driver.groups:
    names = {n for tc in map(cfg.train_config, cfg.losses) for n in (tc.loss, tc.teacher_loss)
             if n in losses_lib.REGISTRY}
    out["losses"] = {n: losses_lib.REGISTRY.record(n) for n in sorted(names)}
  if "run" in driver.groups and cfg.run.teaching:
    out["teaching"] = {cfg.run.teaching: teaching_lib.REGISTRY.record(cfg.run.teaching)}
  if "data" in driver.groups:
    out["dataset"] = {cfg.data.dataset: data_lib.specs.REGISTRY.record(cfg.data.dataset)}
  # the modules outside this project that registered any of them: what --registry_modules names to a later process
  out["modules"] = sorted({m for kind in out.values() for e in kind.values()
                           if (m := e["module"]).split(".")[0] not in ("__main__", "pfd_jax", "experiments")})
  return out


def data_provenance(d: DataConfig) -> Dict[str, Any]:
  if data_lib.spec(d.dataset).in_memory:
    kw = d.synthetic_kwargs()
    gen = data_lib.spec(d.dataset).generate
    if d.dataset in analogues.ANALOGUES:  # its shape and the teachers' settings in force (analogues.json's)
      try:
        a = dataclasses.asdict(analogues.resolved(d.dataset, kw.get("settings"), kw.get("scale", 1.0)))
      except ValueError:  # calibrated per loss, no population named (a calibration's recipe: each candidate names
        a = dict(dataclasses.asdict(analogues.ANALOGUES[d.dataset]),  # its own): the shape and both populations
                 populations=analogues.calibrations(d.dataset, kw.get("scale", 1.0)))
      return dict(generator="pfd_jax.data.analogues.generate", arguments=kw, analogue=a)
    return dict(generator="pfd_jax.data.synthetic." + ("generate_chunked" if "chunk" in kw else "generate")
                if d.dataset == "synthetic" else f"{gen.__module__}.{gen.__qualname__}", arguments=kw)
  found = {}
  for fold in folds_of(d):
    for split, path in data_lib.split_files(d.dataset, d.data_dir, fold).items():
      found[f"fold{fold}/{split}"] = dict(path=os.path.abspath(path), bytes=os.path.getsize(path),
                                          sha256=files.sha256(path))
  return dict(folder=os.path.abspath(data_lib.resolve_data_dir(d.dataset, d.data_dir)), files=found)


SOURCES = ("pfd_jax", "experiments")  # the folders whose .py files are a run's code (source_sha256)


def source_digest(files: Dict[str, bytes]) -> str:
  """SHA-256 of the sources {path relative to the repository: bytes} (the .py files of SOURCES): each file's name
  and bytes, folder by folder (SOURCES' order, then the folders' paths sorted), names sorted within a folder."""
  h = hashlib.sha256()
  key = lambda p: (SOURCES.index(p.split(os.sep)[0]), os.path.dirname(p), os.path.basename(p))
  for path in sorted(files, key=key):
    h.update(os.path.basename(path).encode())
    h.update(files[path])
  return h.hexdigest()


def code_version() -> CodeVersion:
  """pfd_jax's version, the git commit (and whether the tree has changes) when there is one, and the SHA-256
  of the library's and the drivers' sources (what a saved row depends on)."""
  root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository
  files = {}
  for sub in SOURCES:
    for dirpath, _, names in os.walk(os.path.join(root, sub)):
      for name in (n for n in names if n.endswith(".py")):
        with open(os.path.join(dirpath, name), "rb") as f:
          files[os.path.relpath(os.path.join(dirpath, name), root)] = f.read()
  out = dict(pfd_jax=pfd_jax.__version__, source_sha256=source_digest(files), git_commit=None, git_dirty=None)
  try:
    git = lambda *a: subprocess.run(["git", *a], cwd=root, capture_output=True, text=True, timeout=10)
    head = git("rev-parse", "HEAD")
    if head.returncode == 0:
      changed = sorted(line[3:] for line in git("status", "--porcelain").stdout.splitlines() if line.strip())
      out.update(git_commit=head.stdout.strip(), git_dirty=bool(changed), git_changed=changed)
  except (OSError, subprocess.SubprocessError):
    pass
  return out


def environment() -> Environment:
  """Where a run ran: the short fields RESULTS.md shows, the matrix products' precision in force
  (--matmul_precision), `numerics` (what its bits depend on besides code, configuration and data: CPU model,
  instruction set, caches, threads, XLA_FLAGS, the numeric packages; on an accelerator its device, driver, plugins
  and the precision) and
  every installed package's version."""
  installed = machine.packages()
  return dict(python=platform.python_version(), jax=jax.__version__, flax=installed.get("flax"),
              optax=installed.get("optax"), numpy=np.__version__, backend=jax.default_backend(),
              devices=[str(d) for d in jax.devices()], machine=platform.machine(),
              cpus=os.cpu_count(), time=time.strftime("%Y-%m-%d %H:%M:%S"),
              matmul_precision=machine.matmul_precision(), numerics=machine.numerics(installed), packages=installed)
