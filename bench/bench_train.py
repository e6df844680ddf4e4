"""Training step time, GFLOPS and loader throughput for a platform on a basedir's shards (BENCHMARK=N style):
N steps from a fresh model, the median step, the estimated time to TRAIN_STEPS, GFLOPS, samples/s.

  .venv/bin/python bench/bench_train.py [--platform cpu] [--basedir results/demo] [--steps 20] [--set KEY=VALUE ...]

The platform's tinygrad settings (USE_ATOMICS, BEAM, DEV, ...) are exported before tinygrad is imported.
"""
import argparse, json, os, sys, time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from mlperf_bert.constants import platform_path
from mlperf_bert.train.environment import export_tinygrad_env
from mlperf_bert.train.hparams import load_platform, resolve


def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--platform", default="cpu")
  ap.add_argument("--basedir", default=str(REPO / "results/demo"))
  ap.add_argument("--steps", type=int, default=20)
  ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE")
  a = ap.parse_args()
  import yaml
  over = {k: yaml.safe_load(v) for k, v in (s.split("=", 1) for s in a.set)}
  base = Path(a.basedir)
  from mlperf_bert.data.shards import Shard
  ev = Shard(base / "eval" / "eval.shard")
  settings = resolve(load_platform(platform_path(REPO, a.platform)), over, seed=0,
                     eval_examples=len(ev))
  hp = settings.as_dict()
  export_tinygrad_env(settings, os.environ)
  from mlperf_bert.train.inputs import RunInputs
  from mlperf_bert.train.evaluation import evaluate
  from mlperf_bert.train.run import TrainRun
  import tempfile
  with tempfile.TemporaryDirectory() as td:
    run = TrainRun(settings, RunInputs.of(
      shards=sorted((base / "shards").glob("*.shard")), eval_set=base / "eval" / "eval.shard",
      bert_config=base / "download" / "bert_config.json", log=Path(td) / "r.log", ckpt_dir=Path(td) / "ckpt",
      max_seq_length=ev.max_seq_length, max_predictions_per_seq=ev.max_predictions_per_seq), echo=False, progress=False)
    t = time.perf_counter()
    r = run.benchmark(a.steps)
    wall = time.perf_counter() - t
    # eval speed: one pass over EVAL_SAMPLES with the jitted eval step
    steps = run._build()
    evaluate(steps, run.eval_shard, settings, run.devices)  # compile
    acc, secs, _ = evaluate(steps, run.eval_shard, settings, run.devices)
  print(f"platform {a.platform}: BS {hp['BS']}, seq {ev.max_seq_length}, pred {ev.max_predictions_per_seq}, "
        f"{run.cfg.num_hidden_layers} layers, hidden {run.cfg.hidden_size}, {hp['FLOAT']}, BEAM {hp.get('BEAM', 0)}")
  print(f"first step (incl. compile): {r['first_step_s']:.1f} s; median step {r['median_step_s'] * 1e3:.1f} ms; "
        f"{r['gflops']:.2f} GFLOPS; {r['samples_per_s']:.1f} train samples/s; fetch {r['median_fetch_ms']:.3f} ms")
  print(f"estimated time for TRAIN_STEPS={hp['TRAIN_STEPS']}: {r['estimated_total_min']:.1f} min")
  print(f"eval: {hp['EVAL_SAMPLES']} samples in {secs:.1f} s ({hp['EVAL_SAMPLES'] / secs:.0f} samples/s)")
  print(f"wall for {a.steps} steps: {wall:.1f} s")
  print(json.dumps({k: round(v, 4) for k, v in r.items()}))


if __name__ == "__main__":
  main()
