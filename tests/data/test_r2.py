"""MLCommons R2 downloads against a real loopback server in R2's layout (.uri, .md5 list, files): clean, resumed,
wrong md5, 403/302, an HTML body, a missing file, a local mirror; no mocks."""
import hashlib
from pathlib import Path

import pytest

from mlperf_bert.data import r2
from mlperf_bert.data.download import fetch
from mlperf_bert.errors import UserError
from r2_server import R2Server

BIG = bytes(range(256)) * 12288  # 3 MiB: several 1 MiB chunks
CONFIG = b'{"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16, "intermediate_size": 4096, ' \
         b'"vocab_size": 30522, "max_position_embeddings": 512, "type_vocab_size": 2}'
QUIET = dict(log=lambda s: None, progress=False, backoff=0)


@pytest.fixture
def server():
  with R2Server() as s:
    s.datasets["bert-input-files"] = {
      "bert_config.json": CONFIG,
      "tf1_ckpt/model.ckpt-28252.index": b"index-tf1",
      "tf2_ckpt/model.ckpt-28252.index": b"index-tf2",
      "tf1_ckpt/model.ckpt-28252.data-00000-of-00001": BIG,
    }
    yield s


def _listing(server, tmp_path, name="bert-input-files"):
  d = tmp_path / "r2"
  n = r2.fetch_listing("mlcommons-r2:" + server.uri(name), d / f"{name}.md5", d / f"{name}.uri", log=lambda s: None,
                       backoff=0)
  return d / f"{name}.md5", d / f"{name}.uri", n


def _files(d: Path):
  return sorted(p.name for p in d.iterdir())


def test_names_and_md5_list_url():
  uri = "https://training.mlcommons-storage.org/metadata/bert-input-files.uri"
  assert r2.is_r2("mlcommons-r2:" + uri) and r2.is_r2(uri) and not r2.is_r2("https://x/y.txt")
  assert r2.dataset_name("mlcommons-r2:" + uri) == r2.dataset_name(uri) == "bert-input-files"
  assert r2.md5_list_url(uri) == "https://training.mlcommons-storage.org/metadata/bert-input-files.md5"
  listing = r2.parse_md5_list("d41d8cd98f00b204e9800998ecf8427e  ./results/part-00000-of-00002\n"
                              "d41d8cd98f00b204e9800998ecf8427e  ./results/eval.txt\n", "x.md5")
  assert r2.find_entry(listing, "part-00000-of-00002", "ds") == "results/part-00000-of-00002"
  with pytest.raises(UserError, match="not a relative path"):
    r2.parse_md5_list("d41d8cd98f00b204e9800998ecf8427e  ../../etc/passwd\n", "x.md5")
  with pytest.raises(UserError, match="x.md5:1: expected"):
    r2.parse_md5_list("<html>\n", "x.md5")


def test_clean_download_through_the_listing(server, tmp_path):
  md5_list, uri, n = _listing(server, tmp_path)
  assert n == 4 and uri.read_text().strip() == f"{server.url}/data/bert-input-files"
  out = tmp_path / "dl" / "model.ckpt-28252.data-00000-of-00001"
  info = r2.fetch_member(md5_list, uri, "tf1_ckpt/model.ckpt-28252.data-00000-of-00001", out,
                         dataset="bert-input-files", **QUIET)
  assert out.read_bytes() == BIG and info["md5"] == hashlib.md5(BIG).hexdigest()
  assert info["sha256"] == hashlib.sha256(BIG).hexdigest() and info["resumed_from"] == 0
  assert _files(out.parent) == [out.name]  # no .part left
  # the same through the workflow's fetch(): mlcommons-r2 source, path picks tf1 over tf2, md5 + sidecar
  idx = tmp_path / "dl" / "model.ckpt-28252.index"
  fetch("mlcommons-r2:" + server.uri("bert-input-files"), idx, md5=hashlib.md5(b"index-tf1").hexdigest(),
        path="tf1_ckpt/model.ckpt-28252.index", listing=md5_list, uri=uri, sidecar=True, quiet=True, backoff=0,
        log=lambda s: None)
  assert idx.read_bytes() == b"index-tf1"
  assert (tmp_path / "dl" / "model.ckpt-28252.index.sha256").read_text() == \
    f"{hashlib.sha256(b'index-tf1').hexdigest()}  model.ckpt-28252.index\n"
  with pytest.raises(UserError, match="matches 2 files"):  # ambiguous without path:
    fetch("mlcommons-r2:" + server.uri("bert-input-files"), tmp_path / "x" / "model.ckpt-28252.index", md5=None,
          listing=md5_list, uri=uri, quiet=True, log=lambda s: None)


