"""Download stage: local paths, gdown and plain URLs against a real loopback HTTP server (no mocks), and the
checks made at download time (content by kind, sha256 sidecar, one-line errors for permissions and a full disk)."""
import errno, hashlib, http.server, io, json, os, subprocess, tarfile, threading
from pathlib import Path

import pytest

from mlperf_bert.data.download import fetch, resolve_source
from mlperf_bert.errors import UserError
from r2_server import basic_auth

PAYLOAD = bytes(range(256)) * 4096  # 1 MiB
PAYLOAD_MD5 = hashlib.md5(PAYLOAD).hexdigest()


class _Handler(http.server.BaseHTTPRequestHandler):
  requests: list[str] = []
  auth: tuple[str, str] | None = None  # the basic-auth login /uc?id=LOGINID wants

  def log_message(self, *a):  # keep pytest output clean
    pass

  def do_GET(self):
    type(self).requests.append(self.path)
    if self.path == "/uc?id=LOGINID" and self.headers.get("Authorization") != basic_auth(*(self.auth or ("", ""))):
      self.send_response(401)
      self.send_header("WWW-Authenticate", 'Basic realm="drive"')
      self.send_header("Content-Length", "0")
      self.end_headers()
      return
    if self.path == "/mirror/bad_config.json":
      body = b"this is not json"
      self.send_response(200)
      self.send_header("Content-Length", str(len(body)))
      self.end_headers()
      self.wfile.write(body)
    elif self.path in ("/uc?id=GOODID", "/uc?id=LOGINID", "/mirror/vocab.txt"):
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
  t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
  t.start()
  yield f"http://127.0.0.1:{srv.server_address[1]}"
  srv.shutdown()
  srv.server_close()


def _leftovers(d: Path):
  return sorted(p.name for p in d.iterdir())


def test_resolve_source_kinds(tmp_path):
  assert resolve_source("gdrive:abc") == ("gdrive", "https://drive.google.com/uc?id=abc")
  assert resolve_source("https://drive.google.com/uc?id=abc")[0] == "gdrive"
  assert resolve_source("https://x/y") == ("url", "https://x/y")
  assert resolve_source("mlcommons-r2:https://h/metadata/d.uri") == ("r2", "https://h/metadata/d.uri")
  assert resolve_source("https://h/metadata/d.uri") == ("r2", "https://h/metadata/d.uri")
  assert resolve_source("resources/demo/vocab.txt", root="/repo") == ("path", "/repo/resources/demo/vocab.txt")
  with pytest.raises(UserError, match="gdrive:<id>"):
    resolve_source("gdrive:")


def test_gdrive_id_through_gdown(server, tmp_path):
  out = tmp_path / "payload.bin"
  info = fetch("gdrive:GOODID", out, md5=PAYLOAD_MD5, gdrive_url=server + "/uc?id={id}", quiet=True, log=lambda s: None)
  assert out.read_bytes() == PAYLOAD
  assert info == {"source": "gdrive:GOODID", "md5": PAYLOAD_MD5, "sha256": hashlib.sha256(PAYLOAD).hexdigest(),
                  "bytes": len(PAYLOAD), "checked": None}
  assert "/uc?id=GOODID" in _Handler.requests
  assert _leftovers(tmp_path) == ["payload.bin"]


def test_url_mirror_with_resumable_http(server, tmp_path):
  out = tmp_path / "payload.bin"
  fetch(server + "/mirror/vocab.txt", out, md5=PAYLOAD_MD5, quiet=True, log=lambda s: None)
  assert out.read_bytes() == PAYLOAD
  assert _leftovers(tmp_path) == ["payload.bin"]


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
    fetch("gdrive:CUTID", out, md5=None, gdrive_url=server + "/uc?id={id}", quiet=True, log=lambda s: None, backoff=0)
  assert _leftovers(tmp_path) == []


def test_missing_file_and_http_error(server, tmp_path):
  with pytest.raises(UserError, match="does not exist"):
    fetch("no/such/file", tmp_path / "vocab.txt", md5=None, root=tmp_path, log=lambda s: None)
  with pytest.raises(UserError, match="not on the server \\(HTTP 404\\)"):
    fetch(server + "/nothing", tmp_path / "vocab.txt", md5=None, quiet=True, log=lambda s: None)
  assert _leftovers(tmp_path) == []


def test_local_path_relative_to_root(tmp_path):
  repo = Path(__file__).resolve().parents[2]
  out = tmp_path / "vocab.txt"
  fetch("resources/demo/vocab.txt", out, md5="64800d5d8528ce344256daf115d4965e", root=repo, log=lambda s: None)
  assert out.read_bytes() == (repo / "resources/demo/vocab.txt").read_bytes()


