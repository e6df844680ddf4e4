"""tools/import_graph.py: the package's wings import downwards only (data <- train <- audit), with no circle; and the
tool fails, naming the import, when a fake package breaks either rule."""
import subprocess, sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TOOL = REPO / "tools" / "import_graph.py"


def _run(*args):
  return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True, timeout=120)


def test_package_has_three_wings_without_circles():
  r = _run()
  assert r.returncode == 0, r.stdout + r.stderr
  assert "0 circles" in r.stdout and "!!" not in r.stdout
  assert "train -> data" in r.stdout and "audit -> data" in r.stdout  # the wings exist and import downwards
  assert "data -> train" not in r.stdout and "data -> audit" not in r.stdout and "train -> audit" not in r.stdout


def test_broken_layering_is_named(tmp_path):
  pkg = tmp_path / "mlperf_bert"
  for d in ("data", "train", "audit"): (pkg / d).mkdir(parents=True)
  (pkg / "errors.py").write_text("from mlperf_bert.data import shards\n")                 # base -> wing
  (pkg / "data" / "shards.py").write_text("def f():\n  from mlperf_bert.train.run import x\n")  # data -> train (lazy)
  (pkg / "train" / "run.py").write_text("from . import model\nx = 1\n")                      # circle run <-> model
  (pkg / "train" / "model.py").write_text("from mlperf_bert.train import run\n")
  (pkg / "audit" / "log_checks.py").write_text("import mlperf_bert.data.shards\n")          # allowed
  (pkg / "plan.py").write_text("from mlperf_bert.data import shards\n")                     # workflow -> data: allowed
  (pkg / "data" / "reader.py").write_text("from mlperf_bert.plan import make_plan\n")       # data -> workflow
  r = _run("--package", str(pkg))
  assert r.returncode == 1, r.stdout + r.stderr
  assert "mlperf_bert.data.shards -> mlperf_bert.train.run (data must not import train)" in r.stderr
  assert "mlperf_bert.errors -> mlperf_bert.data.shards (base must not import data)" in r.stderr
  assert "import circle: mlperf_bert.train.model <-> mlperf_bert.train.run" in r.stderr
  assert "mlperf_bert.data.reader -> mlperf_bert.plan (data must not import workflow)" in r.stderr
  assert "mlperf_bert.plan -> " not in r.stderr
  assert "audit" not in r.stderr  # audit -> data is the allowed direction


def test_architecture_page_inventory_is_the_code():
  """docs/architecture.md's module table and import graph are generated from the code: a new, renamed or removed module
  (or a changed first docstring sentence) without `--write-doc` fails here, naming the command."""
  r = _run("--doc", str(REPO / "docs" / "architecture.md"))
  assert r.returncode == 0, r.stdout + r.stderr


def test_stale_inventory_is_named(tmp_path):
  doc = tmp_path / "architecture.md"
  doc.write_text((REPO / "docs" / "architecture.md").read_text().replace("| data | `data.loader` |", "| data | `data.gone` |"))
  r = _run("--doc", str(doc))
  assert r.returncode == 1
  assert f"{doc}'s module inventory differs from the code: run python tools/import_graph.py --write-doc {doc}" in r.stderr


def _defined_twice(pkg: Path) -> dict[str, list[str]]:
  """Top-level names (functions, classes, constants) that more than one module of `pkg` defines."""
  import ast, collections
  seen = collections.defaultdict(list)
  for p in sorted(pkg.rglob("*.py")):
    for n in ast.parse(p.read_text()).body:
      if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)): names = [n.name]
      elif isinstance(n, ast.Assign): names = [t.id for t in n.targets if isinstance(t, ast.Name)]
      elif isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name): names = [n.target.id]
      else: names = []
      for name in names:
        if not name.startswith("__"): seen[name].append(str(p.relative_to(pkg.parent)))
  return {k: v for k, v in seen.items() if len(v) > 1}


def test_no_top_level_name_is_defined_twice(tmp_path):
  """One name, one meaning: no function, class or constant of the package is defined in two modules (a constant is
  imported from the one that defines it)."""
  assert _defined_twice(REPO / "mlperf_bert") == {}
  pkg = tmp_path / "mlperf_bert"
  (pkg / "audit").mkdir(parents=True)
  (pkg / "audit" / "chain.py").write_text('CHECK = "chain"\ndef read_json(p): pass\n')
  (pkg / "audit" / "text.py").write_text('CHECK = "chain"\nclass Other: pass\n')
  assert _defined_twice(pkg) == {"CHECK": ["mlperf_bert/audit/chain.py", "mlperf_bert/audit/text.py"]}
