"""Forgeries of what a train record claims, on copies of the demo tree of tests/workflow/test_end_to_end.py (whose
namespace collects these tests: they share its module fixture `run`, built once). Each edits the log and its train
record to agree (the log's sha256 and bytes), re-records the provenance with the workflow's own rule, keeps the files'
modification times, and audits: the claim may lower the audit's guard only where something independent confirms it,
so each FAILs with a row that names it (audit/claims.py; docs/audit.md, "What a train record claims"). Without
training again: the audits re-execute nothing, or stop each worker after a second, but for the one that trains a
segment of a GPU record on this CPU."""
from __future__ import annotations
import hashlib, json, os, re, signal, subprocess, sys, time
from pathlib import Path

import numpy as np

from demo_tree import PLATFORM, Run, _copy, _events, _fails, _forge_state, _only_seed_0, _record_of, _rerecord, \
  _rewrite_record, _write_events
from workflow_helpers import snakemake

SEGMENTS_BRIEFLY = ("--no-dry-run", "--reexecute-parts", "segments", "--reexecute-budget", "2")  # each worker ~1 s


def _scale_times(log: Path, factor: float) -> None:
  """Every time after run_start scaled by `factor` (the log's own evals, whose kept states stay as they are)."""
  events = _events(log)
  t0 = next(e["time_ms"] for e in events if e["key"] == "run_start")
  for e in events:
    if e["time_ms"] > t0: e["time_ms"] = t0 + round(factor * (e["time_ms"] - t0))
  _write_events(log, events)


def _forge(c: Run, seed: int, edit, log_edit=None) -> tuple[Path, str]:
  """Seed `seed`'s log changed by `log_edit(log)`, its train record by `edit(record)` and made to agree with the log,
  the modification times kept; returns (log, its path in the tree). The caller re-records the provenance."""
  log = c.base / f"results/{PLATFORM}/result_bert_{seed}.log"
  rp = _record_of(log)
  st = {p: p.stat() for p in (log, rp)}
  if log_edit: log_edit(log)
  data = log.read_bytes()

  def both(r):
    edit(r)
    r["log"].update(sha256=hashlib.sha256(data).hexdigest(), bytes=len(data))
  _rewrite_record(rp, both)
  for p, s in st.items(): os.utime(p, ns=(s.st_atime_ns, s.st_mtime_ns))
  return log, log.relative_to(c.base).as_posix()


def _row(out: str, status: str, check: str, rel: str, pattern: str) -> str:
  """The one row of `status` and `check` on `rel` whose reason matches `pattern`."""
  rows = [l for l in out.splitlines() if re.match(rf"{status}\s+{re.escape(check)}\s+{re.escape(rel)}\s", l)
          and re.search(pattern, l)]
  assert len(rows) == 1, (pattern, out)
  return rows[0]


