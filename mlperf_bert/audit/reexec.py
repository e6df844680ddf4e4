"""Re-execution as evidence: the audit redoes a random sample of a workflow tree's work, chosen when it runs.

Records can be rewritten by whoever holds the tree; work cannot be faked without doing it. So the audit
  - rebuilds a random sample of topics' shards from their text (the text the header names) with the preprocessing
    settings on record and the vocab, with the package's own builder (data/instances.build_shard, in a temporary
    folder outside the tree), and compares the bytes with the shard on disk: shards are deterministic;
  - evaluates a random sample of the last eval's batches on the final weights the train process saved
    (result_bert_<seed>.final.safetensors) with the trainer's own eval step (train/evidence.py, in a process of its
    own that exports the run's tinygrad settings first), and compares each batch's counts with those the train
    record holds, which must in turn give the log's last eval_accuracy.
The sample is drawn from a seed taken at audit time (os.urandom through `secrets`, or --reexecute-seed to repeat a
draw) that is printed in the table, so a forger cannot know which part will be redone. A time budget bounds the
work: shards are rebuilt in the drawn order until half of it is spent (at least one), then each log's batches are
evaluated in the drawn order until its share of the rest is spent (at least one batch each).

Same device kind, device count and float type as the train run: the counts must be equal (they are integers; only a
logit tie broken the other way could change one). Another device (e.g. a GPU run audited on a CPU), the record's
float type: each batch's total exact, and its correct count may differ by at most its near ties, the predictions
whose label's logit and best other logit differ by at most REL_EPS[float type] times the prediction's largest
|logit| (train/evidence.py near_ties): only those can flip from right to wrong or back when another device sums in
another order. REL_EPS is 8 times the largest difference measured between the logits of the demo's final weights
in that float type and in a more exact one (bench/bench_device_band.py; docs/audit.md, "the device band"): a
forger's extra correct predictions are not near ties, so they are no longer let through as a share of the batch.

    reexecute(audit, base, logs, preprocessing, hasher, seed=..., budget_s=..., parts={"shards", "evals"})
"""
from __future__ import annotations
import json, os, queue, random, secrets, subprocess, sys, tempfile, threading, time
from pathlib import Path
from typing import Callable

from mlperf_bert.audit.rows import Audit
from mlperf_bert.errors import UserError

CHECK = "re-execution"
DEFAULT_BUDGET_S = 300.0
# the device band: near ties within this share of a prediction's largest |logit| (measured, x8: docs/audit.md)
REL_EPS = {"float32": 5e-6, "half": 6e-3, "bfloat16": 5e-2}
PARTS = ("shards", "evals", "segments")  # what --reexecute-parts may name (segments: audit/segments.py)
NOT_REEXECUTABLE = "not re-executable"
RETRAIN = "retrain: snakemake --forcerun train"


def draw_seed() -> int:
  """A fresh seed for the sample (from os.urandom), printed so the same draw can be repeated."""
  return secrets.randbits(32)


def draw_order(n: int, seed: int, salt: str) -> list[int]:
  """0..n-1 in an order drawn from (seed, salt): the sample is a prefix of it, as long as the budget allows."""
  order = list(range(n))
  random.Random(f"{seed}:{salt}").shuffle(order)
  return order


def catch_chance(k: int, n: int) -> str:
  return f"a change to any one of the {n} is caught with probability {k}/{n}" if k < n else "every one redone"


