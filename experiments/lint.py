"""The shape of the code, measured with the standard library only: the import graph of `pfd_jax/` (its depth,
its longest chain, any circle, imports written inside functions), file lengths, the longest functions and
public functions with many positional parameters, annotations that use a bare ``dict`` (no key or value types), for
`pfd_jax/` and `experiments/`, and whether a driver imports another driver.

  python -m experiments.lint            # the report
  python -m experiments.lint --check    # exit 1 when a limit below is broken (tests/test_layers.py runs it)

Depth counts modules on the longest chain of imports (a module that imports nothing of the project has depth
1). An import of `a.b.c` is an edge to `a.b.c` and, because Python runs them first, to the packages `a.b` and
`a`; imports under ``if TYPE_CHECKING:`` (annotations only, never run) are not edges. Function lines count code
only: the docstring, blank lines and comment lines are left out. Public functions: module-level functions and
methods of module-level classes whose names do not start with '_'.

  python -m experiments.lint --root=<checkout>   # another checkout (e.g. an older commit's) with these rules

"""
from __future__ import annotations

import ast
import os
import sys
from typing import Dict, NamedTuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("pfd_jax", "experiments")
MAX_DEPTH, MAX_FILE_LINES, MAX_FUNCTION_LINES, MAX_POSITIONAL = 6, 400, 60, 6
# Annotations with a bare dict / Dict: a reader learns nothing of its keys and values. A dict of named JSON fields is
# pfd_jax.config.JsonObject, a dataset's splits pfd_jax.data.groups.Splits; the rest say their key and value types.
MAX_UNTYPED_DICTS = 100


class Function(NamedTuple):
  where: str  # path:line
  name: str
  lines: int  # code lines
  positional: int
  public: bool


def modules(package: str, root: str = ROOT) -> dict:
  """{dotted module name: path} of every .py file under `package`."""
  found = {}
  for folder, dirs, files in os.walk(os.path.join(root, package)):
    dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__")))
    for f in sorted(files):
      if f.endswith(".py"):
        path = os.path.join(folder, f)
        name = os.path.relpath(path, root)[:-3].replace(os.sep, ".")
        found[name.removesuffix(".__init__")] = path
  return found


def _targets(node: ast.AST, module: str, is_package: bool) -> list:
  """Dotted names an import statement loads."""
  if isinstance(node, ast.Import):
    return [a.name for a in node.names]
  base = module if is_package else module.rpartition(".")[0]
  for _ in range(max(node.level - 1, 0)):
    base = base.rpartition(".")[0]
  stem = node.module if node.level == 0 else ".".join(p for p in (base, node.module) if p)
  return [stem] + [f"{stem}.{a.name}" for a in node.names]


def import_graph(package: str = "pfd_jax", root: str = ROOT) -> tuple:
  """({module: set of project modules it imports}, [(module, line, target) of imports inside functions])."""
  mods = modules(package, root)
  graph, local = {m: set() for m in mods}, []
  for m, path in mods.items():
    tree = ast.parse(open(path).read(), path)
    inside = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
              for n in ast.walk(f)}
    typing_only = {id(n) for f in ast.walk(tree) if isinstance(f, ast.If) and "TYPE_CHECKING" in ast.unparse(f.test)
                   for n in ast.walk(f)}
    for node in ast.walk(tree):
      if not isinstance(node, (ast.Import, ast.ImportFrom)) or id(node) in typing_only:
        continue
      for t in _targets(node, m, path.endswith("__init__.py")):
        parts = t.split(".")
        hits = {".".join(parts[:i]) for i in range(1, len(parts) + 1)} & mods.keys()
        hits.discard(m)
        hits -= {p for p in hits if m.startswith(p + ".")}  # a module's own packages run before it anyway
        graph[m] |= hits
        if id(node) in inside and hits:
          local.append((m, node.lineno, t))
  return graph, sorted(set(local))


def circles(graph: dict) -> list:
  """The strongly connected components with more than one module (Tarjan)."""
  index, low, stack, on, out = {}, {}, [], set(), []

  def visit(v):
    index[v] = low[v] = len(index)
    stack.append(v)
    on.add(v)
    for w in sorted(graph[v]):
      if w not in index:
        visit(w)
        low[v] = min(low[v], low[w])
      elif w in on:
        low[v] = min(low[v], index[w])
    if low[v] == index[v]:
      comp = []
      while True:
        w = stack.pop()
        on.discard(w)
        comp.append(w)
        if w == v:
          break
      if len(comp) > 1:
        out.append(sorted(comp))

  sys.setrecursionlimit(10_000)
  for v in sorted(graph):
    if v not in index:
      visit(v)
  return out