def test_downgrades_fail_one_row_each(run, tmp_path):
  """Seed 0's record says EVIDENCE_STATE_FREQ 0 (the platform file gives the default 1) and keeps no states, while its
  2 states stay on disk, times x0.1; seed 1's record is rewritten as train-record/1 (its settings under `hparams`, no
  final weights, last-eval batches or kept states) with its last accuracy 0.0387 -> 0.72, times x0.1. Their
  provenance names this version and trainer: each downgrade FAILs with its own row. (Before: WARN "taken on trust"
  and PASS.)"""
  c = _copy(run, tmp_path / "wd")
  def no_states(r):
    r["settings"]["EVIDENCE_STATE_FREQ"] = 0
    r["kept_states"] = {"path": r["kept_states"]["path"], "every": 0, "states": []}
  log0, rel0 = _forge(c, 0, no_states, lambda l: _scale_times(l, 0.1))

  def first_form(r):
    r["eval_accuracy"][-1][1] = 0.72
    for k in ("final_weights", "last_eval", "kept_states"): r.pop(k)
    r.update(schema="mlperf-bert/train-record/1", hparams=r.pop("settings"))
  def accuracy(log):
    _scale_times(log, 0.1)
    events = _events(log)
    last = [e for e in events if e["key"] == "eval_accuracy"][-1]
    last["value"] = last["metadata"]["masked_lm_accuracy"] = 0.72
    _write_events(log, events)
  log1, rel1 = _forge(c, 1, first_form, accuracy)
  _rerecord(c, [log0, log1])
  rc, out = c.audit("--no-dry-run")
  assert rc == 1, out
  _row(out, "FAIL", "claims", rel0, r"downgrade: EVIDENCE_STATE_FREQ: the train record says 0, platforms/cpu/platform\.yaml "
       r"with the audit's config gives 1: fewer kept states, fewer segments trained again")
  _row(out, "FAIL", "claims", rel0, r"downgrade: 2 kept state\(s\) on disk \(results/cpu/result_bert_0\.states/: steps 20, "
       r"40\) are missing from the train record's kept_states \(none\)")
  _row(out, "FAIL", "claims", rel1, r"downgrade: result_bert_1\.train\.json is 'mlperf-bert/train-record/1', an older "
       r"schema without final weights, last-eval batches, kept states, where its provenance names this version's train "
       r"process .* which writes mlperf-bert/train-record/2")
  _row(out, "FAIL", "claims", rel1, r"downgrade: 2 kept state\(s\) on disk \(results/cpu/result_bert_1\.states/")
  assert all(re.search(rf"PASS\s+provenance\s+{re.escape(r)}", out) for r in (rel0, rel1)), out  # resealed
  assert all(re.search(rf"PASS\s+chain\s+{re.escape(r)}\s+train record -> log", out) for r in (rel0, rel1)), out


def test_an_earlier_accuracy_edited_and_resealed_fails_by_its_kept_states_eval(run, tmp_path):
  """Seed 0's eval at step 20 (a kept state's, not the last) raised by 0.001 in its log and in its train record, the
  provenance re-recorded: every record agrees and the last eval is untouched, but the eval of the kept state of step 20,
  evaluated again whole on its weights, gives the accuracy the run logged: FAIL, naming the step and the state. (Before:
  only the last eval was re-executed, and this passed.) Seed 1, honest, PASSes the same row."""
  c = _copy(run, tmp_path / "wd")
  was = []

  def raise_first(log):
    events = _events(log)
    first = [e for e in events if e["key"] == "eval_accuracy"][0]
    was.append(first["value"])
    first["value"] = first["metadata"]["masked_lm_accuracy"] = round(first["value"] + 0.001, 6)
    _write_events(log, events)
  log0, rel0 = _forge(c, 0, lambda r: r["eval_accuracy"][0].__setitem__(1, round(was[0] + 0.001, 6)), raise_first)
  _rerecord(c, [log0])
  rc, out = c.audit("--no-dry-run", "--reexecute-parts", "evals", "--reexecute-budget", "1%", reexecute=True)
  assert rc == 1, out
  assert re.search(rf"PASS\s+chain\s+{re.escape(rel0)}\s+train record -> log: the log is byte for byte", out), out
  _row(out, "PASS", "re-execution", rel0, r"1 of 1 batches of the last eval")   # the last eval is the run's
  _row(out, "FAIL", "re-execution", rel0, rf"the eval at step 20 evaluated again whole \(1 batch\(es\), seed \d+\) on "
       rf"the kept state results/cpu/result_bert_0\.states/state_00000020\.safetensors with the trainer's eval step on 1 "
       rf"CPU device\(s\), bit-exact: accuracy {was[0]}, the log says {round(was[0] + 0.001, 6)}: the state does not "
       r"reach the logged accuracy")
  _row(out, "PASS", "re-execution", f"results/{PLATFORM}/result_bert_1.log", r"the evals of 1 of 1 earlier kept "
       r"state\(s\) \(drawn with seed \d+; step 20\) evaluated again whole on their weights .* bit-exact: the logged "
       r"accuracies; .* every one redone")