# ---- issue 11: what can be checked at download time is checked; sha256 recorded; one-line OS errors; no retries
#      of deterministic failures

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "resources" / "demo"


def test_invalid_bert_config_is_refused_at_download(server, tmp_path):
  out = tmp_path / "bert_config.json"
  with pytest.raises(UserError, match="bert_config.json: not valid JSON"):
    fetch(server + "/mirror/bad_config.json", out, md5=None, quiet=True, log=lambda s: None)
  assert _leftovers(tmp_path) == []
  assert _Handler.requests.count("/mirror/bad_config.json") == 1  # deterministic: fetched once, not retried
  src = tmp_path / "src.json"
  src.write_text(json.dumps({"hidden_size": 128}))
  with pytest.raises(UserError, match="without BERT's integer keys num_hidden_layers"):
    fetch(str(src), tmp_path / "out" / "bert_config.json", md5=None, log=lambda s: None)
  info = fetch(str(DEMO / "bert_config.json"), tmp_path / "ok" / "bert_config.json", md5=None, log=lambda s: None)
  assert info["checked"].startswith("JSON with BERT's keys")


def test_unparsable_manifest_and_damaged_tarball_are_refused(tmp_path):
  bad = tmp_path / "bad_manifest.txt"
  bad.write_text("<html><body>quota exceeded</body></html>\n")
  with pytest.raises(UserError, match="expected '<md5>  ./<file>'"):
    fetch(str(bad), tmp_path / "dl" / "bert_reference_results_text_md5.txt", md5=None, log=lambda s: None)
  data = bytearray((DEMO / "results_text.tar.gz").read_bytes())
  data[len(data) // 2] ^= 0xFF  # one flipped byte inside the deflate stream
  damaged = tmp_path / "damaged.tar.gz"
  damaged.write_bytes(bytes(data))
  with pytest.raises(UserError, match="results_text.tar.gz: the archive is corrupt or truncated"):
    fetch(str(damaged), tmp_path / "dl" / "results_text.tar.gz", md5=None, log=lambda s: None)
  truncated = tmp_path / "truncated.tar.gz"
  truncated.write_bytes(bytes(data[: len(data) // 3]))
  with pytest.raises(UserError, match="corrupt or truncated"):
    fetch(str(truncated), tmp_path / "dl" / "results_text.tar.gz", md5=None, log=lambda s: None)
  assert _leftovers(tmp_path / "dl") == []
  info = fetch(str(DEMO / "results_text.tar.gz"), tmp_path / "ok" / "results_text.tar.gz", md5=None, log=lambda s: None)
  assert info["checked"] == "archive of 9 members, gzip CRC intact"


def test_sha256_of_what_was_accepted_reaches_the_provenance(tmp_path):
  out = tmp_path / "download" / "vocab.txt"
  info = fetch(str(DEMO / "vocab.txt"), out, md5="64800d5d8528ce344256daf115d4965e", sidecar=True, log=lambda s: None)
  sha = hashlib.sha256((DEMO / "vocab.txt").read_bytes()).hexdigest()
  assert info["sha256"] == sha
  assert (tmp_path / "download" / "vocab.txt.sha256").read_text() == f"{sha}  vocab.txt\n"
  from mlperf_bert.audit.provenance import file_record
  rec = file_record(out, tmp_path)
  assert rec["accepted_sha256"] == sha == rec["sha256"]


def _mount_tmpfs(path: Path, opts: str) -> bool:
  path.mkdir(parents=True, exist_ok=True)
  r = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(path)], capture_output=True)
  return r.returncode == 0


def test_permission_denied_is_one_line(tmp_path):
  target_dir = tmp_path / "ro"
  if os.geteuid() != 0:
    target_dir.mkdir()
    target_dir.chmod(0o500)
    mounted = False
  elif _mount_tmpfs(target_dir, "ro,size=1m"):
    mounted = True
  else:
    pytest.skip("running as root without permission to mount a read-only tmpfs")
  try:
    with pytest.raises(UserError) as e:
      fetch(str(DEMO / "vocab.txt"), target_dir / "vocab.txt", md5=None, log=lambda s: None)
    msg = str(e.value)
    assert "cannot write vocab.txt" in msg and f"make {target_dir} writable" in msg and "\n" not in msg
  finally:
    if mounted:
      subprocess.run(["umount", str(target_dir)], check=True)
    else:
      target_dir.chmod(0o700)


def test_disk_full_is_one_line(tmp_path):
  small = tmp_path / "small"
  if not _mount_tmpfs(small, "size=256k"):
    pytest.skip("cannot mount a small tmpfs here (needs root)")
  try:
    with pytest.raises(UserError) as e:  # the demo tarball (~1 MB) does not fit in 256 kB
      fetch(str(DEMO / "results_text.tar.gz"), small / "results_text.tar.gz", md5=None, log=lambda s: None)
    msg = str(e.value)
    assert "no space left to write results_text.tar.gz" in msg and "free space" in msg and "\n" not in msg
    assert _leftovers(small) == []
  finally:
    subprocess.run(["umount", str(small)], check=True)


# ---- the hostile loopback server (tests/r2_server.py): a cut body leaves no .part; credentials never shown ----
@pytest.fixture
def r2():
  from r2_server import R2Server
  with R2Server() as s:
    s.datasets["ds"] = {"payload.bin": PAYLOAD}
    yield s


def test_a_body_over_its_bound_removes_the_part_an_earlier_attempt_kept(r2, tmp_path):
  from mlperf_bert.data.http import FetchPolicy
  out, url = tmp_path / "dl" / "payload.bin", f"{r2.url}/data/ds/payload.bin"
  r2.faults["payload.bin"], r2.drop_at["payload.bin"] = "drop", 300_000
  with pytest.raises(UserError, match="failed 1 times"):  # an honest cut: what arrived is kept for resuming
    fetch(url, out, md5=PAYLOAD_MD5, attempts=1, log=lambda s: None, quiet=True)
  assert [p.stat().st_size for p in out.parent.glob(".payload.bin.*.part")] == [300_000]
  for fault, bound, said in (("oversize", 2_000_000, "announces"), ("endless", 600_000, "sent more than")):
    if fault == "endless":  # the kept part again, then a body that never ends
      r2.faults["payload.bin"] = "drop"
      with pytest.raises(UserError, match="failed 1 times"):
        fetch(url, out, md5=PAYLOAD_MD5, attempts=1, log=lambda s: None, quiet=True)
      assert _leftovers(out.parent)
    r2.faults["payload.bin"] = fault
    with pytest.raises(UserError) as e:
      fetch(url, out, md5=PAYLOAD_MD5, attempts=1, policy=FetchPolicy(max_file_bytes=bound), log=lambda s: None,
            quiet=True)
    assert said in str(e.value) and "max_file_bytes" in str(e.value), e.value
    assert _leftovers(out.parent) == []  # neither the target nor any .part: a body cut at its bound is not the file


@pytest.mark.parametrize("written", ["s3@cret", "s3%40cret"])  # a raw '@' (was shown in part) and its escape
def test_a_urls_credentials_are_never_shown(r2, tmp_path, written, monkeypatch):
  """On the command line (`python -m mlperf_bert download --source URL`) a URL's login is used, and never shown."""
  monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))  # the URL's login, not one of this machine's
  r2.auth = ("alice", "s3@cret")  # requests sends the URL's password %-decoded
  port = r2.httpd.server_address[1]
  secret_url = f"http://alice:{written}@127.0.0.1:{port}/data/ds/payload.bin"
  said = []
  info = fetch(secret_url, tmp_path / "payload.bin", md5=PAYLOAD_MD5, log=said.append, quiet=True)
  assert info["source"] == f"http://***@127.0.0.1:{port}/data/ds/payload.bin"
  assert said and not any("cret" in s or "alice" in s for s in said), said
  for src in (f"http://alice:{written}@127.0.0.1:{port}/data/ds/missing.txt",  # HTTP 404
              f"mlcommons-r2:http://alice:{written}@127.0.0.1:{port}/metadata/nothere.uri"):  # no such dataset
    with pytest.raises(UserError) as e:
      fetch(src, tmp_path / "x" / "payload.bin", md5=None, attempts=1, log=said.append, quiet=True)
    msg = str(e.value)
    assert "cret" not in msg and "alice" not in msg and "***@127.0.0.1" in msg, msg
  assert not any("cret" in s for s in said)


