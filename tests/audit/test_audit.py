"""`python -m mlperf_bert audit` on tinycorp's real v4.1 submission and on damaged copies of it.

The expected verdicts come from mlperf-logging's own result_summarizer, run here independently."""
import csv, hashlib, json, re, shutil, subprocess, sys
from pathlib import Path

import pytest

from mlperf_bert.constants import platform_path
from mlperf_bert import cli
from mlperf_bert.audit.path_kind import detect_kind
from mlperf_bert.audit.rows import Audit, Row
from mlperf_bert.audit.org import audit_submission
from conftest import FIXTURES

DATA = FIXTURES / "tinycorp-v4.1"


# the config build_tree's tree was made with: tinybox_green keeping no training states (its log is tinycorp's, with
# 19 evals; the kept states are tested on trees the workflow built)
TREE_TRAIN = {"EVIDENCE_STATE_FREQ": 0}


def _settings(seed: int):
  """The resolved settings of the tinybox_green platform for `seed` with TREE_TRAIN (what the train process records)."""
  from mlperf_bert.train.hparams import load_platform, resolve
  return resolve(load_platform(platform_path(Path(__file__).resolve().parents[2], "tinybox_green")), TREE_TRAIN,
                 seed=seed)


def make_pkg(tmp_path, systems=("tinybox_green", "tinybox_red")) -> Path:
  org = tmp_path / "tinycorp"
  for s in systems:
    shutil.copytree(DATA / "results" / s, org / "results" / s)
    (org / "systems").mkdir(parents=True, exist_ok=True)
    shutil.copy(DATA / "systems" / f"{s}.json", org / "systems" / f"{s}.json")
  return org


def tree_digest(root: Path) -> dict:
  return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


def summarizer_scores(org: Path, ruleset: str, tmp: Path) -> dict:
  """mlperf-logging's result_summarizer, run on its own copy: {system dir: score}."""
  work = tmp / "summarizer"
  shutil.copytree(org, work / org.name)
  subprocess.run([sys.executable, "-m", "mlperf_logging.result_summarizer", str(work / org.name), "training", ruleset,
                  "--csv", str(work / "s.csv")], cwd=work, check=True, capture_output=True)
  with open(work / "s.csv") as f:
    return {re.search(r"/systems/(.+)\.json", r["details_url"]).group(1): float(r["bert"]) for r in csv.DictReader(f)}


def rows(audit, check=None, status=None, subject=None):
  return [r for r in audit.rows if (check is None or r.check == check) and (status is None or r.status == status)
          and (subject is None or subject in r.subject)]


def test_tinycorp_v41_official_verdicts(tmp_path):
  org = make_pkg(tmp_path / "pkg")
  before = tree_digest(tmp_path / "pkg")
  audit = audit_submission(org, "4.1.0")
  assert tree_digest(tmp_path / "pkg") == before, "the audit wrote into the audited tree"
  # tinycorp published green's result_8 as a copy of result_3 (byte-identical but for the seed), and MLCommons
  # accepted it: in a received submission a WARN that says so, not a FAIL
  assert not audit.failed, [r for r in audit.rows if r.status == "FAIL"]
  [copy] = rows(audit, "copies")
  assert copy.status == "WARN" and copy.subject == "tinybox_green"
  assert ("tinybox_green/result_3.txt and tinybox_green/result_8.txt have the same 16 eval(s) (epoch_num and "
          "eval_accuracy, in order), every event at the same time_ms with the same value, only the seed differs (seeds "
          "20762, 22978): one run logged 2 times") in copy.reason
  official = summarizer_scores(org, "4.1.0", tmp_path)
  assert round(official["tinybox_green"], 2) == 360.52 and round(official["tinybox_red"], 2) == 397.33
  for system, score in official.items():
    s = audit.scores[f"tinycorp/{system}"]
    assert round(s["score"], 2) == round(score, 2) and s["result_summarizer"] == pytest.approx(score)
  r2 = next(v for v in audit.runs if v.file == "tinybox_green/result_2.txt")
  assert r2.verdict.startswith("dropped") and "0.7197" in r2.verdict and "no run_stop" in r2.verdict
  assert [r.status for r in rows(audit, "run_stop", subject="tinybox_green/result_2.txt")] == ["DROP"]
  assert sum(v.verdict == "scored" for v in audit.runs) == 16
  assert all(r.status == "PASS" for r in rows(audit, "rcp") + rows(audit, "package_checker") + rows(audit, "score"))
  # tinycorp logged eval_samples 10002 (accepted by MLCommons): a warning, not a failure
  assert {r.status for r in rows(audit, "eval_samples")} == {"WARN"}