def test_claimed_machine_and_device_fail(run, tmp_path):
  """Seed 0's record says 64 cores (its provenance, written on the same host, says the host has its CPUs), times x0.2;
  seed 1's says DEV "cpu" (tinygrad reads CPU) and GPU target CUDA:sm_89 (the cpu platform names none), times x0.05.
  Each claim FAILs, and the time floor of the CPU seconds the records hold over the host's cores FAILs both logs.
  (Before: the floor became 64 cores' and a 4090's roofline: PASS, no WARN.)"""
  c = _copy(run, tmp_path / "wd")
  log0, rel0 = _forge(c, 0, lambda r: r["machine"].update(cores=64), lambda l: _scale_times(l, 0.2))

  def device(r):
    r["settings"]["DEV"] = "cpu"
    r["machine"]["gpu_target"] = "CUDA:sm_89"
  log1, rel1 = _forge(c, 1, device, lambda l: _scale_times(l, 0.05))
  _rerecord(c, [log0, log1])
  rc, out = c.audit(*SEGMENTS_BRIEFLY, reexecute=True)
  assert rc == 1, out
  cpus = os.cpu_count()
  _row(out, "FAIL", "claims", rel0, rf"machine: the train record says 64 cores on host \S+; its provenance, written on "
       rf"\S+, says it has {cpus} CPUs: the CPU time floor divides by {cpus}, not 64")
  _row(out, "FAIL", "claims", rel1, r"GPU target: the train record says 'CUDA:sm_89', platforms/cpu/platform\.yaml with "
       r"the audit's config gives None \(DRESS_TARGET\)")
  assert not re.search(rf"FAIL\s+claims\s+{re.escape(rel1)}\s+DEV", out), out  # "cpu" is tinygrad's CPU
  for rel in (rel0, rel1):
    _row(out, "FAIL", "time", rel, rf"which {cpus} cores give in no less than .*: the log trains faster than its "
         "hardware can")


def test_nan_in_a_kept_state_fails(run, tmp_path):
  """The last kept state's LAMB moments set to NaN and its RNG counters to 12345, its sha256 and bytes re-recorded,
  DEV "cpu": FAIL before anything is trained again. (Before: the band compared the weights only: PASS.)"""
  c = _copy(run, tmp_path / "wd")
  log = _only_seed_0(c)
  from safetensors import safe_open
  from safetensors.numpy import save_file
  folder = _record_of(log).with_name("result_bert_0.states")
  last = folder / "state_00000040.safetensors"
  with safe_open(str(last), framework="numpy") as f:
    arrays, meta = {k: f.get_tensor(k) for k in f.keys()}, dict(f.metadata())
  for k in arrays:
    if re.search(r"\.[mv]\.\d+$", k): arrays[k] = np.full_like(arrays[k], np.nan)
    if k.startswith("rng/"): arrays[k] = np.full_like(arrays[k], 12345)
  st = last.stat()
  save_file(arrays, str(last), metadata=meta)
  os.utime(last, ns=(st.st_atime_ns, st.st_mtime_ns))
  data = last.read_bytes()

  def edit(r):
    r["settings"]["DEV"] = "cpu"
    r["kept_states"]["states"][-1].update(bytes=len(data), sha256=hashlib.sha256(data).hexdigest())
  _, rel = _forge(c, 0, edit)
  _rerecord(c, [log])
  rc, out = c.audit(*SEGMENTS_BRIEFLY, reexecute=True)
  assert rc == 1, out
  _row(out, "FAIL", "re-execution", rel, r"the kept state of step 40 \(results/cpu/result_bert_0\.states/"
       r"state_00000040\.safetensors\) holds a NaN or an infinity \(optim/opt0\.m\.0, ")


