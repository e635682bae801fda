"""RESULTS.md's reading order: the runs grouped by the question they answer, the tables' shared legend
once at the top (each run's table.md keeps its own full legend; on the page a pointer replaces it), and no line of
prose wider than the page's width (tables, headings, HTML and code are left as they are)."""
from __future__ import annotations

import re

# The questions the page answers, in its order: (key, heading).
QUESTIONS = (
    ("paper", "Does the paper reproduce? Tables 2-6, Figures 2-5, the alpha study"),
    ("theory", "Does the theory hold? Theorems 1-2, Figure 6"),
    ("practice", "Does PFD help a team's own data?"),
    ("debiasing", "Is the display position a privileged feature to distil? PFD against unbiased learning-to-rank"),
    ("related", "The related systems: SDR, Ranking Distillation, the Committee Perceptron"),
    ("data", "The data"),
)
_BY_DRIVER = {"theory": "theory", "debias": "debiasing", "sdr": "related", "rank_distill": "related",
              "committee_perceptron": "related", "data_summary": "data"}

ANCHOR = "how-to-read-the-tables"
_SEE = f"([how to read the tables](#{ANCHOR}))"
LEGEND = f"""<a id="{ANCHOR}"></a>

## How to read the tables

* **Change vs R** (`+x% [lo, hi] p=...`): the mean paired difference of NDCG@k between a row's runs and the same
  runs of the reference R (same keys, same data), relative to R's mean; its 95% paired-t interval and the paired
  t-test's p-value; **†** = p < 0.05. Each run's results.json adds bootstrap intervals and Wilcoxon p-values.
* **Seeds for ±2%**: the seeds (per fold) a paired t-test would need to detect a 2% change with 80% power at the
  row's measured spread.
* **Per query**: the same comparison over the test queries with a positive, each query's NDCG averaged over the
  seeds (pooled over folds): a diagnostic, never the claim's unit.
* **Rows marked \\***: they read privileged features, so they cannot serve; shown for reference.
* **Placebo rows**: the PFD teacher and student with the privileged values permuted (within each query unless the
  table says otherwise): every value kept, its link to the label broken. A PFD student's change against the
  placebo student is the privileged information's gain beyond distillation as regularisation.
* **LightGBM rows**: early-stopped on the selection split's NDCG. A LightGBM seed shares no random numbers with
  an MLP seed, so across model families runs pair by fold and seed index only.

"""

# The legend paragraphs of a run's table.md (experiments.framework.tabulate.stats_note, table2's placebo and
# LightGBM notes) and the pointer that replaces each on the page, keeping what is the run's own.
_SHORT = (
    (re.compile(r"Change vs ([^:\n]+): mean paired difference of (NDCG@\d+) over the ([^,\n]+), each run of a row "
                r"paired[^\n]*? at this row's spread\."), rf"Change vs \1: \2 over the \3 {_SEE}."),
    (re.compile(r"Placebo rows: the PFD teacher and student with the privileged rows permuted ([^(\n]+?) \(every "
                r"value kept[^\n]*?regularisation\."), rf"Placebo rows: the privileged rows permuted \1 {_SEE}."),
    (re.compile(r"LightGBM rows \(`pfd_jax\.methods\.gbdt`\): early-stopped on (NDCG@\d+ of \w+)\. 'vs PFD "
                r"student'[^\n]*?by fold only\)\."), rf"LightGBM rows: early-stopped on \1 {_SEE}."),
)
WIDTH, MAX_LINE = 116, 200


def question(driver: str, label: str) -> str:
  """The question a run answers: its driver's, and for table2 'practice' on a team's own data (a LETOR folder)."""
  if driver == "table2" and label.startswith("letor"):
    return "practice"
  return _BY_DRIVER.get(driver, "paper")


def order(keys: list) -> list:
  """Indices of `keys` (each a question key) grouped by QUESTIONS' order, the page's order kept within a group."""
  rank = {k: i for i, (k, _) in enumerate(QUESTIONS)}
  return sorted(range(len(keys)), key=lambda i: (rank[keys[i]], i))


def arrange(questions: list, summary: list, sections: list) -> tuple:
  """(the summary table's rows with their question first, the sections with a heading before each question's
  first), both in :func:`order`; questions, summary rows and sections are parallel lists, one per run."""
  idx = order(questions)
  parts = []
  for n, i in enumerate(idx):
    if n == 0 or questions[i] != questions[idx[n - 1]]:
      parts.append(f"# {dict(QUESTIONS)[questions[i]]}\n\n")
    parts.append(sections[i] + "\n")
  return [[questions[i]] + summary[i] for i in idx], parts


def shorten(md: str) -> str:
  """A run's table.md with its shared legend paragraphs replaced by pointers to the page's legend."""
  for pattern, short in _SHORT:
    md = pattern.sub(short, md)
  return md


def _fill(text: str, first: str, rest: str) -> list:
  """Greedy lines of at most WIDTH characters; a code span is never split (its command stays copyable)."""
  lines, line, fresh = [], first, True
  for word in re.findall(r"(?:`[^`]*`|[^\s`])+", text):
    if not fresh and len(line) + 1 + len(word) > WIDTH:
      lines.append(line)
      line = rest + word
    else:
      line += ("" if fresh else " ") + word
    fresh = False
  return lines + [line]


def wrap(page: str) -> str:
  """Every prose line wider than MAX_LINE wrapped at WIDTH (a list item's continuation indented, a hard break's
  two trailing spaces kept); table rows, headings, HTML, images and code blocks unchanged."""
  out, code = [], False
  for line in page.split("\n"):
    if line.startswith("```"):
      code = not code
    if code or len(line) <= MAX_LINE or line.lstrip().startswith(("|", "#", "<", "!", "```")):
      out.append(line)
      continue
    lead = re.match(r"(\s*)(?:([*-]|\d+\.) )?", line).group(0)
    pieces = _fill(line[len(lead):].rstrip(), lead, " " * len(lead))
    pieces[-1] += "  " if line.endswith("  ") else ""
    out += pieces
  return "\n".join(out)
