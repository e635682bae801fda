"""pfd_jax: privileged features distillation for learning-to-rank in JAX.

The practitioner's path in a few calls (see the README section "PFD on your own data")::

  import jax, pfd_jax
  raw = pfd_jax.load_raw("letor", "my_logs/")                        # {split: Groups}, ids as in the files
  ds = pfd_jax.prepare("letor", raw, labels="file", privileged=[21, 22, 23])
  dd = pfd_jax.to_device(ds, eval_splits=("test",))
  cfg, keys = pfd_jax.TrainConfig(loss="rankbce", epochs=20), jax.random.split(jax.random.PRNGKey(0), 5)
  rows = pfd_jax.run_methods(keys, cfg, dd, ["pfd"])                 # no_distill, pfd_teacher, pfd
  student = pfd_jax.make_ranker(rows["pfd"], cfg, "x", ds.config)
  student.save("models/pfd"); student = pfd_jax.load_model("models/pfd")
  scores = student.score_groups(pfd_jax.load_serving("serve.txt", student.num_features))
"""
from pfd_jax import config, data, distill, gbdt, losses, metrics, models, rank_distill, serving, theory, train
from pfd_jax.data import Dataset, Groups, load_letor, load_raw, load_serving, prepare
from pfd_jax.distill import (METHODS, TEACHING, run_methods, teacher_targets, to_device, train_on_data,
                             train_student)
from pfd_jax.config import DataConfig
from pfd_jax.serving import GBDTRanker, Ranker, load_model, make_ranker, save_model
from pfd_jax.train import TrainConfig, TrainResult, evaluate, predict

__version__ = "0.1.0"

__all__ = [
    # modules
    "config", "data", "distill", "gbdt", "losses", "metrics", "models", "rank_distill", "serving", "theory", "train",
    # load and prepare data
    "DataConfig", "Dataset", "Groups", "load_letor", "load_raw", "load_serving", "prepare",
    # train and distil
    "METHODS", "TEACHING", "TrainConfig", "TrainResult", "evaluate", "predict", "run_methods",
    "teacher_targets", "to_device", "train_on_data", "train_student",
    # save, load and score
    "GBDTRanker", "Ranker", "load_model", "make_ranker", "save_model",
]
