"""A received submission is untrusted input: hostile copies of tinycorp's real v4.1 tinybox_red.

Each case runs the real CLI in a subprocess under an address-space limit and a timeout (the bounds docs/audit.md
states), and checks that the finding is one line naming the file, with no traceback."""
import json, os, resource, shutil, subprocess, sys
from pathlib import Path

import pytest

from mlperf_bert.audit.rows import Audit
from mlperf_bert.audit.tree import check_checksums, _Hasher
from conftest import FIXTURES

ROOT = Path(__file__).resolve().parents[2]
DATA = FIXTURES / "tinycorp-v4.1"
SYSTEM = "tinybox_red"
MEM_LIMIT = 3 << 30   # address space of the audit process (a 3 GB file read whole would not fit)
TIME_LIMIT = 120      # seconds per audit


@pytest.fixture
def red(tmp_path) -> Path:
  org = tmp_path / "tinycorp"
  shutil.copytree(DATA / "results" / SYSTEM, org / "results" / SYSTEM)
  (org / "systems").mkdir()
  shutil.copy(DATA / "systems" / f"{SYSTEM}.json", org / "systems" / f"{SYSTEM}.json")
  return org


def bert(org: Path) -> Path:
  return org / "results" / SYSTEM / "bert"


def _limit():
  resource.setrlimit(resource.RLIMIT_AS, (MEM_LIMIT, MEM_LIMIT))


def audit_cli(org: Path, expect_rc: int = 1) -> tuple[list[dict], str]:
  """The CLI on org, bounded in memory and time: (its rows, its output). No traceback, one line per row."""
  out_json = org.parent / "audit.json"
  env = dict(os.environ, PYTHONPATH=str(ROOT))
  p = subprocess.run([sys.executable, "-m", "mlperf_bert", "audit", str(org), "--ruleset", "4.1.0", "--json",
                      str(out_json)], capture_output=True, text=True, timeout=TIME_LIMIT, preexec_fn=_limit, env=env)
  out = p.stdout + p.stderr
  assert "Traceback" not in out, out[-3000:]
  assert p.returncode == expect_rc, out[-3000:]
  data = json.loads(out_json.read_text())
  assert all(len(r["reason"]) < 2000 and "\n" not in r["reason"] for r in data["rows"])
  return data["rows"], p.stdout


def find(rows, check, status, text=""):
  return [r for r in rows if r["check"] == check and r["status"] == status and text in r["subject"] + r["reason"]]


def test_symlinks_out_of_the_submission_are_not_read(red, tmp_path):
  big = tmp_path / "sparse.bin"
  with open(big, "wb") as f: f.truncate(3 << 30)   # 3 GB, sparse
  secret = tmp_path / "secret"
  secret.write_text(":::MLLOG " + "x" * 100)
  (bert(red) / "result_3.txt").unlink(); (bert(red) / "result_3.txt").symlink_to(big)
  (bert(red) / "result_4.txt").unlink(); (bert(red) / "result_4.txt").symlink_to(secret)
  rows, _ = audit_cli(red)
  for n, target in (("result_3.txt", big), ("result_4.txt", secret)):
    [r] = find(rows, "read", "FAIL", n)
    assert "symlink" in r["reason"] and str(target) in r["reason"] and "outside the submission" in r["reason"]
  assert find(rows, "package_checker", "SKIP") and not find(rows, "compliance", "FAIL", "result_3.txt")


def test_deep_json_in_a_log_and_in_the_systems_json(red):
  for name, depth in (("result_0.txt", 200_000), ("result_1.txt", 2_000)):
    with open(bert(red) / name, "a") as f:
      f.write(':::MLLOG {"key": "x", "time_ms": 1, "value": ' + "[" * depth + "]" * depth + "}\n")
  (red / "systems" / f"{SYSTEM}.json").write_text("[" * 100_000 + "]" * 100_000)
  rows, _ = audit_cli(red)
  assert "over the audit's bound of 65,536" in find(rows, "parse", "FAIL", "result_0.txt")[0]["reason"]
  assert "nested deeper than 64" in find(rows, "parse", "FAIL", "result_1.txt")[0]["reason"]
  assert "nested deeper than 64" in find(rows, "system description", "FAIL")[0]["reason"]


