"""Provenance records: what they hold, and that re-hashing finds a changed byte anywhere on the chain."""
import json, platform, shutil, socket, subprocess
from importlib.metadata import version
from pathlib import Path

import pytest

from mlperf_bert.errors import UserError
from mlperf_bert.fileio import file_digest
from mlperf_bert.audit.provenance import PROVENANCE_SCHEMA, listed_shards, read_provenance, verify_provenance, write_provenance
from mlperf_bert.data.shards import write_sha256sums, write_sidecar
from conftest import FIXTURES

REPO = Path(__file__).resolve().parents[2]
LOG = FIXTURES / "tinycorp-v4.1/results/tinybox_green/bert/result_0.txt"


def tiny_tree(base: Path) -> dict[str, list[Path]]:
  """A basedir laid out as the workflow lays it out, with small stand-in artifacts."""
  (base / "download").mkdir(parents=True)
  for f in ("bert_config.json", "vocab.txt", "bert_reference_results_text_md5.txt", "results_text.tar.gz"):
    shutil.copy(REPO / "resources/demo" / f, base / "download" / f)
  (base / "shards").mkdir()
  shards = []
  for i in range(2):
    p = base / "shards" / f"part-0000{i}-of-00002.shard"
    p.write_bytes(bytes(range(256)) * (i + 1))
    shards.append(p)
  (base / "eval").mkdir()
  (base / "eval/eval.shard").write_bytes(b"eval" * 100)
  (base / "results/cpu").mkdir(parents=True)
  shutil.copy(LOG, base / "results/cpu/result_bert_0.log")
  return {"downloads": sorted((base / "download").iterdir()), "shards": shards, "eval": [base / "eval/eval.shard"]}


def test_record_contents_and_clean_verify(tmp_path):
  base = tmp_path / "run"
  inputs = tiny_tree(base)
  cfg = {"basedir": str(base), "eval_examples": 10000, "preprocessing": {"max_seq_length": 128}}
  out = base / "results/cpu/result_bert_0.provenance.json"
  rec = write_provenance(out, log_path=base / "results/cpu/result_bert_0.log", inputs=inputs, config=cfg, seed=0,
                         platform="cpu", command=["snakemake", "--cores", "2"], repo_dir=REPO)
  assert json.loads(out.read_text()) == read_provenance(out) and rec["schema"] == PROVENANCE_SCHEMA
  assert rec["seed"] == 0 and rec["platform"] == "cpu" and rec["config"] == {**cfg, "basedir": "<basedir>"}
  assert rec["command"] == ["snakemake", "--cores", "2"]
  head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
  assert rec["git"]["commit"] == head and isinstance(rec["git"]["dirty"], bool)
  want = {"python": platform.python_version(), **{p: version(p) for p in (
    "tinygrad", "numpy", "snakemake", "mlperf-logging", "gdown", "tokenizers")}}
  assert want.items() <= rec["versions"].items(), rec["versions"]
  assert rec["host"]["hostname"] == socket.gethostname() and rec["host"]["platform"] == platform.platform()
  assert rec["log"]["sha256"] == file_digest(LOG, "sha256") and rec["log"]["md5"] == file_digest(LOG, "md5")
  vocab = next(e for e in rec["inputs"]["downloads"] if e["path"].endswith("vocab.txt"))
  assert vocab["md5"] == "64800d5d8528ce344256daf115d4965e" and vocab["basedir_path"] == "download/vocab.txt"
  assert [e["basedir_path"] for e in rec["inputs"]["shards"]] == ["shards/part-00000-of-00002.shard",
                                                                   "shards/part-00001-of-00002.shard"]
  results = verify_provenance(rec, base)
  assert len(results) == 1 + 4 + 2 + 1 and all(s == "PASS" for s, _, _ in results)


