"""The audit calibrated on every published BERT result: one row per system of MLCommons' training_results_v0.7 ...
v5.0, with the audit's verdict and score beside mlperf-logging's result_summarizer's.

  python tools/calibrate_audit.py [--mirrors /work/.mirror] [--scratch /tmp/calib] [--round 4.1 ...]
                                  [--out tests/fixtures/audit-calibration.json] [--fresh] [--merge OLD_TABLE]

--mirrors holds bare git mirrors of github.com/mlcommons/training_results_vX.Y, one per round, at
`mlcommons+training_results_vX.Y/repo` (as the `fetch` tool lays them out; `git clone --mirror URL
DIR/mlcommons+training_results_vX.Y/repo` makes the same). From each mirror's HEAD only the BERT parts are
extracted to --scratch/vX.Y/<org>/: `results/<system>/bert/**`, `results/<system>/package_checker_params` and
`systems/*.json` (every system description: package_checker checks them all). A system whose logs are absent from
the mirror (a snapshot can lack its largest files) is not extracted; its row says so.

Then, one organization at a time:
  * the audit, by its real CLI: `python -m mlperf_bert audit <org> --ruleset X.Y.0 --json ...` (the round's ruleset;
    mlperf-logging ships every training ruleset 0.7.0 ... 5.0.0; the audit checks it with the rules of its round,
    resources/mlperf-rules, and meta names them);
  * mlperf-logging's own `python -m mlperf_logging.result_summarizer <org> training X.Y.0` on a plain copy of the
    extracted org, with the same round's rules (mlperf_bert.audit.round_rules.tool_env): the official score of each
    system;
  * every result log read as the audit reads it: its lines that are not `:::MLLOG` records (count, bytes) and its
    lines with bytes that are not UTF-8.
Each organization's figures are kept in --scratch/vX.Y/_calib/<org>.json, so an interrupted run goes on where it
stopped (--fresh redoes them). The table is written to --out (JSON: `meta` and one `rows` entry per system) and a
summary per round is printed. Exit status 0 when no system FAILs and every score equals the summarizer's where it
gives one, else 1.
"""
from __future__ import annotations
import argparse, csv, datetime, json, math, os, platform, re, resource, shutil, subprocess, sys, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mlperf_bert.audit.logs import read_log  # noqa: E402
from mlperf_bert.audit.round_rules import rules_in_force, tool_env  # noqa: E402

ROUNDS = ("0.7", "1.0", "1.1", "2.0", "2.1", "3.0", "3.1", "4.0", "4.1", "5.0")   # BERT entered in v0.7
BERT_PART = re.compile(r"^([^/]+)/(?:results/([^/]+)/(?:bert/.+|package_checker_params)|systems/[^/]+\.json)$")
LOG_NAME = re.compile(r"/bert/result_[^/]*\.txt$")
FINDING_CHARS = 240      # a FAIL or WARN row's reason, as kept in the table


def _git(repo: Path, *args: str, data: bytes | None = None) -> bytes:
  return subprocess.run(["git", "-C", str(repo), *args], input=data, capture_output=True, check=True).stdout


def extract(repo: Path, dest: Path) -> dict:
  """The BERT parts of the mirror's HEAD into dest/<org>/... Returns {"commit", "absent": {org/system: [paths]}}."""
  commit = _git(repo, "rev-parse", "HEAD").decode().strip()
  entries = []   # (blob, path)
  for line in _git(repo, "ls-tree", "-r", "-z", "HEAD").split(b"\0"):
    if not line: continue
    meta, path = line.decode().split("\t", 1)
    mode, kind, blob = meta.split()
    if kind == "blob" and BERT_PART.match(path) and mode != "120000":
      entries.append((blob, path))
  present = {l for l in _git(repo, "cat-file", "--batch-check=%(objectname)", data="".join(
    f"{b}\n" for b, _ in entries).encode()).decode().splitlines() if " " not in l}   # "<sha> missing" when absent
  absent: dict[str, list[str]] = {}
  for blob, path in entries:
    m = BERT_PART.match(path)
    if blob not in present:
      absent.setdefault(f"{m.group(1)}/{m.group(2) or 'systems'}", []).append(path)
  bert_orgs = {BERT_PART.match(p).group(1) for _, p in entries if LOG_NAME.search(p)}
  if dest.exists(): shutil.rmtree(dest)
  for blob, path in entries:
    m = BERT_PART.match(path)
    if m.group(1) not in bert_orgs or blob not in present or f"{m.group(1)}/{m.group(2)}" in absent: continue
    out = dest / path
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(_git(repo, "cat-file", "blob", blob))
  return {"commit": commit, "absent": absent}


