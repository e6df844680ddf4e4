"""The training state at each eval, kept as evidence of the steps: the audit re-executes a random sample of the
segments between two kept states (or from the run's initial state) with the trainer's own code and compares the
weights it gets (train/segment.py, audit/segments.py).

    kept = KeptStates(ckpt_dir / "states", every=s.checkpoint.evidence_freq)
    kept.reset(resumed_step, fingerprint)          # a new run: none; a resumed run: those up to its checkpoint
    kept.keep(trainer, eval_number=n, last=..., step=k, position=p, seed=..., fingerprint=..., cpu=(secs, steps))
    entry = kept.publish(states_path(log), folder)  # moved beside the log; the train record's `kept_states`

A state is a resume checkpoint (train/resume.py: weights, LAMB state and schedule step, tinygrad's RNG counters; the
step, loader position, seed and settings fingerprint as metadata, and the process's CPU seconds in the train steps
since the state before) named `state_<step>.safetensors`. It is written
after the eval of every EVIDENCE_STATE_FREQ-th eval and after the last one (0: none), into the run's checkpoint
folder while the run lasts (a killed job keeps them, and its resumed run keeps those up to the checkpoint it resumes
from), then moved into `result_bert_<seed>.states/` (the train rule's output) when the run is published. Writing one
copies the state to host memory and to disk inside the timed run: for BERT-large ~4 GB a state (docs/audit.md).
"""
from __future__ import annotations
import os, re, shutil
from pathlib import Path
from typing import Any

from mlperf_bert.fileio import file_digest
from mlperf_bert.train.resume import write_state

STATE_RE = re.compile(r"^state_(\d{8})\.safetensors$")
STATES_SUFFIX = ".states"


def states_path(log_path: str | os.PathLike) -> Path:
  """result_bert_0.log -> result_bert_0.states (a folder beside the log)."""
  p = Path(log_path)
  return p.with_name((p.name[:-len(".log")] if p.name.endswith(".log") else p.name) + STATES_SUFFIX)


def state_name(step: int) -> str:
  return f"state_{step:08d}.safetensors"


def list_states(folder: str | os.PathLike) -> list[tuple[int, Path]]:
  """(step, path) of every kept state in the folder, by step."""
  d = Path(folder)
  if not d.is_dir(): return []
  return sorted((int(m.group(1)), p) for p in d.iterdir() if (m := STATE_RE.match(p.name)))


def state_metadata(path: str | os.PathLike) -> dict[str, str]:
  """The metadata of a state file ({} when it is not readable)."""
  from safetensors import SafetensorError, safe_open
  try:
    with safe_open(str(path), framework="numpy") as f: return dict(f.metadata() or {})
  except (SafetensorError, OSError):
    return {}


class KeptStates:
  """The states of one run while it lasts, in `work_dir`; `every` N-th eval (and the last) is kept, 0: none."""
  def __init__(self, work_dir: Path, every: int):
    self.work_dir, self.every = Path(work_dir), int(every)

  def reset(self, resumed_step: int | None, fingerprint: str) -> None:
    """A new run (resumed_step None) keeps no state of an earlier one; a resumed run keeps the states of these
    settings up to the step it resumes from (the later ones are made again)."""
    for step, p in list_states(self.work_dir):
      if resumed_step is None or step > resumed_step or state_metadata(p).get("fingerprint") != fingerprint:
        p.unlink(missing_ok=True)

  def wanted(self, eval_number: int, last: bool) -> bool:
    return self.every > 0 and (last or eval_number % self.every == 0)

  def keep(self, trainer, *, eval_number: int, last: bool, step: int, position: int, seed: int,
           fingerprint: str, cpu: tuple[float, int]) -> bool:
    """The state after eval number `eval_number` (1, 2, ...) of step `step`, when it is one to keep; `cpu`: the
    process's CPU seconds in the train steps since the state before and how many steps they are (a resumed run
    counts only its own). Returns whether it was kept."""
    if not self.wanted(eval_number, last): return False
    self.work_dir.mkdir(parents=True, exist_ok=True)
    write_state(trainer, self.work_dir / state_name(step), step=step, position=position, seed=seed,
                fingerprint=fingerprint, extra={"cpu_s": repr(float(cpu[0])), "cpu_steps": str(int(cpu[1]))})
    return True

  def publish(self, dest: Path, folder: Path) -> dict[str, Any]:
    """Move the kept states into `dest` (a new folder, emptied first) and return the train record's entry: the folder
    relative to `folder`, EVIDENCE_STATE_FREQ, and per state its step, loader position, file, bytes and sha256, and
    the CPU seconds of the train steps before it (cpu_s over cpu_steps steps: the audit's time floor)."""
    if dest.exists(): shutil.rmtree(dest)
    dest.mkdir(parents=True)
    states = []
    for step, p in list_states(self.work_dir):
      meta = state_metadata(p)
      states.append({"step": step, "position": int(meta.get("position", -1)), "file": p.name,
                     "bytes": p.stat().st_size, "sha256": file_digest(p, "sha256"),
                     "cpu_s": float(meta.get("cpu_s", "nan")), "cpu_steps": int(meta.get("cpu_steps", 0))})
      shutil.move(str(p), dest / p.name)
    return {"path": os.path.relpath(os.path.abspath(dest), os.path.abspath(folder)), "every": self.every,
            "states": states}
