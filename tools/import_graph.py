#!/usr/bin/env python3
"""The package's import graph, at wing level: prints the edges between mlperf_bert's wings (data, train, audit) and
its base modules, with the module imports behind each edge, and exits 1 when the layering is broken:

  * a circle between modules (imports inside functions count: a lazy import is still a dependency);
  * data importing train or audit, train importing audit (a wing imports only the wings below it);
  * a base module (constants, errors, fileio, config, snakejob) importing a wing. cli.py and __main__.py are the
    front door: they may import every wing.

  python tools/import_graph.py [--package mlperf_bert]
"""
from __future__ import annotations
import argparse, ast, sys
from collections import defaultdict
from pathlib import Path

WINGS = ("data", "train", "audit")        # bottom to top: a wing may import the ones before it
FRONT = {"cli", "__main__"}               # the CLI: may import anything


def modules(pkg: Path) -> dict[str, Path]:
  """{dotted module name: file} of every module in the package."""
  out = {}
  for f in sorted(pkg.rglob("*.py")):
    parts = list(f.relative_to(pkg.parent).with_suffix("").parts)
    if parts[-1] == "__init__": parts = parts[:-1]
    out[".".join(parts)] = f
  return out


def imports(name: str, path: Path, known: set[str]) -> set[str]:
  """The package modules `name` imports anywhere in its file (absolute and relative imports)."""
  is_pkg = path.name == "__init__.py"
  found = set()
  for node in ast.walk(ast.parse(path.read_text(), str(path))):
    if isinstance(node, ast.Import):
      targets = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ""
      if node.level:
        here = name.split(".") if is_pkg else name.split(".")[:-1]
        here = here[: len(here) - (node.level - 1)]
        base = ".".join(here + ([base] if base else []))
      subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in known]  # `from pkg import module`
      targets = subs if len(subs) == len(node.names) else [base] + subs
    else:
      continue
    for t in targets:
      while t and t not in known: t = t.rpartition(".")[0]  # `from pkg.mod import fn` -> pkg.mod
      if t and t != name: found.add(t)
  return found


def wing(module: str) -> str:
  parts = module.split(".")
  if len(parts) == 1: return "(package)"
  return parts[1] if parts[1] in WINGS else ("front" if parts[1] in FRONT else "base")


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
  """One circle per strongly connected component with more than one module (Tarjan)."""
  index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
  def visit(v):
    index[v] = low[v] = counter[0]; counter[0] += 1; stack.append(v); on.add(v)
    for w in sorted(graph.get(v, ())):
      if w not in index: visit(w); low[v] = min(low[v], low[w])
      elif w in on: low[v] = min(low[v], index[w])
    if low[v] == index[v]:
      comp = []
      while True:
        w = stack.pop(); on.discard(w); comp.append(w)
        if w == v: break
      if len(comp) > 1: out.append(sorted(comp))
  sys.setrecursionlimit(10000)
  for v in sorted(graph):
    if v not in index: visit(v)
  return out


def allowed(src: str, dst: str) -> bool:
  if src in ("front", "(package)") or src == dst: return True
  if dst in ("base", "(package)"): return True
  if src == "base": return False
  return dst in WINGS and WINGS.index(dst) < WINGS.index(src)


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--package", default=str(Path(__file__).resolve().parents[1] / "mlperf_bert"))
  a = ap.parse_args(argv)
  mods = modules(Path(a.package))
  graph = {m: imports(m, f, set(mods)) for m, f in mods.items()}
  edges: dict[tuple[str, str], list[str]] = defaultdict(list)
  for src, dsts in graph.items():
    for dst in sorted(dsts):
      if wing(src) != wing(dst): edges[wing(src), wing(dst)].append(f"{src} -> {dst}")
  bad = []
  print("wing-level imports (importer -> imported: module edges)")
  for (s, d), why in sorted(edges.items()):
    ok = allowed(s, d)
    print(f"  {'  ' if ok else '!!'} {s:>9} -> {d:<9} {len(why):>3}: {', '.join(w.replace('mlperf_bert.', '') for w in why[:4])}"
          f"{' ...' if len(why) > 4 else ''}")
    if not ok: bad += [f"{w} ({s} must not import {d})" for w in why]
  circles = cycles(graph)
  for c in circles: bad.append(f"import circle: {' <-> '.join(c)}")
  print(f"{len(mods)} modules, {sum(map(len, graph.values()))} imports, {len(circles)} circles")
  for b in bad: print(f"error: {b}", file=sys.stderr)
  return 1 if bad else 0


if __name__ == "__main__":
  raise SystemExit(main())
