"""pfd_jax: privileged features distillation for learning-to-rank in JAX."""
__version__ = "0.1.0"
