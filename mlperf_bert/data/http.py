"""HTTP GET with bounds: a small text body (a .uri, an md5 list) and a resumable file download.

Every fetch has an overall deadline (all its attempts together), a stall timeout (no byte for that long is a
network error, retried) and a size bound: a listing's is small; a file's is the size the server announces
(Content-Length, Content-Range) or `FetchPolicy.max_file_bytes` when it announces none. A body over its bound is
refused at once and what arrived of it removed, with any `.part` an earlier attempt kept (a body cut at its bound is
not resumable data); a deadline keeps the `.part` of an honest download, and the next run resumes it. No message,
log line or record shows a URL's `user:password@` (mlperf_bert/urls.py `redact`). Redirects are followed by hand, hop
by hop, so that the MLCommons token (`MLC_R2_TOKEN`) goes only to https URLs of MLCommons' storage and never to a host
a redirect or a `.uri` names (requests forwards custom headers across origins). A login (HTTP basic auth) comes from
~/.netrc or the file NETRC names: requests reads it for each request, per host, so each hop gets its own host's entry;
a fetch that sends a login from a netrc file its group or others may read says so in one line (`warn_loose_netrc`).
"""
from __future__ import annotations
import contextlib, hashlib, os, re, signal, threading, time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable
from urllib.parse import urljoin, urlsplit

from mlperf_bert.errors import UserError
from mlperf_bert.urls import NETRC_FIX, netrc_warning, redact

TOKEN_ENV = "MLC_R2_TOKEN"       # a Cloudflare Access token for restricted datasets (sent as cf-access-token)
TOKEN_HEADER = "cf-access-token"
TOKEN_DOMAIN = "mlcommons-storage.org"
CHUNK = 1 << 20
NET_CHUNK = 1 << 16  # a dropped connection loses at most this much of what arrived
REDIRECTS = (301, 302, 303, 307, 308)
SLOW_FILE = "rerun to resume it, or raise download.deadline_s in the config for a slow link"
SLOW_LIST = "a dataset's list is a few kB, so the server is not answering properly: check the source URL and rerun"
MAX_REDIRECTS = 10


@dataclass(frozen=True)
class Deadline:
  """When a fetch must be done, all its attempts and waits together (`at`: time.monotonic()'s clock), the limit it
  was given and the hint of the one-line error a late fetch raises. Made by FetchPolicy (file_deadline,
  listing_deadline) when the fetch starts."""
  at: float
  limit_s: float
  hint: str

  @classmethod
  def after(cls, limit_s: float, hint: str) -> "Deadline":
    return cls(time.monotonic() + limit_s, limit_s, hint)

  def left_s(self) -> float:
    return self.at - time.monotonic()

  def late(self, what: str, url: str, detail: str = "") -> UserError:
    return UserError(f"{what}: {redact(url)} did not finish within {self.limit_s:g} s{detail}; {self.hint}")

  def check(self, what: str, url: str, detail: str = "") -> None:
    if time.monotonic() > self.at:
      raise self.late(what, url, detail)


@dataclass(frozen=True)
class FetchPolicy:
  """The bounds of a fetch (config.yaml `download:` sets the first three) and where the token may go."""
  deadline_s: float = 12 * 3600         # one file, all its attempts and waits together
  stall_s: float = 60.0                 # no byte for this long: a network error (retried)
  max_file_bytes: int = 16 << 30        # a file whose size the server does not announce (MLPerf's largest: ~5 GB)
  listing_deadline_s: float = 120.0     # a .uri or an md5 list
  listing_max_bytes: int = 4 << 20      # MLPerf's lists are a few kB
  token_domain: str = TOKEN_DOMAIN      # the token goes to https://<this domain or a subdomain of it> only
  token_loopback_port: int | None = None  # tests: a server on http://127.0.0.1:<this port> may receive it too

  @classmethod
  def bounded(cls, deadline_s: float | None = None, stall_s: float | None = None,
              max_file_bytes: int | None = None) -> "FetchPolicy":
    """The policy of config.yaml's `download:` bounds or the download command's options (None: the default); a
    listing's deadline never exceeds a file's."""
    deadline = cls.deadline_s if deadline_s is None else deadline_s
    return cls(deadline_s=deadline, stall_s=cls.stall_s if stall_s is None else stall_s,
               max_file_bytes=cls.max_file_bytes if max_file_bytes is None else max_file_bytes,
               listing_deadline_s=min(deadline, cls.listing_deadline_s))

  def file_deadline(self) -> Deadline:
    """The deadline of a file fetch starting now (deadline_s)."""
    return Deadline.after(self.deadline_s, SLOW_FILE)

  def listing_deadline(self) -> Deadline:
    """The deadline of a listing fetch (a .uri, an md5 list) starting now (listing_deadline_s)."""
    return Deadline.after(self.listing_deadline_s, SLOW_LIST)


