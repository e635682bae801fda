"""Data layer: LETOR files and synthetic data -> labelled, split, padded query groups."""
from pfd_jax.data.datasets import (LABEL_MODES, NAMES, SPLITS, Dataset, available_folds, default_num_privileged,
                                   default_tau, file_labels, load_raw, privileged_indices,
                                   num_folds, prepare, resolve_data_dir, shared_data_root, split_files,
                                   summary, with_graded_labels, with_placebo_privileged,
                                   with_synthetic_privileged)
from pfd_jax.data.groups import DataError, Groups
from pfd_jax.data.letor import load_letor, load_serving, pad_features, read_serving
from pfd_jax.data.padding import Padded, bucket_cuts, bucketize, pad, padding_ratio
from pfd_jax.data.preprocess import (PLACEBO_MODES, abs_correlation, draw_gumbel, filter_groups, gumbel_labels,
                                     log1p_transform, permute_privileged, positive_groups, privileged_columns,
                                     query_level_minmax, split_features, transform_features,
                                     with_labels)
from pfd_jax.data.synthetic import generate as generate_synthetic
from pfd_jax.data.synthetic import web30k_scale
