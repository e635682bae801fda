"""Data layer: LETOR files and synthetic data -> labelled, split, padded query groups; its recipe is
:class:`pfd_jax.data.config.DataConfig` and ``prepare(cfg, raw)`` applies it."""
from pfd_jax import lazy as _lazy

__getattr__, __dir__ = _lazy(__name__, {
    "pfd_jax.data.config": "LABEL_MODES DataConfig parse_ids",
    "pfd_jax.data.datasets": "SPLITS Dataset available_folds default_num_privileged default_tau "
                             "load_raw privileged_indices num_folds prepare read_serving resolve_data_dir spec "
                             "shared_data_root split_files summary with_graded_labels with_placebo_privileged "
                             "with_synthetic_privileged",
    "pfd_jax.data.groups": "DataError Groups",
    "pfd_jax.data.letor": "load_letor load_serving pad_features",
    "pfd_jax.data.specs": "DatasetSpec",
    "pfd_jax.data.padding": "Padded bucket_cuts bucketize pad padding_ratio",
    "pfd_jax.data.preprocess": "PLACEBO_MODES abs_correlation draw_gumbel filter_groups gumbel_labels "
                               "file_labels log1p_transform permute_privileged positive_groups privileged_columns "
                               "query_level_minmax split_features transform_features with_labels",
    "pfd_jax.data.synthetic": "web30k_scale",
})