# ------------------------------------------------------------------------------------------------ shards
def rebuild_shard(base: Path, shard: Path, preprocessing: dict, tmp: Path, hasher: Callable) -> tuple[str, str]:
  """Rebuild `shard` from results4/<topic> (its header's source) with `preprocessing` and download/vocab.txt in
  `tmp`; (status, reason): PASS byte-identical, FAIL different, WARN not re-executable (inputs absent or not those
  of the header: the chain rows say which)."""
  from mlperf_bert.audit.chain import source_text
  from mlperf_bert.data.corpus import preprocessing_settings
  from mlperf_bert.data.instances import build_shard
  from mlperf_bert.data.shards import Shard
  text, vocab = source_text(base, shard), base / "download" / "vocab.txt"
  try:
    sh = Shard(shard, check=False)
    head = (sh.source_sha256, sh.settings_sha256, sh.vocab_sha256)
    sh.close()
    st = preprocessing_settings(**preprocessing)
  except (UserError, TypeError) as e:
    return "WARN", f"{NOT_REEXECUTABLE}: {e}"
  for what, path, want in (("text", text, head[0]), ("vocab", vocab, head[2])):
    if not path.is_file():
      return "WARN", f"{NOT_REEXECUTABLE}: its {what} {path.relative_to(base)} is not present"
    if hasher(path)["sha256"] != want:
      return "WARN", f"{NOT_REEXECUTABLE}: {path.relative_to(base)} is not the {what} its header names (chain rows)"
  if st.sha256() != head[1]:
    return "WARN", f"{NOT_REEXECUTABLE}: its header's settings are not the preprocessing on record (chain rows)"
  out = tmp / shard.name
  build_shard(text, vocab, out, log=None, **{k: getattr(st, k) for k in preprocessing})
  now, again = hasher(shard)["sha256"], hasher(out)["sha256"]
  out.unlink()
  if now != again:
    return "FAIL", (f"rebuilt from {text.relative_to(base)} with the recorded settings and vocab, the shard is "
                    f"{again[:12]}..., the one on disk {now[:12]}...: it was not built from that text and those "
                    f"settings (whatever its records say); rebuild it: snakemake --force {shard}, then retrain")
  return "PASS", "rebuilt byte-identical"


def reexecute_shards(audit: Audit, base: Path, preprocessing: dict | None, seed: int, budget_s: float,
                     hasher: Callable) -> None:
  shards = sorted((base / "shards").glob("*.shard")) if (base / "shards").is_dir() else []
  if not shards: return
  if not isinstance(preprocessing, dict):
    audit.add("WARN", CHECK, "shards", f"{NOT_REEXECUTABLE}: no preprocessing settings on record"); return
  t0, done, bad = time.perf_counter(), 0, 0
  with tempfile.TemporaryDirectory(prefix="mlperf-bert-reexec-") as tmp:
    for i in draw_order(len(shards), seed, "shards"):
      if done and time.perf_counter() - t0 >= budget_s: break
      f = shards[i]
      status, why = rebuild_shard(base, f, preprocessing, Path(tmp), hasher)
      done += 1
      if status != "PASS":
        audit.add(status, CHECK, str(f.relative_to(base)), f"shard rebuilt (seed {seed}): {why}"); bad += 1
  secs = time.perf_counter() - t0
  if not bad:
    audit.add("PASS", CHECK, "shards", f"{done} of {len(shards)} topics' shards (drawn with seed {seed}) rebuilt from "
              f"their text with the recorded settings: byte-identical, {secs:.1f} s of a {budget_s:.0f} s share; "
              f"{catch_chance(done, len(shards))}")


# ------------------------------------------------------------------------------------------------ the last eval
def rel_eps(float_type) -> float:
  """The device band's bound for the record's float type (the widest for one it does not know)."""
  return REL_EPS.get(str(float_type), max(REL_EPS.values()))


def allowed(near: list[float] | None) -> tuple[float, float]:
  """What a device change can move in a batch with these near ties: (|correct|, |accuracy|); (0, 0) on the run's
  devices (near None). The accuracy also gets 1e-6 for its float32 division on another device."""
  if near is None: return 0.0, 0.0
  w, n, valid = map(float, near)
  return w, (n / valid if valid else 0.0) + 1e-6


def batches_agree(recorded: list[float], got: list[float], near: list[float] | None) -> str:
  """'' when a batch's [correct, total, accuracy] re-executed agrees with the recorded one (equal on the run's
  devices, `near` None; elsewhere within its near ties), else what differs."""
  rc, rt, ra = map(float, recorded)
  gc, gt, ga = map(float, got)
  dc, da = allowed(near)
  if rt == gt and abs(rc - gc) <= dc and abs(ra - ga) <= da: return ""
  band = "" if near is None else (f"; {near[0]:g} near-tied prediction(s) could flip on another device, so at most "
                                  f"{dc:g} correct may differ")
  return (f"correct/total {got[0]:g}/{got[1]:g} (accuracy {got[2]:.6f}) on the weights, the record says "
          f"{rc:g}/{rt:g} ({ra:.6f}){band}")


