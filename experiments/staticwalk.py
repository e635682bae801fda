"""The main job's configuration followed through the source, without running it: from ``table2.run``, every call
(a lambda's among them) whose arguments carry the configuration, in the order the code is written, every branch
taken. The counterpart of :mod:`experiments.walk`, which records the calls one run makes.

How it counts. A function's configuration names are its parameters handed a configuration-carrying argument (at
the start, ``run``'s ``cfg``) and every name assigned, looped over or bound by ``with`` from an expression that
mentions one. A call is followed when one of its arguments (or, for a method, its object) mentions a configuration
name; the callee's matching parameters become its configuration names. A call resolves through the module's
imports (re-exports followed), ``self.method``, a class (its ``__init__``/``__post_init__``/``__call__``), and a
method of a configuration name whose annotation (a parameter's, or a dataclass field's along an attribute chain)
names a project class. Each function is walked once, at its first call. The walk is the sequence of modules it
is in, the caller's module again after each callee returns, read as :func:`experiments.walk.walk` reads a run's.
Read by ``python -m experiments.walk --static``.
"""
from __future__ import annotations

import ast
import os
from typing import Dict, List, Optional, Set, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("pfd_jax", "experiments")
Func = Tuple[str, str]  # (module, qualified name in it)


def _is_module(name: str, root: str) -> bool:
  path = os.path.join(root, *name.split("."))
  return os.path.isdir(path) or os.path.exists(path + ".py")


