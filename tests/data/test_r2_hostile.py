"""Downloads against a hostile loopback server (tests/r2_server.py): endless, trickling, stalling and oversized
bodies end within their bounds in one line and leave nothing behind; the MLCommons token never reaches another
origin, nor plain http. Each command-line download runs in a subprocess bounded by `ulimit -f`, an address-space
limit and a timeout, so that a regression fails the test instead of filling the disk or the memory."""
import hashlib, json, os, resource, signal, subprocess, sys, time
from pathlib import Path

import pytest

from mlperf_bert.data import r2
from mlperf_bert.data.download import fetch
from mlperf_bert.data.http import TOKEN_ENV, TOKEN_HEADER, FetchPolicy
from r2_server import R2Server

CONFIG = b'{"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16, "intermediate_size": 4096, ' \
         b'"vocab_size": 30522, "max_position_embeddings": 512, "type_vocab_size": 2}'
FILE_LIMIT = 32 << 20  # ulimit -f of the subprocess: far above every bound a test sets, far below a full disk


@pytest.fixture
def server():
  with R2Server() as s:
    s.datasets["bert-input-files"] = {"bert_config.json": CONFIG}
    yield s


def _limits():
  resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))
  resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))


# the package's fetch with the given bounds, reporting as the CLI does (the CLI itself takes ~3 s to import)
DRIVER = """import json, sys
from mlperf_bert.data.download import fetch
from mlperf_bert.data.http import FetchPolicy
from mlperf_bert.errors import UserError
source, out, bounds = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
try:
  fetch(source, out, md5=None, path="bert_config.json", attempts=1, policy=FetchPolicy(**bounds), quiet=True)
except UserError as e:
  print(f"error: {e}", file=sys.stderr); sys.exit(2)
"""


def _download(server, out: Path, *, cli: list[str] | None = None, timeout: float = 30, **bounds):
  """bert_config.json through `python -m mlperf_bert download` (`cli`: its flags) or the package's fetch with
  FetchPolicy(**bounds), bounded; (stderr's error lines, seconds, result)."""
  source = "mlcommons-r2:" + server.uri("bert-input-files")
  cmd = ([sys.executable, "-m", "mlperf_bert", "download", "--source", source, "--path", "bert_config.json",
          "--output", str(out), "--attempts", "1", *cli] if cli is not None else
         [sys.executable, "-c", DRIVER, source, str(out), json.dumps(bounds)])
  t = time.monotonic()
  try:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, preexec_fn=_limits)
  except subprocess.TimeoutExpired:
    pytest.fail(f"the download ran past {timeout} s: it has no deadline")
  errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
  assert "Traceback" not in r.stderr, r.stderr[-2000:]
  return errors, time.monotonic() - t, r


def _left(d: Path):
  return sorted(p.name for p in d.iterdir()) if d.exists() else []


def test_an_endless_listing_is_cut_at_its_bound(server, tmp_path):
  server.faults["bert-input-files.md5"] = "endless"
  out = tmp_path / "dl" / "bert_config.json"
  errors, took, r = _download(server, out, cli=["--deadline", "20"])
  assert r.returncode == 2 and len(errors) == 1, r.stderr[-2000:]
  assert f"sends more than {FetchPolicy.listing_max_bytes:,} bytes" in errors[0] and "md5 list" in errors[0]
  assert _left(out.parent) == []  # no scratch folder, no target


def test_a_trickling_listing_ends_at_its_deadline(server, tmp_path):
  server.faults["bert-input-files.md5"] = "trickle"
  out = tmp_path / "dl" / "bert_config.json"
  errors, took, r = _download(server, out, listing_deadline_s=2, stall_s=1)
  assert r.returncode == 2 and len(errors) == 1, r.stderr[-2000:]
  assert "did not finish within 2 s" in errors[0] and "md5 list" in errors[0] and "not answering properly" in errors[0]
  assert took < 10 and _left(out.parent) == []


def test_a_server_trickling_its_headers_ends_at_the_deadline(server, tmp_path):
  server.faults["bert-input-files.uri"] = "slowheaders"
  out = tmp_path / "dl" / "bert_config.json"
  errors, took, r = _download(server, out, listing_deadline_s=2, stall_s=1)
  assert r.returncode == 2 and len(errors) == 1, r.stderr[-2000:]
  assert "(.uri)" in errors[0] and "did not finish within 2 s" in errors[0]
  assert took < 10 and _left(out.parent) == []


def test_a_killed_listing_leaves_nothing_for_the_next_run(server, tmp_path):
  server.faults["bert-input-files.md5"] = "trickle"
  out = tmp_path / "dl" / "bert_config.json"
  cmd = [sys.executable, "-c", DRIVER, "mlcommons-r2:" + server.uri("bert-input-files"), str(out), "{}"]
  p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=_limits)
  deadline = time.monotonic() + 15
  while time.monotonic() < deadline and not server.requests:
    time.sleep(0.1)
  time.sleep(0.5)
  os.kill(p.pid, signal.SIGKILL)
  p.wait(timeout=10)
  assert _left(out.parent)  # the killed download's scratch folder is still there
  del server.faults["bert-input-files.md5"]
  errors, _, r = _download(server, out)
  assert r.returncode == 0, r.stderr[-2000:]
  assert _left(out.parent) == ["bert_config.json"]  # the good run removed the dead one's scratch folder


