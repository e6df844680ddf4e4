"""The footprint a dry run plans against `du` of the tree the run left: per basedir folder, the bytes planned for an
empty basedir of the same config (what `snakemake -n` prints before the first job) beside `du -sb` of the finished
tree's folder (apparent bytes, folders included) and `du -sB1` (the blocks the filesystem gave it).

    .venv/bin/python bench/bench_footprint.py results/demo                                  # the demo's config
    .venv/bin/python bench/bench_footprint.py DIR --snakemake-args --config platform=tinybox_green rehearse=true basedir=DIR

The plan is made with the basedir replaced by an empty scratch folder on the tree's filesystem, so nothing of the
finished tree reaches it.
"""
import argparse, subprocess, sys, tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))


def du(path: Path, *flags: str) -> int:
  if not path.exists():
    return 0
  return int(subprocess.run(["du", "-s", *flags, str(path)], capture_output=True, text=True, check=True).stdout.split()[0])


def main() -> int:
  from machine import describe
  from mlperf_bert.footprint import plan_snakemake_args
  from mlperf_bert.space import human
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("tree", type=Path, help="the finished basedir")
  ap.add_argument("--snakemake-args", nargs=argparse.REMAINDER, default=[], help="its snakemake arguments (the last "
                  "basedir= of --config is replaced by an empty folder)")
  a = ap.parse_args()
  print(describe())
  with tempfile.TemporaryDirectory(dir=a.tree.resolve().parent) as tmp:
    args = [x for x in a.snakemake_args if not x.startswith("basedir=")]
    if "--config" not in args: args.append("--config")
    args.append(f"basedir={Path(tmp) / 'empty'}")
    fp = plan_snakemake_args(args, repo=REPO, workdir=REPO)
  print(f"{'folder':12s} {'planned':>14s} {'du -sb':>14s} {'du -sB1':>14s} {'planned/du':>10s}")
  total_b = total_k = 0
  for f in fp.folders:
    b, k = du(a.tree / f.name, "-b"), du(a.tree / f.name, "-B1")
    total_b, total_k = total_b + b, total_k + k
    ratio = f"{f.done / b:.4f}" if b else "-"
    print(f"{f.name:12s} {f.done:>14,} {b:>14,} {k:>14,} {ratio:>10s}")
  whole_b, whole_k = du(a.tree, "-b"), du(a.tree, "-B1")
  print(f"{'(the rest)':12s} {0:>14,} {whole_b - total_b:>14,} {whole_k - total_k:>14,}")
  print(f"{'total':12s} {fp.done:>14,} {whole_b:>14,} {whole_k:>14,} {fp.done / whole_b:>10.4f}")
  print(f"planned {human(fp.done)}, du -sb {human(whole_b)} ({100 * (fp.done - whole_b) / whole_b:+.2f} %), "
        f"du -sB1 {human(whole_k)} ({100 * (fp.done - whole_k) / whole_k:+.2f} %)")
  print("a seed:", fp.run.describe())
  return 0


if __name__ == "__main__":
  raise SystemExit(main())