class NetworkError(Exception):
  """A failure that can succeed when tried again (connection reset, stall, short body, HTTP 5xx/429)."""


def token_headers(url: str, policy: FetchPolicy) -> dict[str, str]:
  """{cf-access-token: ...} when MLC_R2_TOKEN is set and `url` is the origin it is for; else {}."""
  token = os.environ.get(TOKEN_ENV)
  if not token:
    return {}
  u = urlsplit(url)
  host = (u.hostname or "").lower()
  ours = u.scheme == "https" and (host == policy.token_domain or host.endswith("." + policy.token_domain))
  test = (policy.token_loopback_port is not None and u.scheme == "http" and host == "127.0.0.1"
          and u.port == policy.token_loopback_port)
  return {TOKEN_HEADER: token} if ours or test else {}


def warn_loose_netrc(url: str, log: Callable[[str], None]) -> None:
  """The one-line warning of mlperf_bert/urls.py `netrc_warning` for the netrc file requests reads for `url`, if any."""
  said = netrc_warning(url, os.environ.get("NETRC"))
  if said: log(said)


def _session():
  import requests
  s = requests.Session()
  s.headers["User-Agent"] = "mlperf-bert (python-requests)"
  s.headers["Accept-Encoding"] = "identity"  # byte ranges and lengths of the file itself, never of a compressed body
  return s


def _open(s, url: str, *, headers: dict, follow: bool, policy: FetchPolicy, deadline: Deadline, what: str):
  """GET `url` streaming; redirects followed hop by hop when `follow`, each hop given only its own credentials."""
  for _ in range(MAX_REDIRECTS + 1):
    deadline.check(what, url)
    r = s.get(url, headers={**headers, **token_headers(url, policy)}, stream=True, allow_redirects=False,
              timeout=(policy.stall_s, policy.stall_s))
    if not follow or r.status_code not in REDIRECTS or not r.headers.get("Location"):
      return r
    r.close()
    url = urljoin(url, r.headers["Location"])
  raise UserError(f"{what}: more than {MAX_REDIRECTS} redirects from {redact(url)}; check the source URL in the config")


def _blocks(r, *, limit: int, deadline: Deadline, what: str, url: str, kept: str = ""):
  """The body as it arrives (read1: whatever came, so a trickle still meets the deadline), at most `limit` bytes."""
  got = 0
  while True:
    deadline.check(what, url, kept)
    b = r.raw.read1(NET_CHUNK, decode_content=True)
    if not b:
      return
    got += len(b)
    if got > limit:
      raise _TooLarge(got)
    yield b


class _TooLarge(Exception):
  pass


def _looks_html(head: bytes, content_type: str | None) -> bool:
  if content_type and "text/html" in content_type.lower():
    return True
  h = head[:64].lstrip().lower()
  return h.startswith((b"<!doctype html", b"<html", b"<head"))


