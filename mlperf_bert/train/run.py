"""Train BERT with tinygrad as tinygrad's MLPerf submission does, writing an MLPerf result log.

    run = TrainRun(hp, shard_paths=..., eval_path=..., bert_config=..., log_path=..., work_log_path=...,
                   ckpt_dir=..., max_seq_length=128, max_predictions_per_seq=20)
    result = run.run()        # or run.run(phase="init") then, in a new process, run.run(phase="run"); run.benchmark(n)

Phases (as train_bert with INITMLPERF then RUNMLPERF):
  INIT  init_start; a throw-away model of INIT_BERT_LAYERS layers compiles the jitted train and eval steps on
        fake data for INIT_BENCHMARK_STEPS steps (kernels land in tinygrad's cache); init_stop.
  RUN   run_start, seed, hyperparameters; the real model (seeded init or the converted checkpoint) trains on the
        shard stream; every EVAL_STEP_FREQ steps (and at TRAIN_STEPS) the eval set's masked-LM accuracy is
        measured; reaching TARGET stops with run_stop success, TRAIN_STEPS without it with run_stop aborted.
`run(phase="all")` runs both in this process; tinygrad's run_and_time.sh runs them as two processes, which
`phase="init"` (a fresh work log ending with init_stop) and then `phase="run"` (appends to it) reproduce; the
platform key INIT_PROCESS chooses for the train rule (mlperf_bert/train/phases.py).
Resume: with CKPT on (off by default, as train_bert), every SAVE_CKPT_FREQ steps a safetensors checkpoint (weights, LAMB state, schedule step, RNG counters,
loader position; no pickle) goes to ckpt_dir, keeping KEEP_CKPT_AMOUNT. A new run with the same settings
continues from the newest one, appending to the kept work log (an INIT phase leaves such a log and checkpoint
alone and only compiles); checkpoints of other settings are removed.
The result log appears at log_path only when the run finished; until then (or after an abort) it is the work log.
A NaN/inf loss stops the run: run_stop aborted in the work log and a TrainingDiverged error (exit non-zero).
"""
from __future__ import annotations
import dataclasses, hashlib, json, math, os, re, time
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
from safetensors import SafetensorError, safe_open
from safetensors.numpy import save_file
from tinygrad import Device, Tensor, TinyJit, dtypes
from tinygrad.helpers import Context, GlobalCounters
from tqdm import tqdm

from mlperf_bert.errors import UserError
from mlperf_bert.fileio import atomic_path
from mlperf_bert.constants import FEATURES
from mlperf_bert.data.loader import TrainLoader, eval_batches, eval_window, open_shards
from mlperf_bert.train import cpu_threads, jitmem
from mlperf_bert.train.mllog import ResultLog
from mlperf_bert.train.record import publish_result
from mlperf_bert.train.model import BertConfig, BertForPretraining
from mlperf_bert.train.optim import OptimConfig, Trainer
from mlperf_bert.train.hparams import rule_params
from mlperf_bert.data.shards import Shard
from mlperf_bert.train.inputs import check_train_inputs

CKPT_RE = re.compile(r"^ckpt_(\d{8})\.safetensors$")
PHASES = ("all", "init", "run")
# settings that do not change the run's numbers: a change keeps a resumable checkpoint
NOT_FINGERPRINTED = ("CKPT", "KEEP_CKPT_AMOUNT", "SAVE_CKPT_FREQ", "INIT_PROCESS", "CPU_THREADS")
FLOAT_DTYPES = {"float32": dtypes.float32, "half": dtypes.half, "bfloat16": dtypes.bfloat16}


class TrainingDiverged(UserError):
  """The loss became NaN or infinite."""


def devices_for(dev: str, gpus: int) -> tuple[str, ...]:
  return tuple(Device.canonicalize(f"{dev}:{i}") for i in range(gpus))


def model_config(bert_config: str | os.PathLike, hp: dict[str, Any], layers: int | None = None) -> BertConfig:
  """bert_config.json with the platform's size overrides (BERT_LAYERS, BERT_HIDDEN_SIZE, ...)."""
  cfg = BertConfig.from_json(bert_config, num_hidden_layers=layers or hp.get("BERT_LAYERS"))
  over = {f: hp[k] for k, f in (("BERT_HIDDEN_SIZE", "hidden_size"), ("BERT_NUM_HEADS", "num_attention_heads"),
                                ("BERT_INTERMEDIATE_SIZE", "intermediate_size")) if hp.get(k)}
  if hp.get("DISABLE_DROPOUT"): over.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
  try: return dataclasses.replace(cfg, **over) if over else cfg
  except UserError as e: raise UserError(f"model size overrides {over}: {e}") from None