def summarizer_scores(org_dir: Path, ruleset: str) -> tuple[dict[str, float | None], str]:
  """mlperf-logging's result_summarizer on a plain copy of the org, with the rules of the ruleset's round
  (round_rules.tool_env, as the audit): {system dir: minutes or None}, its tail."""
  with tempfile.TemporaryDirectory(prefix="calib-summarizer-") as tmp, tool_env(ruleset) as env:
    tmp = Path(tmp)
    shutil.copytree(org_dir, tmp / org_dir.name)
    p = subprocess.run([sys.executable, "-m", "mlperf_logging.result_summarizer", str(tmp / org_dir.name), "training",
                        ruleset, "--csv", str(tmp / "s.csv")], cwd=tmp, capture_output=True, text=True, errors="replace",
                       env=env)
    scores: dict[str, float | None] = {}
    if (tmp / "s.csv").exists():
      with open(tmp / "s.csv", newline="") as f:
        for row in csv.DictReader(f):
          m = re.search(r"/systems/(.+)\.json$", row.get("details_url", ""))
          v = row.get("bert")
          if m and v is not None: scores[m.group(1)] = float(v) if v != "" else None
    tail = [l for l in (p.stdout + p.stderr).splitlines() if l.strip()][-1:] or [""]
    return scores, f"exit {p.returncode}: {tail[0][:200]}"


def log_stats(bert: Path) -> list[dict]:
  """Each result log's size, its lines that are no :::MLLOG record (count, bytes) and its lines that are not UTF-8."""
  out = []
  for p in sorted(bert.glob("result_*.txt")):
    log = read_log(p)
    out.append({"log": p.name, "bytes": p.stat().st_size, "other_lines": len(log.other_lines),
                "other_bytes": sum(len(t.encode("latin-1", "replace")) + 1 for _, t in log.other_lines),
                "non_utf8_lines": len(log.non_utf8), "unread": log.unread})
  return out


def audit_org(org_dir: Path, ruleset: str) -> dict:
  """The audit by its CLI, the summarizer and the logs' figures for one extracted organization."""
  with tempfile.TemporaryDirectory(prefix="calib-audit-") as tmp:
    out = Path(tmp) / "audit.json"
    t, c = time.perf_counter(), _cpu()
    p = subprocess.run([sys.executable, "-m", "mlperf_bert", "audit", str(org_dir), "--ruleset", ruleset, "--json",
                        str(out)], cwd=ROOT, capture_output=True, text=True, errors="replace")
    secs, cpu = time.perf_counter() - t, _cpu() - c
    audit = json.loads(out.read_text()) if out.exists() else None
  scores, summ = summarizer_scores(org_dir, ruleset)
  systems = sorted(d.parent.name for d in org_dir.glob("results/*/bert"))
  return {"org": org_dir.name, "exit": p.returncode, "seconds": round(secs, 1), "cpu_seconds": round(cpu, 1),
          "stderr_tail": (p.stderr.strip().splitlines() or [""])[-1][:300], "audit": audit,
          "summarizer": scores, "summarizer_run": summ,
          "logs": {s: log_stats(org_dir / "results" / s / "bert") for s in systems}}


def _cpu_model() -> str:
  try:
    return next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
  except (OSError, StopIteration):
    return platform.machine()


def _cpu() -> float:
  r = resource.getrusage(resource.RUSAGE_CHILDREN)
  return r.ru_utime + r.ru_stime


def _findings(rows: list[dict]) -> list[dict]:
  """The FAIL and WARN rows, one entry per (status, check) with how many rows and the first one's subject and reason."""
  out: dict[tuple, dict] = {}
  for r in rows:
    if r["status"] not in ("FAIL", "WARN"): continue
    f = out.setdefault((r["status"], r["check"]), {"status": r["status"], "check": r["check"], "rows": 0,
                                                   "subject": r["subject"], "reason": r["reason"][:FINDING_CHARS]})
    f["rows"] += 1
  return list(out.values())


