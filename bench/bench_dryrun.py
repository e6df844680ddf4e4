"""Time `snakemake -n` over a 500-topic manifest (the real dataset's shape).

Builds a scratch tree whose downloads and results4/ already exist (tiny stand-in files: the dry run reads
no text), then times a dry run that must plan verify + shard jobs for all 500 topics.

    .venv/bin/python bench/bench_dryrun.py [--topics 500]
"""
import argparse, hashlib, subprocess, sys, tempfile, time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--topics", type=int, default=500)
  args = ap.parse_args()
  with tempfile.TemporaryDirectory() as tmp:
    base = Path(tmp) / "wiki"
    (base / "download").mkdir(parents=True)
    (base / "results4").mkdir()
    lines = []
    for i in range(args.topics):
      name = f"part-{i:05d}-of-{args.topics:05d}"
      data = f"topic {i}\n".encode()
      (base / "results4" / name).write_bytes(data)
      lines.append(f"{hashlib.md5(data).hexdigest()}  ./{name}\n")
    (base / "results4" / "eval.txt").write_bytes(b"eval\n")
    lines.append(f"{hashlib.md5(b'eval' + bytes([10])).hexdigest()}  ./eval.txt\n")
    (base / "download" / "bert_reference_results_text_md5.txt").write_text("".join(lines))
    for f in ("results_text.tar.gz", "vocab.txt", "bert_config.json"):
      (base / "download" / f).write_bytes(b"stand-in")
    time.sleep(0.01)
    # the extract checkpoint's listing, newer than its inputs: extraction is complete
    (base / "results4.files").write_text("".join(f"{p.stat().st_size}  {p.name}\n" for p in (base / "results4").iterdir()))
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "-d", tmp, "--cores", "16", "-n",
           "--quiet", "rules", "--config", f"basedir={base}"]
    best = None
    for _ in range(3):
      t0 = time.perf_counter()
      r = subprocess.run(cmd, capture_output=True, text=True)
      dt = time.perf_counter() - t0
      if r.returncode != 0:
        sys.exit(f"dry run failed:\n{r.stdout}\n{r.stderr}")
      best = dt if best is None else min(best, dt)
    print(r.stdout.strip())
    assert f"shard {args.topics}" in " ".join(r.stdout.split()), "the dry run did not plan a shard job per topic"
    print(f"snakemake -n over a {args.topics}-topic manifest: {best:.2f} s (best of 3)")


if __name__ == "__main__":
  main()
