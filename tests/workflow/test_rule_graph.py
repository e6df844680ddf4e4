"""tools/rule_graph.py: docs/architecture.md's rule table and DAG are the workflow's, as Snakemake parses and plans it
(every job rule with its file, log, script and outputs; the dry runs of the demo, tinygrad's trainer and the R2 data
merged), and a stale copy of the page is named with the command that fixes it. One run of the tool: three dry runs
over scratch trees in one process."""
import re, subprocess, sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TOOL = REPO / "tools" / "rule_graph.py"
DOC = REPO / "docs" / "architecture.md"


def test_architecture_page_rules_and_dag_are_the_workflow(tmp_path):
  text = DOC.read_text()
  stale = tmp_path / "architecture.md"
  stale.write_text(text.replace("  r2_text --> verify_topic\n", ""))  # an edge of the R2 branch dropped
  assert stale.read_text() != text
  r = subprocess.run([sys.executable, str(TOOL), "--doc", str(DOC), str(stale)], capture_output=True, text=True,
                     timeout=300, cwd=tmp_path)
  assert f"{stale}'s rule table and DAG differ from the workflow: run python tools/rule_graph.py --write-doc {stale}" \
    in r.stderr, r.stdout + r.stderr
  # the page itself is the workflow's: a new, renamed or removed rule, log, output or script call without
  # `--write-doc` fails here
  assert f"{DOC}'s" not in r.stderr and r.stderr.count("error:") == 1, r.stderr
  assert r.returncode == 1
  # what the generated block holds: every job rule of the three branches, each with a log, and their edges
  block = text.split("<!-- rules:", 1)[1].split("<!-- /rules -->", 1)[0]
  rows = re.findall(r"^\| (?:checkpoint )?`(\w+)` \| (\S+) \| .* \| (`[^|]*`) \|$", block, re.M)
  assert len(rows) >= 23 and all(log.startswith("`logs/") for _, _, log in rows), rows
  for rule in ("r2_listing", "r2_text", "preflight", "train_tinygrad", "dress_platform"):
    assert rule in [n for n, _, _ in rows], rule
  for edge in ("extract -.-> verify_topic", "r2_text --> verify_topic", "shard --> train", "preflight --> train",
               "train_tinygrad --> provenance", "dress_platform --> dress"):
    assert f"  {edge}\n" in block, edge