def _http_error(status: int, url: str, what: str, headers) -> UserError:
  if status == 401 and "basic" in headers.get("WWW-Authenticate", "").lower():
    host = urlsplit(url).hostname
    return UserError(f"{what}: {redact(url)} answered HTTP 401: the server wants a login (a user and password for "
                     f"{host}, or a wrong one was given): {NETRC_FIX.replace('HOST', str(host))}, then rerun")
  if status in REDIRECTS + (401, 403):
    where = headers.get("Location", "") if status < 400 else ""
    return UserError(
      f"{what}: {redact(url)} answered HTTP {status}{' to ' + redact(where) if where else ''}: the storage wants a Cloudflare Access "
      f"login for it. Log in with MLCommons' r2-downloader (bash mlc-r2-downloader.sh -d DIR <the .uri URL>) and point "
      f"the source at mlcommons-r2:DIR, or set {TOKEN_ENV} to a token from `cloudflared access token`, or use the "
      "Google Drive sources: --configfile config/mlperf-gdrive.yaml")
  if status in (404, 410):
    return UserError(f"{what}: {redact(url)} is not on the server (HTTP {status}); the dataset may have changed: delete its "
                     "cached list under download/r2/ and rerun, or check the source URL in the config")
  return UserError(f"{what}: {redact(url)} answered HTTP {status}; check the source URL in the config")


def _retryable_status(status: int) -> bool:
  return status == 429 or status >= 500


def _net_errors():
  import requests, urllib3
  return (requests.RequestException, urllib3.exceptions.HTTPError, ConnectionError, TimeoutError)


def get_text(url: str, what: str, *, attempts: int = 5, backoff: float = 2.0, policy: FetchPolicy = FetchPolicy(),
             log: Callable[[str], None] = print) -> str:
  """A small text body (a .uri, an md5 list): at most policy.listing_max_bytes within policy.listing_deadline_s;
  network errors retried with backoff, HTTP errors raised once."""
  deadline = policy.listing_deadline()
  limit = policy.listing_max_bytes
  warn_loose_netrc(url, log)

  def once():
    try:
      with _session() as s, _open(s, url, headers={}, follow=False, policy=policy, deadline=deadline, what=what) as r:
        if _retryable_status(r.status_code):
          raise NetworkError(f"HTTP {r.status_code}")
        if r.status_code != 200:
          raise _http_error(r.status_code, url, what, r.headers)
        announced = r.headers.get("Content-Length", "")
        if announced.isdigit() and int(announced) > limit:
          raise _TooLarge(int(announced))
        body = b"".join(_blocks(r, limit=limit, deadline=deadline, what=what, url=url))
    except _TooLarge:
      raise UserError(f"{what}: {redact(url)} sends more than {limit:,} bytes, far more than a dataset's list; it is not "
                      "one: check the source URL in the config") from None
    except _net_errors() as e:
      raise NetworkError(redact(f"{type(e).__name__}: {e}")) from e
    if _looks_html(body, r.headers.get("Content-Type")):
      raise UserError(f"{what}: {redact(url)} returned an HTML page, not the expected text (a login or error page); "
                      "check the URL, or download the dataset with mlcommons/r2-downloader and use a mirror directory")
    return body.decode("utf-8", errors="replace")

  return with_retries(once, url, what, attempts=attempts, backoff=backoff, log=log, deadline=deadline)


def with_retries(fn, url, what, *, attempts, backoff, log, deadline: Deadline | None = None):
  """fn() until it returns, retrying NetworkError with exponential backoff; never past `deadline` (the reads check
  it between blocks; an alarm a second later is the backstop for a server that trickles its headers)."""
  try:
    with _alarm(None if deadline is None else deadline.left_s() + 1.0):
      for attempt in range(1, attempts + 1):
        try:
          return fn()
        except NetworkError as e:
          if attempt == attempts:
            raise UserError(f"{what}: {redact(url)} failed {attempts} times, last: {e}; check the network and rerun the "
                            "same command (a partial download resumes)") from None
          wait = min(backoff * 2 ** (attempt - 1), 60.0)
          if deadline is not None and wait > deadline.left_s():
            raise deadline.late(what, url, f" (last: {e})") from None
          log(f"{what}: network error ({e}); retry {attempt}/{attempts - 1} in {wait:.0f} s")
          time.sleep(wait)
  except _Deadline:
    raise deadline.late(what, url) from None


class _Deadline(BaseException):  # not an Exception: no library's `except Exception` swallows it
  pass


