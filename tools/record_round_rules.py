"""Record the rules of each MLPerf Training round as they stood when its results were published: the BERT
compliance-checker configs and RCPs of mlcommons/logging at the last commit of its main line before the round's
first commit to github.com/mlcommons/training_results_vX.Y, copied from a mirror into
resources/mlperf-rules/<ruleset>/ with the repository's LICENSE.md (Apache-2.0), and resources/mlperf-rules/rounds.json
naming, per ruleset, that commit, its date, the release tag it is at or after, the round's results commit and date,
and the files (paths inside the mlperf_logging package).

  python tools/record_round_rules.py [--mirror /work/.mirror/mlcommons+logging/repo] [--results /work/.mirror]
                                     [--out resources/mlperf-rules]

--mirror is a bare git mirror of github.com/mlcommons/logging, --results holds the training_results mirrors
(`mlcommons+training_results_vX.Y/repo`, the `fetch` tool's layout; `git clone --mirror URL DIR` makes the same).
The rules at publication, not at the round's last release candidate: review changed them in between, and MLCommons
accepted what the changed rules pass (training_3.1.0/common.yaml took `step_num` for `epoch_num` on 2023-10-03,
after 3.1.0-rc3 and before the v3.1 results; training_2.1.0's RCPs changed on 2022-10-13, after 2.1.0-rc3). What
changed after the round is not its rules: training_2.1.0/closed_bert.yaml asks `opt_lamb_epsilon` for `opt_epsilon`
since d82b94d (2022-11-22), after the v2.1 results. Rulesets 0.7.0 and 1.0.0 then kept their configs at
`compliance_checker/X.Y.Z/` and named them so, a layout today's checker does not read: those rounds are checked
with the installed rules and none are kept for them (1.0.0's BERT configs are the installed ones but for that
directory name, its RCPs but for a `gradient_accumulation_steps` field the installed ones add).
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


def published(results: Path, ruleset: str) -> tuple[str, str]:
  """The round's first commit to its training_results repository and its date (ISO): when its results came out."""
  repo = results / f"mlcommons+training_results_v{ruleset.rsplit('.', 1)[0]}" / "repo"
  first = _git(repo, "log", "--reverse", "--format=%H %cI", "HEAD").decode().splitlines()[0].split()
  return first[0], first[1]


def record(repo: Path, results: Path, out: Path, ruleset: str) -> dict:
  res_commit, res_date = published(results, ruleset)
  commit = _git(repo, "rev-list", "-n", "1", "--first-parent", f"--before={res_date}", "HEAD").decode().strip()
  date = _git(repo, "log", "-1", "--format=%cd", "--date=short", commit).decode().strip()
  tag = _git(repo, "describe", "--tags", commit).decode().strip()   # the release tag it is at or after
  present = set(_git(repo, "ls-tree", "-r", "--name-only", commit, "mlperf_logging/").decode().splitlines())
  files = []
  for pattern in BERT_FILES:
    rel = pattern.format(r=ruleset)
    if f"mlperf_logging/{rel}" not in present: continue
    dest = out / ruleset / "mlperf_logging" / rel
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(_git(repo, "show", f"{commit}:mlperf_logging/{rel}"))
    files.append(rel)
  if not any(f.endswith("/common.yaml") for f in files):
    raise SystemExit(f"{commit}: no compliance_checker/training_{ruleset}/common.yaml; not a layout the checker reads")
  (out / ruleset / "LICENSE.md").write_bytes(_git(repo, "show", f"{commit}:LICENSE.md"))   # Apache-2.0
  print(f"training {ruleset}: results {res_commit[:8]} {res_date}: mlcommons/logging {commit[:10]} {date} ({tag}): "
        f"{len(files)} files")
  return {"commit": commit, "date": date, "tag": tag, "results_commit": res_commit, "results_date": res_date,
          "files": files}


def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--mirror", type=Path, default=Path("/work/.mirror/mlcommons+logging/repo"))
  ap.add_argument("--results", type=Path, default=Path("/work/.mirror"), help="the training_results mirrors")
  ap.add_argument("--out", type=Path, default=ROOT / "resources" / "mlperf-rules")
  a = ap.parse_args(argv)
  rounds = {r: record(a.mirror, a.results, a.out, r) for r in RULESETS}
  manifest = {"source": "https://github.com/mlcommons/logging", "license": "Apache-2.0 (LICENSE.md beside each tag's files)",
              "made_by": "tools/record_round_rules.py",
              "paths": "resources/mlperf-rules/<ruleset>/mlperf_logging/<file>, <file> as in the mlperf_logging package",
              "when": "mlcommons/logging's main line at the round's first commit to training_results_vX.Y",
              "rounds": rounds}
  (a.out / "rounds.json").write_text(json.dumps(manifest, indent=1) + "\n")
  return 0


if __name__ == "__main__":
  sys.exit(main())
