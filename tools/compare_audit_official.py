"""The audit beside MLCommons' own tools on every BERT system of a results repository.

  python tools/compare_audit_official.py CHECKOUT [--ruleset 5.0.0] [--org NAME ...] [--independent] [--json OUT]

CHECKOUT is a checkout of github.com/mlcommons/training_results_vX.Y (or any directory of org directories; only
`<org>/results/*/bert/` and `<org>/systems/*.json` are read). For each organization with a BERT result it runs
`mlperf_bert.audit.org.audit_submission`, which computes its own score and verdict and runs
`python -m mlperf_logging.result_summarizer ORG training R` and `python -m mlperf_logging.package_checker ORG
training R` on its copy of the org's BERT parts; the table sets the audit's figures beside those tools'. With
--independent the two tools run again on a plain copy of the whole org directory (twice the time). It prints one row per system: the audit's score and
the summarizer's, the audit's verdict for the organization and package_checker's, and the seconds the audit took;
then a summary. Exit status 0 when every score and verdict agrees and no audit raised, else 1.
"""
from __future__ import annotations
import argparse, json, math, re, shutil, subprocess, sys, tempfile, time, traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mlperf_bert.audit.org import audit_submission  # noqa: E402
sys.path.insert(0, str(Path(__file__).resolve().parent))
from calibrate_audit import summarizer_scores  # noqa: E402


def official(org_dir: Path, ruleset: str) -> tuple[dict[str, float | None], bool]:
  """result_summarizer's scores {system: minutes} and package_checker's verdict, each on its own copy."""
  scores, _ = summarizer_scores(org_dir, ruleset)
  with tempfile.TemporaryDirectory(prefix="compare-official-") as tmp:
    tmp = Path(tmp)
    copy2 = tmp / "b" / org_dir.name
    shutil.copytree(org_dir, copy2, symlinks=True)
    p = subprocess.run([sys.executable, "-m", "mlperf_logging.package_checker", str(copy2), "training", ruleset,
                        "--log_output", str(tmp / "pc.log")], cwd=tmp, capture_output=True, text=True, errors="replace")
    accepted = p.returncode == 0 and "PACKAGE CHECKER FOUND NO ERRORS" in p.stdout + p.stderr
  return scores, accepted


def embedded(audit, org: str) -> tuple[dict[str, float | None], bool | None]:
  """The official tools' results as the audit ran them: result_summarizer's scores, package_checker's verdict."""
  scores = {k.split("/", 1)[1]: v.get("result_summarizer") for k, v in audit.scores.items() if k.startswith(org + "/")}
  systems = {k.split("/", 1)[1] for k in audit.scores if k.startswith(org + "/")}
  pc = [r.status for r in audit.rows if r.check == "package_checker" and (r.subject == org or r.subject in systems)]
  return scores, (all(s == "PASS" for s in pc) if pc and "SKIP" not in pc else None)


def compare_org(org_dir: Path, ruleset: str, independent: bool) -> list[dict]:
  systems = sorted(p.parent.name for p in org_dir.glob("results/*/bert"))
  t = time.perf_counter()
  try:
    audit, raised = audit_submission(org_dir, ruleset), None
  except Exception:  # the comparison reports a traceback as a disagreement; the audit must never raise
    audit, raised = None, traceback.format_exc().strip().splitlines()[-1]
  secs = time.perf_counter() - t
  if independent or audit is None:
    scores, accepted = official(org_dir, ruleset)
  else:
    scores, accepted = embedded(audit, org_dir.name)
    if accepted is None:  # the audit did not run package_checker (it stopped early): run it here
      scores, accepted = official(org_dir, ruleset)
  verdict = None if audit is None else not audit.failed
  out = []
  for s in systems:
    mine = None if audit is None else (audit.scores.get(f"{org_dir.name}/{s}") or {}).get("score")
    theirs = scores.get(s)
    same = (mine is None and theirs is None) or (mine is not None and theirs is not None
                                                 and math.isclose(mine, theirs, rel_tol=1e-9, abs_tol=1e-9))
    out.append({"org": org_dir.name, "system": s, "audit": mine, "result_summarizer": theirs, "score_equal": same,
                "audit_accepts": verdict, "package_checker_accepts": accepted, "verdict_equal": verdict == accepted,
                "audit_seconds": round(secs, 1), "raised": raised,
                "fails": [] if audit is None else [f"{r.check} {r.subject}" for r in audit.rows if r.status == "FAIL"][:3]})
  return out


def _fmt(x: float | None) -> str:
  return "-" if x is None else f"{x:.2f}"


def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("checkout", type=Path)
  ap.add_argument("--ruleset", help="default: from the checkout's name (training_results_v4.1 -> 4.1.0)")
  ap.add_argument("--org", action="append", help="only these organizations")
  ap.add_argument("--independent", action="store_true", help="run the official tools again on a plain copy")
  ap.add_argument("--json", type=Path, help="write the rows here")
  a = ap.parse_args(argv)
  ruleset = a.ruleset
  if not ruleset:
    m = re.search(r"v?(\d+)\.(\d+)", a.checkout.resolve().name)
    if not m: ap.error("--ruleset is needed: the checkout's name does not say the version")
    ruleset = f"{m.group(1)}.{m.group(2)}.0"
  orgs = sorted(p for p in a.checkout.iterdir() if p.is_dir() and any(p.glob("results/*/bert"))
                and (not a.org or p.name in a.org))
  rows: list[dict] = []
  print(f"{'ORG':<24} {'SYSTEM':<44} {'AUDIT':>8} {'SUMMARIZER':>10} {'=':>2}  {'AUDIT':<6} {'PKG_CHK':<7} {'=':>2} {'SEC':>5}")
  for org in orgs:
    for r in compare_org(org, ruleset, a.independent):
      rows.append(r)
      acc = {True: "accept", False: "reject", None: "raised"}
      print(f"{r['org']:<24} {r['system'][:44]:<44} {_fmt(r['audit']):>8} {_fmt(r['result_summarizer']):>10} "
            f"{'ok' if r['score_equal'] else 'NO':>2}  {acc[r['audit_accepts']]:<6} {acc[r['package_checker_accepts']]:<7} "
            f"{'ok' if r['verdict_equal'] else 'NO':>2} {r['audit_seconds']:>5}"
            + (f"  FAILs: {'; '.join(r['fails'])}" if r["fails"] else "") + (f"  RAISED {r['raised']}" if r["raised"] else ""),
            flush=True)
  n_org = len({r["org"] for r in rows})
  scored = [r for r in rows if r["result_summarizer"] is not None or r["audit"] is not None]
  org_rows = {r["org"]: r for r in rows}.values()
  print(f"\nSummary (training {ruleset}): {len(rows)} systems in {n_org} organizations; scores equal "
        f"{sum(r['score_equal'] for r in scored)} of {len(scored)} scored; verdicts equal "
        f"{sum(r['verdict_equal'] for r in org_rows)} of {n_org}; audits that raised {sum(bool(r['raised']) for r in org_rows)}; "
        f"audit time {sum(r['audit_seconds'] for r in org_rows):.0f} s")
  if a.json:
    a.json.write_text(json.dumps({"ruleset": ruleset, "rows": rows}, indent=1))
  return 0 if all(r["score_equal"] and r["verdict_equal"] and not r["raised"] for r in rows) else 1


if __name__ == "__main__":
  sys.exit(main())
