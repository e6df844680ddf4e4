"""What a seed's training run writes to disk, planned before its first step, and the train job's check of it.

When the run is done it holds its kept states (EVIDENCE_STATE_FREQ: every N-th eval's and the last; train/states.py),
its final weights, its result log and records; while it trains, also its resume checkpoints (CKPT; KEEP_CKPT_AMOUNT of
them, one more for the moment a new one is written before the oldest goes; removed when the run is done) and its work
log. A kept state and a checkpoint are the same file (train/resume.py): the weights and LAMB's two moments, float32
whatever DEFAULT_FLOAT (the model keeps float32 master weights, train/model.py; LAMB's moments are tinygrad's
OPTIM_DTYPE, float32), so 12 bytes a parameter and the safetensors header; the final weights 4 bytes a parameter
(train/evidence.py). The parameters are counted from bert_config.json with the platform's size overrides.

How many evals: the run ends at TRAIN_STEPS, or at the first eval (every EVAL_STEP_FREQ steps) after the samples to
its TARGET where they are known: tinycorp's published v5.0 runs for the GPU boxes at MLPerf's target (the schema's
TARGET default; resources/published/tinycorp-v5.0-bert.json, the median steps to the target times their batch size),
the demo's seed 0 for the cpu platform (MEASURED). Another TARGET, or a platform with no figure: TRAIN_STEPS.

    fp = plan_run(settings, bert_config)      # RunFootprint: fp.done, fp.peak, fp.describe()
    check_train_space(settings, inputs)       # the train job, before it writes
"""
from __future__ import annotations
import dataclasses, json, math, os
from pathlib import Path
from typing import Any

from mlperf_bert.data.footprint import ratios
from mlperf_bert.space import check_space, filesystem_of, human
from mlperf_bert.train.settings import Settings

HEADER_PER_TENSOR = 112  # bytes of a safetensors header a tensor (its name, dtype, shape, offsets: the demo's files)
# samples to the platform's own TARGET, measured: (SUBMISSION_PLATFORM, TARGET) -> (samples, where it was measured)
MEASURED = {("cpu_demo", 0.06): (150 * 8, "measured: the demo's seed 0 reaches it at step 150 of BS 8, README")}


def model_size(bert_config: str | os.PathLike | dict, s: Settings | None) -> tuple[int, int]:
  """(parameters, tensors) of the model bert_config.json describes with the settings' size overrides (None: none), as
  train/model.py's parameter_shapes counts them (the decoder is tied to the word embeddings)."""
  cfg = bert_config if isinstance(bert_config, dict) else json.loads(Path(bert_config).read_text())
  over = lambda v, key: int(v or cfg[key])
  H = over(s and s.model.hidden_size, "hidden_size")
  I = over(s and s.model.intermediate_size, "intermediate_size")
  L = over(s and s.model.layers, "num_hidden_layers")
  V, P, T = int(cfg["vocab_size"]), int(cfg["max_position_embeddings"]), int(cfg["type_vocab_size"])
  embeddings = (V + P + T) * H + 2 * H
  layer = 4 * (H * H + H) + 2 * H + (H * I + I) + (I * H + H) + 2 * H
  heads = (H * H + H) + (H * H + H + 2 * H) + V + (2 * H + 2)  # pooler, transform + LayerNorm, decoder bias, NSP
  return embeddings + L * layer + heads, 5 + 16 * L + 9


def weights_bytes(bert_config: str | os.PathLike | dict, s: Settings | None = None) -> int:
  """The bytes of the model's weights in float32 safetensors (the final weights; the converted initial weights)."""
  params, tensors = model_size(bert_config, s)
  return 4 * params + tensors * HEADER_PER_TENSOR


@dataclasses.dataclass(frozen=True)
class RunFootprint:
  parameters: int
  state_bytes: int       # one kept state or resume checkpoint
  final_bytes: int       # the final weights
  steps: int             # steps the run is planned to take
  evals: int
  how: str               # where `steps` comes from
  states: int            # kept states when done
  checkpoints: int       # resume checkpoints on disk at once, at most
  records_bytes: int     # result log, train and provenance records
  log_bytes: int         # the train job's log

  @property
  def done(self) -> int:
    """Bytes the seed's run holds when done (results/ and its job log)."""
    return self.states * self.state_bytes + self.final_bytes + self.records_bytes + self.log_bytes

  @property
  def peak(self) -> int:
    """The most it holds at once: when done, and the checkpoints and work log of the last steps."""
    return self.done + self.checkpoints * self.state_bytes + self.records_bytes

  def describe(self) -> str:
    ckpt = f"; while it trains {self.checkpoints} resume checkpoint(s) of {human(self.state_bytes)} more" \
      if self.checkpoints else ""
    return (f"{self.states} kept state(s) of {human(self.state_bytes)} ({self.evals} eval(s) in {self.steps:,} steps: "
            f"{self.how}), final weights {human(self.final_bytes)}, logs and records "
            f"{human(self.records_bytes + self.log_bytes)}{ckpt}")

  def brief(self) -> str:
    """What the run writes, without where the counts come from (the train job's refusal)."""
    kept = f"{self.states} kept state(s)" + (f" and {self.checkpoints} resume checkpoint(s)" if self.checkpoints else "")
    return (f"{kept} of {human(self.state_bytes)} for {self.evals} eval(s) in {self.steps:,} steps, final weights "
            f"{human(self.final_bytes)}, logs and records {human(self.records_bytes + self.log_bytes)}")

  def as_dict(self) -> dict[str, Any]:
    return {**dataclasses.asdict(self), "done": self.done, "peak": self.peak}