def test_resumed_download_sends_range_and_finishes(server, tmp_path):
  md5_list, uri, _ = _listing(server, tmp_path)
  rel = "tf1_ckpt/model.ckpt-28252.data-00000-of-00001"
  server.faults[rel] = "drop"
  server.drop_at[rel] = 1_200_000
  out = tmp_path / "dl" / "model.ckpt-28252.data-00000-of-00001"
  with pytest.raises(UserError, match="failed 1 times.*resumes"):
    r2.fetch_member(md5_list, uri, rel, out, dataset="bert-input-files", attempts=1, **QUIET)
  assert not out.exists()
  parts = list(out.parent.glob(".*.part"))
  kept = parts[0].stat().st_size if len(parts) == 1 else None
  assert kept and 1_000_000 < kept <= 1_200_000  # kept for the next attempt, never at the target
  info = r2.fetch_member(md5_list, uri, rel, out, dataset="bert-input-files", **QUIET)
  assert out.read_bytes() == BIG and info["resumed_from"] == kept
  gets = server.gets(rel)
  assert len(gets) == 2 and "Range" not in gets[0] and gets[1]["Range"] == f"bytes={kept}-"
  assert _files(out.parent) == [out.name]


def test_network_error_is_retried_within_one_call(server, tmp_path):
  md5_list, uri, _ = _listing(server, tmp_path)
  rel = "tf1_ckpt/model.ckpt-28252.data-00000-of-00001"
  server.faults[rel] = "drop"
  out = tmp_path / "dl" / "data"
  msgs = []
  r2.fetch_member(md5_list, uri, rel, out, dataset="bert-input-files", attempts=3, backoff=0, progress=False,
                  log=msgs.append)
  assert out.read_bytes() == BIG
  assert any("retry 1/2" in m for m in msgs) and any("resuming at byte" in m for m in msgs)
  ranges = [h.get("Range") for h in server.gets(rel)]
  assert len(ranges) == 2 and ranges[0] is None and ranges[1].startswith("bytes=") and ranges[1] != "bytes=0-"


def test_wrong_md5_fails_once_and_leaves_nothing(server, tmp_path):
  server.md5_override[("bert-input-files", "bert_config.json")] = "0" * 32
  md5_list, uri, _ = _listing(server, tmp_path)
  out = tmp_path / "dl" / "bert_config.json"
  with pytest.raises(UserError) as e:
    r2.fetch_member(md5_list, uri, "bert_config.json", out, dataset="bert-input-files", attempts=5, **QUIET)
  assert "MD5 mismatch" in str(e.value) and "0" * 32 in str(e.value) and hashlib.md5(CONFIG).hexdigest() in str(e.value)
  assert len(server.gets("bert_config.json")) == 1  # deterministic: not retried
  assert _files(out.parent) == []  # neither the target nor a .part
  # a config md5 that disagrees with the dataset's list is refused before any download
  server.md5_override.clear()
  md5_list, uri, _ = _listing(server, tmp_path)
  with pytest.raises(UserError, match="listed with md5 .* config expects"):
    r2.fetch_member(md5_list, uri, "bert_config.json", out, dataset="bert-input-files", md5="1" * 32, **QUIET)


@pytest.mark.parametrize("fault", ["403", "302"])
def test_access_denied_names_the_dataset_and_the_fix(server, tmp_path, fault):
  md5_list, uri, _ = _listing(server, tmp_path)
  server.faults["bert_config.json"] = fault
  out = tmp_path / "dl" / "bert_config.json"
  with pytest.raises(UserError) as e:
    r2.fetch_member(md5_list, uri, "bert_config.json", out, dataset="bert-input-files", **QUIET)
  msg = str(e.value)
  assert f"HTTP {fault}" in msg and "bert-input-files" in msg and "Cloudflare Access" in msg
  assert "mlc-r2-downloader.sh" in msg and "config/mlperf-gdrive.yaml" in msg and "\n" not in msg
  assert len(server.gets("bert_config.json")) == 1
  assert _files(out.parent) == []