def _stream(cmd: list[str], env: dict, deadline: float, need: int) -> tuple[list[dict], str, bool]:
  """Run `cmd`, collecting its JSON lines until it ends or `deadline` passes with at least `need` lines read;
  (lines, stderr tail, cut by the deadline)."""
  with tempfile.TemporaryFile() as err:
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=env)
    q: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [q.put(l) for l in p.stdout] + [q.put(None)], daemon=True).start()
    lines, cut = [], False
    while True:
      left = deadline - time.perf_counter()
      if len(lines) >= need and left <= 0:
        cut = True; break
      try: line = q.get(timeout=max(left, 0.1) if len(lines) >= need else 1.0)
      except queue.Empty: continue
      if line is None: break
      try: obj = json.loads(line)
      except ValueError: continue  # not one of the eval process's lines
      if isinstance(obj, dict): lines.append(obj)
    if p.poll() is None: p.kill()
    p.wait()
    err.seek(0)
    tail = err.read().decode(errors="replace").strip().splitlines()[-2:]
  return lines, " | ".join(tail), cut


def run_module(module: str, request: dict, deadline: float, need: int) -> tuple[list[dict], str, bool]:
  """`python -m <module> REQUEST.json` (one of the trainer's re-execution processes) with this package first on its
  path: _stream's (JSON lines, stderr tail, cut by the deadline)."""
  with tempfile.TemporaryDirectory(prefix="mlperf-bert-reexec-") as tmp:
    req = Path(tmp) / "request.json"
    req.write_text(json.dumps(request))
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("PARALLEL", "0")  # tinygrad compiles in this process, not a pool: the same kernels, 30 % less CPU
    return _stream([sys.executable, "-m", module, str(req)], env, deadline, need)


def reeval_sample(record: Path, indices: list[int], ev: dict, deadline: float) -> tuple[dict, list[dict], str]:
  """The re-execution process (python -m mlperf_bert.train.evidence): (devices used, batch lines, error)."""
  lines, tail, _ = run_module("mlperf_bert.train.evidence",
                              {"record": str(record.resolve()), "indices": indices, "device": ev.get("device"),
                               "devices": ev.get("devices", 1), "rel_eps": rel_eps(ev.get("float_type"))},
                              deadline, 2)
  errors = [l["error"] for l in lines if "error" in l]
  devs = next((l for l in lines if "device" in l), {})
  got = [l for l in lines if "index" in l]
  if errors or not devs or not got:
    return devs, got, errors[0] if errors else (tail or "the eval process printed nothing")
  return devs, got, ""


def _recorded(rec: dict) -> tuple[list[list[float]], dict] | str:
  w, ev = rec.get("final_weights"), rec.get("last_eval")
  if not w or not ev or not isinstance(ev.get("batches"), list) or not ev["batches"]:
    return "the train record holds no final weights and last-eval batches (a tree of an older version, or of " \
           "tinygrad's own trainer)"
  return ev["batches"], ev


