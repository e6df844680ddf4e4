"""`compare` refuses a log with a malformed :::MLLOG line, naming it (file:line), instead of skipping it and then
reporting "first differing setting: none" (tinycorp's published v4.1 logs, mutated here)."""
from pathlib import Path

from mlperf_bert.cli import main as cli_main

V41 = Path(__file__).resolve().parents[1] / "fixtures/tinycorp-v4.1/results/tinybox_red/bert"


def test_a_malformed_line_is_named_not_skipped(tmp_path, capsys):
  lines = (V41 / "result_0.txt").read_text().splitlines(keepends=True)
  n = next(i for i, line in enumerate(lines) if '"key": "opt_base_learning_rate"' in line)
  lines[n] = lines[n].replace('"key": "opt_base_learning_rate"', '"key": "opt_base_learning_rate", ')  # bad JSON
  bad = tmp_path / "result_0.txt"
  bad.write_text("".join(lines))
  assert cli_main(["compare", str(bad), str(V41 / "result_0.txt")]) == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and err[0].startswith(f"error: {bad}:{n + 1}: a malformed :::MLLOG line: not valid JSON"), err
  assert "repair or remove it" in err[0]
  assert cli_main(["compare", str(V41 / "result_0.txt"), str(bad)]) == 2  # either side
  assert f"{bad}:{n + 1}:" in capsys.readouterr().err
