"""Extraction refuses unsafe archives; verification names file, expected and actual digests."""
import gzip, hashlib, io, tarfile
from pathlib import Path

import pytest

from mlperf_bert.errors import UserError
from mlperf_bert.data.extract import extract_results, parse_manifest, topics
from mlperf_bert.data.verify import verify_eval_articles, verify_file

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "resources" / "demo"
MANIFEST = DEMO / "bert_reference_results_text_md5.txt"


def _tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]):
  with tarfile.open(path, "w:gz") as tf:
    for info, data in members:
      tf.addfile(info, io.BytesIO(data) if data is not None else None)


def _file(name: str, data: bytes):
  info = tarfile.TarInfo(name)
  info.size = len(data)
  return info, data


def _manifest(tmp: Path, files: dict[str, bytes]) -> Path:
  m = tmp / "manifest.txt"
  m.write_text("".join(f"{hashlib.md5(d).hexdigest()}  ./{n}\n" for n, d in files.items()))
  return m


def _nothing_left(tmp: Path, keep: set[str]):
  assert sorted(p.name for p in tmp.iterdir() if p.name not in keep) == []


def test_demo_archive_extracts_and_verifies(tmp_path):
  names = extract_results(DEMO / "results_text.tar.gz", MANIFEST, tmp_path / "results4", log=lambda s: None)
  assert sorted(names) == sorted(parse_manifest(MANIFEST))
  assert topics(MANIFEST) == [f"part-{i:05d}-of-00008" for i in range(8)]
  for n in names:
    verify_file(tmp_path / "results4" / n, MANIFEST, stamp=tmp_path / "ok" / f"{n}.ok", log=lambda s: None)
  assert (tmp_path / "ok" / "eval.txt.ok").read_text().startswith("18485f7a46d1e5a4147ecbc212f8ec20")
  assert verify_eval_articles(tmp_path / "results4" / "eval.txt", DEMO / "eval.md5", log=lambda s: None) == 12
  assert (DEMO / "results_text.tar.gz").exists()  # the tarball is kept


@pytest.mark.parametrize("kind", ["dotdot", "absolute", "symlink", "hardlink", "device", "outside"])
def test_unsafe_members_are_refused(tmp_path, kind):
  good = _file("results4/part-00000-of-00001", b"a b c\n")
  bad = {
    "dotdot": _file("results4/../x", b"evil"),
    "absolute": _file("/tmp/evil", b"evil"),
    "outside": _file("etc/passwd", b"evil"),
  }.get(kind)
  if kind in ("symlink", "hardlink"):
    info = tarfile.TarInfo("results4/link")
    info.type = tarfile.SYMTYPE if kind == "symlink" else tarfile.LNKTYPE
    info.linkname = "/etc/passwd"
    bad = (info, None)
  if kind == "device":
    info = tarfile.TarInfo("results4/dev")
    info.type = tarfile.CHRTYPE
    info.devmajor, info.devminor = 1, 3
    bad = (info, None)
  tarball = tmp_path / "results_text.tar.gz"
  _tar(tarball, [good, bad])
  manifest = _manifest(tmp_path, {"part-00000-of-00001": b"a b c\n"})
  with pytest.raises(UserError) as e:
    extract_results(tarball, manifest, tmp_path / "results4", log=lambda s: None)
  msg = str(e.value)
  assert str(tarball) in msg and repr(bad[0].name) in msg and "download" in msg.lower()
  _nothing_left(tmp_path, {"results_text.tar.gz", "manifest.txt"})


