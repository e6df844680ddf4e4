"""The audit's bounds and notes, the cheap parts: the re-execution's budget (seconds or a coverage) and its processes
(stopped with their process group at the deadline), its own kernel search settings (BEAM 0 whatever the record says),
sizes compared before any hash (a 12 GB sparse file is one row at once), symlinks out of a tree named, and a
rehearsal's settings that are not its platform's named. (The bound on a real tree whose record says BEAM 8:
tests/workflow/test_end_to_end.py, its last section.)"""
import json, os, sys, time
from pathlib import Path

import pytest

from mlperf_bert.constants import platform_path
from mlperf_bert.audit.bounded import Budget, catch_chance, run_json_lines
from mlperf_bert.audit.provenance import hashes, size_differs, verify_provenance
from mlperf_bert.audit.rows import Audit
from mlperf_bert.errors import UserError

REPO = Path(__file__).resolve().parents[2]


def test_budget_is_seconds_or_a_coverage():
  assert Budget.parse("300") == Budget.parse("300s") == Budget.parse(300.0) == Budget(seconds=300.0)
  assert Budget.parse("20%") == Budget(coverage=0.2) and Budget.parse("100%") == Budget(coverage=1.0)
  for bad in ("0", "-5", "0%", "101%", "nan", "inf", "fast", "20 %%"):
    with pytest.raises(UserError, match="expected seconds"):
      Budget.parse(bad)
  # 500 topics: a fifth is 100 of them, and a sample is never empty; under a time bound every one is a candidate
  assert Budget(coverage=0.2).count(500) == 100 and Budget(coverage=0.2).count(3) == 1
  assert Budget(coverage=0.2).count(0) == 0 and Budget(seconds=300).count(500) == 500
  assert catch_chance(13, 500) == ("a change to any one of the 500 is caught with probability 13/500 (missed with "
                                   "probability 97.4%; --reexecute-budget P% redoes a share P of them)")
  assert catch_chance(500, 500) == "every one redone"


def _alive(pid: int) -> bool:
  try: state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
  except (OSError, IndexError): return False
  return state != "Z"


def test_a_process_past_its_deadline_is_stopped_with_its_group(tmp_path):
  """A worker that prints one line, starts a child (as tinygrad starts a compiler or a search's pool) and never ends:
  the call returns at the deadline with that line, and neither the worker nor its child outlives it."""
  script = ("import json, subprocess, sys, time\n"
            "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
            "print(json.dumps({'child': c.pid}), flush=True)\n"
            "time.sleep(600)\n")
  t0 = time.perf_counter()
  lines, _, stopped = run_json_lines([sys.executable, "-c", script], dict(os.environ), time.perf_counter() + 3)
  took = time.perf_counter() - t0
  assert stopped and 3 <= took < 10 and len(lines) == 1, (lines, took)
  time.sleep(0.2)
  assert not _alive(lines[0]["child"])
  # and one that ends by itself is read to its end, whatever the deadline
  lines, _, stopped = run_json_lines([sys.executable, "-c", "print('{\"a\": 1}'); print('not json')"],
                                     dict(os.environ), None)
  assert lines == [{"a": 1}] and not stopped


def test_the_re_execution_sets_its_own_search_settings():
  """A tinybox_green record (BEAM 8): the eval process exports BEAM 0 (and JITBEAM 0, which tinygrad's jit reads
  first) and runs its eval step at BEAM 0; the comparison is then within the band, not bit-exact."""
  from mlperf_bert.audit.reexec import eval_search
  from mlperf_bert.train.evidence import audit_settings, export_audit_env
  from mlperf_bert.train.hparams import load_platform, resolve, rule_params
  hp = rule_params(resolve(load_platform(platform_path(REPO, "tinybox_green"))))
  assert hp["BEAM"] == 8 and eval_search(hp) == 8 and eval_search({**hp, "EVAL_BEAM": 0}) == 0
  s = audit_settings(hp)
  assert (s.tinygrad.beam, s.eval.beam, s.train_beam) == (0, 0, 0)
  env = {}
  export_audit_env(s, env)
  assert env["BEAM"] == "0" and env["JITBEAM"] == "0" and env["DEV"] == "NV"   # the rest is the run's
  assert eval_search(rule_params(resolve(load_platform(platform_path(REPO, "cpu"))))) == 0


def test_sizes_are_compared_before_any_hash(tmp_path):
  """A 12 GB sparse file in place of the final weights: the provenance row and the re-execution's are one line each,
  at once, without reading it."""
  from mlperf_bert.audit.reexec import _weights
  w = tmp_path / "result_bert_0.final.safetensors"
  w.write_bytes(b"weights")
  rec = {"log": {"path": str(w), "bytes": 7, **hashes(w)}, "inputs": {}}
  assert verify_provenance(rec)[0][0] == "PASS"
  with open(w, "r+b") as f: f.truncate(12 << 30)
  hashed = []
  t0 = time.perf_counter()
  [(status, _, why)] = verify_provenance(rec, hasher=lambda p: hashed.append(p) or hashes(p))
  assert status == "FAIL" and why == f"log: {12 << 30} bytes, the record says 7 (not hashed)" and not hashed
  entry = {"final_weights": {"path": w.name, "bytes": 7, "sha256": "0" * 64}}
  why = _weights(tmp_path, tmp_path / "result_bert_0.train.json", entry, lambda p: hashed.append(p))
  assert why.startswith(f"{w.name}: {12 << 30} bytes, the record says 7 (not hashed)") and not hashed, why
  assert time.perf_counter() - t0 < 5 and size_differs(w, None) == "" and size_differs(w, 12 << 30) == ""