def system_rows(rnd: str, res: dict) -> list[dict]:
  """The table's rows of one organization's results."""
  org, audit = res["org"], res["audit"]
  rows = []
  own = lambda r, s: r["subject"] == s or r["subject"].startswith(s + "/")
  systems = sorted(res["logs"])
  org_rows = [r for r in (audit or {}).get("rows", []) if not any(own(r, s) for s in systems)]
  for s in systems:
    mine = [r for r in (audit or {}).get("rows", []) if own(r, s)]
    counts = {k: sum(r["status"] == k for r in mine) for k in ("PASS", "FAIL", "WARN", "DROP", "SKIP")}
    score = ((audit or {}).get("scores", {}).get(f"{org}/{s}") or {})
    summ = res["summarizer"].get(s)
    logs = res["logs"][s]
    findings = _findings(mine + org_rows)
    verdict = ("ERROR" if audit is None else "FAIL" if any(f["status"] == "FAIL" for f in findings) else
               "WARN" if findings else "PASS")
    rows.append({
      "round": rnd, "org": org, "system": s, "verdict": verdict, "counts": counts,
      "audit_score": score.get("score"), "scaling_factor": score.get("scaling_factor"), "summarizer_score": summ,
      "score_equal": (score.get("score") is not None and summ is not None
                      and math.isclose(score["score"], summ, rel_tol=1e-9, abs_tol=1e-9)) if summ is not None else None,
      "logs": len(logs), "log_bytes_max": max((l["bytes"] for l in logs), default=0),
      "other_lines_max": max((l["other_lines"] for l in logs), default=0),
      "other_bytes_max": max((l["other_bytes"] for l in logs), default=0),
      "non_utf8_lines_max": max((l["non_utf8_lines"] for l in logs), default=0),
      "findings": findings})
  if audit is None:
    for r in rows: r["findings"] = [{"status": "ERROR", "check": "audit", "rows": 1, "subject": org,
                                     "reason": f"the audit wrote no JSON (exit {res['exit']}): {res['stderr_tail']}"}]
  return rows


def summary(rows: list[dict]) -> list[dict]:
  out = []
  for rnd in sorted({r["round"] for r in rows}, key=lambda v: tuple(map(int, v.split(".")))):
    rr = [r for r in rows if r["round"] == rnd]
    audited = [r for r in rr if r["verdict"] != "ABSENT"]
    out.append({"round": rnd, "systems": len(rr), "audited": len(audited),
                "absent": len(rr) - len(audited),
                "scored": sum(r["summarizer_score"] is not None for r in audited),
                "PASS": sum(r["verdict"] == "PASS" for r in audited), "WARN": sum(r["verdict"] == "WARN" for r in audited),
                "FAIL": sum(r["verdict"] in ("FAIL", "ERROR") for r in audited),
                "score_equal": sum(bool(r["score_equal"]) for r in audited),
                "score_mismatch": sum(r["score_equal"] is False for r in audited)})
  return out


