"""Download stage: local paths, and gdown against a real loopback HTTP server (no mocks)."""
import hashlib, http.server, threading
from pathlib import Path

import pytest

from mlperf_bert.data.download import fetch, resolve_source
from mlperf_bert.errors import UserError

PAYLOAD = bytes(range(256)) * 4096  # 1 MiB
PAYLOAD_MD5 = hashlib.md5(PAYLOAD).hexdigest()


class _Handler(http.server.BaseHTTPRequestHandler):
  requests: list[str] = []

  def log_message(self, *a):  # keep pytest output clean
    pass

  def do_GET(self):
    type(self).requests.append(self.path)
    if self.path == "/uc?id=GOODID" or self.path == "/mirror/vocab.txt":
      self.send_response(200)
      self.send_header("Content-Type", "application/octet-stream")
      self.send_header("Content-Length", str(len(PAYLOAD)))
      self.end_headers()
      self.wfile.write(PAYLOAD)
    elif self.path == "/uc?id=CUTID":  # promises the whole file, sends half, hangs up
      self.send_response(200)
      self.send_header("Content-Type", "application/octet-stream")
      self.send_header("Content-Length", str(len(PAYLOAD)))
      self.end_headers()
      self.wfile.write(PAYLOAD[: len(PAYLOAD) // 2])
      self.wfile.flush()
      self.close_connection = True
    else:
      self.send_error(404)


@pytest.fixture(scope="module")
def server():
  srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
  t = threading.Thread(target=srv.serve_forever, daemon=True)
  t.start()
  yield f"http://127.0.0.1:{srv.server_address[1]}"
  srv.shutdown()
  srv.server_close()


def _leftovers(d: Path):
  return sorted(p.name for p in d.iterdir())


def test_resolve_source_kinds(tmp_path):
  assert resolve_source("gdrive:abc") == ("url", "https://drive.google.com/uc?id=abc")
  assert resolve_source("https://x/y") == ("url", "https://x/y")
  assert resolve_source("resources/demo/vocab.txt", root="/repo") == ("path", "/repo/resources/demo/vocab.txt")
  with pytest.raises(UserError, match="gdrive:<id>"):
    resolve_source("gdrive:")


def test_gdrive_id_through_gdown(server, tmp_path):
  out = tmp_path / "vocab.txt"
  info = fetch("gdrive:GOODID", out, md5=PAYLOAD_MD5, gdrive_url=server + "/uc?id={id}", quiet=True, log=lambda s: None)
  assert out.read_bytes() == PAYLOAD
  assert info == {"source": "gdrive:GOODID", "md5": PAYLOAD_MD5, "bytes": len(PAYLOAD)}
  assert "/uc?id=GOODID" in _Handler.requests
  assert _leftovers(tmp_path) == ["vocab.txt"]


def test_url_mirror_through_gdown(server, tmp_path):
  out = tmp_path / "vocab.txt"
  fetch(server + "/mirror/vocab.txt", out, md5=PAYLOAD_MD5, quiet=True, log=lambda s: None)
  assert out.read_bytes() == PAYLOAD


def test_md5_mismatch_leaves_no_target(server, tmp_path):
  out = tmp_path / "bert_config.json"
  with pytest.raises(UserError) as e:
    fetch("gdrive:GOODID", out, md5="0" * 32, gdrive_url=server + "/uc?id={id}", quiet=True, log=lambda s: None)
  msg = str(e.value)
  assert "bert_config.json" in msg and "expected " + "0" * 32 in msg and PAYLOAD_MD5 in msg
  assert _leftovers(tmp_path) == []


def test_interrupted_download_leaves_no_target(server, tmp_path):
  out = tmp_path / "results_text.tar.gz"
  with pytest.raises(UserError, match="results_text.tar.gz"):
    fetch("gdrive:CUTID", out, md5=None, gdrive_url=server + "/uc?id={id}", quiet=True, log=lambda s: None)
  assert _leftovers(tmp_path) == []


def test_missing_file_and_http_error(server, tmp_path):
  with pytest.raises(UserError, match="does not exist"):
    fetch("no/such/file", tmp_path / "vocab.txt", md5=None, root=tmp_path, log=lambda s: None)
  with pytest.raises(UserError, match="download from .* failed"):
    fetch(server + "/nothing", tmp_path / "vocab.txt", md5=None, quiet=True, log=lambda s: None)
  assert _leftovers(tmp_path) == []


def test_local_path_relative_to_root(tmp_path):
  repo = Path(__file__).resolve().parents[2]
  out = tmp_path / "vocab.txt"
  fetch("resources/demo/vocab.txt", out, md5="64800d5d8528ce344256daf115d4965e", root=repo, log=lambda s: None)
  assert out.read_bytes() == (repo / "resources/demo/vocab.txt").read_bytes()
