"""`python -m mlperf_bert SUBCOMMAND ...`: the command line; the workflow's rules call the same functions.

Every subcommand is defined in this package, a module a wing: cli/data.py (and check-config), cli/train.py (and the
dress), cli/audit.py (and the audit's internal workers `reexecute-eval`, `reexecute-segment`: the processes a basedir
audit starts to redo part of a run); this module builds the one parser and runs the handler. Each handler
parses nothing itself: it calls one function of the package and turns its result into output and an exit code (0
success, 1 a check failed, 2 a usage or input error, printed as one line; a worker's failure is its {"error"} line
and exit 1). Wing modules are imported inside the handlers, so `python -m mlperf_bert shard` does not load tinygrad,
and `train` does not load tokenizers.
"""
from __future__ import annotations
import argparse, sys

from mlperf_bert.errors import UserError
from mlperf_bert.cli.audit import _add_audit, _add_workers
from mlperf_bert.cli.data import _add_config, _add_data, _add_footprint, _add_lock
from mlperf_bert.cli.train import _add_dress, _add_train

# ---------------------------------------------------------------------------------------------------- main

def build_parser() -> argparse.ArgumentParser:
  p = argparse.ArgumentParser(prog="python -m mlperf_bert", description=__doc__.splitlines()[0])
  sub = p.add_subparsers(dest="command", required=True)
  _add_config(sub)
  _add_footprint(sub)
  _add_lock(sub)
  _add_data(sub)
  _add_train(sub)
  _add_dress(sub)
  _add_audit(sub)
  _add_workers(sub)
  return p


def main(argv: list[str] | None = None) -> int:
  args = build_parser().parse_args(argv)
  import warnings
  warnings.showwarning = lambda message, *a, **k: print(f"warning: {message}", file=sys.stderr)  # one line
  try:
    return int(args.func(args) or 0)
  except UserError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  except OSError as e:  # a write the disk refused that no writer turned into its one line
    from mlperf_bert.fileio import FULL
    if e.errno not in FULL: raise
    print(f"error: {e.filename or 'a write'}: {e.strerror}; free space on that disk and rerun", file=sys.stderr)
    return 2
