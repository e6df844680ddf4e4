#!/usr/bin/env python3
"""Where the audit of one 10-run submission system spends its time.

    python bench/bench_audit.py [ORG_DIR] [--ruleset 4.1.0] [--system tinybox_red]

Default ORG_DIR: tinycorp's real v4.1 submission (tests/fixtures/tinycorp-v4.1), one system. Times, in one process
(warm imports; CPU seconds of this process and its subprocesses beside wall seconds, since the machine may
be shared):
  read        read_log on the 10 logs (the bounded reader);
  compliance  mlperf-logging's compliance checker on the 10 logs, in-process;
  rcp         mlperf-logging's RCP checker on the result directory;
  system      system_desc_checker on the systems json;
  audit rows  the whole audit of the system without the official tools (check_logs: all of the above and the
              rest of the rows);
  summarizer / package_checker  the official tools, each a `python -m` subprocess on a copy.
Prints figures only.
"""
from __future__ import annotations
import argparse, resource, shutil, sys, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from machine import describe  # noqa: E402

from mlperf_bert.audit.mlperf_tools import (compliance_check, package_checker, rcp_check, result_summarizer,  # noqa: E402
                                            system_desc_check)
from mlperf_bert.audit.log_checks import check_logs  # noqa: E402
from mlperf_bert.audit.rows import Audit  # noqa: E402
from mlperf_bert.audit.logs import read_log  # noqa: E402
from mlperf_bert.audit.org import LOG_GLOB, log_index  # noqa: E402


def _cpu() -> float:
  """CPU seconds of this process and its finished children (the official tools run as subprocesses)."""
  ch = resource.getrusage(resource.RUSAGE_CHILDREN)
  return time.process_time() + ch.ru_utime + ch.ru_stime


def timed(fn) -> tuple[float, float, object]:
  w, c = time.perf_counter(), _cpu()
  r = fn()
  return time.perf_counter() - w, _cpu() - c, r


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("org", nargs="?", type=Path, default=ROOT / "tests" / "fixtures" / "tinycorp-v4.1")
  ap.add_argument("--ruleset", default="4.1.0")
  ap.add_argument("--system", default="tinybox_red")
  a = ap.parse_args()
  with tempfile.TemporaryDirectory() as tmp:
    org = Path(tmp) / a.org.name
    shutil.copytree(a.org / "results" / a.system, org / "results" / a.system)
    (org / "systems").mkdir()
    shutil.copy(a.org / "systems" / f"{a.system}.json", org / "systems")
    bert = org / "results" / a.system / "bert"
    paths = sorted(bert.glob(LOG_GLOB), key=lambda p: log_index(p.name))
    compliance_check(paths[0], a.ruleset)  # warm the checker's imports and rule files
    print(describe())
    print(f"{org.name}/{a.system}: {len(paths)} logs, {sum(p.stat().st_size for p in paths) / 1e6:.1f} MB, training "
          f"{a.ruleset}")
    figures = [
      ("read", lambda: [read_log(p) for p in paths]),
      ("compliance", lambda: [compliance_check(p, a.ruleset) for p in paths]),
      ("rcp", lambda: rcp_check(bert, a.ruleset)),
      ("system", lambda: system_desc_check(org / "systems" / f"{a.system}.json", a.ruleset)),
      ("audit rows", lambda: check_logs(Audit(str(org), "org", a.ruleset), [read_log(p) for p in paths],
                                        system=a.system, division="closed", ruleset=a.ruleset, bert_dir=bert)),
      ("summarizer", lambda: result_summarizer(org, a.ruleset)),
      ("package_checker", lambda: package_checker(org, a.ruleset)),
    ]
    for name, fn in figures:
      w, c, _ = timed(fn)
      print(f"  {name:<16} {w:7.2f} s wall  {c:7.2f} s CPU")


if __name__ == "__main__":
  main()
