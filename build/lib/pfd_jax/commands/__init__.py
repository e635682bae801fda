"""The installed commands (``pip install`` puts them on the PATH): ``pfd-predict`` scores a LETOR/SVMlight file with a
saved model, ``pfd-export`` writes a saved MLP as an ONNX or StableHLO serving graph. Thin absl programs over
:mod:`pfd_jax.serving.jobs`, the same functions the clone's ``python -m experiments.predict`` and
``experiments.export`` run. The one place in pfd_jax with flags and printing: a practitioner who installs the package
has no clone, so its shell commands must be installed with it; the library never imports this package."""
