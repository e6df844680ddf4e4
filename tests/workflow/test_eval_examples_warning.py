"""eval_examples larger than the eval text's instances: the eval set repeats rows, and says so on the console
(not only in the job log) and in the audit (a WARN row). Real Snakemake on the demo corpus."""
import re, subprocess, sys
from pathlib import Path

import pytest

from workflow_helpers import snakemake, write_config

pytestmark = pytest.mark.slow


def test_repeated_eval_rows_warn_on_the_console_and_in_the_audit(tmp_path):
  cfg = write_config(tmp_path / "config.yaml", Path("base"), eval_examples=50000)
  r = snakemake(tmp_path, "--cores", "2", "base/eval/eval.shard", configfile=cfg)
  console = r.stdout + r.stderr
  m = re.search(r"warning: \S*eval.txt gave (\d+) instances for eval_examples=50000: (\d+) rows of \S*eval.shard "
                r"repeat an earlier row; lower eval_examples to at most (\d+)", console)
  assert m, console[-3000:]
  n = int(m.group(1))
  assert 0 < n < 50000 and int(m.group(2)) == 50000 - n and int(m.group(3)) == n
  assert m.group(0) in (tmp_path / "base/logs/evalset/evalset.log").read_text()
  p = subprocess.run([sys.executable, "-m", "mlperf_bert", "audit", str(tmp_path / "base"), "--no-dry-run"],
                     capture_output=True, text=True, timeout=600)
  assert re.search(rf"WARN\s+eval set\s+eval/eval.shard\s+{50000 - n} of its 50000 rows repeat the row before them: "
                   rf"eval_examples \(50000\) is more than the {n} instances", p.stdout), p.stdout + p.stderr