@pytest.mark.parametrize("fault,match", [("html", "HTML page where data was expected"),
                                         ("404", "not on the server \\(HTTP 404\\)")])
def test_bad_answer_is_refused_and_leaves_nothing(server, tmp_path, fault, match):
  md5_list, uri, _ = _listing(server, tmp_path)
  server.faults["bert_config.json"] = fault
  out = tmp_path / "dl" / "bert_config.json"
  with pytest.raises(UserError, match=match):
    r2.fetch_member(md5_list, uri, "bert_config.json", out, dataset="bert-input-files", **QUIET)
  assert len(server.gets("bert_config.json")) == 1  # neither is retried
  assert _files(out.parent) == []


def test_names_outside_the_list_or_the_server(server, tmp_path):
  md5_list, uri, _ = _listing(server, tmp_path)
  with pytest.raises(UserError, match="no file 'vocab.txt'"):  # not even in the list
    r2.fetch_member(md5_list, uri, "vocab.txt", tmp_path / "dl" / "vocab.txt", dataset="bert-input-files", **QUIET)
  with pytest.raises(UserError, match="not on the server"):  # an unknown dataset: its .uri is a 404
    r2.fetch_listing("mlcommons-r2:" + server.uri("nope"), tmp_path / "n.md5", tmp_path / "n.uri", backoff=0,
                     log=lambda s: None)


def test_local_mirror_directory(server, tmp_path):
  mirror = tmp_path / "mirror"
  for rel, data in server.datasets["bert-input-files"].items():
    (mirror / rel).parent.mkdir(parents=True, exist_ok=True)
    (mirror / rel).write_bytes(data)
  (mirror / "bert-input-files.md5").write_text(
    "".join(f"{hashlib.md5(d).hexdigest()}  ./{p}\n" for p, d in server.datasets["bert-input-files"].items()))
  src = f"mlcommons-r2:{mirror}"
  assert r2.dataset_name(src) == "bert-input-files"
  d = tmp_path / "r2"
  r2.fetch_listing(src, d / "l.md5", d / "l.uri", log=lambda s: None)
  out = tmp_path / "dl" / "bert_config.json"
  fetch(src, out, md5=None, listing=d / "l.md5", uri=d / "l.uri", log=lambda s: None)
  assert out.read_bytes() == CONFIG
  (mirror / "bert_config.json").write_bytes(b"{}")  # a damaged mirror file: md5 of the list catches it
  with pytest.raises(UserError, match="MD5 mismatch"):
    fetch(src, tmp_path / "dl2" / "bert_config.json", md5=None, listing=d / "l.md5", uri=d / "l.uri", log=lambda s: None)
  assert _files(tmp_path / "dl2") == []
  with pytest.raises(UserError, match="does not exist"):
    r2.dataset_name(f"mlcommons-r2:{tmp_path / 'nowhere'}")


def test_text_dataset_entries_and_manifest(tmp_path):
  lines = "".join(f"{hashlib.md5(str(i).encode()).hexdigest()}  ./results/part-{i:05d}-of-00500\n" for i in range(500))
  lines += f"{'a' * 32}  ./results/eval.txt\n{'b' * 32}  ./results/eval.md5\n"
  (tmp_path / "ds.md5").write_text(lines)
  names = r2.text_entries(r2.read_listing(tmp_path / "ds.md5"), "ds")
  assert len(names) == 501 and names["eval.txt"] == "results/eval.txt"
  assert r2.write_manifest(tmp_path / "ds.md5", tmp_path / "manifest.txt", "ds") == 501
  from mlperf_bert.data.extract import parse_manifest, topics
  m = parse_manifest(tmp_path / "manifest.txt")
  assert m["eval.txt"] == "a" * 32 and len(topics(m)) == 500
  (tmp_path / "tar.md5").write_text(f"{'c' * 32}  ./results_text.tar.gz\n")
  with pytest.raises(UserError, match="sources/results_text.tar.gz"):
    r2.text_entries(r2.read_listing(tmp_path / "tar.md5"), "tar")