def test_cli_exit_codes_and_ruleset_5_1_has_no_bert(tmp_path, capsys):
  org = make_pkg(tmp_path, systems=("tinybox_red",))
  assert cli.main(["audit", str(org), "--ruleset", "5.0.0"]) == 0
  out = capsys.readouterr().out
  assert "397.33" in out and "-> PASS" in out
  # a received submission holds no training states: what that leaves unchecked is said, not failed
  assert re.search(r"SKIP\s+time\s+\S+\s+(time and )?steps taken on trust: a received submission holds no training "
                   r"states", out), out
  # the step times of tinycorp's cards against the cost model's band (resources/predicted/steps.json)
  assert re.search(r"PASS\s+time\s+tinybox_red\s+10 log\(s\), steps from the samples: their eval intervals' "
                   r"0.1-quantile steps, 499.9-512.1 ms, hold the published runs' floor; their whole runs are "
                   r"1.09-1.11x their floor .* tinybox_red at BS 66 is predicted .*held to tinycorp's 10 published "
                   r"run\(s\) of tinybox_red", out), out
  assert cli.main(["audit", str(org), "--ruleset", "5.1"]) == 1
  out = capsys.readouterr().out
  assert re.search(r"FAIL\s+ruleset.*BERT is not a benchmark of MLPerf Training 5\.1\.0", out)
  assert cli.main(["audit", str(org), "--strict"]) == 1  # eval_samples 10002 fails under --strict
  assert cli.main(["audit", str(tmp_path / "missing")]) == 2


def _edit(path: Path, old: str, new: str, count: int = 1):
  text = path.read_text()
  assert old in text
  path.write_text(text.replace(old, new, count))


@pytest.fixture
def green(tmp_path):
  return make_pkg(tmp_path, systems=("tinybox_green",))


def _failing(org, capsys, ruleset="4.1.0"):
  """Run the CLI (exit 1, no traceback) and read back its --json rows."""
  out_json = org.parent / "audit.json"
  assert cli.main(["audit", str(org), "--ruleset", ruleset, "--json", str(out_json)]) == 1
  out = capsys.readouterr()
  assert "Traceback" not in out.out + out.err and "-> FAIL" in out.out
  data = json.loads(out_json.read_text())
  audit = Audit(data["path"], data["kind"], data["ruleset"], rows=[Row(**r) for r in data["rows"]])
  return audit, [r for r in audit.rows if r.status == "FAIL"]


def test_malformed_lines(green, capsys):
  log = green / "results/tinybox_green/bert/result_0.txt"
  text = log.read_text().splitlines(keepends=True)
  text.insert(3, ':::MLLOG {"namespace": "", "time_ms": 17285169\n')
  text.insert(6, ':::MLLOG {"time_ms": 1728516968782, "value": null, "metadata": {}}\n')
  log.write_text("".join(text))
  audit, fails = _failing(green, capsys)
  parse = rows(audit, "parse", "FAIL", "result_0.txt")
  assert parse and "2 malformed" in parse[0].reason and "line 4" in parse[0].reason and "line 7" in parse[0].reason
  assert rows(audit, "compliance", "FAIL", "result_0.txt")


def test_missing_system_json(green, capsys):
  (green / "systems/tinybox_green.json").unlink()
  audit, fails = _failing(green, capsys)
  assert any(r.check == "system description" and "missing systems/tinybox_green.json" in r.reason for r in fails)


@pytest.mark.parametrize("n", [9, 11])
def test_wrong_log_count(green, capsys, n):
  bert = green / "results/tinybox_green/bert"
  if n == 9:
    (bert / "result_9.txt").unlink()
  else:
    shutil.copy(DATA / "results/tinybox_red/bert/result_0.txt", bert / "result_10.txt")
  audit, fails = _failing(green, capsys)
  assert any(r.check == "log count" and r.reason.startswith(f"{n} result logs") for r in fails)
  assert rows(audit, "rcp")[0].status == "SKIP"