def reexecute_eval(audit: Audit, base: Path, log: Path, seed: int, budget_s: float, hasher: Callable) -> None:
  """One result log's last eval: the record's batches give the log's accuracy; a sample of them, evaluated again
  on the final weights, gives the record's counts."""
  from mlperf_bert.audit.chain import _accuracies
  from mlperf_bert.train.evidence import EvalBatch, eval_accuracy
  from mlperf_bert.train.record import read_record, record_path
  rel, rp = str(log.relative_to(base)), record_path(log)
  try:
    rec = read_record(rp)
  except UserError as e:
    audit.add("WARN", CHECK, rel, f"{NOT_REEXECUTABLE}: {e}"); return
  r = _recorded(rec)
  if isinstance(r, str):
    audit.add("WARN", CHECK, rel, f"{NOT_REEXECUTABLE}: {r}; {RETRAIN} to make it re-executable"); return
  batches, ev = r
  weights = (rp.parent / str(rec["final_weights"].get("path"))).resolve()
  if not weights.is_file():
    audit.add("FAIL", CHECK, rel, f"the final weights {rec['final_weights'].get('path')} are missing; {RETRAIN}"); return
  if hasher(weights)["sha256"] != rec["final_weights"].get("sha256"):
    audit.add("FAIL", CHECK, rel, f"{weights.name}: sha256 is not the one the train process wrote ({rp.name}); "
              f"{RETRAIN}"); return
  try:
    as_b = [EvalBatch(*map(float, b)) for b in batches]
  except (TypeError, ValueError):
    audit.add("FAIL", CHECK, rel, f"{rp.name}: last_eval batches are not [correct, total, accuracy] numbers; {RETRAIN}")
    return
  logged = _accuracies(log)
  rec_acc = eval_accuracy(as_b, str(ev.get("metric")))
  if not logged or logged[-1] != rec_acc:
    audit.add("FAIL", CHECK, rel, f"the log's last eval_accuracy is {logged[-1] if logged else 'absent'}, the "
              f"{len(batches)} eval batches in {rp.name} give {rec_acc}: the log or its record was changed; {RETRAIN}")
    return
  n = len(batches)
  order = draw_order(n, seed, log.name)
  st = time.perf_counter()
  devs, got, err = reeval_sample(rp, order, ev, st + budget_s)
  secs = time.perf_counter() - st
  if err:
    audit.add("FAIL", CHECK, rel, f"the eval of {weights.name} failed: {err}"); return
  exact = (devs.get("device"), devs.get("devices")) == (ev.get("device"), ev.get("devices"))
  near = {g["index"]: (None if exact else g.get("near") or [0.0, 0.0, 0.0]) for g in got}
  ties = sum(n[0] for n in near.values() if n)
  how = (f"on {devs.get('devices')} {devs.get('device')} device(s), {ev.get('float_type')}, " +
         ("bit-exact as recorded" if exact else f"within each batch's near ties ({ties:g} in all: predictions whose "
          f"label and best other logit lie within {rel_eps(ev.get('float_type')):g} of their largest |logit|; the "
          f"run used {ev.get('devices')} {ev.get('device')})"))
  bad = [(g["index"], why) for g in got if (why := batches_agree(batches[g["index"]], g["batch"], near[g["index"]]))]
  got.sort(key=lambda g: g["index"])  # summed in the eval's order, as the run summed them
  sample = eval_accuracy([EvalBatch(*g["batch"]) for g in got], str(ev.get("metric")))
  if bad:
    i, why = bad[0]
    audit.add("FAIL", CHECK, rel, f"{len(bad)} of {len(got)} re-executed eval batches disagree with {rp.name} "
              f"(seed {seed}): batch {i}: {why}; the sample's accuracy is {sample:.6f}, the log says {logged[-1]}: "
              f"the weights do not reach the logged accuracy; {RETRAIN}"); return
  if len(got) == n and abs(sample - logged[-1]) > whole_eval_band([allowed(near[g["index"]]) for g in got],
                                                                  [float(b[1]) for b in batches], str(ev.get("metric"))):
    audit.add("FAIL", CHECK, rel, f"all {n} eval batches re-executed give accuracy {sample}, the log says "
              f"{logged[-1]}; {RETRAIN}"); return
  audit.add("PASS", CHECK, rel, f"{len(got)} of {n} batches of the last eval (drawn with seed {seed}) evaluated on "
            f"{weights.name} with the trainer's eval step {how}: accuracy {sample:.6f} on the sample, "
            f"{logged[-1]:.6f} logged, {secs:.1f} s of a {budget_s:.0f} s share; {catch_chance(len(got), n)}")


def whole_eval_band(per_batch: list[tuple[float, float]], totals: list[float], metric: str) -> float:
  """How far the whole eval's accuracy may move with each batch's allowed moves: the mean of the accuracy moves
  (tinygrad's metric), or the correct moves over all predictions (pooled); 0 on the run's devices."""
  if not per_batch: return 0.0
  if metric == "tinygrad": return sum(a for _, a in per_batch) / len(per_batch)
  return sum(c for c, _ in per_batch) / (sum(totals) or 1.0) + 1e-6


# ------------------------------------------------------------------------------------------------ both
def reexecute(audit: Audit, base: Path, logs: list[Path], preprocessing: dict | None, hasher: Callable, *,
              seed: int, budget_s: float = DEFAULT_BUDGET_S, parts=("shards", "evals")) -> None:
  """The shard and last-eval re-execution rows of a workflow tree (see the module doc) of `parts`, within
  `budget_s` (the shards half of it when both are redone)."""
  if budget_s <= 0: raise UserError(f"--reexecute-budget {budget_s}: expected a positive number of seconds")
  t0 = time.perf_counter()
  if "shards" in parts:
    reexecute_shards(audit, base, preprocessing, seed, budget_s / 2 if "evals" in parts else budget_s, hasher)
  if "evals" not in parts: return
  left = max(budget_s - (time.perf_counter() - t0), 0.0)
  for i, log in enumerate(logs):
    reexecute_eval(audit, base, log, seed, left / (len(logs) - i), hasher)
    left = max(budget_s - (time.perf_counter() - t0), 0.0)