def test_fifo_device_and_directory_in_place_of_logs(red):
  (bert(red) / "result_4.txt").unlink(); os.mkfifo(bert(red) / "result_4.txt")
  (bert(red) / "result_5.txt").unlink(); (bert(red) / "result_5.txt").mkdir()
  (bert(red) / "result_6.txt").unlink(); (bert(red) / "result_6.txt").symlink_to("/dev/zero")
  rows, _ = audit_cli(red)
  assert "is a FIFO" in find(rows, "read", "FAIL", "result_4.txt")[0]["reason"]
  assert "is a directory" in find(rows, "read", "FAIL", "result_5.txt")[0]["reason"]
  assert "outside the submission" in find(rows, "read", "FAIL", "result_6.txt")[0]["reason"]
  assert find(rows, "rcp", "SKIP") and find(rows, "package_checker", "SKIP")


def test_ten_thousand_logs_stop_early(red):
  for i in range(10, 10_000):
    (bert(red) / f"result_{i}.txt").write_text(":::MLLOG {}\n")
  for i in range(3_000):
    (bert(red) / f"notes_{i}.md").write_text("x")
  rows, out = audit_cli(red)
  [r] = find(rows, "log count", "FAIL")
  assert "10,000 result logs" in r["reason"] and "not read" in r["reason"]
  assert not find(rows, "compliance", "PASS") and not find(rows, "seed", "FAIL")
  assert "3000 file(s) not named" in find(rows, "file names", "WARN")[0]["reason"]
  assert max(map(len, out.splitlines())) < 1000


def test_other_org_and_non_utf8_bytes_are_noted(red):
  log = bert(red) / "result_0.txt"
  text = log.read_bytes()
  assert b'"key": "submission_org", "value": "tinycorp"' in text
  log.write_bytes(text.replace(b'"key": "submission_org", "value": "tinycorp"', b'"key": "submission_org", "value": "NVIDIA"'))
  with open(bert(red) / "result_1.txt", "ab") as f: f.write(b"trainer print \xff\xfe\n")
  rows, _ = audit_cli(red, expect_rc=0)
  assert "'NVIDIA' is not the submission directory's organization 'tinycorp'" in find(rows, "org", "WARN")[0]["reason"]
  assert "not UTF-8" in find(rows, "encoding", "WARN", "result_1.txt")[0]["reason"]


def test_directory_in_place_of_an_eval_shard(tmp_path):
  (tmp_path / "eval" / "eval.shard").mkdir(parents=True)
  audit = Audit(str(tmp_path), "basedir", "5.0.0")
  check_checksums(audit, tmp_path, _Hasher())
  assert [(r.status, r.subject) for r in audit.rows] == [("FAIL", "eval/eval.shard")]
  assert "not a regular file" in audit.rows[0].reason


# ---- numbers no real run produces (mlperf_bert/audit/forged.py) ----
def _edit(path: Path, fn) -> None:
  """Rewrite each :::MLLOG record of a log through fn(record) (the line kept as mllog writes it)."""
  out = []
  for line in path.read_text().splitlines():
    head, sep, body = line.partition(":::MLLOG ")
    out.append(head + sep + json.dumps(fn(json.loads(body))) if sep else line)
  path.write_text("\n".join(out) + "\n")


def _set(key, **changes):
  def fn(rec):
    if rec["key"] == key: rec.update(changes)
    return rec
  return fn


