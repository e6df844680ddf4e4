"""Time `snakemake -n` over a 500-topic manifest (the real dataset's shape), or over many seeds.

Builds a scratch tree whose downloads and results4/ already exist (tiny stand-in files: the dry run reads
no text), then times a dry run that must plan verify + shard jobs for all 500 topics and, with `--seeds N`, the
train and provenance jobs of seeds 0..N-1 and their figures (planning must stay near-linear in both). More seeds than
the config schema's `seeds` maxItems are refused at once (the dry run fails, naming the bound). Prints the best wall
time and the CPU time (user + system) of that dry run: compare CPU times on a shared machine.

    .venv/bin/python bench/bench_dryrun.py [--topics 500] [--seeds 1] [--repeat 3]
"""
import argparse, hashlib, resource, subprocess, sys, tempfile, time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--topics", type=int, default=500)
  ap.add_argument("--seeds", type=int, default=1, help="plan seeds 0..N-1 (config key seeds)")
  ap.add_argument("--repeat", type=int, default=3, help="best of this many dry runs")
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
    if args.seeds > 1:
      (Path(tmp) / "seeds.yaml").write_text(f"seeds: [{', '.join(map(str, range(args.seeds)))}]\n")
      cmd[cmd.index("--config"):cmd.index("--config")] = ["--configfile", str(Path(tmp) / "seeds.yaml")]
    best = best_cpu = None
    for _ in range(args.repeat):
      before = resource.getrusage(resource.RUSAGE_CHILDREN)
      t0 = time.perf_counter()
      r = subprocess.run(cmd, capture_output=True, text=True)
      dt = time.perf_counter() - t0
      after = resource.getrusage(resource.RUSAGE_CHILDREN)
      cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
      if r.returncode != 0:
        sys.exit(f"dry run failed:\n{r.stdout}\n{r.stderr}")
      if best is None or dt < best: best, best_cpu = dt, cpu
    print(r.stdout.strip())
    assert f"shard {args.topics}" in " ".join(r.stdout.split()), "the dry run did not plan a shard job per topic"
    if args.seeds > 1:
      assert f"train {args.seeds}" in " ".join(r.stdout.split()), "the dry run did not plan a train job per seed"
    print(f"snakemake -n over a {args.topics}-topic manifest and {args.seeds} seeds: {best:.2f} s "
          f"(best of {args.repeat}; {best_cpu:.2f} s of CPU)")


if __name__ == "__main__":
  main()