def test_moved_tree_verifies_and_names_a_changed_byte(tmp_path):
  """A changed byte of each kind of input is named by the audit (tests/audit/test_audit.py) and by the workflow's
  audit (tests/workflow/test_end_to_end.py); here: records hold basedir-relative paths, so a moved tree verifies."""
  victim = "shards/part-00001-of-00002.shard"
  base = tmp_path / "run"
  inputs = tiny_tree(base)
  out = tmp_path / "prov.json"
  rec = write_provenance(out, log_path=base / "results/cpu/result_bert_0.log", inputs=inputs,
                         config={"basedir": str(base)}, seed=0, platform="cpu", command="x", repo_dir=REPO)
  # the tree moves: files recorded inside the basedir are found relative to it
  moved = tmp_path / "moved"
  shutil.move(base, moved)
  assert all(st == "PASS" for st, _, _ in verify_provenance(read_provenance(out), moved))
  f = moved / victim
  data = bytearray(f.read_bytes()); data[len(data) // 2] ^= 1; f.write_bytes(bytes(data))
  fails = [(p, why) for s, p, why in verify_provenance(read_provenance(out), moved) if s == "FAIL"]
  assert [p for p, _ in fails] == [victim] and "md5, sha256 differ" in fails[0][1]


def test_record_holds_no_absolute_path_of_the_checkout_workdir_or_basedir(tmp_path, monkeypatch):
  work = tmp_path / "work"
  base = work / "base"
  inputs = tiny_tree(base)
  monkeypatch.chdir(work)
  cfg = {"basedir": str(base), "sources": {"vocab.txt": {"url": str(REPO / "resources/demo/vocab.txt"), "md5": None}}}
  out = base / "results/cpu/result_bert_0.provenance.json"
  write_provenance(out, log_path=base / "results/cpu/result_bert_0.log", inputs=inputs, config=cfg, seed=0,
                   platform="cpu", command=["snakemake", "-s", str(REPO / "Snakefile"), "-d", str(work),
                                            f"--configfile={work}/config.yaml"], repo_dir=REPO)
  text = out.read_text()
  for path in (REPO, work, base, tmp_path):
    assert str(path) not in text, path
  rec = json.loads(text)
  assert rec["command"] == ["snakemake", "-s", "<checkout>/Snakefile", "-d", "<workdir>",
                            "--configfile=<workdir>/config.yaml"]
  assert rec["config"]["sources"]["vocab.txt"]["url"] == "<checkout>/resources/demo/vocab.txt"
  assert rec["cwd"] == "<workdir>" and rec["platform_file"]["path"] == "<checkout>/platforms/cpu/platform.yaml"
  assert rec["inputs"]["shards"][0]["path"] == "<basedir>/shards/part-00000-of-00002.shard"
  # moved elsewhere, it verifies where it now is
  moved = tmp_path / "elsewhere"
  shutil.move(work, moved)
  results = verify_provenance(read_provenance(moved / "base/results/cpu/result_bert_0.provenance.json"), moved / "base")
  assert results and all(s == "PASS" for s, _, _ in results)


def test_missing_input_is_a_user_error(tmp_path):
  base = tmp_path / "run"
  tiny_tree(base)
  with pytest.raises(UserError, match="not found"):
    write_provenance(tmp_path / "p.json", log_path=base / "results/cpu/result_bert_0.log",
                     inputs={"shards": [base / "shards/nope.shard"]}, config={}, seed=1, platform="cpu", command="x",
                     repo_dir=REPO)
  assert not (tmp_path / "p.json").exists()


def test_the_provenance_rule_hashes_the_shards_sha256sums_lists(tmp_path):
  """The provenance rule's shards are those the workflow's SHA256SUMS lists (every topic's sidecar), sorted as the
  topics are; a line that is not `<sha256>  <name>.shard`, or a listed shard that is gone, is one line."""
  shards = tiny_tree(tmp_path)["shards"]
  sums = write_sha256sums(tmp_path / "shards/SHA256SUMS", [write_sidecar(p) for p in reversed(shards)])
  assert listed_shards(sums) == [str(p) for p in sorted(shards)]
  text = sums.read_text()
  sums.write_text(text + f"{'0' * 64}  ../eval/eval.shard\n")
  with pytest.raises(UserError, match=r"SHA256SUMS:3: not '<sha256>  <name>.shard'.*rule shard_checksums"):
    listed_shards(sums)
  sums.write_text(text); shards[1].unlink()
  with pytest.raises(UserError, match=rf"SHA256SUMS: lists {shards[1].name}, which is missing"):
    listed_shards(sums)