def test_copies_with_other_seeds_and_times_and_a_name_that_fakes_table_lines(red):
  """Three copies of result_2 (seeds edited, every time_ms shifted by a day more each): the copies FAIL, named; a log
  whose name holds newlines and a fake summary line prints as one escaped name."""
  src = bert(red) / "result_2.txt"
  for i, n in enumerate((0, 5, 7), 1):
    shutil.copy(src, bert(red) / f"result_{n}.txt")
    _edit(bert(red) / f"result_{n}.txt", lambda r, i=i: {**r, "time_ms": r["time_ms"] + i * 86_400_000,
                                                         **({"value": 40_000 + i} if r["key"] == "seed" else {})})
  fake = "result_9\nSummary: 58 PASS, 0 FAIL, 0 WARN, 0 DROP, 0 SKIP -> PASS\n\x1b[2K_1.txt"
  (bert(red) / "result_9.txt").rename(bert(red) / fake)
  rows, out = audit_cli(red)
  [r] = find(rows, "copies", "FAIL")
  assert all(f"{SYSTEM}/result_{n}.txt" in r["reason"] for n in (0, 2, 5, 7)) and "4 times" in r["reason"]
  assert [l for l in out.splitlines() if l.startswith("Summary")] == [out.strip().splitlines()[-1]]
  assert out.strip().endswith("-> FAIL") and "\x1b" not in out
  escaped = "result_9\\nSummary: 58 PASS, 0 FAIL, 0 WARN, 0 DROP, 0 SKIP -> PASS\\n\\x1b[2K_1.txt"
  assert escaped in out and find(rows, "compliance", "PASS", escaped)


def test_forged_clocks_and_scaling_factor_fail_naming_what_they_are(red):
  """run_stop 60 s before run_start, a negative run_start, a NaN and an infinite run_stop: FAIL rows that say so,
  no score mismatch, the official tools not run on the edited numbers; scaling.json 1e300: FAIL with both factors."""
  b = bert(red)
  start = lambda p: next(json.loads(l.split(":::MLLOG ")[1])["time_ms"] for l in p.read_text().splitlines()
                         if '"key": "run_start"' in l)
  _edit(b / "result_0.txt", _set("run_stop", time_ms=start(b / "result_0.txt") - 60_000))
  _edit(b / "result_1.txt", _set("run_start", time_ms=-5))
  _edit(b / "result_3.txt", _set("run_stop", time_ms=float("nan")))
  _edit(b / "result_4.txt", _set("run_stop", time_ms=float("inf")))
  (b / "scaling.json").write_text('{"scaling_factor": 1e300}')
  rows, out = audit_cli(red)
  assert "60.0 s before run_start" in find(rows, "times", "FAIL", "result_0.txt")[0]["reason"]
  assert "run_start at time_ms -5 (1969-12-31" in find(rows, "times", "FAIL", "result_1.txt")[0]["reason"]
  assert "(run_stop) is NaN" in find(rows, "times", "FAIL", "result_3.txt")[0]["reason"]
  assert "(run_stop) is infinite" in find(rows, "times", "FAIL", "result_4.txt")[0]["reason"]
  assert not [r for r in rows if r["check"] == "run_stop" and "result_0.txt" in r["subject"]]
  assert not find(rows, "score", "FAIL")
  assert find(rows, "package_checker", "SKIP")
  [s] = find(rows, "scaling", "FAIL")
  assert "results/tinybox_red/bert/scaling.json says 1e+300" in s["reason"] and "rcp_checker gives 1 (" in s["reason"]
  assert max(map(len, out.splitlines())) < 1000


@pytest.mark.parametrize("factor", [0.001, 0.5])
def test_scaling_json_is_recomputed_with_the_rcp_checker(red, factor):
  from mlperf_bert.audit.forged import check_scaling
  from mlperf_bert.audit.logs import read_log
  logs = [read_log(p) for p in sorted(bert(red).glob("result_*.txt"))]
  rows, used = check_scaling(logs, bert(red), SYSTEM, division="closed", ruleset="4.1.0", shipped=factor)
  assert used == 1.0 and [r.status for r in rows] == ["FAIL"]
  assert f"scaling.json says {factor:g}; mlperf-logging's rcp_checker gives 1 (" in rows[0].reason
  rows, used = check_scaling(logs, bert(red), SYSTEM, division="open", ruleset="4.1.0", shipped=factor)
  assert used == 1.0 and "open division has no RCP" in rows[0].reason


