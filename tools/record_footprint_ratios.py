"""Measure what the footprint plan scales by (mlperf_bert/data/footprint.py, train/footprint.py) and record it in
resources/footprint/ratios.json: shard bytes per byte of topic text and eval-set bytes per row at the demo's
(128 / 20) and MLPerf's (512 / 76) settings, built from the demo corpus with this checkout's shard builder; the text's
gzip ratio (the extract job's estimate of a tarball too large to list); and, from a finished demo tree (`--tree`, the
demo's results/demo), the small files: a verified stamp, a shard sidecar, a job log by rule, the report's figures and
a seed's records.

    python tools/record_footprint_ratios.py --tree results/demo

Prints the figures; writes the JSON only with --write.
"""
from __future__ import annotations
import argparse, json, platform, subprocess, sys, tarfile, tempfile, time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
OUT = REPO / "resources" / "footprint" / "ratios.json"
DEMO = REPO / "resources" / "demo"
SETTINGS = ((128, 20), (512, 76))  # the demo's and MLPerf's max_seq_length / max_predictions_per_seq


def _cpu() -> str:
  for line in Path("/proc/cpuinfo").read_text().splitlines():
    if line.startswith("model name"):
      return line.split(":", 1)[1].strip()
  return platform.processor()


def measure_shards(work: Path) -> dict:
  from mlperf_bert.data.evalset import build_evalset
  from mlperf_bert.data.instances import build_shard
  text = work / "results4"
  with tarfile.open(DEMO / "results_text.tar.gz") as tar:
    for m in tar.getmembers():
      if m.isfile():
        (text / Path(m.name).name).parent.mkdir(parents=True, exist_ok=True)
        (text / Path(m.name).name).write_bytes(tar.extractfile(m).read())
  topics = sorted(p for p in text.iterdir() if p.name.startswith("part-"))
  text_bytes = sum(p.stat().st_size for p in topics)
  out = {}
  for seq, pred in SETTINGS:
    shard_bytes, once, instances = 0, 0, 0
    for t in topics:
      st = build_shard(t, DEMO / "vocab.txt", work / f"{seq}" / f"{t.name}.shard", max_seq_length=seq,
                       max_predictions_per_seq=pred, log=None, space_check=False)
      shard_bytes += st["bytes"]
      instances += st["instances"]
      # dupe_factor 1: the token stream is stored once whatever the factor, the instances once per duplicate
      once += build_shard(t, DEMO / "vocab.txt", work / f"{seq}" / f"{t.name}.1.shard", max_seq_length=seq,
                          max_predictions_per_seq=pred, dupe_factor=1, log=None,
                          space_check=False)["bytes"]
    ev = build_evalset(text / "eval.txt", DEMO / "vocab.txt", work / f"{seq}" / "eval.shard", num_examples=10000,
                       max_seq_length=seq, max_predictions_per_seq=pred, log=None, space_check=False)
    out[f"{seq}/{pred}"] = {"topics": len(topics), "text_bytes": text_bytes, "shard_bytes": shard_bytes,
                            "shard_per_text_byte": round(shard_bytes / text_bytes, 4),
                            "shard_bytes_dupe_1": once,
                            "per_duplicate": round((shard_bytes - once) / 9 / text_bytes, 4),
                            "instances_per_text_byte": round(instances / text_bytes, 6),
                            "eval_rows": 10000, "eval_bytes": ev["bytes"], "eval_per_row": round(ev["bytes"] / 10000, 2),
                            "eval_text_bytes": (text / "eval.txt").stat().st_size}
    print(f"{seq}/{pred}: {shard_bytes:,} bytes of shards from {text_bytes:,} bytes of text "
          f"({shard_bytes / text_bytes:.3f}x); eval set {ev['bytes']:,} bytes for 10,000 rows", flush=True)
  gz = (DEMO / "results_text.tar.gz").stat().st_size
  tar_bytes = text_bytes + (text / "eval.txt").stat().st_size
  out["text_per_gzip_byte"] = round(tar_bytes / gz, 3)
  return out


def small_files(tree: Path) -> dict:
  """The small files of a finished demo tree (one seed)."""
  size = lambda rel: (tree / rel).stat().st_size
  logs = {}
  for p in sorted((tree / "logs").rglob("*.log")):
    rule = p.relative_to(tree / "logs").parts[0]
    logs.setdefault(rule, []).append(p.stat().st_size)
  steps = 150  # the demo's seed 0 reaches TARGET at step 150 (README)
  train_log = size("logs/train/cpu/seed_0.log")
  return {
    "verified_stamp": max(p.stat().st_size for p in (tree / "verified").iterdir()),
    "shard_sidecar": size("shards/part-00000-of-00008.shard.sha256"),
    "sha256sums_line": round(size("shards/SHA256SUMS") / 8),
    "job_log": {rule: max(v) for rule, v in logs.items() if rule != "train"},
    "train_log_per_step": round(train_log / steps, 1),
    "records_per_seed": sum(size(f"results/cpu/result_bert_0.{k}") for k in ("log", "train.json", "provenance.json")),
    "run_figure": size("report/cpu/run_0.png"),
    "shards_figure": size("report/shards.png"),
    "audit_page": size("report/audit.html"),
    "folder": 4096,
  }


def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--tree", type=Path, required=True, help="a finished demo tree (results/demo)")
  ap.add_argument("--write", action="store_true", help=f"write {OUT.relative_to(REPO)}")
  a = ap.parse_args()
  t0 = time.time()
  with tempfile.TemporaryDirectory() as d:
    shards = measure_shards(Path(d))
  commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
  rec = {"recorded": time.strftime("%Y-%m-%d"), "machine": f"{_cpu()}, {__import__('os').cpu_count()} cores",
         "commit": commit, "by": "tools/record_footprint_ratios.py", "shards": shards, "small": small_files(a.tree)}
  print(json.dumps(rec, indent=1))
  print(f"({time.time() - t0:.0f} s)")
  if a.write:
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(rec, indent=1) + "\n")
    print(f"wrote {OUT.relative_to(REPO)}")
  return 0


if __name__ == "__main__":
  raise SystemExit(main())
