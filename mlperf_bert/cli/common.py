"""What the command line's parts share: the log line, the number type, the --set parser, the space check's flag."""
from __future__ import annotations
import argparse, sys
from typing import Any

from mlperf_bert.errors import UserError


def _log(msg: str) -> None:
  print(msg, file=sys.stderr, flush=True)


def _positive(kind):
  """An argparse type: a number of `kind` above 0."""
  def parse(text: str):
    try: v = kind(text)
    except ValueError: raise argparse.ArgumentTypeError(f"expected a {kind.__name__}, got {text!r}") from None
    if not v > 0: raise argparse.ArgumentTypeError(f"expected a number above 0, got {text!r}")
    return v
  parse.__name__ = kind.__name__
  return parse


def _space_flag(p: argparse.ArgumentParser) -> None:
  p.add_argument("--no-space-check", action="store_true",
                 help="write even when the output's filesystem has less free space than it is planned to take")


def _parse_set(items: list[str] | None) -> dict[str, Any]:
  from mlperf_bert.config import safe_yaml
  out = {}
  for it in items or []:
    if "=" not in it: raise UserError(f"--set {it!r}: expected KEY=VALUE")
    k, v = it.split("=", 1)
    out[k.strip()] = safe_yaml(v, f"--set {k.strip()}")
  return out