def test_a_rehearsals_log_is_not_a_submission(tmp_path):
  """A log with the `rehearsal` line (train/mllog.py writes it under rehearse=true): FAIL in a received submission,
  a SKIP of the scoring in a workflow tree, which is rebuilt as a rehearsal of its platform (no config FAIL)."""
  from mlperf_bert.audit.log_checks import check_logs
  from mlperf_bert.audit.logs import read_log
  from mlperf_bert.audit.rehearsal import rehearsal_config
  plat = tmp_path / "results" / "tinybox_green-rehearsal"
  plat.mkdir(parents=True)
  lines = (DATA / "results" / SYSTEM / "bert" / "result_0.txt").read_text().splitlines(keepends=True)
  lines.insert(4, ':::MLLOG {"namespace": "", "time_ms": 1728516945306, "event_type": "POINT_IN_TIME", "key": '
               '"rehearsal", "value": "tinybox_green rehearsed on the CPU: not a submission", "metadata": {}}\n')
  log = plat / "result_bert_0.log"
  log.write_text("".join(lines))
  for scoring, status in ((True, "FAIL"), (False, "SKIP")):
    audit = Audit(str(tmp_path), "org", "4.1.0")
    check_logs(audit, [read_log(log)], system="s", division="closed", ruleset="4.1.0", expect_count=None,
               scoring=scoring)
    [r] = [r for r in audit.rows if r.check == "rehearsal"]
    assert r.status == status and r.reason.startswith("rehearsal: not a submission"), r
  over = {}
  rehearsal_config([log], over)
  assert over == {"rehearse": "true", "platform": "tinybox_green"}
  over = {"rehearse": "false"}
  rehearsal_config([log], over)
  assert over == {"rehearse": "false"}
  shutil.copy(DATA / "results" / SYSTEM / "bert" / "result_1.txt", plat / "result_bert_1.log")  # not all say so
  rehearsal_config(sorted(plat.glob("*.log")), over := {})
  assert over == {}


def _log(run_start_ms: int, evals: list[tuple[int, float, int]]):
  """A parsed log: run_start, then eval_accuracy (epoch_num, value) at run_start + offset ms."""
  from mlperf_bert.audit.logs import parse_lines
  line = lambda t, key, value, meta: ":::MLLOG " + json.dumps(
    {"namespace": "", "time_ms": t, "event_type": "POINT_IN_TIME", "key": key, "value": value, "metadata": meta})
  return parse_lines([line(run_start_ms, "run_start", None, {})] +
                     [line(run_start_ms + dt, "eval_accuracy", acc, {"epoch_num": ep}) for ep, acc, dt in evals])


def test_a_flat_or_short_eval_sequence_is_a_copy_only_with_the_same_times():
  """Two real seeds of a tiny model can score the most frequent token's share at every eval: equal accuracies, other
  times, not copies. The same sequence with the same eval times after run_start (a copy shifted by a day) is one; three
  or more different accuracies in the same order are one whatever the times."""
  from mlperf_bert.audit.forged import check_copies
  copies = lambda *logs: check_copies(list(logs), {id(l): f"result_{i}.txt" for i, l in enumerate(logs)}, "sys")
  flat = [(64, 0.0363, 40_000)]
  assert copies(_log(1_700_000_000_000, flat), _log(1_700_000_100_000, [(64, 0.0363, 36_000)])) == []
  [row] = copies(_log(1_700_000_000_000, flat), _log(1_700_086_400_000, flat))
  assert row.status == "FAIL" and "result_0.txt and result_1.txt have the same 1 eval(s)" in row.reason
  climbing = [(64, 0.05, 40_000), (128, 0.06, 80_000), (192, 0.07, 120_000)]
  later = [(e, a, dt + 5_000) for e, a, dt in climbing]
  [row] = copies(_log(1_700_000_000_000, climbing), _log(1_700_000_100_000, later))
  assert "have the same 3 eval(s)" in row.reason


