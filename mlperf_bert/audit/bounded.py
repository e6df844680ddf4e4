"""The re-execution's sample, budget and processes.

The sample is a prefix of an order drawn from a seed taken at audit time (`draw_seed`, `draw_order`). A budget names
seconds (a hard bound on the whole re-execution) or a coverage (a share of every sample, however long it takes):
`Budget.parse("300")`, `Budget.parse("300s")`, `Budget.parse("20%")`. Each process of the re-execution runs in a
process group of its own and prints one JSON object a line; at its deadline the whole group is stopped (a compiler,
a kernel search or a worker pool it started included):

    lines, tail, stopped = run_json_lines(cmd, env, deadline)   # deadline: a time.perf_counter() value, or None

Files the audit reads whole (a kept training state: ~4 GB for BERT-large) are read within a deadline too:
`sha256_within(path, deadline)` and `nonfinite_within(path, deadline)` give None when it passes first.
"""
from __future__ import annotations
import hashlib, json, math, os, queue, random, secrets, signal, subprocess, tempfile, threading, time
from dataclasses import dataclass

from mlperf_bert.errors import UserError

@dataclass(frozen=True)
class Budget:
  """seconds: the re-execution ends within them (every process stopped at its share's end); coverage: the share
  (0 < coverage <= 1) of the shards and of each log's eval batches redone, with no time bound."""
  seconds: float | None = None
  coverage: float | None = None

  @classmethod
  def parse(cls, text: str | float | int) -> "Budget":
    """`300` or `300s`: seconds; `20%`: a coverage. UserError (one line) otherwise."""
    s = str(text).strip()
    try:
      if s.endswith("%"):
        c = float(s[:-1]) / 100
        if math.isfinite(c) and 0 < c <= 1: return cls(coverage=c)
      else:
        v = float(s[:-1] if s.endswith("s") else s)
        if math.isfinite(v) and v > 0: return cls(seconds=v)
    except ValueError:
      pass
    raise UserError(f"--reexecute-budget {text}: expected seconds (300, 300s) or a coverage in (0, 100] percent "
                    "(20%: a fifth of the shards and of each log's eval batches, however long it takes)")

  def count(self, n: int) -> int:
    """How many of n items a coverage redoes (at least one of a non-empty sample); n under a time bound."""
    return n if self.coverage is None else min(n, max(1, math.ceil(self.coverage * n - 1e-9)))

  def describe(self) -> str:
    return f"{self.coverage:.0%} coverage" if self.coverage is not None else f"{self.seconds:g} s budget"


def draw_seed() -> int:
  """A fresh seed for the sample (from os.urandom), printed so the same draw can be repeated."""
  return secrets.randbits(32)


def draw_order(n: int, seed: int, salt: str) -> list[int]:
  """0..n-1 in an order drawn from (seed, salt): the sample is a prefix of it, as long as the budget allows."""
  order = list(range(n))
  random.Random(f"{seed}:{salt}").shuffle(order)
  return order


def catch_chance(k: int, n: int) -> str:
  """What a sample of k of n meant for one changed item: the chance it was drawn, and the chance it was not."""
  if k >= n: return "every one redone"
  return (f"a change to any one of the {n} is caught with probability {k}/{n} (missed with probability "
          f"{(n - k) / n:.1%}; --reexecute-budget P% redoes a share P of them)")


def _stop(p: subprocess.Popen) -> None:
  """SIGKILL to the process group: the worker and whatever it started (a compiler, a search's worker pool)."""
  try: os.killpg(p.pid, signal.SIGKILL)
  except (ProcessLookupError, PermissionError): pass


def run_json_lines(cmd: list[str], env: dict, deadline: float | None) -> tuple[list[dict], str, bool]:
  """Run `cmd` in a new session (its own process group), collecting the JSON objects it prints one a line, until it
  ends or `deadline` (time.perf_counter()) passes: then the whole group is stopped. (lines, the last two lines of
  its stderr, whether it was stopped)."""
  with tempfile.TemporaryFile() as err:
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, text=True, env=env,
                         start_new_session=True)
    q: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [q.put(l) for l in p.stdout] + [q.put(None)], daemon=True).start()
    lines, stopped = [], False
    try:
      while True:
        left = None if deadline is None else deadline - time.perf_counter()
        if left is not None and left <= 0:
          stopped = True; break
        try: line = q.get(timeout=0.5 if left is None else min(left, 0.5))
        except queue.Empty:
          if p.poll() is not None: break  # ended, and its output is read (or held open by a child it left)
          continue
        if line is None: break
        try: obj = json.loads(line)
        except ValueError: continue  # not one of the worker's lines
        if isinstance(obj, dict): lines.append(obj)
    finally:
      _stop(p)  # before the wait: the leader's pid (and so its group's id) is not yet reused
      p.wait()
    err.seek(0)
    tail = err.read().decode(errors="replace").strip().splitlines()[-2:]
  return lines, " | ".join(tail), stopped


def sha256_within(path: str | os.PathLike, deadline: float | None, chunk: int = 1 << 22) -> str | None:
  """The sha256 of a file, or None when `deadline` (time.perf_counter()) passes before its end (OSError: unreadable)."""
  h = hashlib.sha256()
  with open(path, "rb") as f:
    while block := f.read(chunk):
      h.update(block)
      if deadline is not None and time.perf_counter() > deadline: return None
  return h.hexdigest()


def nonfinite_within(path: str | os.PathLike, deadline: float | None) -> list[str] | None:
  """The names of a safetensors file's float tensors that hold a NaN or an infinity ([] when none), or None when
  `deadline` passes first. UserError when it is not readable as safetensors."""
  import numpy as np
  from safetensors import SafetensorError, safe_open
  out = []
  try:
    with safe_open(str(path), framework="numpy") as f:
      for k in f.keys():
        if deadline is not None and time.perf_counter() > deadline: return None
        t = f.get_tensor(k)
        if np.issubdtype(t.dtype, np.floating) and not np.isfinite(t).all(): out.append(k)
  except (SafetensorError, OSError, TypeError, ValueError) as e:
    raise UserError(f"{path}: not readable as safetensors ({e})") from None
  return out