def test_duplicate_seeds(green, capsys):
  _edit(green / "results/tinybox_green/bert/result_1.txt", '"key": "seed", "value": 20151', '"key": "seed", "value": 6505')
  audit, fails = _failing(green, capsys)
  dup = [r for r in fails if r.check == "unique seeds"]
  assert dup and "seed 6505" in dup[0].reason and "result_0.txt" in dup[0].reason and "result_1.txt" in dup[0].reason


def test_log_of_another_benchmark(green, capsys):
  _edit(green / "results/tinybox_green/bert/result_4.txt", '"key": "submission_benchmark", "value": "bert"',
        '"key": "submission_benchmark", "value": "retinanet"')
  audit, fails = _failing(green, capsys)
  assert any(r.check == "benchmark" and "result_4.txt" in r.subject and "'retinanet'" in r.reason for r in fails)


def test_detect_kind(tmp_path, green):
  assert detect_kind(green) == "org" and detect_kind(green.parent) == "orgs"
  (tmp_path / "base" / "shards").mkdir(parents=True)
  assert detect_kind(tmp_path / "base") == "basedir"


def test_audit_help_is_the_command_modules_doc(capsys):
  """`audit --help` prints audit/command.py's docstring, the module where the command starts (run_audit)."""
  from mlperf_bert.audit import command
  with pytest.raises(SystemExit) as e:
    cli.main(["audit", "--help"])
  out = capsys.readouterr().out
  assert e.value.code == 0 and command.__doc__.splitlines()[0] in out and "PATH is one of" in out
  assert command.run_audit.__module__ == "mlperf_bert.audit.command"


# ---------------------------------------------------------------------------------------------------------------
# a finished workflow tree (built by hand here: real shards, sidecars, SHA256SUMS, a real log, its provenance)
# ---------------------------------------------------------------------------------------------------------------
REPO = Path(__file__).resolve().parents[2]