def test_a_copy_in_a_received_submission_is_a_warn_unless_its_clock_was_moved():
  """MLCommons accepted tinycorp's v4.1 green with result_8 = result_3 but for the seed: in a received submission a
  copy logged at the same times, or with the same evals at other times, is a WARN saying so; one whose every event
  keeps its time after run_start with the clock moved (edited to look like another run) is a FAIL. In a workflow
  tree (received=False) every copy is a FAIL."""
  from mlperf_bert.audit.forged import check_copies
  copies = lambda received, *logs: check_copies(list(logs), {id(l): f"result_{i}.txt" for i, l in enumerate(logs)},
                                                "sys", received)
  climbing = [(64, 0.05, 40_000), (128, 0.06, 80_000), (192, 0.07, 120_000)]
  same, moved = _log(1_700_000_000_000, climbing), _log(1_700_086_400_000, climbing)
  other = _log(1_700_000_000_000, [(e, a, dt + 5_000) for e, a, dt in climbing])
  for logs, status, what in (((same, _log(1_700_000_000_000, climbing)), "WARN", "every event at the same time_ms with the same value"),
                             ((same, other), "WARN", "at other times"),
                             ((same, moved), "FAIL", "the clock moved by 86,400 s: time stamps edited")):
    [row] = copies(True, *logs)
    assert row.status == status and "result_0.txt and result_1.txt have the same 3 eval(s)" in row.reason, row
    assert what in row.reason and "one run logged 2 times" in row.reason, row
    assert [r.status for r in copies(False, *logs)] == ["FAIL"]


def test_trainer_output_in_a_log_is_counted_and_over_4_mib_a_warn(red):
  """Lines that are no :::MLLOG record (mlperf-logging skips them): the parse row counts them; more than the published
  logs hold (4 MiB; the largest published has 3.7 MB) is a WARN naming the count and bytes, never a FAIL."""
  from mlperf_bert.audit.log_checks import check_parse
  from mlperf_bert.audit.logs import read_log
  log = bert(red) / "result_0.txt"
  [row] = check_parse(read_log(log), "s")
  assert row.status == "PASS" and "other line" not in row.reason   # tinycorp's logs are records only
  with open(log, "ab") as f:
    f.write(b"step 1 loss 7.1\n\n" * 3 + b"x" * 1000 + b"\n")
  [row] = check_parse(read_log(log), "s")
  assert row.status == "PASS" and row.reason.endswith("; 4 other line(s), 1,052 bytes (the trainer's output, which "
                                                      "mlperf-logging skips)")
  with open(log, "ab") as f:
    f.write((b"j" * 1023 + b"\n") * (10 << 10))   # 10 MiB of junk
  rows = check_parse(read_log(log), "s")
  assert [r.status for r in rows] == ["PASS", "WARN"]
  assert rows[1].check == "other lines" and rows[1].reason.startswith("10,486,812 bytes in 10,244 line(s) that are no "
                                                                      ":::MLLOG record: more than the 4 MiB")


def test_half_the_time_with_the_cards_respelled_and_step_num_dropped_fails_on_time(red):
  """tinycorp's v4.1 tinybox_red, every time x0.5, its cards spelled "radeon rx7900xtx 24GB" and every step_num
  dropped from its evals: the cards are still the red box's, the steps come from the samples, and every log FAILs its
  time rows (audit/step_band.py), through the CLI, one line each."""
  desc = json.loads((red / "systems" / f"{SYSTEM}.json").read_text())
  (red / "systems" / f"{SYSTEM}.json").write_text(json.dumps({**desc, "accelerator_model_name": "radeon rx7900xtx 24GB"}))
  for p in sorted(bert(red).glob("result_*.txt")):
    out, t0 = [], None
    for line in p.read_text().splitlines():
      if ":::MLLOG " in line:
        r = json.loads(line.split(":::MLLOG ", 1)[1])
        t0 = r["time_ms"] if t0 is None else t0
        r["time_ms"] = round(t0 + 0.5 * (r["time_ms"] - t0))
        r.get("metadata", {}).pop("step_num", None)
        line = f":::MLLOG {json.dumps(r)}"
      out.append(line + "\n")
    p.write_text("".join(out))
  rows, _ = audit_cli(red)
  fails = find(rows, "time", "FAIL")
  assert {r["subject"] for r in fails} == {f"{SYSTEM}/result_{i}.txt" for i in range(10)}, fails
  assert all("radeon rx7900xtx 24GB" in r["reason"] and "the log trains faster than its hardware can" in r["reason"]
             for r in fails), fails
  assert any(r["reason"].startswith("run_start to run_stop") for r in fails), fails
