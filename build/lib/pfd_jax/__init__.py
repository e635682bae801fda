"""pfd_jax: privileged features distillation for learning-to-rank in JAX.

The package is layered; each layer imports only the ones above it in this list (``python -m experiments.lint``
prints the graph):

* :mod:`pfd_jax.ops`: pure array maths: losses, metrics, the top-K loss, models, the views of a bucket and the
  seed-stacked scoring / NDCG builder, statistics, the linear theory. No configuration objects, no I/O.
* :mod:`pfd_jax.data`: LETOR files and synthetic data -> labelled, split, padded query groups, with its recipe
  (:class:`pfd_jax.data.config.DataConfig`) and ``prepare``.
* :mod:`pfd_jax.training`: hyper-parameters, the step, the epoch program, the feeds, evaluation and the loop.
* :mod:`pfd_jax.methods`: the paper's rows (distillation), the GBDT rows, the Committee Perceptron family and
  building a saved ranker from a trained row.
* :mod:`pfd_jax.serving`: load, check, score and export saved rankers; it imports ``ops`` and ``data`` only, so
  a saved model scores without optax, the training code or LightGBM (loaded only to score a LightGBM model).

``config`` (typed settings), ``registry`` (the registries of losses, rows and datasets), ``files`` (atomic writes) and
``distributed`` (processes) serve every layer.
Every public name below is loaded on first use: ``import pfd_jax`` imports nothing else.

The practitioner's path in a few calls (see the README section "PFD on your own data")::

  import jax, pfd_jax
  raw = pfd_jax.load_raw("letor", "my_logs/")                        # {split: Groups}, ids as in the files
  ds = pfd_jax.prepare(pfd_jax.DataConfig(dataset="letor", privileged="21,22,23"), raw)
  dd = pfd_jax.to_device(ds, eval_splits=("test",))
  cfg, keys = pfd_jax.TrainConfig(loss="rankbce", epochs=20), jax.random.split(jax.random.PRNGKey(0), 5)
  rows = pfd_jax.run_methods(keys, cfg, dd, ["pfd"])                 # no_distill, pfd_teacher, pfd
  student = pfd_jax.make_ranker(rows["pfd"], cfg, "x", ds.config)
  student.save("models/pfd"); student = pfd_jax.load_model("models/pfd")
  scores = student.score_groups(pfd_jax.load_serving("serve.txt", student.num_features))
"""
import importlib
import importlib.util
from typing import Mapping

__version__ = "0.1.0"


def lazy(package: str, table: Mapping[str, str]):
  """``(__getattr__, __dir__)`` of a package whose public names load on first use (PEP 562).

  table: {module: "name name ..."}: each name is that module's attribute; any submodule of `package` loads
  by its own name too. So importing a package runs none of its modules, and a layer pulls in only what it uses.
  """
  where = {name: module for module, names in table.items() for name in names.split()}

  def __getattr__(name: str):
    if name in where:
      value = getattr(importlib.import_module(where[name]), name)
    elif not name.startswith("_") and importlib.util.find_spec(f"{package}.{name}") is not None:
      value = importlib.import_module(f"{package}.{name}")
    else:
      raise AttributeError(f"module {package!r} has no attribute {name!r}")
    return value

  return __getattr__, lambda: sorted(where)


__getattr__, __dir__ = lazy(__name__, {
    "pfd_jax.data.config": "DataConfig",
    "pfd_jax.data.datasets": "Dataset load_raw prepare",
    "pfd_jax.data.groups": "Groups",
    "pfd_jax.data.letor": "load_letor load_serving",
    "pfd_jax.methods.distill": "METHODS run_methods teacher_targets train_on_data train_student",
    "pfd_jax.training.device": "DeviceData to_device",
    "pfd_jax.methods.ranker": "make_ranker",
    "pfd_jax.serving.model": "GBDTRanker Ranker load_model save_model",
    "pfd_jax.training.config": "TrainConfig",
    "pfd_jax.training.teaching": "Teaching",
    "pfd_jax.training.evaluation": "evaluate predict",
    "pfd_jax.training.loop": "TrainResult",
})

__all__ = [
    # layers
    "config", "data", "methods", "ops", "serving", "training",
    # load and prepare data
    "DataConfig", "Dataset", "Groups", "load_letor", "load_raw", "load_serving", "prepare",
    # train and distil
    "METHODS", "Teaching", "TrainConfig", "TrainResult", "evaluate", "predict", "run_methods",
    "teacher_targets", "to_device", "train_on_data", "train_student",
    # save, load and score
    "GBDTRanker", "Ranker", "load_model", "make_ranker", "save_model",
]
