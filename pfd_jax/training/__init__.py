"""Seed-vmapped training with per-epoch evaluation and best-checkpoint keeping (appendix A.3).

* :mod:`~pfd_jax.training.config`: the hyper-parameters (:class:`TrainConfig`, :class:`TopK`);
* :mod:`~pfd_jax.training.teaching`: how a teacher teaches (:class:`Teaching`, the ``--teaching`` registry);
* :mod:`~pfd_jax.training.step`: the model, the optimizer and one update, vmapped over seeds;
* :mod:`~pfd_jax.training.program`: the epoch's batch plan and the one compiled program that trains its steps;
* :mod:`~pfd_jax.training.feed`: where the data lives (one device, a mesh or N processes, or disk) and how
  each epoch's steps reach the program;
* :mod:`~pfd_jax.training.device`: a fold's data on the device (:func:`to_device`: resident or streamed);
* :mod:`~pfd_jax.training.evaluation`: evaluation sets, scoring and best keeping;
* :mod:`~pfd_jax.training.draws`: re-drawn datasets on one layout, their models trained in one program;
* :mod:`~pfd_jax.training.loop`: :func:`train`, the shape of a run.
"""
from pfd_jax import lazy as _lazy

__getattr__, __dir__ = _lazy(__name__, {
    "pfd_jax.training.config": "PAPER_BATCH PAPER_BATCH_DEFAULT TopK TrainConfig format_mesh parse_mesh",
    "pfd_jax.training.step": "SWEEPABLE",
    "pfd_jax.training.teaching": "Teaching teacher_inputs",
    "pfd_jax.training.evaluation": "EvalSet device_buckets eval_buckets eval_set evaluate full_metrics keep_best per_list_ndcg predict scorer",
    "pfd_jax.training.loop": "EpochTimes TrainResult epochs_run train",
    "pfd_jax.training.structures": "EpochScalars Hooks MetricWriter",
    "pfd_jax.ops.scoring": "VIEWS features",
})
