"""The tinygrad environment of a process: the settings tinygrad reads from the environment at import, exported once,
before tinygrad is imported.

    for note in export_tinygrad_env(s, os.environ): print(note)            # train, preflight
    export_tinygrad_env(s, os.environ, search_off=True)                      # the audit's re-execution workers
    export_tinygrad_env(s, os.environ, parallel=True, libraries=compiler.env, setter="the dress")   # the dress

Every process that imports tinygrad calls export_tinygrad_env once, first: the train job (INIT_PROCESS same trains in
it), `python -m mlperf_bert train` (so each of a train job's INIT and RUN processes), the preflight job, the audit's
workers (`reexecute-eval`, `reexecute-segment`) and the dress. tinygrad_env is the same mapping as a value, for the
environment of a process started with its own (tinygrad's train_bert: tinygrad_trainer/process.py). Nothing here
imports tinygrad.
"""
from __future__ import annotations
from typing import Mapping, MutableMapping

from mlperf_bert.train.hparams import TINYGRAD_ENV
from mlperf_bert.train.settings import Settings

# the audit's re-execution searches no kernel, whatever the run did (JITBEAM: tinygrad's jit reads it before BEAM)
SEARCH_OFF_ENV = {"BEAM": "0", "JITBEAM": "0"}


def tinygrad_env(s: Settings, *, parallel: bool = False, search_off: bool = False,
                 libraries: Mapping[str, str] | None = None) -> dict[str, str]:
  """The environment variables to export before importing tinygrad: the settings' tinygrad keys (the schema's
  `x-tinygrad-env`; USE_ATOMICS defaults on for CPU, where the word-embedding backward is otherwise more than half of
  the step; GPU platforms keep tinygrad's default) and DEFAULT_FLOAT; `parallel`: PARALLEL as the settings give it
  (a training run sets it around its RUN phase instead: train/run.py); `search_off`: SEARCH_OFF_ENV; `libraries`: the
  compiler libraries tinygrad loads (the dress's NVRTC_PATH or LLVM_PATH)."""
  env = {k: str(int(v) if isinstance(v, bool) else v) for k, v in s.as_dict().items() if k in TINYGRAD_ENV}
  if s.tinygrad.dev == "CPU": env.setdefault("USE_ATOMICS", "1")
  env["DEFAULT_FLOAT"] = s.float_type
  if parallel and s.tinygrad.parallel is not None: env["PARALLEL"] = str(s.tinygrad.parallel)
  if search_off: env.update(SEARCH_OFF_ENV)
  env.update(libraries or {})
  return env


def export_tinygrad_env(s: Settings, environ: MutableMapping[str, str], *, setter: str = "the platform",
                        parallel: bool = False, search_off: bool = False,
                        libraries: Mapping[str, str] | None = None) -> list[str]:
  """Set tinygrad_env(s, ...) in `environ`, which must happen before tinygrad is imported (it reads them at import).
  The settings win over the environment; returns one note per variable whose different value they replaced
  ("note: BEAM=3 in the environment; the platform sets BEAM=0")."""
  notes = []
  for k, v in tinygrad_env(s, parallel=parallel, search_off=search_off, libraries=libraries).items():
    if environ.get(k, v) != v: notes.append(f"note: {k}={environ[k]} in the environment; {setter} sets {k}={v}")
    environ[k] = v
  return notes
