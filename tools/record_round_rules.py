"""Record the rules of each MLPerf Training round's own release: the BERT compliance-checker configs and RCPs of the
mlcommons/logging release tag the round was checked with, copied from a mirror into resources/mlperf-rules/<tag>/
with the repository's LICENSE.md (Apache-2.0), and resources/mlperf-rules/rounds.json naming, per ruleset, the tag, its commit and
date, and the files (paths inside the mlperf_logging package).

  python tools/record_round_rules.py [--mirror /work/.mirror/mlcommons+logging/repo] [--out resources/mlperf-rules]

--mirror is a bare git mirror of github.com/mlcommons/logging (the `fetch` tool's layout; `git clone --mirror
https://github.com/mlcommons/logging DIR` makes the same). A round's tag is the last release candidate of its ruleset
(`X.Y.0-rcN`, highest N), the checker its submitters ran: 2.1.0-rc3 (2022-10-06) for v2.1, whose closed_bert.yaml
asks `opt_epsilon` where the installed one asks `opt_lamb_epsilon` (mlcommons/logging d82b94d, 2022-11-22, after
the v2.1 results). The tags of training 0.7.0 and 1.0.0 keep their configs at `compliance_checker/X.Y.Z/` and name
them so, a layout today's checker does not read: those rounds are checked with the installed rules and none are kept
for them (1.0.0-rc4's BERT configs are the installed ones but for that directory name, its RCPs but for a
`gradient_accumulation_steps` field the installed ones add).
"""
from __future__ import annotations
import argparse, json, re, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RULESETS = ("1.1.0", "2.0.0", "2.1.0", "3.0.0", "3.1.0", "4.0.0", "4.1.0", "5.0.0")   # BERT's, from 1.1.0 (see above)
# the files of a ruleset that check BERT logs (package_checker and result_summarizer read the same)
BERT_FILES = ("compliance_checker/training_{r}/common.yaml", "compliance_checker/training_{r}/closed_common.yaml",
              "compliance_checker/training_{r}/open_common.yaml", "compliance_checker/training_{r}/closed_bert.yaml",
              "compliance_checker/training_{r}/open_bert.yaml", "rcp_checker/training_{r}/rcps_bert.json")


def _git(repo: Path, *args: str) -> bytes:
  return subprocess.run(["git", "--git-dir", str(repo), *args], capture_output=True, check=True).stdout


def round_tag(repo: Path, ruleset: str) -> str:
  """The last release candidate of the ruleset: X.Y.0-rcN with the highest N."""
  rcs = [t for t in _git(repo, "tag").decode().split() if re.fullmatch(rf"{re.escape(ruleset)}-rc\d+", t)]
  if not rcs:
    raise SystemExit(f"{repo}: no tag {ruleset}-rcN; fetch github.com/mlcommons/logging with its tags")
  return max(rcs, key=lambda t: int(t.rsplit("rc", 1)[1]))


def record(repo: Path, out: Path, ruleset: str) -> dict:
  tag = round_tag(repo, ruleset)
  commit = _git(repo, "rev-list", "-n", "1", tag).decode().strip()
  date = _git(repo, "log", "-1", "--format=%cd", "--date=short", commit).decode().strip()
  present = set(_git(repo, "ls-tree", "-r", "--name-only", commit, "mlperf_logging/").decode().splitlines())
  files = []
  for pattern in BERT_FILES:
    rel = pattern.format(r=ruleset)
    if f"mlperf_logging/{rel}" not in present: continue
    dest = out / tag / "mlperf_logging" / rel
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(_git(repo, "show", f"{commit}:mlperf_logging/{rel}"))
    files.append(rel)
  if not any(f.endswith("/common.yaml") for f in files):
    raise SystemExit(f"{tag}: no compliance_checker/training_{ruleset}/common.yaml; not a ruleset the checker reads")
  (out / tag / "LICENSE.md").write_bytes(_git(repo, "show", f"{commit}:LICENSE.md"))   # Apache-2.0
  print(f"training {ruleset}: {tag} {commit[:10]} {date}: {len(files)} files")
  return {"tag": tag, "commit": commit, "date": date, "files": files}


def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--mirror", type=Path, default=Path("/work/.mirror/mlcommons+logging/repo"))
  ap.add_argument("--out", type=Path, default=ROOT / "resources" / "mlperf-rules")
  a = ap.parse_args(argv)
  rounds = {r: record(a.mirror, a.out, r) for r in RULESETS}
  manifest = {"source": "https://github.com/mlcommons/logging", "license": "Apache-2.0 (LICENSE.md beside each tag's files)",
              "made_by": "tools/record_round_rules.py",
              "paths": "resources/mlperf-rules/<tag>/mlperf_logging/<file>, <file> as in the mlperf_logging package",
              "rounds": rounds}
  (a.out / "rounds.json").write_text(json.dumps(manifest, indent=1) + "\n")
  return 0


if __name__ == "__main__":
  sys.exit(main())