def build_tree(tmp_path) -> tuple[Path, Path]:
  """(basedir, configfile): a basedir as the workflow leaves it, for the checks that need no Snakemake run."""
  import numpy as np
  import yaml
  from mlperf_bert.audit.tree import current_config
  from mlperf_bert.audit.provenance import write_provenance
  import hashlib
  from mlperf_bert.data.corpus import preprocessing_settings
  from mlperf_bert.data.shards import Shard, write_sha256sums, write_shard, write_sidecar
  from mlperf_bert.train.record import publish_result
  base = tmp_path / "run"
  texts = {t: f"the text of {t}\n" for t in ("part-00000-of-00002", "part-00001-of-00002", "eval.txt")}
  md5 = lambda b: hashlib.md5(b).hexdigest()
  # the download's md5 list of these texts (the config pins its md5) and eval.txt's article hashes (audit/text.py)
  manifest = "".join(f"{md5(v.encode())}  ./{t}\n" for t, v in texts.items())
  (tmp_path / "eval.md5").write_text(md5(texts["eval.txt"].rstrip().encode()) + "\n")
  cfgfile = tmp_path / "config.yaml"
  cfgfile.write_text(yaml.safe_dump({"basedir": str(base), "platform": "tinybox_green", "train": TREE_TRAIN,
    "preprocessing": {**yaml.safe_load(
    (REPO / "config.yaml").read_text())["preprocessing"], "dupe_factor": 10}, "eval_md5": str(tmp_path / "eval.md5"),
    "sources": {"bert_reference_results_text_md5.txt": {"url": "manifest.txt", "md5": md5(manifest.encode())}}}))
  (base / "download").mkdir(parents=True)
  for f in ("bert_config.json", "vocab.txt"):
    shutil.copy(REPO / "resources/demo" / f, base / "download" / f)
  (base / "download/bert_reference_results_text_md5.txt").write_text(manifest)
  rng = np.random.default_rng(0)
  def inst(n):
    return [{"input_ids": rng.integers(5, 100, 16), "segment_ids": [0] * 8 + [1] * 8, "masked_lm_positions": [1, 9],
             "masked_lm_ids": [7, 8], "next_sentence_label": i % 2} for i in range(n)]
  # the hashes the shard job records in each header: its text (results4/), settings and vocab (audit/chain.py)
  sha = lambda p: hashlib.sha256(p.read_bytes()).hexdigest()
  pre = yaml.safe_load(cfgfile.read_text())["preprocessing"]
  record = dict(settings_sha256=preprocessing_settings(**pre).sha256(), vocab_sha256=sha(base / "download/vocab.txt"))
  (base / "results4").mkdir()
  sides = []
  for t in ("part-00000-of-00002", "part-00001-of-00002", "eval.txt"):
    (base / "results4" / t).write_text(texts[t])
    out = base / ("eval/eval.shard" if t == "eval.txt" else f"shards/{t}.shard")
    write_shard(out, inst(3 if t == "eval.txt" else 5), max_seq_length=16, max_predictions_per_seq=2,
                source_sha256=sha(base / "results4" / t), **record)
    sides.append(write_sidecar(out))
  write_sha256sums(base / "shards/SHA256SUMS", sides[:2])
  log = base / "results/tinybox_green/result_bert_6505.log"
  # the result log as the train process puts it in place, with its train record: its final weights (a stand-in) and
  # last eval as this version's train process records them
  from safetensors.numpy import save_file
  weights = log.with_name("result_bert_6505.final.safetensors")
  log.parent.mkdir(parents=True)
  save_file({"w": np.zeros(3, np.float32)}, str(weights))
  s = _settings(6505)
  publish_result(DATA / "results/tinybox_green/bert/result_0.txt", log, shards=[Shard(p) for p in sorted(
                 (base / "shards").glob("*.shard"))], eval_shard=Shard(base / "eval/eval.shard"), init_weights=None,
                 bert_config=base / "download/bert_config.json", settings=s, status="success", accuracies=[],
                 final_weights={"path": weights.name, "bytes": weights.stat().st_size, "sha256": sha(weights)},
                 last_eval={"device": s.tinygrad.dev, "devices": s.gpus, "float_type": s.float_type, "batches": []})
  cfg = current_config(REPO, [str(cfgfile)], {})
  write_provenance(log.with_name("result_bert_6505.provenance.json"), log_path=log, config=cfg, seed=6505,
                   platform="tinybox_green", command=["snakemake"], repo_dir=REPO,
                   inputs={"downloads": sorted((base / "download").iterdir()),
                           "shards": sorted((base / "shards").glob("*.shard")), "eval": [base / "eval/eval.shard"]})
  return base, cfgfile


def _basedir_audit(base, cfgfile, capsys):
  # --no-reexecute: build_tree's shards are synthetic instances, not what their text builds (the re-execution would
  # rightly FAIL them; it is tested on trees the workflow built: tests/audit/test_reexec.py, test_end_to_end.py)
  rc = cli.main(["audit", str(base), "--no-dry-run", "--no-reexecute", "--configfile", str(cfgfile), "--ruleset",
                 "4.1.0"])
  out = capsys.readouterr()
  assert "Traceback" not in out.out + out.err
  return rc, out.out


def test_clean_tree_passes(tmp_path, capsys):
  base, cfgfile = build_tree(tmp_path)
  before = tree_digest(base)
  rc, out = _basedir_audit(base, cfgfile, capsys)
  assert rc == 0, out
  assert re.search(r"PASS\s+checksums\s+shards, eval\s+2 shard\(s\) and 1 eval set", out)
  assert re.search(r"PASS\s+provenance\s+results/tinybox_green/result_bert_6505.log\s+log and 6 input files match", out)
  assert re.search(r"PASS\s+config", out) and re.search(r"SKIP\s+dry run", out)
  assert re.search(r"PASS\s+chain\s+results/tinybox_green/result_bert_6505.log\s+train record -> log", out), out
  assert re.search(r"PASS\s+chain\s+shards, eval\s+text -> shard: each of 3 shard\(s\)", out), out
  assert tree_digest(base) == before