def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
  ap.add_argument("--scratch", type=Path, default=Path("/tmp/calib"), help="extracted BERT parts and per-org results")
  ap.add_argument("--round", action="append", choices=ROUNDS, help="only these rounds (default: all)")
  ap.add_argument("--org", action="append", help="only these organizations (the table then holds only them)")
  ap.add_argument("--out", type=Path, default=ROOT / "tests" / "fixtures" / "audit-calibration.json")
  ap.add_argument("--fresh", action="store_true", help="extract and audit again what --scratch already holds")
  ap.add_argument("--merge", type=Path, help="an earlier table whose rounds not named by --round are kept as they are "
                  "(their rows and meta, with the date they were made)")
  a = ap.parse_args(argv)
  rows, meta = [], {"rounds": {}}
  if a.merge:
    old = json.loads(a.merge.read_text())
    kept = [r for r in old["meta"]["rounds"] if r not in (a.round or ROUNDS)]
    meta["rounds"] = {r: {"rules": rules_in_force(f"{r}.0"), **old["meta"]["rounds"][r],
                          "made": old["meta"]["rounds"][r].get("made", old["meta"]["date"])} for r in kept}
    rows = [r for r in old["rows"] if r["round"] in kept]
  for rnd in a.round or ROUNDS:
    repo = a.mirrors / f"mlcommons+training_results_v{rnd}" / "repo"
    base = a.scratch / f"v{rnd}"
    state = base / "_calib" / "extract.json"
    if a.fresh or not state.exists():
      ex = extract(repo, base / "orgs")
      state.parent.mkdir(parents=True, exist_ok=True)
      state.write_text(json.dumps(ex, indent=1))
    ex = json.loads(state.read_text())
    meta["rounds"][rnd] = {"repository": f"github.com/mlcommons/training_results_v{rnd}", "commit": ex["commit"],
                           "ruleset": f"{rnd}.0", "rules": rules_in_force(f"{rnd}.0"), "absent_logs": ex["absent"],
                           "made": datetime.date.today().isoformat()}
    for sysname, paths in sorted(ex["absent"].items()):
      org, system = sysname.split("/", 1)
      if a.org and org not in a.org: continue
      rows.append({"round": rnd, "org": org, "system": system, "verdict": "ABSENT", "counts": {},
                   "audit_score": None, "scaling_factor": None, "summarizer_score": None, "score_equal": None,
                   "logs": 0, "findings": [{"status": "ABSENT", "check": "snapshot", "rows": 1, "subject": sysname,
                   "reason": f"{len(paths)} result log(s) absent from the mirror (files of 4 MiB or more): not audited"}]})
    for org_dir in sorted(p for p in (base / "orgs").iterdir() if any(p.glob("results/*/bert"))
                          and (not a.org or p.name in a.org)):
      cache = base / "_calib" / f"{org_dir.name}.json"
      if a.fresh or not cache.exists():
        res = audit_org(org_dir, f"{rnd}.0")
        cache.write_text(json.dumps(res))
      res = json.loads(cache.read_text())
      got = system_rows(rnd, res)
      for r in got:
        bad = [f"{f['status']} {f['check']} {f['subject']}" for f in r["findings"] if f["status"] in ("FAIL", "ERROR")]
        print(f"v{rnd} {r['org'][:20]:<20} {r['system'][:44]:<44} {r['verdict']:<5} "
              f"{r['audit_score'] if r['audit_score'] is None else round(r['audit_score'], 3)!s:>9} "
              f"{r['summarizer_score'] if r['summarizer_score'] is None else round(r['summarizer_score'], 3)!s:>9} "
              f"{'' if r['score_equal'] is None else 'eq' if r['score_equal'] else 'DIFF'} {res['seconds']}s "
              + "; ".join(bad[:3]), flush=True)
      rows.extend(got)
  from importlib.metadata import version
  meta.update({"made_by": "tools/calibrate_audit.py", "date": datetime.date.today().isoformat(),
               "mlperf_logging": version("mlperf-logging"), "machine": f"{_cpu_model()}, "
               f"{os.cpu_count()} cores"})
  rows.sort(key=lambda r: (tuple(map(int, r["round"].split("."))), r["org"], r["system"]))
  meta["rounds"] = dict(sorted(meta["rounds"].items(), key=lambda kv: tuple(map(int, kv[0].split(".")))))
  table = {"meta": meta, "summary": summary(rows), "rows": rows}
  a.out.parent.mkdir(parents=True, exist_ok=True)
  a.out.write_text("{\n" + ",\n".join(f"{json.dumps(k)}: " + (json.dumps(v, indent=1) if k != "rows" else "[\n"
                   + ",\n".join(json.dumps(r) for r in v) + "\n]") for k, v in table.items()) + "\n}\n")  # a row a line
  print(f"\n{'ROUND':<6} {'SYSTEMS':>7} {'AUDITED':>7} {'ABSENT':>6} {'SCORED':>6} {'PASS':>5} {'WARN':>5} {'FAIL':>5} "
        f"{'EQUAL':>6} {'DIFF':>5}")
  for s in table["summary"]:
    print(f"v{s['round']:<5} {s['systems']:>7} {s['audited']:>7} {s['absent']:>6} {s['scored']:>6} {s['PASS']:>5} "
          f"{s['WARN']:>5} {s['FAIL']:>5} {s['score_equal']:>6} {s['score_mismatch']:>5}")
  print(f"table: {a.out}")
  return 0 if all(s["FAIL"] == 0 and s["score_mismatch"] == 0 for s in table["summary"]) else 1


if __name__ == "__main__":
  sys.exit(main())
