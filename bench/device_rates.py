"""One rate of the step-time model's card (mlperf_bert/train/cost/hardware.py), measured with the tinygrad on PYTHONPATH
on its default device; bench/device_check.py --rates runs it once a figure, with the platform's tinygrad settings (BEAM
and the rest) and a tinygrad checkout of the box's own code (e.g. branch mlperf_training_v5.0), and prints each beside
the model's constant. Prints one line, `<what> <value> <unit>`:

  python bench/device_rates.py gemm [--n 8192]     # a half gemm, fp32 accumulate (TC=0 in the environment: the
                                                  # vector units), TFLOPS
  python bench/device_rates.py gemv [--n 16384]    # a half matrix times a vector, GB/s of the matrix read
  python bench/device_rates.py launch [--n 256]    # a captured graph of n one-block kernels, us a kernel

Each figure is the median wall time of 10 runs of a TinyJit-captured function after 3 (BEAM's search, the capture),
synchronized; written against the API tinygrad kept from v5.0 (2025) to 0.14.
"""
from __future__ import annotations
import argparse, statistics, time


def wall(fn, reps: int = 10) -> float:
  from tinygrad import Device
  dev = Device[Device.DEFAULT]
  for _ in range(3): fn()
  dev.synchronize()
  ts = []
  for _ in range(reps):
    st = time.perf_counter()
    fn()
    dev.synchronize()
    ts.append(time.perf_counter() - st)
  return statistics.median(ts)


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("what", choices=("gemm", "gemv", "launch"))
  ap.add_argument("--n", type=int, default=0, help="the size (gemm 8192, gemv 16384, launch 256 kernels)")
  a = ap.parse_args()
  from tinygrad import Tensor, TinyJit, dtypes
  if a.what == "gemm":
    n = a.n or 8192
    x, y = Tensor.empty(n, n, dtype=dtypes.half).realize(), Tensor.empty(n, n, dtype=dtypes.half).realize()
    s = wall(TinyJit(lambda: (x @ y).realize()))
    print(f"gemm {2 * n ** 3 / s / 1e12:.2f} TFLOPS (n {n}, {s * 1e3:.3f} ms)")
  elif a.what == "gemv":
    n = a.n or 16384
    m, v = Tensor.empty(n, n, dtype=dtypes.half).realize(), Tensor.empty(n, 1, dtype=dtypes.half).realize()
    s = wall(TinyJit(lambda: (m @ v).realize()))
    print(f"gemv {2 * n * n / s / 1e9:.1f} GB/s (n {n}, {s * 1e3:.3f} ms)")
  else:
    k = a.n or 256
    x = Tensor.zeros(64).contiguous().realize()

    def chain():
      y = x
      for _ in range(k): y = (y + 1).realize()
      return y
    s = wall(TinyJit(chain))
    print(f"launch {s / k * 1e6:.2f} us ({k} kernels in one graph, {s * 1e3:.3f} ms)")


if __name__ == "__main__":
  main()
