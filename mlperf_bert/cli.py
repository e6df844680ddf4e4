"""`python -m mlperf_bert SUBCOMMAND ...`: the command line; the workflow's rules call the same functions.

Each module that offers a subcommand defines `add_parser(subparsers)`, which registers its subcommand(s)
and sets `func` (called with the parsed args, returns an exit code). Add the module's name to COMMANDS.
"""
from __future__ import annotations
import argparse, importlib, sys

from mlperf_bert.errors import UserError

# modules that register subcommands; each is imported when the parser is built
COMMANDS: list[str] = ["textcli", "audit", "checkpoint", "datacli", "submission", "train"]


def build_parser() -> argparse.ArgumentParser:
  p = argparse.ArgumentParser(prog="python -m mlperf_bert", description=__doc__.splitlines()[0])
  sub = p.add_subparsers(dest="command", required=True)
  for name in COMMANDS:
    importlib.import_module(f"mlperf_bert.{name}").add_parser(sub)
  return p


def main(argv: list[str] | None = None) -> int:
  args = build_parser().parse_args(argv)
  try:
    return int(args.func(args) or 0)
  except UserError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