def test_a_url_with_credentials_is_found_and_hidden_whole(tmp_path):
  from mlperf_bert.config import check_config_files, precheck_config_files
  from mlperf_bert.urls import redact, refuse_url_credentials, url_credentials
  for url in ("https://alice:p@ss@h.org/f?x=a@b", "https://alice:p%40ss@h.org/f?x=a@b", "https://TOKEN@h.org/f?x=a@b",
              "https://alice:s3 cret@h.org/f?x=a@b"):  # a space: the user-info as urllib3 reads it
    assert redact(f"got {url}, then") == "got https://***@h.org/f?x=a@b, then"
    assert url_credentials({"u": url}) == ["u"]
  # a '/' or '#' in it: no URL urllib3 parses, an '@' after scheme://: refused, hidden to the last '@'
  assert redact("got https://alice:s3/cr#et@h.org/f?x=a@b, then") == "got https://***@b, then"
  assert url_credentials({"u": "https://alice:s3/cr#et@h.org/f"}) == ["u"]
  assert redact("mlcommons-r2:http://u:p@ss@127.0.0.1:8/m/d.uri") == "mlcommons-r2:http://***@127.0.0.1:8/m/d.uri"
  cfg = {"sources": {"vocab.txt": {"url": "https://h.org/pkg@1/vocab.txt"}, "results4": {"url": "/mnt/a@b"},
                     "bert_config.json": {"url": "mlcommons-r2:https://u:p@ss@h.org/m/d.uri"}},
         "tinygrad_source": {"git": "ssh://git@github.com/tinygrad/tinygrad.git"}, "x": ["https://u@h.org/"]}
  assert url_credentials(cfg) == ["sources.bert_config.json.url", "x[0]"]  # ssh's user alone is no secret
  with pytest.raises(UserError) as e:
    refuse_url_credentials(cfg, "mirror.yaml")
  msg = str(e.value)
  assert msg.startswith("mirror.yaml: sources.bert_config.json.url, x[0] give a URL with a user name or password")
  assert "~/.netrc" in msg and "NETRC" in msg and "ss@" not in msg and "\n" not in msg
  bad = tmp_path / "mirror.yaml"
  bad.write_text('sources:\n  vocab.txt: {url: "https://alice:s3%40cret@h.org/vocab.txt", md5: null}\n')
  for check in (lambda: precheck_config_files(REPO / "config.yaml", bad), lambda: check_config_files([bad], REPO / "config.yaml")):
    with pytest.raises(UserError, match=f"^{bad}: sources.vocab.txt.url gives a URL with a user name") as e:
      check()
    assert "cret" not in str(e.value)