# a changed shard or log byte in a tree the workflow built: tests/workflow/test_end_to_end.py
@pytest.mark.parametrize("victim", ["eval/eval.shard", "download/vocab.txt"])
def test_one_changed_byte_fails_and_is_named(tmp_path, capsys, victim):
  base, cfgfile = build_tree(tmp_path)
  f = base / victim
  data = bytearray(f.read_bytes()); data[-3] ^= 0x01; f.write_bytes(bytes(data))
  rc, out = _basedir_audit(base, cfgfile, capsys)
  assert rc == 1
  fails = [l for l in out.splitlines() if l.startswith("FAIL")]
  assert fails and all(victim in l for l in fails), fails
  if victim.endswith(".shard"):
    assert any(l.split()[1] == "checksums" for l in fails) and any(l.split()[1] == "provenance" for l in fails)


def test_changed_config_fails_and_is_named(tmp_path, capsys):
  base, cfgfile = build_tree(tmp_path)
  cfgfile.write_text(cfgfile.read_text().replace("dupe_factor: 10", "dupe_factor: 11"))
  rc, out = _basedir_audit(base, cfgfile, capsys)
  assert rc == 1
  assert re.search(r"FAIL\s+config\s+.*preprocessing\.dupe_factor: recorded 10, now 11", out)


# The real workflow (Snakemake builds the tree, trains two seeds, writes the provenance records; the audit of the
# clean tree, of a changed shard byte, log byte and config key): tests/test_end_to_end.py, one shared run.


def test_log_claiming_ruleset_5_1(green, capsys):
  log = green / "results/tinybox_green/bert/result_0.txt"
  lines = log.read_text().splitlines(keepends=True)
  lines.insert(1, ':::MLLOG {"namespace": "", "time_ms": 1728516968770, "event_type": "POINT_IN_TIME", '
                  '"key": "submission_ruleset", "value": "5.1", "metadata": {}}\n')
  log.write_text("".join(lines))
  audit, fails = _failing(green, capsys, ruleset="5.0.0")
  claim = [r for r in fails if r.check == "ruleset claim"]
  assert claim and "claims ruleset 5.1.0, which has no BERT" in claim[0].reason and "checked under 5.0.0" in claim[0].reason


def test_report_figures_and_table(tmp_path):
  from mlperf_bert.audit.report import audit_html, plot_run, step_records
  step_log = tmp_path / "train.log"
  step_log.write_text("".join(f"{i:5} {900 + i:7.2f} ms run,  100.00 ms python,   1.00 ms fetch data,  800.00 ms CPU, "
                              f"{11 - i / 10:5.2f} loss, {1e-5 * i:.6f} LR, 1.00 GB used,     10.00 GFLOPS\n" for i in range(20)))
  assert step_records(step_log.read_text().splitlines())[3] == {"step": 3, "ms": 903.0, "loss": 10.7, "lr": 3e-05}
  stats = plot_run(tmp_path / "run.png", DATA / "results/tinybox_green/bert/result_0.txt", step_log)
  assert stats == {"steps": 20, "evals": 19, "final_accuracy": pytest.approx(0.7208575420416825), "status": "success"}
  assert (tmp_path / "run.png").read_bytes()[:4] == b"\x89PNG"
  audit = Audit("x", "org", "5.0.0", rows=[Row("FAIL", "seed", "a/result_0.txt", "no <seed>")])
  audit_html(tmp_path / "a.html", audit)
  assert "no &lt;seed&gt;" in (tmp_path / "a.html").read_text()


def test_audit_report_of_a_tree(tmp_path):
  """What rule report_audit runs: the basedir audit without the dry run, as a table and an HTML page."""
  from mlperf_bert.audit.report import audit_report
  from mlperf_bert.audit.tree import current_config
  base, cfgfile = build_tree(tmp_path)
  table = audit_report(tmp_path / "audit.html", base, ruleset="4.1.0", workflow_dir=REPO,
                       resolved_config=current_config(REPO, [str(cfgfile)], {}))
  assert re.search(r"PASS\s+provenance\s+results/tinybox_green/result_bert_6505.log", table), table
  assert re.search(r"SKIP\s+dry run", table), table
  page = (tmp_path / "audit.html").read_text()
  assert "results/tinybox_green/result_bert_6505.log" in page and ": PASS</h2>" in page
