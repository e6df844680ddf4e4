"""The model, its LAMB optimizer and the two jitted steps (train, eval), on one device or data-parallel on several.

    trainer = ModelTrainer(model_config(bert_config, s.model), s, devices, seed=s.seed)
    loss, global_norm, lr = trainer.train(batch)          # batch: numpy arrays named as constants.FEATURES
    correct, total, batch_acc = trainer.evaluate(batch, row_mask)

Both steps take the features positionally in constants.FEATURES order, as BertForPretraining.forward does, each
already on the devices (`step_inputs`): on several devices cut on the host into each device's rows, so that no
kernel of the step slices the batch (each slice was a program of its own, one a device and input shape).
"""
from __future__ import annotations
import dataclasses, os

import numpy as np
from tinygrad import Device, Tensor, TinyJit, dtypes
from tinygrad.device import Buffer
from tinygrad.dtype import _from_np_dtype
from tinygrad.helpers import Context

from mlperf_bert.constants import FEATURES
from mlperf_bert.errors import UserError
from mlperf_bert.train import cpu_threads, jitmem
from mlperf_bert.train.model import BertConfig, BertForPretraining
from mlperf_bert.train.optim import ScheduledLAMB
from mlperf_bert.train.settings import ModelSettings, Settings

FLOAT_DTYPES = {"float32": dtypes.float32, "half": dtypes.half, "bfloat16": dtypes.bfloat16}


def devices_for(dev: str, gpus: int) -> tuple[str, ...]:
  name = dev.split(":")[0]  # NULL:CUDA:sm_89 (a NULL device with a target): devices NULL, NULL:1, ...
  return tuple(Device.canonicalize(f"{name}:{i}") for i in range(gpus))


def model_config(bert_config: str | os.PathLike, m: ModelSettings, layers: int | None = None) -> BertConfig:
  """bert_config.json with the platform's size overrides (BERT_LAYERS, BERT_HIDDEN_SIZE, ...)."""
  cfg = BertConfig.from_json(bert_config, num_hidden_layers=layers or m.layers)
  over = {f: v for v, f in ((m.hidden_size, "hidden_size"), (m.num_heads, "num_attention_heads"),
                            (m.intermediate_size, "intermediate_size")) if v}
  if m.disable_dropout: over.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
  try: return dataclasses.replace(cfg, **over) if over else cfg
  except UserError as e: raise UserError(f"model size overrides {over}: {e}") from None


def new_model(cfg: BertConfig, s: Settings, seed: int) -> BertForPretraining:
  """The model of these settings' float type and decoder/last-layer choices, seeded."""
  return BertForPretraining(cfg, seed=seed, dtype=FLOAT_DTYPES[s.float_type], decoder_block=s.model.decoder_block,
                            last_layer_rows=s.model.last_layer_rows)