@contextlib.contextmanager
def _alarm(seconds: float | None):
  """Raise _Deadline in this thread after `seconds` (SIGALRM): only in the main thread and when no other timer is
  set; otherwise nothing (the reads' own deadline checks remain)."""
  if (seconds is None or threading.current_thread() is not threading.main_thread()
      or signal.getitimer(signal.ITIMER_REAL)[0] > 0):
    yield
    return
  def fire(signum, frame):
    raise _Deadline()
  old = signal.signal(signal.SIGALRM, fire)
  signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.01))
  try:
    yield
  finally:
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, old)


def part_path(dest: Path, md5: str | None, url: str) -> Path:
  """The resumable partial file of `dest`: beside it, hidden, named after what it will become."""
  tag = (md5 or hashlib.sha1(url.encode()).hexdigest())[:12]
  return dest.with_name(f".{dest.name}.{tag}.part")


def drop_stale_parts(dest: Path, keep: Path) -> None:
  for p in dest.parent.glob(f".{dest.name}.*.part"):
    if p != keep:
      p.unlink(missing_ok=True)


def download_file(url: str, dest: str | Path, *, md5: str | None, what: str | None = None,
                  allow_redirects: bool = False, attempts: int = 5, backoff: float = 2.0,
                  policy: FetchPolicy = FetchPolicy(), progress: bool = True,
                  validate: Callable[[Path], None] | None = None, log: Callable[[str], None] = print) -> dict:
  """GET `url` into `dest` with Range resume; the target appears only once complete, md5-checked and validated.

  The partial file (`part_path`) survives a failed attempt and the next one continues it with a Range request.
  Network errors (connection reset, a stall, a short body, HTTP 5xx/429) are retried with exponential backoff;
  an HTTP error, an HTML page, a body over its bound, an md5 mismatch or a failed validation raise UserError at
  once, and so does the deadline (policy.deadline_s, the partial file kept for the next run).
  Returns {"source", "md5", "sha256", "bytes", "resumed_from"}.
  """
  dest = Path(dest)
  what = what or dest.name
  dest.parent.mkdir(parents=True, exist_ok=True)
  part = part_path(dest, md5, url)
  drop_stale_parts(dest, part)
  first_offset = part.stat().st_size if part.exists() else 0
  deadline = policy.file_deadline()
  kept = " (what arrived is kept)"
  warn_loose_netrc(url, log)

  def once():
    offset = part.stat().st_size if part.exists() else 0
    headers = {"Range": f"bytes={offset}-"} if offset else {}
    try:
      with _session() as s, _open(s, url, headers=headers, follow=allow_redirects, policy=policy, deadline=deadline,
                                  what=what) as r:
        if r.status_code == 416 and offset:  # nothing left to send: the part may already be whole
          total = _total_from_content_range(r.headers.get("Content-Range"))
          if total == offset:
            return
          part.unlink(missing_ok=True)
          raise NetworkError(f"HTTP 416 for a {offset}-byte partial file of a {total}-byte file; starting over")
        offset, mode, total = _answered_range(r, offset, url=url, what=what, log=log)
        if total is not None and total > policy.max_file_bytes:
          part.unlink(missing_ok=True)  # what an earlier attempt kept is no part of a file this size either
          raise UserError(f"{what}: {redact(url)} announces {total:,} bytes, more than the {policy.max_file_bytes:,} allowed "
                          "(download.max_file_bytes); check the source in the config, or raise that bound")
        limit = (total if total is not None else policy.max_file_bytes) - offset
        it = _blocks(r, limit=limit, deadline=deadline, what=what, url=url, kept=kept)
        head = next(it, b"")
        if offset == 0 and _looks_html(head, r.headers.get("Content-Type")) and not dest.name.endswith((".html", ".htm")):
          raise UserError(f"{what}: {redact(url)} sent an HTML page where data was expected (first bytes "
                          f"{head[:60]!r}): a login, quota or error page. Check the source in the config; for "
                          "Google Drive quota pages wait a day or use the MLCommons storage (config/mlperf.yaml)")
        if offset:
          log(f"{what}: resuming at byte {offset:,} (HTTP Range)")
        _write_part(part, mode, [head] if head else [], it, total=total, offset=offset, what=what, progress=progress)
        got = part.stat().st_size
        if total is not None and got != total:
          raise NetworkError(f"connection closed at byte {got:,} of {total:,}")
    except _TooLarge:
      part.unlink(missing_ok=True)  # not the file: nothing of it is worth resuming
      raise UserError(f"{what}: {redact(url)} sent more than the {policy.max_file_bytes:,} bytes allowed for a file of "
                      "unknown size (download.max_file_bytes) and was cut off; check the source in the config, or "
                      "raise that bound if the file really is larger") from None
    except _net_errors() as e:  # not disk errors: those are OSError too
      raise NetworkError(redact(f"{type(e).__name__}: {e}")) from e

  with_retries(once, url, what, attempts=attempts, backoff=backoff, log=log, deadline=deadline)
  return finish_part(part, dest, md5=md5, source=redact(url), what=what, validate=validate, log=log,
                     extra={"resumed_from": first_offset})