def test_gpu_record_is_re_executed_on_this_cpu(run, tmp_path):
  """Seed 0's record says DEV NV (its last eval too), the platform file CPU. This machine has no NV device: the eval
  and the segment are re-executed on its CPU in the band (no `NV:0 does not exist` row: the exported DEV=NV no longer
  holds the worker's tensors), the eval within its near ties, and the segment, bit-exact on the CPU, proves the
  record's device false. (An honest GPU record's segment lies within the band, not bit-exact: test_segments.py.)"""
  c = _copy(run, tmp_path / "wd")
  log = _only_seed_0(c)

  def nv(r):
    r["settings"]["DEV"] = "NV"
    r["last_eval"]["device"] = "NV"
  _, rel = _forge(c, 0, nv)
  _rerecord(c, [log])
  rc, out = c.audit("--no-dry-run", "--reexecute-parts", "evals", "segments", "--reexecute-budget", "1%",
                    reexecute=True)
  assert rc == 1, out
  assert "does not exist" not in out, out
  _row(out, "FAIL", "claims", rel, r"DEV: the train record says 'NV', platforms/cpu/platform\.yaml with the audit's "
       r"config gives 'CPU': another device kind, compared in a band instead of bit for bit")
  _row(out, "PASS", "re-execution", rel, r"1 of 1 batches of the last eval .* on 1 CPU device\(s\), float32, within "
       r"each batch's near ties .*the run used 1 NV")
  _row(out, "FAIL", "re-execution", rel, r"steps \d+-\d+ trained again .* on 1 CPU device\(s\): bit-exact \(\d+ of \d+ "
       r"tensors\) on CPU, while the train record says the run trained on 1 NV device\(s\).*the record's device is "
       r"false")


def test_bounds_sparse_states_and_a_symlink_loop(run, tmp_path):
  """A 40 GB sparse file in place of a kept state: seed 0's with the record's size kept (not hashed: FAIL at once),
  seed 1's with the record's size made 40 GB's (its hashing does not fit a 10 s budget: not checked, and said so).
  The audit ends within the budget and a few seconds more than the same audit of the untouched copy (before: 164 s
  of hashing). Then seed 0's kept_states.path a symlink loop: one FAIL row (before: a traceback)."""
  c = _copy(run, tmp_path / "wd")
  budget = ("--no-dry-run", "--reexecute-parts", "segments", "--reexecute-budget", "10")
  t0 = time.perf_counter()
  c.audit(*budget, reexecute=True)
  clean = time.perf_counter() - t0
  for log in c.logs:
    with open(log.with_name(log.name[:-4] + ".states") / "state_00000020.safetensors", "r+b") as f: f.truncate(40 << 30)
  _rewrite_record(_record_of(c.logs[1]), lambda r: r["kept_states"]["states"][0].update(bytes=40 << 30))
  _rerecord(c, c.logs[1:])
  t0 = time.perf_counter()
  rc, out = c.audit(*budget, reexecute=True)
  took = time.perf_counter() - t0
  assert rc == 1 and took < clean + 10, (clean, took, out)
  _row(out, "FAIL", "re-execution", "results/cpu/result_bert_0.log", r"state_00000020\.safetensors: 42949672960 bytes, "
       r"the record says \d+ \(not hashed\)")
  _row(out, "WARN", "re-execution", "results/cpu/result_bert_1.log", r"not checked: 0 of the 2 kept states were read "
       r"within the budget \(results/cpu/result_bert_1\.states/state_00000020\.safetensors, 42949672960 bytes, was not\)")
  (c.base / f"results/{PLATFORM}/loop").symlink_to("loop")
  _rewrite_record(_record_of(c.logs[0]), lambda r: r["kept_states"].update(path="loop"))
  _rerecord(c, c.logs[:1])
  rc, out = c.audit(*SEGMENTS_BRIEFLY, reexecute=True)
  _row(out, "FAIL", "re-execution", "results/cpu/result_bert_0.log", r"result_bert_0\.train\.json: its kept states "
       r"folder loop cannot be resolved \(Symlink loop from .*\); not read")