def fake_batch(bs: int, seq: int, pred: int, vocab: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
  """Random data of the real shapes (the INIT phase compiles on it)."""
  return {"input_ids": rng.integers(0, vocab, (bs, seq), dtype=np.int32),
          "input_mask": np.ones((bs, seq), np.int32), "segment_ids": np.zeros((bs, seq), np.int32),
          "masked_lm_positions": np.tile(np.arange(pred, dtype=np.int32), (bs, 1)),
          "masked_lm_ids": rng.integers(0, vocab, (bs, pred), dtype=np.int32),
          "masked_lm_weights": np.ones((bs, pred), np.float32),
          "next_sentence_labels": rng.integers(0, 2, (bs, 1), dtype=np.int32)}


def host_shard(arr: np.ndarray, devices: tuple[str, ...]) -> Tensor:
  """A batch array as a step's input: on one device, copied there; on several, cut on the host into equal runs of
  rows in device order (what `shard(devices, axis=0)` makes on the devices), each copied straight into its device's
  buffer of one multi-device tensor, so no kernel slices it."""
  if len(devices) == 1: return Tensor(arr, device=devices[0])
  if arr.shape[0] % len(devices):
    raise UserError(f"a batch of {arr.shape[0]} rows does not split evenly over {len(devices)} devices; set BS and "
                    f"EVAL_BS to multiples of GPUS")
  rows, dtype = arr.shape[0] // len(devices), _from_np_dtype(arr.dtype)
  t = Tensor.empty(rows, *arr.shape[1:], dtype=dtype, device=devices)
  for i, buf in enumerate(t.uop.base.buffer.bufs):
    part = np.ascontiguousarray(arr[i * rows:(i + 1) * rows])
    buf.ensure_allocated().copy_from(Buffer("NPY", part.size, dtype).allocate(part))
  return Tensor(t.uop.unshard(0))


def step_inputs(b: dict[str, np.ndarray], devices: tuple[str, ...], keys=FEATURES) -> list[Tensor]:
  """The arrays of `keys` (a batch's features, in order) as a step's inputs on `devices` (host_shard)."""
  return [host_shard(b[k], devices) for k in keys]


class ModelTrainer:
  """A model with its LAMB optimizer (schedule, clipping, loss scaling) and the jitted train and eval steps."""
  def __init__(self, cfg: BertConfig, s: Settings, devices: tuple[str, ...], seed: int,
               init_weights: str | os.PathLike | None = None, zero: bool = False):
    self.devices = devices
    if s.tinygrad.cpu_threads and all(d.split(":")[0] == "CPU" for d in devices): cpu_threads.enable()
    self.model = new_model(cfg, s, seed)
    if zero:
      for p in self.model.parameters(): p.assign(Tensor.zeros_like(p).contiguous()).realize()
    if init_weights is not None:
      from mlperf_bert.train.init_weights import load_weights
      load_weights(self.model, init_weights, log=lambda msg: print(msg, flush=True))
    for p in self.model.parameters(): p.to_(devices if len(devices) > 1 else devices[0])
    self.optimizer = ScheduledLAMB(self.model.decay_parameters(), self.model.no_decay_parameters(), s.optimizer)
    # the RNG state of each device (as the first dropout would make it, in device order) and every state tensor as a
    # real buffer: the steps are captured on their first call (train/jitmem.py), which must not capture their init
    for d in devices: Tensor._next_counter(d, 0)
    Tensor.realize(*self.persistent_tensors())
    self.train_step = TinyJit(self._train_step)
    self.eval_step = TinyJit(self._eval_step)
    for jit in (self.train_step, self.eval_step): jitmem.capture_on_first_call(jit)
    # FREE_INTERMEDIATE 0: the eval step's intermediates live in the train step's arenas (train/jitmem.py)
    self.share_arenas = not s.free_intermediate
    self.plans: dict[str, jitmem.Plan] = {}   # "train"/"eval": the memory plan of each step's capture
    # TRAIN_BEAM / EVAL_BEAM: the BEAM of each jitted step (train_bert sets BEAM.value before each; default BEAM)
    self.train_ctx = {"BEAM": s.train_beam} if s.train_beam is not None else {}
    self.eval_ctx = {"BEAM": s.eval.beam} if s.eval.beam is not None else {}

  def _train_step(self, input_ids, input_mask, segment_ids, positions, lm_ids, lm_weights, ns_labels):  # FEATURES order
    with Context(TRAINING=1):   # the inputs are on the devices already (step_inputs)
      self.optimizer.zero_grad()
      mlm, nsp = self.model.forward(input_ids, input_mask, segment_ids, positions)
      loss = self.model.loss(mlm, nsp, lm_ids, lm_weights, ns_labels)
      self.optimizer.backward(loss)
      # the loss and the grads are realized before the update (as train_bert realizes the grads); train_bert realizes
      # its loss only after optimizer.step() changed the weights in place, so the loss it prints is partly computed on
      # the new weights (docs/parity.md); this one is the loss at the weights the gradient was taken at
      Tensor.realize(loss, *[p.grad for p in self.optimizer.params if p.grad is not None])
      global_norm, lr = self.optimizer.clip_and_step()
      return loss, global_norm, lr

  def _eval_step(self, input_ids, input_mask, segment_ids, positions, lm_ids, lm_weights, ns_labels, row_mask):
    with Context(TRAINING=0):
      mlm, nsp = self.model.forward(input_ids, input_mask, segment_ids, positions)
      correct, total = self.model.accuracy_parts(mlm, lm_ids, lm_weights, row_mask)
      batch_acc = self.model.batch_accuracy(mlm, lm_ids)
      # no eval loss: its log-softmax over the vocab-wide logits (exp of EVAL_BS*20*30522 values) was 40 % of a CPU
      # eval step, and neither MLPerf's log nor the target reads it (the train loss is printed every step)
      Tensor.realize(correct, total, batch_acc)
      return correct, total, batch_acc

  def train(self, b: dict[str, np.ndarray]):
    with Context(**self.train_ctx), jitmem.planned(self.train_step) as record:
      out = self.train_step(*step_inputs(b, self.devices))
    if record is not None: self.plans["train"] = record
    return out

  def evaluate(self, b: dict[str, np.ndarray], row_mask: np.ndarray):
    into = self.plans["train"].arenas() if self.share_arenas and "train" in self.plans else None
    with Context(**self.eval_ctx), jitmem.planned(self.eval_step, into=into) as record:
      out = self.eval_step(*step_inputs({**b, "row_mask": row_mask}, self.devices, (*FEATURES, "row_mask")))
    if record is not None: self.plans["eval"] = record
    return out

  def mlm_logits(self, b: dict[str, np.ndarray]) -> np.ndarray:
    """The masked-LM logits (B, P, vocab) of a batch as float32 host memory, from the model's forward pass as the eval
    step computes it (the audit counts near-tied predictions on them: train/evidence.py)."""
    with Context(TRAINING=0, **self.eval_ctx):
      mlm = self.model.forward(*step_inputs(b, self.devices, FEATURES[:4]))[0]
      return (mlm.to(mlm.device[0]) if isinstance(mlm.device, tuple) else mlm).numpy()

  # ---- state for checkpoints ----
  def state_tensors(self) -> dict[str, Tensor]:
    st = {f"model/{k}": v for k, v in self.model.state_dict().items()}
    st.update({f"optim/{k}": v for k, v in self.optimizer.state_tensors().items()})
    return st

  def persistent_tensors(self) -> list[Tensor]:
    """Every tensor whose buffer carries state from one step to the next: the checkpoint's tensors and tinygrad's
    RNG seeds and counters (FREE_INTERMEDIATE must keep them: mlperf_bert/train/jitmem.py)."""
    return [*self.state_tensors().values(), *Tensor._device_seeds.values(), *Tensor._device_rng_counters.values()]

  def free_intermediates(self, jit: TinyJit) -> int:
    """FREE_INTERMEDIATE, as train_bert around an eval: the intermediates of one captured step (train_step before
    the eval, eval_step after it), never the training state. Returns the number of buffers freed."""
    return 0 if jit.captured is None else jitmem.free_intermediates(jit.captured, self.persistent_tensors())
