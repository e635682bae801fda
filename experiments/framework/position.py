"""The debiasing rows of a run on the team's own LETOR logs (``experiments.paper.table2 --position``): the position and
randomised-list columns checked, the IPS propensities estimated from the file's labels, and the page's note on them.
The rows themselves are the row registry's with ``when=("position",)`` (:mod:`pfd_jax.methods.rows`: their titles,
views, claims and training functions)."""
from __future__ import annotations

import dataclasses
from typing import NamedTuple, Optional

import numpy as np
from absl import logging

from experiments.framework import schema, tabulate
from pfd_jax import data as data_lib
from pfd_jax import training as training_lib
from pfd_jax.config import ConfigError
from pfd_jax.data import preprocess
from pfd_jax.methods import debias


class PositionSetup(NamedTuple):
  """What the --position rows of one fold use, checked before anything trains."""
  column: int          # the position's privileged column
  positions: np.ndarray  # i64[N] the training split's display positions
  propensities: dict   # {name: table} of the IPS rows
  ips_config: training_lib.TrainConfig  # the IPS rows' (RankBCE when the run's loss is not affine in its labels)
  top: float           # the position column's value at position 1, after the recipe's transforms
  notes: dict          # what results.json records of them


def position_setup(cfg: schema.Config, ds, tc: training_lib.TrainConfig) -> PositionSetup:
  """The --position / --randomized columns of one fold and the IPS propensities estimated from the training
  labels (the clicks of the file): from the lists --randomized marks (left out, with a note, when they have no
  label at the top position), and by regression-EM. ConfigError / DataError naming the flag for a bad id."""
  o = cfg.options
  ids = list(ds.config["privileged_ids"])

  def column(flag, fid):
    if fid not in ids:
      raise ConfigError(flag, f"feature {fid} is not among the privileged features {tabulate.ids_text(ids)}: "
                        "it exists at training time only, so name it in --privileged too")
    return ids.index(fid)

  pc = column("position", o.position)
  if ds.config.get("query_norm"):
    raise ConfigError("position", "--query_norm rescales the position column per list; the debiasing rows need "
                      "its positions (run without --query_norm)")
  tr = ds["train"]
  log1p = bool(ds.config.get("log1p"))
  try:
    pos = debias.position_ids(tr.z[:, pc], f"feature {o.position} (--position) of the training split", log1p=log1p)
  except ValueError as e:
    raise data_lib.DataError(str(e)) from None
  props, notes = {}, {"position_column": pc, "max_position": int(pos.max())}
  if o.randomized:
    rc = column("randomized", o.randomized)
    try:
      props["randomized"] = debias.randomized_propensities(tr.y, pos, tr.z[:, rc] > 0, int(pos.max()))
    except ValueError as e:  # too few labels in the randomised lists: the row is left out, and the table says why
      notes["ips_randomized"] = f"left out: {e}"
      logging.warning("IPS from randomised lists %s", notes["ips_randomized"])
  em = debias.em_propensities(tr.y, pos, tr.x, int(pos.max()))
  props["em"] = em.propensity
  ips_tc = tc if tc.loss in debias.IPS_LOSSES else dataclasses.replace(tc, loss="rankbce", loss_params=())
  notes.update(propensities={k: [round(float(v), 4) for v in t[1:11]] for k, t in props.items()},
               em_iterations=em.iterations, ips_loss=ips_tc.loss)
  top = float(preprocess.log1p_transform(np.ones(1))[0]) if log1p else 1.0
  return PositionSetup(pc, pos, props, ips_tc, top, notes)


def table2_note(notes: Optional[dict], position: int, fold: str) -> str:
  """The paragraph of table2's page that says what its --position rows used ('' without them)."""
  if not notes:
    return ""
  props = "; ".join(f"{k} {' '.join(f'{v:.2f}' for v in t)}" for k, t in notes["propensities"].items())
  return (f"Debiasing rows (--position={position}, `pfd_jax.methods.debias`): judged on the file's (position-biased) "
          "labels, like every row here; the position-aware rows are scored with every item at position 1; IPS "
          f"propensities at positions 1-10 ({fold}): {props}; IPS rows trained with {notes['ips_loss']}" +
          (f"; IPS from randomised lists {notes['ips_randomized']}" if "ips_randomized" in notes else "") + ".\n\n")