def test_command_line_download_lists_the_dataset_itself(server, tmp_path):
  import subprocess, sys
  out = tmp_path / "dl" / "model.ckpt-28252.index"
  r = subprocess.run([sys.executable, "-m", "mlperf_bert", "download", "--source", "mlcommons-r2:" + server.uri(
    "bert-input-files"), "--path", "tf2_ckpt/model.ckpt-28252.index", "--output", str(out)],
    capture_output=True, text=True, timeout=120)
  assert r.returncode == 0, r.stderr
  assert out.read_bytes() == b"index-tf2" and _files(out.parent) == [out.name]


def test_full_disk_during_an_http_download_is_one_line_and_resumable(server, tmp_path):
  import subprocess
  md5_list, uri, _ = _listing(server, tmp_path)
  small = tmp_path / "small"
  small.mkdir()
  if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(small)], capture_output=True).returncode:
    pytest.skip("cannot mount a small tmpfs here (needs root)")
  try:
    with pytest.raises(UserError) as e:  # 3 MiB into 1 MiB
      from mlperf_bert.data.download import fetch as _fetch
      _fetch("mlcommons-r2:" + server.uri("bert-input-files"), small / "model.ckpt-28252.data-00000-of-00001",
             md5=None, path="tf1_ckpt/model.ckpt-28252.data-00000-of-00001", listing=md5_list, uri=uri, quiet=True,
             backoff=0, log=lambda s: None)
    msg = str(e.value)
    assert "no space left to write model.ckpt-28252.data-00000-of-00001" in msg and "\n" not in msg
    assert not (small / "model.ckpt-28252.data-00000-of-00001").exists()
    assert len(list(small.glob(".*.part"))) == 1  # what arrived is kept for the resume
  finally:
    subprocess.run(["umount", str(small)], check=True)


def test_relative_mirror_stays_relative_to_the_repository(server, tmp_path):
  repo = tmp_path / "repo"
  mirror = repo / "mirrors" / "inputs"
  mirror.mkdir(parents=True)
  (mirror / "bert_config.json").write_bytes(CONFIG)
  (mirror / "bert-input-files.md5").write_text(f"{hashlib.md5(CONFIG).hexdigest()}  ./bert_config.json\n")
  src = "mlcommons-r2:mirrors/inputs"
  d = tmp_path / "r2"
  r2.fetch_listing(src, d / "l.md5", d / "l.uri", root=repo, log=lambda s: None)
  assert d.joinpath("l.uri").read_text() == "mirrors/inputs\n"  # no absolute checkout path in the cache
  moved = tmp_path / "moved"
  repo.rename(moved)  # a moved checkout still finds its mirror
  out = tmp_path / "dl" / "bert_config.json"
  fetch(src, out, md5=None, listing=d / "l.md5", uri=d / "l.uri", root=moved, log=lambda s: None)
  assert out.read_bytes() == CONFIG


def test_a_listing_that_contradicts_itself_is_refused(server, tmp_path):
  a, b = "a" * 32, "b" * 32
  with pytest.raises(UserError, match=r"x.md5:2: 'bert_config.json' is listed twice with two md5s \(a+, b+\)"):
    r2.parse_md5_list(f"{a}  ./bert_config.json\n{b}  bert_config.json\n", "x.md5")
  assert r2.parse_md5_list(f"{a}  ./x\n{a}  ./x\n", "x.md5") == {"x": a}  # a repeated line says nothing new
  server.md5_override[("bert-input-files", "bert_config.json")] = hashlib.md5(CONFIG).hexdigest()
  server.datasets["bert-input-files"]["./bert_config.json"] = b"{}"  # the server lists the path twice
  server.md5_override[("bert-input-files", "./bert_config.json")] = "0" * 32
  with pytest.raises(UserError, match="listed twice with two md5s") as e:
    _listing(server, tmp_path)
  assert "\n" not in str(e.value)
  assert not (tmp_path / "r2").exists() or _files(tmp_path / "r2") == []  # no cached list