def test_corrupt_and_truncated_archives(tmp_path):
  manifest = _manifest(tmp_path, {"part-00000-of-00001": b"x"})
  corrupt = tmp_path / "corrupt.tar.gz"
  corrupt.write_bytes(b"\x1f\x8b\x08\x00" + bytes(range(256)) * 8)
  whole = (DEMO / "results_text.tar.gz").read_bytes()
  truncated = tmp_path / "truncated.tar.gz"
  truncated.write_bytes(whole[: len(whole) // 2])
  for tarball in (corrupt, truncated):
    with pytest.raises(UserError, match="corrupt or truncated") as e:
      extract_results(tarball, manifest, tmp_path / "results4", log=lambda s: None)
    assert str(tarball) in str(e.value)
  _nothing_left(tmp_path, {"corrupt.tar.gz", "truncated.tar.gz", "manifest.txt"})


def test_archive_missing_a_manifest_file(tmp_path):
  tarball = tmp_path / "results_text.tar.gz"
  _tar(tarball, [_file("results4/part-00000-of-00002", b"x")])
  manifest = _manifest(tmp_path, {"part-00000-of-00002": b"x", "part-00001-of-00002": b"y"})
  with pytest.raises(UserError, match="not in the archive"):
    extract_results(tarball, manifest, tmp_path / "results4", log=lambda s: None)
  assert not (tmp_path / "results4").exists()


def test_md5_mismatch_names_file_expected_actual(tmp_path):
  f = tmp_path / "part-00000-of-00001"
  f.write_bytes(b"changed\n")
  manifest = _manifest(tmp_path, {"part-00000-of-00001": b"original\n"})
  with pytest.raises(UserError) as e:
    verify_file(f, manifest, stamp=tmp_path / "part.ok", log=lambda s: None)
  msg = str(e.value)
  assert str(f) in msg and hashlib.md5(b"original\n").hexdigest() in msg and hashlib.md5(b"changed\n").hexdigest() in msg
  assert not (tmp_path / "part.ok").exists()


def test_malformed_manifest(tmp_path):
  m = tmp_path / "m.txt"
  m.write_text("nonsense line here\n")
  with pytest.raises(UserError, match=r"m.txt:1: expected"):
    parse_manifest(m)


def test_eval_article_mismatch_names_the_article(tmp_path):
  text = extract_results(DEMO / "results_text.tar.gz", MANIFEST, tmp_path / "r4", log=lambda s: None)
  eval_txt = tmp_path / "r4" / "eval.txt"
  arts = eval_txt.read_text().split("\n\n")
  arts[3] = arts[3].replace(" the ", " teh ", 1)
  eval_txt.write_text("\n\n".join(arts))
  with pytest.raises(UserError, match=r"article 4 .*expects"):
    verify_eval_articles(eval_txt, DEMO / "eval.md5", log=lambda s: None)


def test_official_eval_md5_is_shipped():
  lines = (REPO / "resources" / "mlperf" / "eval.md5").read_text().split()
  assert len(lines) == 10000 and all(len(h) == 32 for h in lines)
  assert hashlib.md5((REPO / "resources" / "mlperf" / "eval.md5").read_bytes()).hexdigest() == "71a58382a68947e93e88aa0d42431b6c"


def test_cli_extract_verify_and_exit_codes(tmp_path):
  import subprocess, sys
  def run(*args):
    return subprocess.run([sys.executable, "-m", "mlperf_bert", *args], capture_output=True, text=True, cwd=REPO)
  r = run("extract", "--tarball", str(DEMO / "results_text.tar.gz"), "--manifest", str(MANIFEST),
          "--output", str(tmp_path / "results4"))
  assert r.returncode == 0, r.stderr
  r = run("verify", str(tmp_path / "results4" / "part-00003-of-00008"), "--manifest", str(MANIFEST))
  assert r.returncode == 0 and "matches the manifest" in r.stdout
  r = run("verify-eval", str(tmp_path / "results4" / "eval.txt"), "--eval-md5", str(DEMO / "eval.md5"))
  assert r.returncode == 0 and "all 12 articles" in r.stdout
  (tmp_path / "results4" / "part-00003-of-00008").write_text("edited\n")
  r = run("verify", str(tmp_path / "results4" / "part-00003-of-00008"), "--manifest", str(MANIFEST))
  assert r.returncode == 2 and "MD5 mismatch" in r.stderr
