"""Results files: results.json (plain JSON of configs and arrays), table.md and the plot of a run."""
from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Dict

import numpy as np

from pfd_jax import config, files
from experiments.framework.records import RunRecord
from experiments.framework.schema import Driver


def write_outputs(out_dir: str, res: RunRecord, driver: Driver) -> str:
  """<run folder>/{results.json, table.md, <png>}; returns the Markdown. The table and the plot are made from the
  results as results.json holds them, so either can be remade later from the file alone."""
  res = RunRecord.from_json(as_json(res))
  md = driver.to_markdown(res)
  write_json(os.path.join(out_dir, "results.json"), res)
  write_text(os.path.join(out_dir, "table.md"), md)
  if driver.plot is not None and driver.png:
    driver.plot(res, os.path.join(out_dir, driver.png))
  return md


def as_json(res) -> Dict[str, Any]:
  """Results (a RunRecord, or any record or mapping) as results.json holds them (configs and arrays as plain lists
  and dicts)."""
  return json.loads(json.dumps(_jsonable(res)))


_PLAIN = frozenset((float, int, bool, str, type(None)))


def _jsonable(o):
  if hasattr(o, "to_json"):  # a typed record (experiments.framework.records)
    return _jsonable(o.to_json())
  if dataclasses.is_dataclass(o) and not isinstance(o, type):
    return _jsonable(config.to_dict(o))
  if isinstance(o, dict):
    return {str(k): _jsonable(v) for k, v in o.items()}
  if isinstance(o, (list, tuple)):
    if all(type(v) in _PLAIN for v in o):  # already as JSON holds it (a run's per-list NDCG: millions of floats)
      return list(o)
    return [_jsonable(v) for v in o]
  if isinstance(o, np.ndarray):
    return o.tolist()
  if isinstance(o, (np.floating, np.integer, np.bool_)):
    return o.item()
  if hasattr(o, "shape") and hasattr(o, "dtype"):  # jax arrays
    return np.asarray(o).tolist()
  return o


write_atomic = files.write_atomic


def write_json(path: str, obj) -> None:
  write_atomic(path, json.dumps(_jsonable(obj), indent=1))


def write_text(path: str, text: str) -> None:
  write_atomic(path, text)