def test_sigterm_and_sigint_stop_the_workers_with_the_audit(run, tmp_path):
  """The audit stopped by SIGTERM, then by SIGINT, while a segment worker runs: the worker (its own process group) is
  stopped with it, the temporary folders are removed, one line says so, no traceback."""
  c = _copy(run, tmp_path / "wd")
  for sig in (signal.SIGTERM, signal.SIGINT):
    tmp = tmp_path / f"tmp-{sig.name}"
    tmp.mkdir()
    audit = [sys.executable, "-m", "mlperf_bert", "audit", str(c.base), "--workdir", str(c.wd), "--configfile",
             str(c.cfg), "--no-dry-run", "--reexecute-parts", "segments", "--reexecute-budget", "600"]
    # the audit as a shell's foreground command gets it: SIGINT not ignored. (A test run started in the background by
    # a shell without job control inherits SIGINT ignored, and so would the audit: Python keeps an ignored SIGINT.)
    p = subprocess.Popen([sys.executable, "-c", "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                          "os.execv(sys.argv[1], sys.argv[1:])", *audit], cwd=c.wd,
                         env={**os.environ, "TMPDIR": str(tmp)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    worker, t0 = None, time.time()
    while worker is None and time.time() - t0 < 120 and p.poll() is None:
      worker = next((int(d) for d in os.listdir("/proc") if d.isdigit() and _is_worker(int(d), tmp)), None)
      time.sleep(0.2)
    assert worker is not None, p.communicate()
    p.send_signal(sig)
    out, err = p.communicate(timeout=180)   # minutes under a loaded CI (the green rehearsal beside it)
    assert p.returncode == 128 + sig.value and "Traceback" not in out + err, (out, err)
    assert f"the audit was stopped ({sig.name}): its workers were stopped with it" in err, err
    for _ in range(50):
      if not _alive(worker): break
      time.sleep(0.1)
    assert not _alive(worker), f"worker {worker} outlived the audit"
    assert list(tmp.iterdir()) == [], list(tmp.iterdir())


def _is_worker(pid: int, tmp: Path) -> bool:
  try: return b"reexecute-segment" in (cmd := Path(f"/proc/{pid}/cmdline").read_bytes()) and str(tmp).encode() in cmd
  except OSError: return False


def _alive(pid: int) -> bool:
  try: return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
  except (OSError, IndexError): return False


def test_rehearsal_beside_the_demo_passes_config(run, tmp_path):
  """A rehearsal's run beside the demo's in one basedir (seed 0's train outputs as results/tinybox_green-rehearsal/,
  its provenance recorded by the workflow's rule under the rehearsal's config): each log's config is compared with
  the config of its own run, with and without the rehearsal's --config: no `config` FAIL. The copied run is no
  rehearsal's: its claims FAIL."""
  import shutil
  c = _copy(run, tmp_path / "wd")
  src, dst = c.base / f"results/{PLATFORM}", c.base / "results/tinybox_green-rehearsal"
  dst.mkdir()
  for f in src.glob("result_bert_0.*"):
    if not f.name.endswith(".provenance.json"):
      (shutil.copytree if f.is_dir() else shutil.copy2)(f, dst / f.name)
  rehearsal = ("--config", "platform=tinybox_green", "rehearse=true", "train={EVAL_STEP_FREQ: 4}")
  snakemake(c.wd, "--cores", "1", "base/results/tinybox_green-rehearsal/result_bert_0.provenance.json",
            *rehearsal, configfile=c.cfg)
  rel = "results/tinybox_green-rehearsal/result_bert_0.log"
  for args in ((), rehearsal):
    rc, out = c.audit("--no-dry-run", *args)
    assert not re.search(r"^FAIL\s+config\s", out, re.M), out
    for log in ("results/cpu/result_bert_0.log", "results/cpu/result_bert_1.log", rel):
      assert re.search(rf"PASS\s+config\s+{re.escape(log)}\s", out), out
    assert re.search(rf"FAIL\s+claims\s+{re.escape(rel)}\s", out), out
