"""The demo tree of tests/workflow/test_end_to_end.py (its module fixture `run` builds it once) and what its tests do
with it: a copy of the finished working directory, the audit as a user runs it, and the editing of its logs, train
records and kept states that a forger does (the provenance then re-recorded by the workflow's own rule). The forgeries
of a record's claims: tests/workflow/forged_claims.py."""
from __future__ import annotations
import hashlib, json, shutil, subprocess, sys
from pathlib import Path

from workflow_helpers import snakemake

SEEDS = [0, 1]
TRAIN = {"TRAIN_STEPS": 40, "EVAL_STEP_FREQ": 20, "EVAL_SAMPLES": 64, "TARGET": 0.037, "SAVE_CKPT_FREQ": 20}
PLATFORM = "cpu"


class Run:
  def __init__(self, wd: Path):
    self.wd, self.base, self.cfg = wd, wd / "base", wd / "config.yaml"
    self.logs = [self.base / f"results/{PLATFORM}/result_bert_{s}.log" for s in SEEDS]

  def audit(self, *args: str, reexecute: bool = False) -> tuple[int, str]:
    """`python -m mlperf_bert audit BASEDIR` as a user runs it after this workflow run; with `reexecute` as a user
    runs it by default (a random sample of the shards and eval batches is redone: minutes on 2 cores), else with
    --no-reexecute (the tests of the records alone; the re-execution's own tests ask for it)."""
    p = subprocess.run([sys.executable, "-m", "mlperf_bert", "audit", str(self.base), "--workdir", str(self.wd),
                        "--configfile", str(self.cfg), *args, *(() if reexecute else ("--no-reexecute",))],
                       capture_output=True, text=True, timeout=900,
                       cwd=self.wd)
    assert "Traceback" not in p.stdout + p.stderr, p.stdout + p.stderr
    return p.returncode, p.stdout


def _fails(out: str) -> list[str]:
  return [l for l in out.splitlines() if l.startswith("FAIL")]


def _copy(run, dst: Path) -> Run:
  """A copy of the finished working directory (config, basedir, .snakemake), modification times kept: Snakemake
  sees the same tree, and the module's tree stays untouched for the other tests. Without the submission package
  test_submission_package adds (its audit fails for its 2 of 10 logs): the tree as `snakemake all` leaves it."""
  shutil.copytree(run.wd, dst, symlinks=True, ignore=lambda d, names: ["submission"] if d == str(run.base) else [])
  return Run(dst)


def _rewrite_record(path: Path, edit) -> None:
  """The train record at `path` changed in place by `edit(record)`."""
  rec = json.loads(path.read_text())
  edit(rec)
  path.write_text(json.dumps(rec, indent=1) + "\n")


def _events(log: Path) -> list[dict]:
  """The log's :::MLLOG records."""
  return [json.loads(l.split(":::MLLOG ", 1)[1]) for l in log.read_text().splitlines() if ":::MLLOG " in l]


def _write_events(log: Path, events: list[dict]) -> None:
  log.write_text("".join(f":::MLLOG {json.dumps(e)}\n" for e in events))


def _forge_state(src: Path, dst: Path, **meta) -> dict:
  """The kept state `src` rewritten to `dst` with its metadata changed by `meta` (its tensors as they are); returns
  the record's fields of the new file."""
  from safetensors import safe_open
  from safetensors.numpy import save_file
  with safe_open(str(src), framework="numpy") as f:
    arrays, old = {k: f.get_tensor(k) for k in f.keys()}, dict(f.metadata())
  save_file(arrays, str(dst), metadata={**old, **{k: str(v) for k, v in meta.items()}})
  if dst != src: src.unlink()
  data = dst.read_bytes()
  return {"file": dst.name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def _rerecord(c: Run, logs: list[Path]) -> None:
  """What `snakemake all` remakes of a forged log: its provenance record (the audits below skip the dry run)."""
  snakemake(c.wd, "--cores", "1", "--force", *[str(l.relative_to(c.wd).with_name(l.name[:-4] + ".provenance.json"))
                                               for l in logs], configfile=c.cfg)


def _record_of(log: Path) -> Path:
  return log.with_name(log.name[:-4] + ".train.json")


def _only_seed_0(c: Run) -> Path:
  """The copy without seed 1's results (log, records, weights, states), so that the audit trains only the forged
  run's segment again (a segment costs ~40 CPU s, most of it compiling the train step in a new process)."""
  for f in c.base.glob(f"results/{PLATFORM}/result_bert_1.*"):
    shutil.rmtree(f) if f.is_dir() else f.unlink()
  return c.logs[0]
