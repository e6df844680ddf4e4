"""A URL's credentials (its user-info, `user:password@`) in what the project prints and records: found, hidden,
refused; and the netrc file a login comes from instead.

Snakemake records every rule's params in .snakemake/metadata and prints them in a dry run's "Params have changed"
reason, and the provenance record (and so a submission package) holds the config: a config value that is a URL with
user-info is refused (`refuse_url_credentials`), before any job, whatever the user-info holds (a space, an '@', a
'%40'). A URL is read as requests reads it, with urllib3's `parse_url` (its `auth`), never by a pattern of what a
password may hold; only where a URL starts (`scheme://`) is looked for in a text. A URL urllib3 cannot parse is
taken as holding user-info when an '@' follows its `scheme://` (requests would refuse to send it, but Snakemake would
still record it). A server that wants a login gets it from ~/.netrc, or the file the environment variable NETRC
names, which requests reads for each request, per host (docs/download.md); `netrc_warning` says so when that file is
open to others than its owner. Every message that names a URL shows it `redact`ed.
"""
from __future__ import annotations
import os, re
from pathlib import Path
from typing import Any

from mlperf_bert.errors import UserError

# where a URL starts in a text (RFC 3986's scheme, then '//'); what follows is parsed by urllib3
_SCHEME = re.compile(r"(?i)(?<![a-z0-9+.-])[a-z][a-z0-9+.-]*://")
# urllib3's authority ends at the first of these (urllib3/util/url.py `_URI_RE`: `//([^\\/?#]*)`); its user-info
# is what precedes the authority's last '@' (`authority.rpartition("@")`)
_AUTHORITY_END = "\\/?#"
_USER_ONLY_SCHEMES = ("ssh", "git+ssh")  # ssh://git@host: a user name alone is no secret there
# Python's netrc module refuses a ~/.netrc holding a password that its group or others may access (netrc.py
# `_security_check`: st_mode & (S_IRWXG | S_IRWXO)); requests reads the file by its path, without that check
NETRC_LOOSE_BITS = 0o077
NETRC_FIX = ("put them in ~/.netrc (`machine HOST login USER password PASSWORD`, chmod 600) or in a file named by "
             "the environment variable NETRC; see docs/download.md")


def _userinfos(text: str):
  """(scheme, start, end, user-info) of each URL in `text` that has user-info, as urllib3 parses it: text[start:end]
  is the user-info as written (before urllib3 percent-encodes it), end the index of its '@'."""
  from urllib3.exceptions import LocationParseError
  from urllib3.util import parse_url
  for m in _SCHEME.finditer(text):
    rest = text[m.start():]
    cut = [i for i in (rest.find(c, m.end() - m.start()) for c in _AUTHORITY_END) if i >= 0]
    authority = rest[m.end() - m.start():min(cut, default=len(rest))]
    try:
      auth = parse_url(rest).auth
    except (LocationParseError, ValueError):   # its message quotes the URL: never shown
      auth, at = None, rest.rfind("@")
      if at > m.end() - m.start():    # unparsable, an '@' after scheme://: may be user-info; hidden to the last '@'
        yield m.group()[:-3].lower(), m.end(), m.start() + at, rest[m.end() - m.start():at]
      continue
    if auth is not None:
      at = authority.rfind("@")
      yield m.group()[:-3].lower(), m.end(), m.end() + at, authority[:at]


def redact(text) -> str:
  """`text` with the user-info of every URL in it replaced by `***`."""
  text = str(text)
  out, last = [], 0
  for _, start, end, _ in _userinfos(text):
    if start < last: continue
    out += [text[last:start], "***"]
    last = end
  return "".join(out) + text[last:]


def has_credentials(text: str) -> bool:
  """Whether `text` holds a URL with user-info (a password, or a user name: a token is often given as the user),
  but an ssh URL's user name alone."""
  return any(scheme not in _USER_ONLY_SCHEMES or ":" in info for scheme, _, _, info in _userinfos(str(text)))


def url_credentials(value: Any, where: str = "") -> list[str]:
  """The keys (`sources.vocab.txt.url`) of every text in `value`, a config, that holds a URL with credentials."""
  if isinstance(value, str):
    return [where or "(the value)"] if has_credentials(value) else []
  if isinstance(value, dict):
    return [k for key, v in value.items() for k in url_credentials(v, f"{where}.{key}" if where else str(key))]
  if isinstance(value, (list, tuple)):
    return [k for i, v in enumerate(value) for k in url_credentials(v, f"{where}[{i}]")]
  return []


def refuse_url_credentials(config: Any, source: str) -> None:
  """UserError (one line naming `source` and the keys, never a URL) when a config value is a URL with credentials:
  Snakemake would record it and print it."""
  keys = url_credentials(config)
  if keys:
    raise UserError(f"{source}: {', '.join(keys)} give{'s' if len(keys) == 1 else ''} a URL with a user name or "
                    "password (user:password@), which Snakemake would record in .snakemake/metadata and print, and the "
                    f"provenance record would keep: write the URL without them and {NETRC_FIX}")


def netrc_warning(url: str, netrc_env: str | None) -> str | None:
  """One line when the netrc file requests reads for `url` (the file `netrc_env`, the environment variable NETRC,
  names; else ~/.netrc or ~/_netrc: requests.utils.get_netrc_auth's order) holds a login for the URL's host and its
  group or others may access it (NETRC_LOOSE_BITS); None otherwise."""
  import netrc
  from urllib.parse import urlparse
  from requests.utils import NETRC_FILES
  try:
    host = urlparse(url).hostname
  except ValueError:
    return None
  names = (netrc_env,) if netrc_env is not None else tuple(f"~/{n}" for n in NETRC_FILES)
  path = next((Path(os.path.expanduser(n)) for n in names if os.path.exists(os.path.expanduser(n))), None)
  if host is None or path is None:
    return None
  try:
    mode = path.stat().st_mode & 0o777
    if not mode & NETRC_LOOSE_BITS or not netrc.netrc(str(path)).authenticators(host):
      return None
  except (OSError, netrc.NetrcParseError):
    return None
  who = "others" if mode & 0o007 else "its group"
  return (f"warning: {path}, whose login for {host} this download sends, is open to {who} (mode {mode:04o}): anyone "
          f"who can read it has the password; chmod 600 {path}")