def longest_chain(graph: dict) -> list:
  """The longest import chain, as modules from the importer down (cycles broken where first met)."""
  memo, active = {}, set()

  def chain(v):
    if v in memo:
      return memo[v]
    active.add(v)
    best = []
    for w in sorted(graph[v]):
      if w not in active:
        c = chain(w)
        best = c if len(c) > len(best) else best
    active.discard(v)
    memo[v] = [v] + best
    return memo[v]

  return max((chain(v) for v in sorted(graph)), key=len, default=[])


def _code_lines(node: ast.AST, source_lines: list) -> int:
  skip = set()
  body = getattr(node, "body", [])
  if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
      and isinstance(body[0].value.value, str):
    skip |= set(range(body[0].lineno, body[0].end_lineno + 1))
  n = 0
  for i in range(node.lineno, node.end_lineno + 1):
    text = source_lines[i - 1].strip()
    n += i not in skip and bool(text) and not text.startswith("#")
  return n


def functions(packages=PACKAGES, root: str = ROOT) -> list:
  """Every function and method of the packages, as :class:`Function`; `public` marks the module-level
  functions and the methods of module-level classes whose names do not start with '_' (closures are not)."""
  out = []
  for package in packages:
    for m, path in modules(package, root).items():
      source = open(path).read()
      lines = source.splitlines()
      tree = ast.parse(source, path)
      api = {id(n) for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
      api |= {id(f) for c in tree.body if isinstance(c, ast.ClassDef) for f in c.body
              if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
      for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
          args = node.args.posonlyargs + node.args.args
          positional = len([a for a in args if a.arg not in ("self", "cls")])
          out.append(Function(f"{os.path.relpath(path, root)}:{node.lineno}", node.name,
                              _code_lines(node, lines), positional,
                              id(node) in api and not node.name.startswith("_")))
  return out


def _bare_dict(annotation) -> bool:
  subscripted = {id(n.value) for n in ast.walk(annotation) if isinstance(n, ast.Subscript)}
  return any(isinstance(n, ast.Name) and n.id in ("dict", "Dict") and id(n) not in subscripted
             for n in ast.walk(annotation))


def untyped_dicts(packages=PACKAGES, root: str = ROOT) -> list:
  """"path:line" of every annotation (a parameter's, a return's, a field's) that uses a bare dict or Dict."""
  out = []
  for package in packages:
    for path in modules(package, root).values():
      for node in ast.walk(ast.parse(open(path).read(), path)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
          a = node.args
          found = [x.annotation for x in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg] if x]
          found.append(node.returns)
        else:
          found = [node.annotation] if isinstance(node, ast.AnnAssign) else []
        out += [f"{os.path.relpath(path, root)}:{x.lineno}" for x in found if x is not None and _bare_dict(x)]
  return out


def file_lines(packages=PACKAGES, root: str = ROOT) -> Dict[str, int]:
  """{path: lines} of every file of the packages."""
  return {os.path.relpath(p, root): sum(1 for _ in open(p)) for package in packages
          for p in modules(package, root).values()}


# A driver imports no other driver (library code belongs in pfd_jax or experiments.framework), but for these:
# alpha_robustness is fig3_alpha's driver re-run with the appendix's alpha list over re-drawn data; calibrate is
# table2's protocol re-run per candidate analogue with its teachers only; table3_sparsity is table3_logs' rows re-run
# at each purchase rate.
DRIVER_IMPORTS_ALLOWED = {("experiments.paper.alpha_robustness", "experiments.paper.fig3_alpha"),
                          ("experiments.calibrate", "experiments.paper.table2"),
                          ("experiments.paper.table3_sparsity", "experiments.paper.table3_logs")}


def drivers(root: str = ROOT) -> set:
  """The experiments modules that define a module-level DRIVER."""
  found = set()
  for name, path in modules("experiments", root).items():
    with open(path) as f:
      tree = ast.parse(f.read())
    if any(isinstance(n, ast.Assign) and any(getattr(t, "id", None) == "DRIVER" for t in n.targets) for n in tree.body):
      found.add(name)
  return found


def driver_imports(root: str = ROOT) -> list:
  """(driver, driver it imports) pairs other than :data:`DRIVER_IMPORTS_ALLOWED`."""
  graph, _ = import_graph("experiments", root)
  names = drivers(root)
  return sorted((a, b) for a in names for b in graph.get(a, ()) if b in names and b != a and
                (a, b) not in DRIVER_IMPORTS_ALLOWED)


# The results page (experiments.page) reads run records; the drivers and their harness never import it, so a run
# is the same whatever the page says. Its readers: the page's own command and the cross-machine check of its runs.
PAGE = "experiments.page"
PAGE_READERS = {"experiments.report", "experiments.crossmachine"}


def page_imports(root: str = ROOT) -> list:
  """(module, the page's module it imports) of every module outside the page other than PAGE_READERS."""
  graph, _ = import_graph("experiments", root)
  inside = lambda m: m == PAGE or m.startswith(PAGE + ".")
  return sorted((a, b) for a, deps in graph.items() for b in deps
                if inside(b) and not inside(a) and a not in PAGE_READERS)


def problems(root: str = ROOT) -> list:
  """Every broken limit, as a line of text."""
  graph, local = import_graph("pfd_jax", root)
  chain = longest_chain(graph)
  out = [f"import depth {len(chain)} > {MAX_DEPTH}: {' -> '.join(chain)}"] if len(chain) > MAX_DEPTH else []
  out += [f"import circle: {' <-> '.join(c)}" for c in circles(graph)]
  out += [f"{p}: {n} lines > {MAX_FILE_LINES}" for p, n in file_lines(root=root).items() if n > MAX_FILE_LINES]
  for f in functions(root=root):
    if f.lines > MAX_FUNCTION_LINES:
      out.append(f"{f.where} {f.name}: {f.lines} code lines > {MAX_FUNCTION_LINES}")
    if f.positional > MAX_POSITIONAL and f.public:
      out.append(f"{f.where} {f.name}: {f.positional} positional parameters > {MAX_POSITIONAL}")
  out += [f"driver {a} imports driver {b}: move what it uses into pfd_jax or experiments.framework"
          for a, b in driver_imports(root)]
  out += [f"{a} imports the page ({b}): a run never reads what the page says of it" for a, b in page_imports(root)]
  bare = untyped_dicts(root=root)
  out += [f"{len(bare)} annotations with a bare dict > {MAX_UNTYPED_DICTS} (first: {bare[0]})"] \
      if len(bare) > MAX_UNTYPED_DICTS else []
  return out


def report(root: str = ROOT, top: int = 10) -> str:
  graph, local = import_graph("pfd_jax", root)
  chain = longest_chain(graph)
  lines = [f"pfd_jax import depth: {len(chain)} ({' -> '.join(chain)})",
           f"import circles: {circles(graph) or 'none'}",
           f"imports inside functions: {len(local)}"] + [f"  {m}:{n} {t}" for m, n, t in local]
  sizes = file_lines(root=root)
  for package in PACKAGES:
    mine = {p: n for p, n in sizes.items() if p.startswith(package + os.sep)}
    lines.append(f"{package}/: {len(mine)} files, {sum(mine.values())} lines, longest "
                 + ", ".join(f"{p} {n}" for p, n in sorted(mine.items(), key=lambda kv: -kv[1])[:3]))
  fs = functions(root=root)
  lines.append("longest functions (code lines): " + ", ".join(
      f"{f.where} {f.name} {f.lines}" for f in sorted(fs, key=lambda f: -f.lines)[:top]))
  public = sorted((f for f in fs if f.public), key=lambda f: -f.positional)
  lines.append("most positional parameters (public): " + ", ".join(
      f"{f.where} {f.name} {f.positional}" for f in public[:5]))
  lines.append(f"annotations with a bare dict: {len(untyped_dicts(root=root))}")
  found = problems(root)
  lines.append(f"limits (depth {MAX_DEPTH}, file {MAX_FILE_LINES}, function {MAX_FUNCTION_LINES}, positional "
               f"{MAX_POSITIONAL}, bare-dict annotations {MAX_UNTYPED_DICTS}): "
               + ("all kept" if not found else f"{len(found)} broken"))
  lines += [f"  {p}" for p in found]
  return "\n".join(lines)


if __name__ == "__main__":
  root = next((a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--root=")), ROOT)
  print(report(os.path.abspath(root)))
  if "--check" in sys.argv[1:]:
    sys.exit(1 if problems(root) else 0)
