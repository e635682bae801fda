"""A saved ranker from a trained row: the bridge from the methods to :mod:`pfd_jax.serving` (which never
imports training)."""
from __future__ import annotations


from typing import TYPE_CHECKING, Any, Dict

import numpy as np

from pfd_jax import config
from pfd_jax.methods import gbdt
from pfd_jax.ops.models import Arch
from pfd_jax.ops.scoring import input_ids, served_constant
from pfd_jax.serving.model import FORMAT, GBDT_FILE, GBDTRanker, Ranker, jsonable

if TYPE_CHECKING:
  from pfd_jax.training.config import TrainConfig


def _mlp_model(cfg: TrainConfig) -> Dict[str, Any]:
  """model.json's model entry of an MLP row: kind, hidden, layers and the modern options that are on (a model
  of the paper's shape records exactly what it recorded before the options existed)."""
  arch, off = cfg.arch._asdict(), Arch()._asdict()
  return dict(kind="mlp", **{k: v for k, v in arch.items() if k in ("hidden", "layers") or v != off[k]})


def make_ranker(result, cfg: TrainConfig, view: str, data_config: config.JsonObject, **info) -> Ranker:
  """The :class:`Ranker` of a training run (its best-epoch parameters of every seed).

  result: a :class:`pfd_jax.training.loop.TrainResult`, or a :class:`pfd_jax.methods.gbdt.Result`.
  data_config: the dataset's recipe (:attr:`pfd_jax.data.Dataset.config`): feature ids and transforms.
  info: anything else to record (dataset, fold, row name, ...). A LightGBM row (`cfg` gives its evaluation settings)
  makes a :class:`pfd_jax.serving.model.GBDTRanker`.
  """
  if served_constant(view):
    raise ValueError(f"view {view!r} feeds constants no file has: such a model is scored, not saved")
  is_gbdt = isinstance(result, gbdt.Result)
  sel = np.asarray(result.best[cfg.select_on])[:, 0]
  regular = data_config.get("regular_ids")
  privileged = data_config.get("privileged_ids", [])
  if regular is None:
    raise ValueError("data_config has no regular_ids: build the dataset with pfd_jax.data.prepare")
  ids = input_ids(view, regular, privileged)
  recipe = dict(
      format=FORMAT, view=view, input_ids=ids,
      model=(dict(kind="lightgbm", files=[GBDT_FILE.format(s) for s in range(sel.shape[0])], params=result.params)
             if is_gbdt else _mlp_model(cfg)),
      regular_ids=list(regular), privileged_ids=list(privileged),
      num_features=int(data_config.get("num_features", max(ids, default=0))),
      transforms=dict(query_norm=bool(data_config.get("query_norm", False)),
                      log1p=bool(data_config.get("log1p", True))),
      labels=dict(mode=data_config.get("labels", "gumbel"), positive_grade=data_config.get("positive_grade"),
                  t=data_config.get("t"), tau=data_config.get("tau"), seed=data_config.get("seed")),
      min_docs=int(data_config.get("min_docs", 1)), ks=list(cfg.ks), select_on=cfg.select_on,
      empty_rule=cfg.empty_rule, num_seeds=int(sel.shape[0]), best_seed=int(np.argmax(sel)),
      best_epoch=np.asarray(result.best_epoch).tolist(),
      metrics={s: np.asarray(v).tolist() for s, v in result.best.items()},
      train_config=jsonable(config.to_dict(cfg)), **jsonable(info))
  if is_gbdt:
    return GBDTRanker(params=tuple(result.models), recipe=recipe)
  return Ranker(params=result.params, recipe=recipe)