def samples_to_target(s: Settings) -> tuple[int, str] | None:
  """The samples to the run's TARGET where they were published or measured (module docstring), else None."""
  from mlperf_bert.train.dress.report import published
  from mlperf_bert.train.hparams import DEFAULTS
  name, target = s.submission.platform, float(s.eval.target)
  if (name, target) in MEASURED:
    return MEASURED[(name, target)]
  pub = published(name) if target == float(DEFAULTS["TARGET"]) else None
  if pub is None:
    return None
  return (pub["steps_to_target"] * pub["global_batch_size"],
          f"published: tinycorp's v5.0 {name} runs, a median {pub['steps_to_target']:,} steps of BS "
          f"{pub['global_batch_size']}")


def plan_run(s: Settings, bert_config: str | os.PathLike | dict) -> RunFootprint:
  """The disk a seed's run with settings `s` takes (module docstring)."""
  params, tensors = model_size(bert_config, s)
  train_steps, freq = s.optimizer.train_steps, s.eval.step_freq
  known = samples_to_target(s)
  if known is None:
    steps, how = train_steps, "TRAIN_STEPS: no published steps to this TARGET"
  else:
    to_target = math.ceil(known[0] / s.global_batch_size)
    steps = min(train_steps, math.ceil(to_target / freq) * freq)
    how = f"{to_target:,} steps to TARGET {s.eval.target} at BS {s.global_batch_size} ({known[1]})" + \
      (f"; TRAIN_STEPS {train_steps:,} ends it first" if steps == train_steps else "")
  evals = math.ceil(steps / freq)
  every = s.checkpoint.evidence_freq
  states = 0 if every <= 0 else evals // every + (evals % every != 0)
  saves = (steps - 1) // s.checkpoint.save_freq if s.checkpoint.enabled else 0
  small = ratios()["small"]  # a seed's records and its train job's log a step, measured on the demo
  header = 3 * tensors * HEADER_PER_TENSOR + 1024  # model, two moments; the scalars, RNG counters and metadata
  return RunFootprint(parameters=params, state_bytes=12 * params + header,
                      final_bytes=weights_bytes(bert_config, s), steps=steps, evals=evals, how=how,
                      states=states, checkpoints=min(saves, s.checkpoint.keep + 1),
                      records_bytes=int(small["records_per_seed"]), log_bytes=int(small["train_log_per_step"] * steps))


SHRINK_RUN = ("keep fewer training states (EVIDENCE_STATE_FREQ N keeps every N-th eval's and the last; 0 none) or resume "
          "checkpoints (KEEP_CKPT_AMOUNT, or CKPT false), train fewer seeds, or point the config's basedir at a larger "
          "disk")


def check_train_space(s: Settings, inputs) -> RunFootprint:
  """The train job, before it writes (and again before the RUN phase's first step): what the run will still write
  through to its end (kept states and checkpoints in its checkpoint folder, less those a resumed run already has
  there; the final weights and records beside the result log, and the kept states again when that is another
  filesystem) must fit. UserError (one line) otherwise. Returns the plan."""
  fp = plan_run(s, inputs.bert_config)
  work = Path(inputs.ckpt_dir)
  have = sum(p.stat().st_size for p in work.rglob("*.safetensors") if p.is_file()) if work.is_dir() else 0
  results = Path(inputs.log).parent
  in_work = max(0, (fp.states + fp.checkpoints) * fp.state_bytes - have) + 2 * fp.records_bytes
  in_results = fp.final_bytes + fp.records_bytes
  if filesystem_of(results).dev != filesystem_of(work).dev:
    in_results += fp.states * fp.state_bytes  # the states are copied there, not renamed
  check_space({work: in_work, results: in_results}, what=f"the train job of seed {s.seed}",
              detail=fp.brief() + (f"; {human(have)} of it there already" if have else ""),
              shrink=SHRINK_RUN)
  return fp


MLPERF_RUNS = 10  # MLPerf scores BERT over 10 runs (config/mlperf.yaml's seeds)


def dress_footprint(s: Settings, bert_config: str | os.PathLike) -> dict[str, Any]:
  """The dress's disk answer for a platform: one seed's run at full size, and MLPerf's 10 runs; `lines` for its
  table."""
  fp = plan_run(s, bert_config)
  lines = [f"disk a seed: {human(fp.done)} when done ({fp.brief()}); MLPerf's {MLPERF_RUNS} runs "
           f"{human(MLPERF_RUNS * fp.done)}; the data and why: python -m mlperf_bert footprint"]
  return {**fp.as_dict(), "runs": MLPERF_RUNS, "runs_bytes": MLPERF_RUNS * fp.done, "lines": lines}