def optim_config(hp: dict[str, Any]) -> OptimConfig:
  return OptimConfig(base_lr=hp["OPT_BASE_LEARNING_RATE"], train_steps=hp["TRAIN_STEPS"],
                     warmup_steps=hp["NUM_WARMUP_STEPS"], beta_1=hp["OPT_LAMB_BETA_1"], beta_2=hp["OPT_LAMB_BETA_2"],
                     epsilon=hp["EPSILON"], weight_decay=hp["DECAY"], poly_power=hp["POLY_POWER"],
                     loss_scaler=hp["LOSS_SCALER"])


def clear_kernel_cache(enabled: bool) -> bool:
  """CACHE_CLEAR: empty tinygrad's disk cache of compiled kernels (CACHEDB, ~/.cache/tinygrad/cache.db) as
  train_bert's INIT phase does before it logs cache_clear; returns whether it did (the value logged)."""
  if not enabled: return False
  from tinygrad.helpers import diskcache_clear
  diskcache_clear()
  return True


def fake_batch(bs: int, seq: int, pred: int, vocab: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
  """Random data of the real shapes (the INIT phase compiles on it)."""
  return {"input_ids": rng.integers(0, vocab, (bs, seq), dtype=np.int32),
          "input_mask": np.ones((bs, seq), np.int32), "segment_ids": np.zeros((bs, seq), np.int32),
          "masked_lm_positions": np.tile(np.arange(pred, dtype=np.int32), (bs, 1)),
          "masked_lm_ids": rng.integers(0, vocab, (bs, pred), dtype=np.int32),
          "masked_lm_weights": np.ones((bs, pred), np.float32),
          "next_sentence_labels": rng.integers(0, 2, (bs, 1), dtype=np.int32)}


class Steps:
  """A model with its LAMB trainer and the two jitted steps, on one device or data-parallel on several."""
  def __init__(self, cfg: BertConfig, hp: dict[str, Any], devices: tuple[str, ...], seed: int,
               init_weights: str | os.PathLike | None = None, zero: bool = False):
    self.devices = devices
    if hp.get("CPU_THREADS") and all(d.split(":")[0] == "CPU" for d in devices): cpu_threads.enable()
    dtype = FLOAT_DTYPES[hp["FLOAT"]]
    self.model = BertForPretraining(cfg, seed=seed, dtype=dtype, decoder_block=hp["DECODER_BLOCK"],
                                    last_layer_rows=hp["LAST_LAYER_ROWS"])
    if zero:
      for p in self.model.parameters(): p.assign(Tensor.zeros_like(p).contiguous()).realize()
    if init_weights is not None:
      from mlperf_bert.train.checkpoint import load_weights
      load_weights(self.model, init_weights, log=lambda s: print(s, flush=True))
    if len(devices) > 1:
      for p in self.model.parameters(): p.to_(devices)
    else:
      for p in self.model.parameters(): p.to_(devices[0])
    self.trainer = Trainer(self.model.decay_parameters(), self.model.no_decay_parameters(), optim_config(hp))
    self.train_step = TinyJit(self._train_step)
    self.eval_step = TinyJit(self._eval_step)
    # TRAIN_BEAM / EVAL_BEAM: the BEAM of each jitted step (train_bert sets BEAM.value before each; default BEAM)
    self.train_ctx = {"BEAM": hp["TRAIN_BEAM"]} if hp.get("TRAIN_BEAM") is not None else {}
    self.eval_ctx = {"BEAM": hp["EVAL_BEAM"]} if hp.get("EVAL_BEAM") is not None else {}

  def _place(self, *ts: Tensor):
    for t in ts:
      if len(self.devices) > 1: t.shard_(self.devices, axis=0)
      else: t.to_(self.devices[0])

  def _train_step(self, input_ids, input_mask, segment_ids, positions, lm_ids, lm_weights, ns_labels):  # FEATURES order
    with Context(TRAINING=1):
      self._place(input_ids, segment_ids, input_mask, positions, lm_ids, lm_weights, ns_labels)
      self.trainer.zero_grad()
      mlm, nsp = self.model.forward(input_ids, segment_ids, input_mask, positions)
      loss = self.model.loss(mlm, nsp, lm_ids, lm_weights, ns_labels)
      self.trainer.backward(loss)
      # the loss and the grads are realized before the update (as train_bert realizes the grads); train_bert realizes
      # its loss only after optimizer.step() changed the weights in place, so the loss it prints is partly computed on
      # the new weights (docs/parity.md); this one is the loss at the weights the gradient was taken at
      Tensor.realize(loss, *[p.grad for p in self.trainer.params if p.grad is not None])
      global_norm, lr = self.trainer.clip_and_step()
      return loss, global_norm, lr

  def _eval_step(self, input_ids, input_mask, segment_ids, positions, lm_ids, lm_weights, ns_labels, row_mask):
    with Context(TRAINING=0):
      self._place(input_ids, segment_ids, input_mask, positions, lm_ids, lm_weights, ns_labels, row_mask)
      mlm, nsp = self.model.forward(input_ids, segment_ids, input_mask, positions)
      correct, total = self.model.accuracy_parts(mlm, lm_ids, lm_weights, row_mask)
      batch_acc = self.model.batch_accuracy(mlm, lm_ids)
      # no eval loss: its log-softmax over the vocab-wide logits (exp of EVAL_BS*20*30522 values) was 40 % of a CPU
      # eval step, and neither MLPerf's log nor the target reads it (the train loss is printed every step)
      Tensor.realize(correct, total, batch_acc)
      return correct, total, batch_acc

  def train(self, b: dict[str, np.ndarray]):
    with Context(**self.train_ctx): return self.train_step(*[Tensor(b[k]) for k in FEATURES])

  def evaluate(self, b: dict[str, np.ndarray], row_mask: np.ndarray):
    with Context(**self.eval_ctx): return self.eval_step(*[Tensor(b[k]) for k in FEATURES], Tensor(row_mask))

  # ---- state for checkpoints ----
  def state_tensors(self) -> dict[str, Tensor]:
    st = {f"model/{k}": v for k, v in self.model.state_dict().items()}
    st.update({f"optim/{k}": v for k, v in self.trainer.state_tensors().items()})
    return st

  def persistent_tensors(self) -> list[Tensor]:
    """Every tensor whose buffer carries state from one step to the next: the checkpoint's tensors and tinygrad's
    RNG seeds and counters (FREE_INTERMEDIATE must keep them: mlperf_bert/train/jitmem.py)."""
    return [*self.state_tensors().values(), *Tensor._device_seeds.values(), *Tensor._device_rng_counters.values()]

  def free_intermediates(self, jit: TinyJit) -> int:
    """FREE_INTERMEDIATE, as train_bert around an eval: the intermediates of one captured step (train_step before
    the eval, eval_step after it), never the training state. Returns the number of buffers freed."""
    return 0 if jit.captured is None else jitmem.free_intermediates(jit.captured, self.persistent_tensors())




def _to_numpy(t: Tensor) -> np.ndarray:
  if isinstance(t.device, tuple): t = t.to(t.device[0])
  return t.numpy()


def _rng_state() -> dict[str, np.ndarray]:
  return {f"rng/{d if isinstance(d, str) else '|'.join(d)}": _to_numpy(c).astype(np.uint32)
          for d, c in Tensor._device_rng_counters.items()}


def _restore_rng(saved: dict[str, np.ndarray]):
  for k, v in saved.items():
    name = k[len("rng/"):]
    dev: Any = tuple(name.split("|")) if "|" in name else name
    if dev not in Tensor._device_rng_counters: Tensor._next_counter(dev, 0)
    c = Tensor._device_rng_counters[dev]
    c.assign(Tensor(v.astype(np.uint32), dtype=dtypes.uint32, device=c.device)).realize()


def log_keys(path: str | os.PathLike) -> list[str]:
  """The event keys of an MLPerf log, in order ([] for a missing file; lines that are not `:::MLLOG {json}` and a
  torn last line are skipped)."""
  try: text = Path(path).read_text(errors="replace")
  except FileNotFoundError: return []
  keys = []
  for line in text.splitlines():
    if not line.startswith(":::MLLOG "): continue
    try: keys.append(json.loads(line[len(":::MLLOG "):])["key"])
    except (ValueError, KeyError, TypeError): continue
  return keys


def list_checkpoints(ckpt_dir: str | os.PathLike) -> list[tuple[int, Path]]:
  d = Path(ckpt_dir)
  if not d.is_dir(): return []
  return sorted((int(m.group(1)), p) for p in d.iterdir() if (m := CKPT_RE.match(p.name)))


@dataclasses.dataclass
class RunResult:
  status: str              # success | aborted | stopped (interrupted on purpose, no result log) | init (phase init done)
  steps: int
  samples: int
  accuracies: list[tuple[int, float]]
  losses: list[float]
  log_path: Path | None
  step_ms: float = float("nan")

  def summary(self) -> str:
    """The line the train command and the train rule print at the end."""
    return (f"training finished: status {self.status} after {self.steps} steps ({self.samples} samples), "
            f"eval accuracies {self.accuracies}, median step {self.step_ms:.1f} ms")


@dataclasses.dataclass
class StepTiming:
  """One timed train step: seconds in total, enqueuing (python), fetching the next batch, waiting for the device."""
  loss: float
  lr: float
  total_s: float
  python_s: float
  fetch_s: float
  device_s: float
  ops: int
  mem: int
  end: float               # time.perf_counter() when the step finished


class TrainRun:
  def __init__(self, hp: dict[str, Any], *, shard_paths: Sequence[str | os.PathLike], eval_path: str | os.PathLike,
               bert_config: str | os.PathLike, log_path: str | os.PathLike, work_log_path: str | os.PathLike,
               ckpt_dir: str | os.PathLike, max_seq_length: int, max_predictions_per_seq: int,
               init_weights: str | os.PathLike | None = None, devices: tuple[str, ...] | None = None,
               echo: bool = True, progress: bool = True):
    self.hp = dict(hp)
    self.log_path, self.work_log_path, self.ckpt_dir = Path(log_path), Path(work_log_path), Path(ckpt_dir)
    self.seq, self.pred = max_seq_length, max_predictions_per_seq
    self.init_weights = init_weights
    self.echo, self.progress = echo, progress
    self.devices = devices or devices_for(self.hp["DEV"], self.hp["GPUS"])
    if len(self.devices) != self.hp["GPUS"]:
      raise UserError(f"GPUS={self.hp['GPUS']} but {len(self.devices)} devices given; make them agree")
    # validate every input before any work: shards, eval set, model config
    self.shards = open_shards(shard_paths, max_seq_length, max_predictions_per_seq)
    self.eval_shard = open_shards([eval_path], max_seq_length, max_predictions_per_seq, what="eval set")[0]
    check_train_inputs([Path(p) for p in shard_paths], eval_path, bert_config)  # not the eval set; vocab fits
    if len(self.eval_shard) < self.hp["EVAL_SAMPLES"]:
      raise UserError(f"{eval_path}: the eval set has {len(self.eval_shard)} rows, fewer than EVAL_SAMPLES="
                      f"{self.hp['EVAL_SAMPLES']}; rebuild the eval set or lower EVAL_SAMPLES")
    self.cfg = model_config(bert_config, self.hp)
    self.bert_config = bert_config
    if init_weights is not None and not Path(init_weights).is_file():
      raise UserError(f"{init_weights}: initial checkpoint not found; run the checkpoint conversion first")
    self.fingerprint = hashlib.sha256(json.dumps(
      {"hp": {k: v for k, v in rule_params(self.hp).items() if k not in NOT_FINGERPRINTED},
       "shards": [Path(p).name for p in shard_paths], "seq": self.seq, "pred": self.pred,
       "model": dataclasses.asdict(self.cfg),
       "init": Path(init_weights).name if init_weights else None},  # names, not paths: a moved tree resumes
      sort_keys=True, default=str).encode()).hexdigest()

  def say(self, msg: str):
    if self.echo: tqdm.write(msg)

  # ---------------------------------------------------------------------------------------------------
  def _init_phase(self, log: ResultLog | None):
    """Compile the steps on fake data with a throw-away model of INIT_BERT_LAYERS layers (as train_bert's INIT)."""
    hp = self.hp
    if log: log.init_header(hp, cache_cleared=clear_kernel_cache(hp["CACHE_CLEAR"]))
    n = hp["INIT_BENCHMARK_STEPS"]
    if n > 0:
      st = time.perf_counter()
      cfg = dataclasses.replace(self.cfg, num_hidden_layers=min(hp["INIT_BERT_LAYERS"], self.cfg.num_hidden_layers))
      warm = Steps(cfg, hp, self.devices, seed=hp["SEED"], zero=True)
      rng = np.random.default_rng(0)
      for _ in range(n):
        loss, _, _ = warm.train(fake_batch(hp["BS"], self.seq, self.pred, self.cfg.vocab_size, rng))
        loss.item()
      fb = fake_batch(hp["EVAL_BS"], self.seq, self.pred, self.cfg.vocab_size, rng)
      for _ in range(min(n, 3)): warm.evaluate(fb, np.ones(hp["EVAL_BS"], np.float32))[0].item()
      del warm
      self.say(f"init: compiled {n} train steps of a {cfg.num_hidden_layers}-layer model in "
               f"{time.perf_counter() - st:.1f} s")
    if log: log.init_stop()

  def _build(self) -> Steps:
    Tensor.manual_seed(self.hp["SEED"])
    return Steps(self.cfg, self.hp, self.devices, seed=self.hp["SEED"], init_weights=self.init_weights)

  # ---- checkpoints ----
  def _save(self, steps: Steps, step: int, position: int):
    arrays = {k: np.ascontiguousarray(_to_numpy(t)) for k, t in steps.state_tensors().items()}
    arrays.update(_rng_state())
    meta = {"step": str(step), "position": str(position), "seed": str(self.hp["SEED"]),
            "fingerprint": self.fingerprint, "format": "mlperf-bert-train-state-1"}
    path = self.ckpt_dir / f"ckpt_{step:08d}.safetensors"
    with atomic_path(path) as tmp: save_file(arrays, str(tmp), metadata=meta)
    for _, old in list_checkpoints(self.ckpt_dir)[:-self.hp["KEEP_CKPT_AMOUNT"]]:
      old.unlink(missing_ok=True)
    self.say(f"saved checkpoint {path}")

  def _find_resume(self) -> tuple[Path, dict] | None:
    """The newest checkpoint of these settings; checkpoints of other settings (or unreadable ones) are removed."""
    found = None
    for step, p in reversed(list_checkpoints(self.ckpt_dir)):
      try:
        with safe_open(str(p), framework="numpy") as f: meta = f.metadata() or {}
      except (SafetensorError, OSError) as e:
        self.say(f"ignoring unreadable checkpoint {p} ({e}); removing it"); p.unlink(missing_ok=True); continue
      if meta.get("fingerprint") != self.fingerprint:
        self.say(f"removing checkpoint {p}: it was written with other settings"); p.unlink(missing_ok=True); continue
      if found is None: found = (p, meta)
    return found

  def _load(self, steps: Steps, path: Path):
    targets = steps.state_tensors()
    with safe_open(str(path), framework="numpy") as f:
      keys = set(f.keys())
      missing = [k for k in targets if k not in keys]
      if missing: raise UserError(f"{path}: checkpoint lacks {missing[:3]}...; delete it to start over")
      for k, t in targets.items():
        arr = f.get_tensor(k)
        if tuple(arr.shape) != tuple(t.shape):
          raise UserError(f"{path}: {k} has shape {arr.shape}, expected {t.shape}; delete the checkpoint to start over")
        src = Tensor(np.ascontiguousarray(arr)).cast(t.dtype)
        t.assign(src.to(t.device)).realize()
      _restore_rng({k: f.get_tensor(k) for k in keys if k.startswith("rng/")})

  # ---------------------------------------------------------------------------------------------------
  def run(self, stop_after: int | None = None, on_step: Callable[[int, float], None] | None = None,
          phase: str = "all") -> RunResult:
    """Train to TARGET or TRAIN_STEPS; `stop_after` ends (status "stopped") after that many steps of this process.

    phase "all": the INIT then the RUN phase in this process. "init": the INIT phase alone (a fresh work log that
    ends with init_stop; status "init"). "run": the RUN phase alone, appended to the work log an INIT phase left (in
    another process: tinygrad's run_and_time.sh). A resumable run (a checkpoint of these settings and a work log
    with run_start) is continued in every phase: "init" and "all" only compile then, nothing is logged twice."""
    if phase not in PHASES: raise UserError(f"phase {phase!r}: use one of {', '.join(PHASES)}")
    hp = self.hp
    gbs = hp["GLOBAL_BATCH_SIZE"]
    resume = self._find_resume()
    keys = log_keys(self.work_log_path)
    kept = resume is not None and "run_start" in keys        # continue this work log: no header again
    init_logged = bool(keys) and keys[-1] == "init_stop"     # an INIT phase's log, the RUN phase not begun
    if phase == "run" and not (kept or init_logged):
      found = "is missing" if not self.work_log_path.exists() else \
              f"ends with {keys[-1]!r}" if keys else "has no MLPerf events"
      raise UserError(f"{self.work_log_path}: the RUN phase needs the work log of an INIT phase that ends with "
                      f"init_stop (or a resumable run's log with its checkpoint), but it {found}; run the INIT phase "
                      f"first (train --phase init with the same settings) or use --phase all")
    fresh = phase != "run" and not kept                         # a new work log from init_start
    if fresh: self.work_log_path.unlink(missing_ok=True)
    log = ResultLog(self.work_log_path, echo=self.echo, append=not fresh)
    try:
      if kept and phase != "run":
        self.say(f"a resumable run: {self.work_log_path} and {resume[0]} are kept; the INIT phase compiles, logs nothing")
      if phase != "run": self._init_phase(log if fresh else None)
      if phase == "init":
        return RunResult("init", 0, 0, [], [], None)
      if not kept: log.run_header(hp, self.seq, self.pred, self.eval_samples())
      steps = self._build()
      step, position = 0, 0
      if resume is not None:
        self._load(steps, resume[0])
        step, position = int(resume[1]["step"]), int(resume[1]["position"])
        self.say(f"resuming from {resume[0]} at step {step} (sample {position})")
        log.event("resume_from_checkpoint", None, step_num=step, samples_count=position)
      if not kept: log.epoch_start(step * gbs)
      # PARALLEL: the v5.1 scripts run the RUN phase with PARALLEL=0 (the INIT phase keeps tinygrad's default)
      with Context(**({"PARALLEL": hp["PARALLEL"]} if hp.get("PARALLEL") is not None else {})):
        return self._loop(steps, log, step, position, stop_after, on_step)
    finally:
      log.close()

  def eval_samples(self) -> int:
    """The number of eval samples one eval reads (logged as eval_samples): EVAL_BS * MAX_EVAL_STEPS for the
    tinygrad metric (as train_bert logs it), EVAL_SAMPLES for the pooled one."""
    hp = self.hp
    return hp["EVAL_BS"] * hp["MAX_EVAL_STEPS"] if hp["EVAL_METRIC"] == "tinygrad" else hp["EVAL_SAMPLES"]

  def _evaluate(self, steps: Steps, evals_done: int = 0) -> tuple[float, float]:
    """(masked-LM accuracy, seconds). EVAL_METRIC tinygrad: the mean of the per-batch
    accuracies of MAX_EVAL_STEPS batches that continue where the previous eval stopped (`evals_done` evals ago
    from row 0), as train_bert; pooled: correct / total over the first EVAL_SAMPLES rows (MLCommons)."""
    hp = self.hp
    st = time.perf_counter()
    if hp["EVAL_METRIC"] == "tinygrad":
      n, bs = hp["MAX_EVAL_STEPS"], hp["EVAL_BS"]
      ones = np.ones(bs, np.float32)
      window = eval_window(self.eval_shard, bs, n, (evals_done * n * bs) % len(self.eval_shard))
      accs = [steps.evaluate(b, ones)[2].item() for b in window]
      acc = sum(accs) / len(accs)
    else:
      correct = total = 0.0
      for b, mask in eval_batches(self.eval_shard, hp["EVAL_BS"], hp["EVAL_SAMPLES"]):
        c, t, _ = steps.evaluate(b, mask)
        correct, total = correct + c.item(), total + t.item()
      acc = correct / total if total else 0.0
    return acc, time.perf_counter() - st

  def _timed_step(self, steps: Steps, data: dict[str, np.ndarray], loader: TrainLoader, index: int
                  ) -> tuple[StepTiming, tuple[int, dict[str, np.ndarray]]]:
    """One train step on `data` while the loader fetches the next batch, timed and printed as train_bert prints
    it (the RUN loop and benchmark()); returns the timing and the loader's (position, next batch)."""
    st = time.perf_counter()
    GlobalCounters.reset()
    loss_t, _, lr_t = steps.train(data)
    pt = time.perf_counter()
    fetched = next(loader)
    dt = time.perf_counter()
    loss, lr = loss_t.item(), lr_t.item()
    cl = time.perf_counter()
    t = StepTiming(loss, lr, cl - st, pt - st, dt - pt, cl - dt, GlobalCounters.global_ops, GlobalCounters.global_mem, cl)
    dev = self.devices[0] if len(self.devices) == 1 else f"{self.devices[0]} * {len(self.devices)}"
    self.say(f"{index:5} {t.total_s * 1e3:7.2f} ms run, {t.python_s * 1e3:7.2f} ms python, {t.fetch_s * 1e3:6.2f} ms "
             f"fetch data, {t.device_s * 1e3:7.2f} ms {dev}, {loss:5.2f} loss, {lr:.6f} LR, "
             f"{GlobalCounters.mem_used / 1e9:.2f} GB used, {t.ops * 1e-9 / t.total_s:9.2f} GFLOPS")
    return t, fetched

  def _loop(self, steps: Steps, log: ResultLog, step: int, position: int, stop_after, on_step) -> RunResult:
    hp = self.hp
    gbs, train_steps = hp["GLOBAL_BATCH_SIZE"], hp["TRAIN_STEPS"]
    accs: list[tuple[int, float]] = []
    losses: list[float] = []
    times: list[float] = []
    start_step, prev_ckpt_step = step, step
    bar = tqdm(total=train_steps, initial=step, disable=not self.progress, mininterval=5, unit="step")
    loader = TrainLoader(self.shards, hp["BS"], seed=hp["SEED"], position=position, cycle_length=hp["NUM_CPU_THREADS"])
    status = None
    try:
      pos_next, data = next(loader)
      while step < train_steps:
        if stop_after is not None and step - start_step >= stop_after:
          status = "stopped"; break
        t, (pos_fetched, data) = self._timed_step(steps, data, loader, step)
        pos_after, pos_next = pos_next, pos_fetched
        step += 1
        loss = t.loss
        times.append(t.total_s)
        losses.append(loss)
        bar.update(1)
        if on_step: on_step(step, loss)
        if not math.isfinite(loss):
          log.run_stop(False, step * gbs, reason=f"loss {loss} at step {step}")
          raise TrainingDiverged(
            f"the loss became {loss} at step {step}: training stopped (run_stop aborted). The partial MLPerf log is kept "
            f"at {self.work_log_path}. Lower OPT_BASE_LEARNING_RATE, raise NUM_WARMUP_STEPS, or under fp16 lower "
            f"LOSS_SCALER; delete {self.ckpt_dir} to start over")
        if step % hp["EVAL_STEP_FREQ"] == 0 or step == train_steps:
          log.eval_start(step * gbs, step)
          if hp.get("FREE_INTERMEDIATE"): steps.free_intermediates(steps.train_step)  # room for the eval's buffers
          acc, secs = self._evaluate(steps, evals_done=(step - 1) // hp["EVAL_STEP_FREQ"])
          if hp.get("FREE_INTERMEDIATE"): steps.free_intermediates(steps.eval_step)
          log.eval_stop(step * gbs, step, self.eval_samples())
          log.eval_accuracy(acc, step * gbs)
          accs.append((step, acc))
          self.say(f"eval at step {step}: masked-LM accuracy {acc:.6f} over "
                   f"{self.eval_samples()} samples, metric {hp['EVAL_METRIC']} ({secs:.1f} s)")
          if acc >= hp["TARGET"]:
            self.say(f"target {hp['TARGET']} reached after {step * gbs} samples")
            log.epoch_stop(step * gbs)
            log.run_stop(True, step * gbs)
            status = "success"; break
        if step % hp["SAVE_CKPT_FREQ"] == 0 and step < train_steps:
          if step > prev_ckpt_step: log.block_stop(step, step - prev_ckpt_step)
          if hp["CKPT"]: self._save(steps, step, pos_after)  # tinygrad saves only under CKPT: off, nothing is spent
          log.block_start(step * gbs, step)
          prev_ckpt_step = step
      if status is None:
        self.say(f"TRAIN_STEPS={train_steps} done without reaching TARGET {hp['TARGET']}: run_stop aborted")
        log.epoch_stop(step * gbs)
        log.run_stop(False, step * gbs)
        status = "aborted"
    finally:
      loader.close()
      bar.close()
    step_ms = float(np.median(times) * 1e3) if times else float("nan")
    if status == "stopped":
      return RunResult("stopped", step, step * gbs, accs, losses, None, step_ms)
    log.close()
    # the result log and, beside it, the train record of what this process read and wrote (train/record.py)
    publish_result(self.work_log_path, self.log_path, shards=self.shards, eval_shard=self.eval_shard,
                   init_weights=self.init_weights, bert_config=self.bert_config, hp=hp, status=status, accuracies=accs)
    self.work_log_path.unlink()
    for _, p in list_checkpoints(self.ckpt_dir): p.unlink()  # the run is complete: nothing to resume
    return RunResult(status, step, step * gbs, accs, losses, self.log_path, step_ms)

  # ---------------------------------------------------------------------------------------------------
  def benchmark(self, n: int) -> dict[str, float]:
    """BENCHMARK=n: n steps on real data from a fresh model; prints the estimated time to TRAIN_STEPS."""
    hp = self.hp
    t0 = time.perf_counter()
    steps = self._build()
    loader = TrainLoader(self.shards, hp["BS"], seed=hp["SEED"], cycle_length=hp["NUM_CPU_THREADS"])
    times, fetch, ops, mem = [], [], 0, 0
    first = None
    try:
      _, data = next(loader)
      for i in range(n):
        t, (_, data) = self._timed_step(steps, data, loader, i)
        if first is None: first = t.end - t0
        times.append(t.total_s); fetch.append(t.fetch_s)
        ops, mem = t.ops, t.mem
    finally:
      loader.close()
    med = sorted(times)[len(times) // 2]
    est = int(med * hp["TRAIN_STEPS"] / 60)
    print(f"Estimated training time: {est // 60}h{est % 60}m")
    print(f"epoch global_ops: {hp['TRAIN_STEPS'] * ops:_}, epoch global_mem: {hp['TRAIN_STEPS'] * mem:_}")
    return {"median_step_s": med, "first_step_s": first or float("nan"), "gflops": ops * 1e-9 / med,
            "median_fetch_ms": float(np.median(fetch) * 1e3), "samples_per_s": hp["BS"] / med,
            "estimated_total_min": med * hp["TRAIN_STEPS"] / 60}


def shard_files(shards: str | os.PathLike | Sequence[str | os.PathLike]) -> list[Path]:
  """Training shards named on the command line: shard files, or directories of *.shard files."""
  out: list[Path] = []
  for s in [shards] if isinstance(shards, (str, os.PathLike)) else shards:
    out += sorted(Path(s).glob("*.shard")) if Path(s).is_dir() else [Path(s)]
  return out


def train_from_paths(platform_file, overrides: dict[str, Any], *, shards, eval_path, bert_config, init_weights,
                     max_seq_length: int, max_predictions_per_seq: int, seed: int, out, ckpt_dir, benchmark: int = 0,
                     stop_after: int | None = None, phase: str = "all", work_log=None):
  """`python -m mlperf_bert train` (and the train rule's INIT / RUN processes, mlperf_bert/train/phases.py): resolve
  the platform's hyperparameters with `overrides`, then train (a RunResult; `phase` as TrainRun.run) or, with
  benchmark=N, time N steps (a dict of figures). The work log defaults to `<out>.partial`."""
  from mlperf_bert.train.hparams import load_platform, resolve, tinygrad_env
  hp = resolve(load_platform(platform_file), overrides, seed=seed, eval_examples=len(Shard(eval_path)), where="--set")
  for k, v in tinygrad_env(hp).items():  # the CLI exported them before importing tinygrad; a caller in-process may not
    if os.environ.get(k, v) != v:
      print(f"note: {k}={os.environ[k]} in the environment; the platform says {v}, which this process cannot apply "
            f"(tinygrad is imported): run python -m mlperf_bert train")
  out = Path(out)
  run = TrainRun(hp, shard_paths=shard_files(shards), eval_path=eval_path, bert_config=bert_config, log_path=out,
                 work_log_path=work_log or out.with_name(out.name + ".partial"), ckpt_dir=ckpt_dir,
                 max_seq_length=max_seq_length, max_predictions_per_seq=max_predictions_per_seq,
                 init_weights=init_weights)
  if benchmark:
    return run.benchmark(benchmark)
  return run.run(stop_after=stop_after, phase=phase)