def _answered_range(r, offset: int, *, url: str, what: str, log: Callable[[str], None]) -> tuple[int, str, int | None]:
  """(offset, file mode, total bytes or None) of a GET's answer: a 206 continues the partial file at `offset`, a
  200 starts it over; a retryable status is a NetworkError, any other an HTTP error."""
  if _retryable_status(r.status_code):
    raise NetworkError(f"HTTP {r.status_code}")
  if r.status_code not in (200, 206):
    raise _http_error(r.status_code, url, what, r.headers)
  if r.status_code == 206:
    start = _start_from_content_range(r.headers.get("Content-Range"))
    if start != offset:
      raise NetworkError(f"the server resumed at byte {start}, not {offset}")
    return offset, "ab", _total_from_content_range(r.headers.get("Content-Range"))
  if offset:
    log(f"{what}: the server ignored the Range request; starting over")
  total = int(r.headers["Content-Length"]) if r.headers.get("Content-Length", "").isdigit() else None
  return 0, "wb", total


def _write_part(part: Path, mode: str, first: list[bytes], rest, *, total: int | None, offset: int, what: str,
                progress: bool) -> None:
  """Append (mode "ab") or write ("wb") the body's blocks to the partial file, with a tqdm bar in the log."""
  from tqdm import tqdm
  with open(part, mode) as f, tqdm(total=total, initial=offset, unit="B", unit_scale=True, unit_divisor=1024,
                                   desc=what, disable=not progress, mininterval=1.0, ascii=True) as bar:
    for block in first, rest:
      for b in block:
        f.write(b)
        bar.update(len(b))


def finish_part(part: Path, dest: Path, *, md5: str | None, source: str, what: str,
                validate: Callable[[Path], None] | None, log: Callable[[str], None], extra: dict | None = None) -> dict:
  """md5-check and validate a complete partial file, then rename it onto `dest` (removed on any failure)."""
  try:
    h_md5, h_sha = hashlib.md5(), hashlib.sha256()
    with open(part, "rb") as f:
      while block := f.read(CHUNK):
        h_md5.update(block); h_sha.update(block)
    actual, sha256 = h_md5.hexdigest(), h_sha.hexdigest()
    if md5 is not None and actual != md5.lower():
      raise UserError(f"{what}: MD5 mismatch for {redact(source)}: expected {md5}, got {actual}; the file is corrupt or not "
                      f"the MLPerf file. Rerun to fetch it again, or fix the source of {dest.name} in the config")
    if validate is not None:
      validate(part)
    size = part.stat().st_size
    os.replace(part, dest)
  except BaseException:
    part.unlink(missing_ok=True)
    raise
  log(f"{dest.name}: {size:,} bytes, md5 {actual}" + (" (matches the published md5)" if md5 else " (no published md5)"))
  return {"source": source, "md5": actual, "sha256": sha256, "bytes": size, **(extra or {})}


def _start_from_content_range(v: str | None) -> int | None:
  m = re.match(r"bytes (\d+)-\d+/(\d+|\*)", v or "")
  return int(m.group(1)) if m else None


def _total_from_content_range(v: str | None) -> int | None:
  m = re.match(r"bytes (?:\d+-\d+|\*)/(\d+)", v or "")
  return int(m.group(1)) if m else None
