"""A URL's credentials (`user:password@`) in what the project prints and records: found, hidden, refused.

Snakemake records every rule's params in .snakemake/metadata and prints them in a dry run's "Params have changed"
reason, and the provenance record (and so a submission package) holds the config: a config value that is a URL with
credentials is refused (`refuse_url_credentials`), before any job. A server that wants a login gets it from
~/.netrc, or the file the environment variable NETRC names, which requests reads for each request, per host
(docs/download.md). Every message that names a URL shows it `redact`ed.
"""
from __future__ import annotations
import re
from typing import Any

from mlperf_bert.errors import UserError

# scheme://userinfo@: the userinfo runs to the last '@' before the end of the host ('/', '?', '#' or a space), where
# urllib and requests split it, so a password holding a raw '@' is hidden whole, not in part
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*)://([^/?#\s]*)@")
_USER_ONLY_SCHEMES = ("ssh", "git+ssh")  # ssh://git@host: a user name alone is no secret there
NETRC_FIX = ("put them in ~/.netrc (`machine HOST login USER password PASSWORD`, chmod 600) or in a file named by "
             "the environment variable NETRC; see docs/download.md")


def redact(text) -> str:
  """`text` with the `user:password@` of every URL in it replaced by `***@`."""
  return _USERINFO.sub(r"\1://***@", str(text))


def has_credentials(text: str) -> bool:
  """Whether `text` holds a URL with a password or, but for ssh, a user name (a token is often given as the user)."""
  for m in _USERINFO.finditer(text):
    if ":" in m.group(2) or m.group(1).lower() not in _USER_ONLY_SCHEMES:
      return True
  return False


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
  """UserError (one line naming `source` and the keys, the URLs redacted) when a config value is a URL with
  credentials: Snakemake would record it and print it."""
  keys = url_credentials(config)
  if keys:
    raise UserError(f"{source}: {', '.join(keys)} give{'s' if len(keys) == 1 else ''} a URL with a user name or "
                    "password (user:password@), which Snakemake would record in .snakemake/metadata and print, and the "
                    f"provenance record would keep: write the URL without them and {NETRC_FIX}")