def test_the_audits_hasher_compares_recorded_sizes_first(tmp_path):
  """The audit's one hasher (tree._Hasher) knows the size every record states: a 12 GB sparse shard listed in
  SHA256SUMS is not hashed by the checksum check either (its row says why), and a path it cannot read (a symlink loop)
  is a digest that matches nothing, not a traceback."""
  from mlperf_bert.audit.tree import _Hasher, check_checksums
  shards = tmp_path / "shards"
  shards.mkdir()
  f = shards / "part-00000-of-00001.shard"
  f.write_bytes(b"shard")
  (shards / "SHA256SUMS").write_text(f"{hashes(f)['sha256']}  {f.name}\n")
  (shards / f"{f.name}.sha256").write_text(f"{hashes(f)['sha256']}  {f.name}\n")
  with open(f, "r+b") as fh: fh.truncate(12 << 30)
  t0, a = time.perf_counter(), Audit(str(tmp_path), "basedir", "5.0.0")
  check_checksums(a, tmp_path, _Hasher({str(f.resolve()): 5}))
  assert time.perf_counter() - t0 < 5 and [(r.status, r.subject) for r in a.rows] == [("FAIL", f"shards/{f.name}")]
  assert a.rows[0].reason.endswith(f"(not hashed: {12 << 30} bytes, the record says 5)"), a.rows[0].reason
  (tmp_path / "loop").symlink_to("loop")
  assert _Hasher()(tmp_path / "loop")["sha256"].startswith("(not hashed: not readable: ")


def test_symlinks_out_of_a_tree_are_named(tmp_path):
  from mlperf_bert.audit.tree import check_links
  base, outside = tmp_path / "base", tmp_path / "elsewhere"
  (base / "download").mkdir(parents=True); (base / "results4").mkdir(); outside.mkdir()
  (outside / "vocab.txt").write_text("x\n"); (base / "results4/a").write_text("a\n")
  (base / "download/vocab.txt").symlink_to(outside / "vocab.txt")
  (base / "results4/b").symlink_to(base / "results4/a")          # inside the tree: not named
  (base / "shards").symlink_to(outside)                          # a folder out of the tree: named, not walked
  a = Audit(str(base), "basedir", "5.0.0")
  check_links(a, base)
  assert [(r.status, r.check) for r in a.rows] == [("WARN", "links")], a.rows
  assert a.rows[0].reason.startswith("2 path(s) of the tree are symlinks resolving outside it (or nowhere), followed "
                                     f"by the checks: download/vocab.txt -> {outside / 'vocab.txt'}; shards -> "
                                     f"{outside}"), a.rows[0].reason
  (base / "download/vocab.txt").unlink(); (base / "shards").unlink()
  a = Audit(str(base), "basedir", "5.0.0")
  check_links(a, base)
  assert a.rows == []


def test_a_rehearsals_row_names_every_setting_not_its_platforms(tmp_path):
  """The audit of a rehearsal's tree: from its train record, every setting the run had that is not
  platforms/<platform>/platform.yaml's, the rehearsal's (LR, warmup) and the `train:` overrides' (beta) included."""
  from mlperf_bert.audit.rehearsal import rehearsal_settings_rows
  from mlperf_bert.train.hparams import load_platform, resolve, rule_params
  from mlperf_bert.train.rehearsal import rehearsal_settings
  from mlperf_bert.train.record import RECORD_SCHEMA
  d = tmp_path / "results" / "tinybox_green-rehearsal"
  d.mkdir(parents=True)
  log = d / "result_bert_0.log"
  log.write_text(':::MLLOG {"namespace": "", "time_ms": 1, "event_type": "POINT_IN_TIME", "key": "rehearsal", '
                 '"value": "tinybox_green rehearsed on the CPU: not a submission", "metadata": {}}\n')
  settings, _ = rehearsal_settings(load_platform(platform_path(REPO, "tinybox_green")), cpus=2)
  run = resolve(settings, {"OPT_LAMB_BETA_1": 0.8}, seed=0)
  (d / "result_bert_0.train.json").write_text(json.dumps({"schema": RECORD_SCHEMA, "settings": rule_params(run)}))
  [row] = rehearsal_settings_rows(tmp_path, [log], REPO)
  assert row.status == "SKIP" and row.subject == "results/tinybox_green-rehearsal/result_bert_0.log", row
  for said in ("BEAM 8 -> 0", "DEV NV -> CPU", "OPT_BASE_LEARNING_RATE 0.000169443 -> 0.01", "NUM_WARMUP_STEPS 1 -> 2",
               "OPT_LAMB_BETA_1 0.9 -> 0.8", "TRAIN_STEPS 40000 -> 12", "SUBMISSION_DIVISION closed -> open"):
    assert said in row.reason, (said, row.reason)
  assert row.reason.startswith("rehearsal settings (its train record against platforms/tinybox_green/platform.yaml): ")
  assert "DRESS_TARGET" not in row.reason  # a run-time knob (no rule param): the record does not hold it
