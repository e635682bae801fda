"""Sphinx configuration of the docs (python -m sphinx -W --keep-going -b html docs docs/_build, as .ci/run does).

Sphinx + MyST, as jax, flax, optax and rax build theirs: the pages stay Markdown that GitHub renders, and the API
reference comes from the docstrings by autodoc. -W makes every warning an error: a link to a missing page or
heading, a reference autodoc cannot resolve, a page outside every table of contents.
"""
import os
import re
import sys

from sphinx.util import logging

ROOT = os.path.abspath("..")
sys.path.insert(0, ROOT)

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


# [text](../FILE#anchor): a link from a page to a repository file outside docs/ (RESULTS.md above all), which the
# site does not build. GitHub follows it as it is; Sphinx cannot, so it is checked here (the file exists, and so
# does the anchor: an <a id=...> of a generated page or a heading's GitHub slug) and written as a plain HTML link.
_OUTSIDE = re.compile(r"\[([^\]]+)\]\(\.\./([^)#\s]+)(?:#([^)\s]+))?\)")
_LOG = logging.getLogger(__name__)


def _slug(heading: str) -> str:
  return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _outside_links(app, docname, source):
  def check(m):
    text, path, anchor = m.groups()
    full = os.path.join(ROOT, path)
    if not os.path.exists(full):
      _LOG.warning(f"link to a missing repository file ../{path}", location=docname)
    elif anchor and os.path.isfile(full):
      page = open(full, encoding="utf-8").read()
      slugs = {_slug(h) for h in re.findall(r"^#+ (.*)$", page, re.M)}
      if f'id="{anchor}"' not in page and anchor not in slugs:
        _LOG.warning(f"link to a missing anchor ../{path}#{anchor}", location=docname)
    return f'<a href="../{path}{"#" + anchor if anchor else ""}">{text}</a>'
  source[0] = _OUTSIDE.sub(check, source[0])


def setup(app):
  app.connect("autodoc-process-docstring", _verbatim)
  app.connect("source-read", _outside_links)
