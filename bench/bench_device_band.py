#!/usr/bin/env python3
"""How far a change of kernels, device count or float type moves the masked-LM logits of a finished run's last eval:
the measurement behind the audit's device band (mlperf_bert/audit/reexec.py, REL_EPS; docs/audit.md).

    python bench/bench_device_band.py BASEDIR/results/cpu/result_bert_0.train.json [--batches 1]

Evaluates the record's last-eval batches on its final weights in one process per configuration (each exports its
tinygrad settings before importing tinygrad, as the audit's eval process does) and saves the logits; then, against the
reference (the record's own settings on one CPU device), prints for each configuration the largest logit difference
relative to the largest |logit| of its prediction, the predictions whose argmax moved, and the near ties the band
would count at that relative bound. Configurations: float32 with tinygrad's kernel optimizations off (NOOPT=1:
other kernels, another summation order), float32 on two CPU devices (data parallel), HALF and BFLOAT16 (weights and
activations in the 16-bit type, the decoder in float32 as the model has it), and FLOAT64 (the model in float64 but
its float32 decoder table: how far float32's own rounding is from the exact logits). Prints figures only.
"""
from __future__ import annotations
import argparse, json, os, subprocess, sys, tempfile, time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

CONFIGS = {  # name: (settings overrides, extra environment, devices)
  "reference": ({}, {}, 1),
  "float32 NOOPT=1": ({}, {"NOOPT": "1"}, 1),
  "float32 2 CPU devices": ({"GPUS": 2}, {}, 2),
  "half": ({"DEFAULT_FLOAT": "HALF", "FLOAT": "half"}, {}, 1),
  "bfloat16": ({"DEFAULT_FLOAT": "BFLOAT16", "FLOAT": "bfloat16"}, {}, 1),
  "float64": ({"DEFAULT_FLOAT": "FLOAT64", "FLOAT": "float64"}, {}, 1),  # the exact side of float32's rounding
}


def child(record: str, name: str, n: int, out: str) -> None:
  from mlperf_bert.train.environment import export_tinygrad_env
  from mlperf_bert.train.record import read_record
  from mlperf_bert.train.settings import Settings
  over, env, ndev = CONFIGS[name]
  rec = read_record(record)
  s = Settings.from_dict({**rec["settings"], **over})
  export_tinygrad_env(s, os.environ); os.environ.update(env)
  from mlperf_bert.data.shards import Shard
  from mlperf_bert.train.evaluation import eval_inputs
  from mlperf_bert.train.evidence import load_final_weights
  from mlperf_bert.train import trainer as trainer_module
  from mlperf_bert.train.trainer import ModelTrainer, devices_for, model_config
  from tinygrad import dtypes
  trainer_module.FLOAT_DTYPES.setdefault("float64", dtypes.float64)  # this measurement only: the model has no float64
  rp = Path(record)
  cfg = model_config(rp.parent / rec["bert_config"]["path"], s.model)
  trainer = ModelTrainer(cfg, s, devices_for("CPU", ndev), seed=s.seed)
  load_final_weights(trainer, rp.parent / rec["final_weights"]["path"])
  shard = Shard(rp.parent / rec["eval_set"]["path"])
  logits, ids, w = [], [], []
  for i, (b, mask) in enumerate(eval_inputs(shard, s.eval, int(rec["last_eval"]["evals_done"]))):
    if i >= n: break
    logits.append(trainer.mlm_logits(b)); ids.append(b["masked_lm_ids"]); w.append(b["masked_lm_weights"] * mask[:, None])
  np.savez(out, logits=np.stack(logits), ids=np.stack(ids), w=np.stack(w))


def compare(ref: dict, got: dict) -> dict:
  L, G, ids, w = ref["logits"], got["logits"], ref["ids"].astype(np.int64), ref["w"]
  scale = np.abs(L).max(-1)
  rel = np.abs(G.astype(np.float64) - L).max(-1) / scale
  moved = (L.argmax(-1) != G.argmax(-1)) & (w > 0)
  lab = np.take_along_axis(L, ids[..., None], -1)[..., 0]
  others = L.copy(); np.put_along_axis(others, ids[..., None], -np.inf, -1)
  margin = np.abs(lab - others.max(-1)) / scale
  flips = ((L.argmax(-1) == ids) != (G.argmax(-1) == ids)) & (w > 0)
  return {"max_rel": float(rel[w > 0].max()), "p99_rel": float(np.quantile(rel[w > 0], 0.99)),
          "argmax_moved": int(moved.sum()), "correct_flipped": int(flips.sum()),
          "smallest_margin_of_a_flip": float(margin[flips].min()) if flips.any() else None,
          "predictions": int((w > 0).sum()), "min_margin": float(margin[w > 0].min())}


def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("record")
  ap.add_argument("--batches", type=int, default=1)
  ap.add_argument("--configs", nargs="+", choices=list(CONFIGS)[1:], default=list(CONFIGS)[1:])
  ap.add_argument("--child", nargs=2, metavar=("NAME", "OUT"), help=argparse.SUPPRESS)
  a = ap.parse_args()
  if a.child:
    child(a.record, a.child[0], a.batches, a.child[1]); return 0
  from machine import describe
  print(f"machine: {describe()}; date {time.strftime('%Y-%m-%d')}")
  with tempfile.TemporaryDirectory() as tmp:
    got = {}
    for name in ["reference", *a.configs]:
      out = str(Path(tmp) / f"{len(got)}.npz")
      st = time.perf_counter()
      p = subprocess.run([sys.executable, __file__, a.record, "--batches", str(a.batches), "--child", name, out],
                         capture_output=True, text=True)
      if p.returncode:
        print(f"{name}: failed: {p.stderr.strip().splitlines()[-1] if p.stderr.strip() else p.returncode}"); continue
      got[name] = dict(np.load(out))
      print(f"{name}: evaluated in {time.perf_counter() - st:.0f} s", flush=True)
    ref = got.pop("reference")
    for name, g in got.items():
      print(f"{name:24s} {json.dumps(compare(ref, g))}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