class _Module:
  """A module's top-level functions, classes (methods and annotated fields) and imports of the project."""

  def __init__(self, name: str, root: str):
    path = os.path.join(root, *name.split("."))
    path = os.path.join(path, "__init__.py") if os.path.isdir(path) else path + ".py"
    with open(path) as f:
      tree = ast.parse(f.read(), path)
    self.name, self.defs, self.classes, self.fields, self.imports = name, {}, {}, {}, {}
    for node in tree.body:
      if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        self.defs[node.name] = node
      elif isinstance(node, ast.ClassDef):
        self.classes[node.name] = {n.name: n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        self.fields[node.name] = {n.target.id: n.annotation for n in node.body
                                  if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    for node in ast.walk(tree):
      if isinstance(node, ast.Import):
        for a in node.names:
          if a.name.split(".")[0] in PACKAGES:
            self.imports[a.asname or a.name.split(".")[0]] = ("module", a.name if a.asname else a.name.split(".")[0])
      elif isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] in PACKAGES:
        for a in node.names:
          sub = f"{node.module}.{a.name}"
          self.imports[a.asname or a.name] = ("module", sub) if _is_module(sub, root) else ("name", (node.module, a.name))


class Walker:
  def __init__(self, root: str = ROOT):
    self.root = root
    self._modules: Dict[str, _Module] = {}
    self.seen: Set[Func] = set()
    self.sequence: List[str] = []

  def module(self, name: str) -> _Module:
    if name not in self._modules:
      self._modules[name] = _Module(name, self.root)
    return self._modules[name]

  def _member(self, module: str, name: str, depth: int = 0) -> Optional[tuple]:
    """What `name` is in `module`: ("func", module, name), ("class", module, name) or ("module", name)."""
    if depth > 8 or not _is_module(module, self.root):
      return None
    m = self.module(module)
    if name in m.defs:
      return ("func", module, name)
    if name in m.classes:
      return ("class", module, name)
    if name in m.imports:
      kind, target = m.imports[name]
      return ("module", target) if kind == "module" else self._member(*target, depth=depth + 1)
    return ("module", f"{module}.{name}") if _is_module(f"{module}.{name}", self.root) else None

  def _annotation_class(self, module: str, ann) -> Optional[tuple]:
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
      ann = ast.parse(ann.value, mode="eval").body
    if isinstance(ann, ast.Subscript):  # Optional[X]
      ann = ann.slice
    target = self._resolve(module, ann, None, {})
    return target if target and target[0] == "class" else None

  def _resolve(self, module: str, expr, cls: Optional[str], types: Dict[str, tuple]) -> Optional[tuple]:
    chain = []
    while isinstance(expr, ast.Attribute):
      chain.append(expr.attr)
      expr = expr.value
    if not isinstance(expr, ast.Name):
      return None
    head, rest = expr.id, chain[::-1]
    if head == "self" and cls:
      target = ("class", module, cls)
    else:
      target = types.get(head) or self._member(module, head)
    for i, attr in enumerate(rest):
      if target is None or target[0] == "func":
        return None
      if target[0] == "module":
        target = self._member(target[1], attr)
        continue
      _, cm, cn = target
      if attr in self.module(cm).classes[cn]:
        return ("func", cm, f"{cn}.{attr}") if i == len(rest) - 1 else None
      field = self.module(cm).fields[cn].get(attr)
      target = self._annotation_class(cm, field) if field is not None else None
    return target

  def _targets(self, target: tuple) -> List[Func]:
    if target[0] == "func":
      return [(target[1], target[2])]
    if target[0] == "class":
      methods = self.module(target[1]).classes[target[2]]
      return [(target[1], f"{target[2]}.{k}") for k in ("__init__", "__post_init__", "__call__") if k in methods]
    return []

  def _node(self, module: str, qual: str) -> Tuple[Optional[str], ast.FunctionDef]:
    """(its class or None, the definition) of a function or method."""
    cls, name = qual.split(".") if "." in qual else (None, qual)
    return cls, self.module(module).classes[cls][name] if cls else self.module(module).defs[name]

  def visit(self, func: Func, carried: Set[str]):
    module, qual = func
    self.seen.add(func)
    self.sequence.append(module)
    cls, node = self._node(module, qual)
    args = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
    types = {}
    for a in args:
      if a.arg in carried and a.annotation is not None:
        t = self._annotation_class(module, a.annotation)
        if t:
          types[a.arg] = t
    names = set(carried)

    def mentions(expr) -> bool:
      return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(expr))

    for stmt in node.body:
      for n in _in_order(stmt):
        if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.comprehension, ast.withitem,
                          ast.NamedExpr)):
          value = getattr(n, "value", None) or getattr(n, "iter", None) or getattr(n, "context_expr", None)
          targets = getattr(n, "targets", None) or [getattr(n, "target", None) or getattr(n, "optional_vars", None)]
          if value is not None and mentions(value):
            names.update(t.id for tgt in targets if tgt is not None for t in ast.walk(tgt) if isinstance(t, ast.Name))
        if not isinstance(n, ast.Call):
          continue
        obj = n.func.value if isinstance(n.func, ast.Attribute) else None
        handed = [a for a in n.args if mentions(a)] + [k for k in n.keywords if mentions(k.value)]
        if not handed and not (obj is not None and mentions(obj)):
          continue
        target = self._resolve(module, n.func, cls, types)
        for callee in self._targets(target) if target else []:
          if callee in self.seen:
            continue
          self.visit(callee, self._parameters(callee, n, mentions))
          self.sequence.append(module)

  def _parameters(self, callee: Func, call: ast.Call, mentions) -> Set[str]:
    """The callee's parameters handed a configuration-carrying argument (its own first, for a method called on one)."""
    module, qual = callee
    cls, node = self._node(module, qual)
    params = [a.arg for a in node.args.posonlyargs + node.args.args]
    if cls:
      params = params[1:]  # self (or cls), bound by the call
    out = {params[i] for i, a in enumerate(call.args) if i < len(params) and mentions(a)}
    out |= {k.arg for k in call.keywords if k.arg and mentions(k.value)}
    if cls and isinstance(call.func, ast.Attribute) and mentions(call.func.value):
      out.add(node.args.args[0].arg)
    return out


def _in_order(stmt):
  """The nodes of a statement, in the order the code is written (a call's arguments after the call itself)."""
  yield stmt
  for child in ast.iter_child_nodes(stmt):
    if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
      continue
    yield from _in_order(child)


def sequence(module: str, function: str, carried: Tuple[str, ...] = ("cfg",),
             root: str = ROOT) -> Tuple[List[str], int]:
  """(the modules the configuration passes through, in order; the functions walked) from `function` of `module`,
  its parameters `carried` holding the configuration."""
  w = Walker(root)
  w.visit((module, function), set(carried))
  return w.sequence, len(w.seen)
