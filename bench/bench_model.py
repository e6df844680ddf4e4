"""Time a forward+backward step of the tinygrad BERT (no optimizer) and report the achieved GFLOPS.

The FLOP count is analytic (matmuls only: 2*m*n*k forward, twice that backward), so it measures useful
work, not tinygrad's kernel ops. The step runs under TinyJit after warm-up steps, dropout on.

    .venv/bin/python bench/bench_model.py [--hidden 128 --layers 2 --heads 2 --intermediate 512 \
        --vocab 30522 --batch 8 --seq 128 --predictions 20 --steps 5 --half]
"""
import argparse, time

import numpy as np
from tinygrad import Context, Device, Tensor, TinyJit, dtypes

from mlperf_bert.train.dress.report import step_flops  # the analytic matmul count (the dress's too)
from mlperf_bert.train.model import BertConfig, BertForPretraining


def main():
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--hidden", type=int, default=128)
  ap.add_argument("--layers", type=int, default=2)
  ap.add_argument("--heads", type=int, default=2)
  ap.add_argument("--intermediate", type=int, default=512)
  ap.add_argument("--vocab", type=int, default=30522)
  ap.add_argument("--batch", type=int, default=8)
  ap.add_argument("--seq", type=int, default=128)
  ap.add_argument("--predictions", type=int, default=20)
  ap.add_argument("--steps", type=int, default=5)
  ap.add_argument("--half", action="store_true", help="fp16 compute (fp32 weights, LayerNorm, softmax, loss)")
  a = ap.parse_args()

  cfg = BertConfig(vocab_size=a.vocab, hidden_size=a.hidden, num_hidden_layers=a.layers,
                   num_attention_heads=a.heads, intermediate_size=a.intermediate, max_position_embeddings=max(512, a.seq))
  model = BertForPretraining(cfg, seed=0, dtype=dtypes.half if a.half else dtypes.float32)
  params = model.parameters()
  rng = np.random.default_rng(0)
  B, S, P = a.batch, a.seq, a.predictions

  def batch():
    return (Tensor(rng.integers(0, a.vocab, (B, S), dtype=np.int32)), Tensor(np.repeat([[0] * (S // 2) + [1] * (S - S // 2)], B, 0).astype(np.int32)),
            Tensor(np.ones((B, S), np.int32)), Tensor(rng.integers(0, S, (B, P), dtype=np.int32)),
            Tensor(rng.integers(0, a.vocab, (B, P), dtype=np.int32)), Tensor(np.ones((B, P), np.float32)),
            Tensor(rng.integers(0, 2, (B,), dtype=np.int32)))

  @TinyJit
  def step(ids, seg, mask, pos, mlm_ids, mlm_w, nsp):
    for p in params: p.grad = None
    loss = model.loss(*model(ids, mask, seg, pos), mlm_ids, mlm_w, nsp)  # forward: FEATURES order
    loss.backward()
    Tensor.realize(loss, *[p.grad for p in params])
    return loss

  flops = step_flops(cfg, B, S, P)
  print(f"device {Device.DEFAULT}; config H={a.hidden} L={a.layers} heads={a.heads} I={a.intermediate} V={a.vocab}; "
        f"batch {B}x{S}, {P} predictions; {'fp16' if a.half else 'fp32'}; {model.num_parameters():,} parameters")
  with Context(TRAINING=1):
    for i in range(2):  # TinyJit captures on the second call
      t = time.perf_counter()
      loss = step(*batch()).item()
      print(f"warm-up {i}: {time.perf_counter() - t:.2f} s (loss {loss:.3f})")
    times = []
    for _ in range(a.steps):
      inputs = [x.realize() for x in batch()]
      t = time.perf_counter()
      step(*inputs).item()
      times.append(time.perf_counter() - t)
  med = float(np.median(times))
  print(f"step (forward+backward): median {med * 1e3:.1f} ms over {a.steps}, "
        f"{flops / 1e9:.2f} GFLOP/step, {flops / med / 1e9:.1f} GFLOPS, {B / med:.1f} sequences/s")


if __name__ == "__main__":
  main()