def test_a_netrc_open_to_others_is_named_with_the_fix(r2, tmp_path, monkeypatch):
  """A download that sends a login from the netrc file (NETRC, or ~/.netrc) says in one line when its group or
  others may read it, naming the file and `chmod 600`; an owner-only file, or one without the host, says nothing."""
  r2.auth = ("alice", "s3cret")
  netrc = tmp_path / "netrc"
  netrc.write_text("machine 127.0.0.1 login alice password s3cret\n")
  monkeypatch.setenv("NETRC", str(netrc))
  url = f"{r2.url}/data/ds/payload.bin"
  for mode, warned in ((0o644, True), (0o640, True), (0o600, False)):
    netrc.chmod(mode)
    said = []
    fetch(url, tmp_path / f"{mode:o}" / "payload.bin", md5=PAYLOAD_MD5, log=said.append, quiet=True)
    lines = [s for s in said if s.startswith("warning")]
    assert lines == ([f"warning: {netrc}, whose login for 127.0.0.1 this download sends, is open to "
                      f"{'others' if mode & 0o004 else 'its group'} (mode {mode:04o}): anyone who can read it has the "
                      f"password; chmod 600 {netrc}"] if warned else []), said
    assert not any("s3cret" in s for s in said)
  from mlperf_bert.urls import netrc_warning
  netrc.chmod(0o644)
  assert netrc_warning("http://example.org/x", str(netrc)) is None   # no login of that host in it: not sent


@pytest.mark.parametrize("password", ["p@ss:w0rd", "p%40ss"])  # netrc holds a password as it is: '@', '%40' too
def test_a_login_comes_from_netrc(r2, server, tmp_path, password, monkeypatch):
  """A server that wants a login gets it from the file NETRC names (or ~/.netrc), read by requests per host: an R2
  dataset's .uri, md5 list and files, a plain URL, gdown; without it, one line saying where the login goes."""
  r2.auth = ("alice", password)
  monkeypatch.setattr(_Handler, "auth", r2.auth)
  netrc = tmp_path / "netrc"
  netrc.write_text(f"machine 127.0.0.1 login alice password {password}\n")
  netrc.chmod(0o600)
  monkeypatch.setenv("NETRC", str(tmp_path / "absent"))
  said = []
  with pytest.raises(UserError) as e:
    fetch("mlcommons-r2:" + r2.uri("ds"), tmp_path / "a" / "payload.bin", md5=None, log=said.append, quiet=True)
  assert "HTTP 401: the server wants a login" in str(e.value) and "machine 127.0.0.1 login USER" in str(e.value)
  monkeypatch.setenv("NETRC", str(netrc))
  for source in ("mlcommons-r2:" + r2.uri("ds"), f"{r2.url}/data/ds/payload.bin", "gdrive:LOGINID"):
    out = tmp_path / source[:5] / "payload.bin"
    info = fetch(source, out, md5=PAYLOAD_MD5, gdrive_url=server + "/uc?id={id}", log=said.append, quiet=True)
    assert out.read_bytes() == PAYLOAD and "@" not in info["source"]
  assert not any(password in s for s in said)
