"""Sphinx configuration of the docs (python -m sphinx -W --keep-going -b html docs docs/_build, as .ci/run does).

Sphinx + MyST, as jax, flax, optax and rax build theirs: the pages stay Markdown that GitHub renders, and the API
reference comes from the docstrings by autodoc. -W makes every warning an error: a link to a missing page or
heading, a reference autodoc cannot resolve, a page outside every table of contents.
"""
import os
import sys

sys.path.insert(0, os.path.abspath(".."))

project = "pfd_jax"
copyright = "2026, the pfd_jax authors"
extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.napoleon"]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build"]
myst_heading_anchors = 3  # [text](page.md#a-heading) links are checked against the page's headings
autodoc_member_order = "bysource"
autodoc_typehints = "none"  # the signatures carry them; rendering jax's types as cross-references is noise
html_theme = "alabaster"


def _verbatim(app, what, name, obj, options, lines):
  """The docstrings are plain text written for help() and the source's reader (|x|, *, a_i), not reStructuredText:
  shown as they are, in a literal block, rather than parsed into substitutions and emphasis."""
  if lines:
    lines[:] = ["::", ""] + ["   " + line for line in lines] + [""]


def setup(app):
  app.connect("autodoc-process-docstring", _verbatim)