def test_an_endless_file_is_cut_at_max_bytes_and_removed(server, tmp_path):
  server.faults["bert_config.json"] = "endless"
  out = tmp_path / "dl" / "bert_config.json"
  errors, took, r = _download(server, out, max_file_bytes=2_000_000)
  assert r.returncode == 2 and len(errors) == 1, r.stderr[-2000:]
  assert "sent more than the 2,000,000 bytes allowed" in errors[0] and "max_file_bytes" in errors[0]
  assert _left(out.parent) == []  # neither the target nor the .part of a body that is not the file


def test_an_oversized_announced_file_is_refused_before_a_byte_is_written(server, tmp_path):
  server.faults["bert_config.json"] = "oversize"
  out = tmp_path / "dl" / "bert_config.json"
  errors, took, r = _download(server, out, cli=["--max-bytes", "2000000"])
  assert r.returncode == 2 and len(errors) == 1, r.stderr[-2000:]
  assert f"announces {1 << 40:,} bytes, more than the 2,000,000 allowed" in errors[0]
  assert _left(out.parent) == []


def test_a_trickling_file_ends_at_its_deadline_and_keeps_what_arrived(server, tmp_path):
  server.faults["bert_config.json"] = "trickle"
  out = tmp_path / "dl" / "bert_config.json"
  errors, took, r = _download(server, out, deadline_s=3, stall_s=1)
  assert r.returncode == 2 and len(errors) == 1, r.stderr[-2000:]
  assert "did not finish within 3 s (what arrived is kept); rerun to resume it" in errors[0]
  assert took < 12 and not out.exists()
  assert len(list(out.parent.glob(".bert_config.json.*.part"))) == 1


def test_a_stalled_file_is_a_network_error_after_the_stall_timeout(server, tmp_path):
  server.faults["bert_config.json"] = "trickle"
  server.trickle_s = 5  # one byte, then silence longer than the stall timeout
  out = tmp_path / "dl" / "bert_config.json"
  errors, took, r = _download(server, out, stall_s=1)
  assert r.returncode == 2 and len(errors) == 1, r.stderr[-2000:]
  assert "failed 1 times" in errors[0] and "timed out" in errors[0].lower()
  assert took < 12 and not out.exists()


# ---- the token


@pytest.fixture
def two_origins(monkeypatch):
  """The token's origin (a loopback server the policy lets receive it) and another origin on another port."""
  monkeypatch.setenv(TOKEN_ENV, "SECRET-TOKEN")
  with R2Server() as ours, R2Server() as other:
    for s in (ours, other):
      s.datasets["bert-input-files"] = {"bert_config.json": CONFIG}
    yield ours, other, FetchPolicy(token_loopback_port=int(ours.url.rsplit(":", 1)[1]))


def _tokens(server):
  return [h.get(TOKEN_HEADER) for _, h in server.requests]


def test_a_redirect_to_another_origin_does_not_carry_the_token(two_origins, tmp_path):
  ours, other, policy = two_origins
  ours.faults["bert_config.json"] = "redirect"
  ours.redirect_to["bert_config.json"] = f"{other.url}/data/bert-input-files/bert_config.json"
  out = tmp_path / "dl" / "bert_config.json"
  fetch(f"{ours.url}/data/bert-input-files/bert_config.json", out, md5=hashlib.md5(CONFIG).hexdigest(),
        policy=policy, quiet=True, log=lambda s: None)
  assert out.read_bytes() == CONFIG
  assert _tokens(ours) == ["SECRET-TOKEN"]  # the origin it is for gets it
  assert _tokens(other) == [None]  # the redirect's target never does


def test_a_uri_naming_another_origin_does_not_get_the_token(two_origins, tmp_path):
  ours, other, policy = two_origins
  ours.base["bert-input-files"] = f"{other.url}/data/bert-input-files"
  d = tmp_path / "r2"
  r2.fetch_listing("mlcommons-r2:" + ours.uri("bert-input-files"), d / "l.md5", d / "l.uri", policy=policy,
                   backoff=0, log=lambda s: None)
  out = tmp_path / "dl" / "bert_config.json"
  r2.fetch_member(d / "l.md5", d / "l.uri", "bert_config.json", out, dataset="bert-input-files", policy=policy,
                  progress=False, log=lambda s: None)
  assert out.read_bytes() == CONFIG
  assert _tokens(ours) == ["SECRET-TOKEN", "SECRET-TOKEN"]  # its .uri and its md5 list
  assert _tokens(other) == [None]


def test_the_token_never_goes_over_plain_http_by_default(two_origins, tmp_path):
  ours, _, _ = two_origins
  d = tmp_path / "r2"
  r2.fetch_listing("mlcommons-r2:" + ours.uri("bert-input-files"), d / "l.md5", d / "l.uri", backoff=0,
                   log=lambda s: None)
  r2.fetch_member(d / "l.md5", d / "l.uri", "bert_config.json", tmp_path / "dl" / "bert_config.json",
                  dataset="bert-input-files", progress=False, log=lambda s: None)
  assert len(ours.requests) == 3 and _tokens(ours) == [None, None, None]
  from mlperf_bert.data.http import token_headers
  assert token_headers("https://training.mlcommons-storage.org/metadata/x.uri", FetchPolicy()) == \
    {TOKEN_HEADER: "SECRET-TOKEN"}
  for url in ("http://training.mlcommons-storage.org/x", "https://mlcommons-storage.org.evil.com/x",
              "https://evilmlcommons-storage.org/x", "https://127.0.0.1/x"):
    assert token_headers(url, FetchPolicy()) == {}, url
