"""BERT for pretraining (masked LM + next sentence) in tinygrad, with Google-BERT parameter names.

Parameters live in one ordered dict keyed by the variable names of Google's TensorFlow BERT
(`bert/encoder/layer_3/attention/self/query/kernel`, ...), in the same layouts: a dense kernel is
(in, out) and is applied as `x @ kernel`; `cls/seq_relationship/output_weights` is (2, hidden). The
converted MLPerf checkpoint therefore loads name for name, shape for shape, with no transposes.

Precision: parameters are stored in `param_dtype` (float32 by default) and cast to the compute `dtype`
where they are used, so `dtype=dtypes.half` gives fp16 matmuls and activations with fp32 master weights.
The casts sit where tinygrad's train_bert (extra/models/bert.py with examples/mlperf/initializers.py) puts them:
LayerNorm normalizes in float32 and applies gamma/beta in the compute dtype; attention scores are computed in
float32, the mask added, then cast to the compute dtype before the softmax (Tensor.scaled_dot_product_attention);
the masked-LM decoder multiplies by the float32 word embeddings (so it runs in float32); the losses run in float32.

Dropout is active only under `tinygrad.Context(TRAINING=1)` (tinygrad's `Tensor.dropout` reads it).

`decoder_block` (platform key DECODER_BLOCK) only changes how the masked-LM decoder's vocab-wide matmul is laid out
for tinygrad's kernels: 0 computes `h @ table.T` as train_bert does; a block size computes the logits vocab-major,
one block of the table at a time (`blocked_decoder`). Same values, but the gradient of `h` is summed block by block,
so that gradient is rounded differently (docs/parity.md row 18).

`last_layer_rows` (platform key LAST_LAYER_ROWS) computes the last encoder layer's queries, attention output and
feed-forward only for the rows the heads read (position 0 for the next-sentence head and the masked positions);
its keys and values still come from every row. The heads get the same values; dropout draws its masks for the whole
layer, as the full computation does, and keeps the rows used, so training follows the same random stream
(docs/parity.md row 19). Single device only: on several devices the layer is computed in full.
"""
from __future__ import annotations
import dataclasses, json, math
from pathlib import Path

import numpy as np
from tinygrad import Tensor, dtypes, nn
from tinygrad.dtype import DType
from tinygrad.helpers import TRAINING

from mlperf_bert.errors import UserError

LAYER_NORM_EPS = 1e-12
ATTENTION_MASK_VALUE = -10000.0  # additive mask of Google BERT; fits fp16
MLM_LOSS_EPS = 1e-5              # denominator guard of the reference masked-LM loss


@dataclasses.dataclass(frozen=True)
class BertConfig:
  """The fields of Google's bert_config.json. Defaults are BERT-large (the MLPerf model)."""
  vocab_size: int = 30522
  hidden_size: int = 1024
  num_hidden_layers: int = 24
  num_attention_heads: int = 16
  intermediate_size: int = 4096
  max_position_embeddings: int = 512
  type_vocab_size: int = 2
  hidden_dropout_prob: float = 0.1
  attention_probs_dropout_prob: float = 0.1
  initializer_range: float = 0.02
  hidden_act: str = "gelu"

  def __post_init__(self):
    self.check()

  def check(self, source: str = "BertConfig") -> None:
    """Raise UserError naming `source` if a value is out of range."""
    for f in dataclasses.fields(self):
      v = getattr(self, f.name)
      if f.type == "int" and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
        raise UserError(f"{source}: {f.name} must be a positive integer, got {v!r}; fix the value")
      if f.type == "float" and (not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0):
        raise UserError(f"{source}: {f.name} must be a non-negative number, got {v!r}; fix the value")
    for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
      if not getattr(self, name) < 1:
        raise UserError(f"{source}: {name} must be below 1, got {getattr(self, name)!r}; fix the value")
    if self.hidden_size % self.num_attention_heads:
      raise UserError(f"{source}: hidden_size {self.hidden_size} is not a multiple of num_attention_heads "
                      f"{self.num_attention_heads}; pick sizes that divide")
    if self.hidden_act != "gelu":
      raise UserError(f"{source}: hidden_act must be 'gelu' (the erf GELU of BERT), got {self.hidden_act!r}")

  @property
  def head_size(self) -> int:
    return self.hidden_size // self.num_attention_heads

  @classmethod
  def from_json(cls, path: str | Path, num_hidden_layers: int | None = None) -> "BertConfig":
    """Read Google's bert_config.json; `num_hidden_layers` overrides the layer count (BERT_LAYERS).

    Keys that are not fields (e.g. from a Hugging Face config) are ignored; every field is required.
    """
    path = Path(path)
    try:
      raw = json.loads(path.read_text())
    except FileNotFoundError:
      raise UserError(f"{path}: BERT config not found; check the path (the download stage writes bert_config.json)")
    except json.JSONDecodeError as e:
      raise UserError(f"{path}: not valid JSON ({e}); re-download bert_config.json")
    if not isinstance(raw, dict):
      raise UserError(f"{path}: expected a JSON object with the BERT config keys, got {type(raw).__name__}")
    kw = {}
    for f in dataclasses.fields(cls):
      if f.name not in raw:
        raise UserError(f"{path}: missing key {f.name!r} (expected a {f.type}); use Google's bert_config.json")
      v = raw[f.name]
      ok = {"int": isinstance(v, int) and not isinstance(v, bool),
            "float": isinstance(v, (int, float)) and not isinstance(v, bool),
            "str": isinstance(v, str)}[f.type]
      if not ok:
        raise UserError(f"{path}: key {f.name!r} must be of type {f.type}, got {v!r}; fix the config file")
      kw[f.name] = float(v) if f.type == "float" else v
    if num_hidden_layers is not None:
      kw["num_hidden_layers"] = num_hidden_layers
    try:
      return cls(**kw)
    except UserError as e:
      raise UserError(f"{path}: {e}") from None


# ---------------------------------------------------------------------------------------------------------
# parameter names and shapes

def parameter_shapes(config: BertConfig) -> dict[str, tuple[int, ...]]:
  """Google-BERT variable name -> shape, for every parameter of BertForPretraining, in a stable order.

  The masked-LM decoder is tied to `bert/embeddings/word_embeddings` and has no entry of its own.
  """
  H, I, V = config.hidden_size, config.intermediate_size, config.vocab_size
  s: dict[str, tuple[int, ...]] = {
    "bert/embeddings/word_embeddings": (V, H),
    "bert/embeddings/position_embeddings": (config.max_position_embeddings, H),
    "bert/embeddings/token_type_embeddings": (config.type_vocab_size, H),
    "bert/embeddings/LayerNorm/gamma": (H,),
    "bert/embeddings/LayerNorm/beta": (H,),
  }
  for i in range(config.num_hidden_layers):
    p = f"bert/encoder/layer_{i}"
    for qkv in ("query", "key", "value"):
      s[f"{p}/attention/self/{qkv}/kernel"] = (H, H)
      s[f"{p}/attention/self/{qkv}/bias"] = (H,)
    s[f"{p}/attention/output/dense/kernel"] = (H, H)
    s[f"{p}/attention/output/dense/bias"] = (H,)
    s[f"{p}/attention/output/LayerNorm/gamma"] = (H,)
    s[f"{p}/attention/output/LayerNorm/beta"] = (H,)
    s[f"{p}/intermediate/dense/kernel"] = (H, I)
    s[f"{p}/intermediate/dense/bias"] = (I,)
    s[f"{p}/output/dense/kernel"] = (I, H)
    s[f"{p}/output/dense/bias"] = (H,)
    s[f"{p}/output/LayerNorm/gamma"] = (H,)
    s[f"{p}/output/LayerNorm/beta"] = (H,)
  s.update({
    "bert/pooler/dense/kernel": (H, H),
    "bert/pooler/dense/bias": (H,),
    "cls/predictions/transform/dense/kernel": (H, H),
    "cls/predictions/transform/dense/bias": (H,),
    "cls/predictions/transform/LayerNorm/gamma": (H,),
    "cls/predictions/transform/LayerNorm/beta": (H,),
    "cls/predictions/output_bias": (V,),
    "cls/seq_relationship/output_weights": (2, H),
    "cls/seq_relationship/output_bias": (2,),
  })
  return s


def is_no_decay(name: str) -> bool:
  """True for parameters excluded from weight decay: biases and LayerNorm (as in Google's optimizer)."""
  return name.endswith("bias") or "LayerNorm" in name


def _init_value(name: str, shape: tuple[int, ...], std: float, rng: np.random.Generator) -> np.ndarray:
  if name.endswith("/gamma"): return np.ones(shape, np.float32)
  if name.endswith("bias") or name.endswith("/beta"): return np.zeros(shape, np.float32)
  return truncated_normal(rng, shape, std)


def truncated_normal(rng: np.random.Generator, shape: tuple[int, ...], std: float) -> np.ndarray:
  """Normal(0, std) values redrawn until all lie within +-2 std (TF's truncated_normal), float32."""
  x = rng.standard_normal(shape, dtype=np.float32).reshape(-1)
  while (bad := np.flatnonzero(np.abs(x) > 2.0)).size:
    x[bad] = rng.standard_normal(bad.size, dtype=np.float32)
  return (x * np.float32(std)).reshape(shape)


# ---------------------------------------------------------------------------------------------------------
# the model

def _lookup(table: Tensor, ids: Tensor) -> Tensor:
  """Embedding lookup through tinygrad's nn.Embedding (keeps its fast paths, e.g. USE_ATOMICS)."""
  emb = nn.Embedding.__new__(nn.Embedding)
  emb.weight = table
  return emb(ids)


def blocked_decoder(h: Tensor, table: Tensor, block: int) -> Tensor:
  """`h @ table.T` for h (B, P, H) and table (V, H), as (B, P, V), computed vocab-major in ceil(V / block) blocks.

  tinygrad's CPU kernels for the plain form are slow at the demo's shapes: its backward `g @ table` is one
  reduction over the whole vocabulary per output, which streams the table from memory again for every tile of
  the output. Here the table is padded to whole blocks, the logits are materialized as (blocks, block, B*P) and so
  is their gradient, and each block's share of the gradient of `h` is its own reduction over `block` rows of the
  table (which stays in cache), summed over the blocks afterwards. The logits are the same numbers (each is still
  one sum over H); the gradient of `h` is the same sum in another order.
  """
  B, P, H = h.shape
  V, R = table.shape[0], B * P
  blocks = -(-V // block)
  tb = table.pad(((0, blocks * block - V), (0, 0))).reshape(blocks, block, H)
  # h once per block; contiguous_backward keeps each block's gradient of h its own reduction over `block` rows
  hb = h.reshape(1, R, H).expand(blocks, R, H).contiguous_backward()
  logits_t = (tb @ hb.transpose(1, 2)).contiguous_backward().contiguous()  # (blocks, block, R), its gradient too
  return logits_t.reshape(blocks * block, R)[:V].T.reshape(B, P, V)


def _take_rows(t: Tensor, rows: Tensor, dim: int) -> Tensor:
  """t's entries at `rows` (B, R) along `dim` (1 or 2); every other dim of t is kept."""
  shape = list(t.shape)
  shape[dim] = rows.shape[1]
  idx = rows.reshape(rows.shape[0], *([1] * (dim - 1)), rows.shape[1], *([1] * (t.ndim - dim - 1)))
  return t.gather(dim, idx.expand(*shape))


def _dropout_rows(y: Tensor, p: float, full_shape: tuple[int, ...], rows: Tensor | None, dim: int) -> Tensor:
  """Tensor.dropout of a tensor shaped `full_shape`, applied to `y`, its entries at `rows` along `dim`: the mask is
  drawn for the whole tensor (the random numbers the full computation draws) and its rows at `rows` are used.
  Without `rows`, y is that whole tensor: plain Tensor.dropout."""
  if rows is None: return y.dropout(p)
  if not TRAINING or p == 0: return y
  if p == 1: return y.const_like(0)
  keep = (Tensor.rand(*full_shape, device=y.device, dtype=dtypes.default_float, contiguous=False) >= p).contiguous()
  return _take_rows(keep, rows, dim).where(y, 0) / (1.0 - p)


def _gelu(x: Tensor) -> Tensor:
  """The erf GELU of BERT (tinygrad's default `gelu` is the tanh approximation)."""
  return x * 0.5 * (1.0 + (x * (1.0 / math.sqrt(2.0))).erf())


class BertForPretraining:
  """BERT encoder with the masked-LM and next-sentence heads.

  `seed` seeds the MLPerf initialization (truncated normal, +-2 std, std `initializer_range`; zero biases;
  LayerNorm gamma ones, beta zeros). `dtype` is the compute dtype, `param_dtype` the storage dtype
  (defaults to float32). `params` maps Google-BERT names to the parameter tensors.
  """

  def __init__(self, config: BertConfig, seed: int | None = None, dtype: DType = dtypes.float32,
               param_dtype: DType = dtypes.float32, device: str | None = None, decoder_block: int = 0,
               last_layer_rows: bool = False):
    if decoder_block < 0: raise UserError(f"DECODER_BLOCK={decoder_block}: 0 (train_bert's decoder) or a block size")
    self.config, self.dtype, self.param_dtype, self.decoder_block = config, dtype, param_dtype, decoder_block
    self.last_layer_rows = last_layer_rows
    rng = np.random.default_rng(seed)
    self.params: dict[str, Tensor] = {}
    for name, shape in parameter_shapes(config).items():
      value = _init_value(name, shape, config.initializer_range, rng)
      self.params[name] = Tensor(value, device=device).cast(param_dtype).contiguous().realize()

  # --- parameters -------------------------------------------------------------------------------------
  def state_dict(self) -> dict[str, Tensor]:
    """Google-BERT name -> parameter tensor (the same objects the model computes with)."""
    return dict(self.params)

  def parameters(self) -> list[Tensor]:
    return list(self.params.values())

  def no_decay_names(self) -> list[str]:
    return [n for n in self.params if is_no_decay(n)]

  def decay_names(self) -> list[str]:
    return [n for n in self.params if not is_no_decay(n)]

  def no_decay_parameters(self) -> list[Tensor]:
    return [self.params[n] for n in self.no_decay_names()]

  def decay_parameters(self) -> list[Tensor]:
    return [self.params[n] for n in self.decay_names()]

  def num_parameters(self) -> int:
    return sum(math.prod(t.shape) for t in self.params.values())

  # --- building blocks --------------------------------------------------------------------------------
  def _w(self, name: str) -> Tensor:
    return self.params[name].cast(self.dtype)

  def _dense(self, x: Tensor, prefix: str) -> Tensor:
    return x.matmul(self._w(f"{prefix}/kernel")) + self._w(f"{prefix}/bias")

  def _layer_norm(self, x: Tensor, prefix: str) -> Tensor:
    y = x.float().layernorm(eps=LAYER_NORM_EPS).cast(self.dtype)
    return y * self._w(f"{prefix}/gamma") + self._w(f"{prefix}/beta")

  def _attention(self, x: Tensor, mask_add: Tensor, prefix: str, rows: Tensor | None = None) -> Tensor:
    """Self-attention block; with `rows` (B, R) only those query rows are computed (keys and values: all rows)."""
    B, S, _ = x.shape
    nh, hs = self.config.num_attention_heads, self.config.head_size
    xq = x if rows is None else _take_rows(x, rows, 1)
    R = xq.shape[1]
    def heads(t: Tensor, n: int) -> Tensor: return t.reshape(B, n, nh, hs).permute(0, 2, 1, 3)
    q = heads(self._dense(xq, f"{prefix}/self/query"), R)
    k = heads(self._dense(x, f"{prefix}/self/key"), S)
    v = heads(self._dense(x, f"{prefix}/self/value"), S)
    scores = q.matmul(k.transpose(-2, -1), dtype=dtypes.float32) * (1.0 / math.sqrt(hs)) + mask_add
    # contiguous: otherwise the softmax (its exp) is recomputed inside the probs @ v matmul for every output column
    probs = scores.cast(self.dtype).softmax(-1).contiguous()
    p_attn, p_hidden = self.config.attention_probs_dropout_prob, self.config.hidden_dropout_prob
    probs = _dropout_rows(probs, p_attn, (B, nh, S, S), rows, 2)
    ctx = probs.matmul(v).permute(0, 2, 1, 3).reshape(B, R, nh * hs)
    out = self._dense(ctx, f"{prefix}/output/dense")
    out = _dropout_rows(out, p_hidden, x.shape, rows, 1)
    return self._layer_norm(out + xq, f"{prefix}/output/LayerNorm")

  def _layer(self, x: Tensor, mask_add: Tensor, i: int, rows: Tensor | None = None) -> Tensor:
    p = f"bert/encoder/layer_{i}"
    a = self._attention(x, mask_add, f"{p}/attention", rows)
    # materialize the GELU's output and its input's gradient: otherwise tinygrad fuses the erf GELU (and its
    # derivative) into the next matmul and recomputes it once per output column (on CPU 0.6 s of a 1.5 s demo step;
    # bench/bench_step_vs_tinygrad.py). Values are unchanged (tests/train/test_parity.py).
    h = _gelu(self._dense(a, f"{p}/intermediate/dense").contiguous_backward()).contiguous()
    o = _dropout_rows(self._dense(h, f"{p}/output/dense"), self.config.hidden_dropout_prob, x.shape, rows, 1)
    return self._layer_norm(o + a, f"{p}/output/LayerNorm")

  # --- forward ----------------------------------------------------------------------------------------
  def encode(self, input_ids: Tensor, segment_ids: Tensor, input_mask: Tensor, rows: Tensor | None = None) -> Tensor:
    """Sequence output (B, S, hidden) of the encoder; with `rows` (B, R) the last layer computes only those rows
    and the output is (B, R, hidden)."""
    B, S = input_ids.shape
    if S > self.config.max_position_embeddings:
      raise UserError(f"sequence length {S} exceeds max_position_embeddings {self.config.max_position_embeddings}")
    x = (_lookup(self._w("bert/embeddings/word_embeddings"), input_ids)
         + self._w("bert/embeddings/position_embeddings")[:S].unsqueeze(0)
         + _lookup(self._w("bert/embeddings/token_type_embeddings"), segment_ids))
    x = self._layer_norm(x, "bert/embeddings/LayerNorm").dropout(self.config.hidden_dropout_prob)
    mask_add = ((1.0 - input_mask.float()) * ATTENTION_MASK_VALUE).reshape(B, 1, 1, S)
    n = self.config.num_hidden_layers
    for i in range(n):
      x = self._layer(x, mask_add, i, rows if i == n - 1 else None)
    return x

  def forward(self, input_ids: Tensor, input_mask: Tensor, segment_ids: Tensor,
              masked_lm_positions: Tensor) -> tuple[Tensor, Tensor]:
    """(masked-LM logits (B, P, vocab) float32, next-sentence logits (B, 2) float32).

    Inputs are integer tensors in constants.FEATURES order: ids/mask/segments (B, S), masked_lm_positions (B, P).
    """
    B = masked_lm_positions.shape[0]
    positions = masked_lm_positions.cast(dtypes.int32)
    if self.last_layer_rows and not isinstance(input_ids.device, tuple):
      # the last layer computes row 0 (the next-sentence head's) and the masked positions only
      rows = Tensor.zeros(B, 1, dtype=dtypes.int32, device=positions.device).cat(positions, dim=1)
      out = self.encode(input_ids, segment_ids, input_mask, rows)
      first, h = out[:, 0], out[:, 1:]
    else:
      seq = self.encode(input_ids, segment_ids, input_mask)
      first, h = seq[:, 0], _take_rows(seq, positions, 1)
    pooled = self._dense(first, "bert/pooler/dense").tanh()
    nsp_logits = (pooled.matmul(self._w("cls/seq_relationship/output_weights").T)
                  + self._w("cls/seq_relationship/output_bias")).float()
    h = self._layer_norm(_gelu(self._dense(h, "cls/predictions/transform/dense")), "cls/predictions/transform/LayerNorm")
    # the decoder multiplies by the float32 table (as tinygrad's BertLMPredictionHead): float32 under HALF too
    table = self.params["bert/embeddings/word_embeddings"]
    logits = blocked_decoder(h, table, self.decoder_block) if self.decoder_block else h.matmul(table.T)
    mlm_logits = logits + self.params["cls/predictions/output_bias"]
    # contiguous: the vocab-wide matmul is materialized once and reused by the backward pass
    return mlm_logits.float().contiguous(), nsp_logits

  __call__ = forward

  # --- losses and metrics -----------------------------------------------------------------------------
  @staticmethod
  def loss_terms(mlm_logits: Tensor, nsp_logits: Tensor, masked_lm_ids: Tensor, masked_lm_weights: Tensor,
                 next_sentence_labels: Tensor) -> tuple[Tensor, Tensor]:
    """(masked-LM loss, next-sentence loss), both float32 scalars.

    Masked LM: sum(w * nll) / (sum(w) + 1e-5) over all predictions. Next sentence: tinygrad's
    `binary_crossentropy_logits` of the (B, 2) logits against the (B, 1) labels broadcast to (B, 2), i.e. the mean
    over both columns of -(y log sigmoid(z) + (1 - y) log sigmoid(-z)) (MLCommons' reference takes the softmax
    cross-entropy of the two logits instead; see docs/parity.md).
    """
    V = mlm_logits.shape[-1]
    logp = mlm_logits.float().log_softmax(-1)
    onehot = masked_lm_ids.cast(dtypes.int32).unsqueeze(-1)._one_hot_along_dim(V, dim=-1)
    nll = -(onehot.where(logp, 0.0).sum(-1))
    w = masked_lm_weights.float()
    mlm = (w * nll).sum() / (w.sum() + MLM_LOSS_EPS)
    z, y = nsp_logits.float(), next_sentence_labels.float().reshape(-1, 1)
    nsp = -(y * z.logsigmoid() + (1 - y) * (-z).logsigmoid()).mean()
    return mlm, nsp

  @classmethod
  def loss(cls, mlm_logits: Tensor, nsp_logits: Tensor, masked_lm_ids: Tensor, masked_lm_weights: Tensor,
           next_sentence_labels: Tensor) -> Tensor:
    """Total pretraining loss: masked-LM loss + next-sentence loss (float32 scalar)."""
    mlm, nsp = cls.loss_terms(mlm_logits, nsp_logits, masked_lm_ids, masked_lm_weights, next_sentence_labels)
    return mlm + nsp

  @staticmethod
  def batch_accuracy(mlm_logits: Tensor, masked_lm_ids: Tensor) -> Tensor:
    """tinygrad's per-batch masked-LM accuracy: correct predictions over positions whose label id is not 0
    (the padding of masked_lm_ids), float32 scalar (train_bert averages it over the eval batches)."""
    ids = masked_lm_ids.cast(dtypes.int32)
    valid = (ids != 0).float()
    return ((mlm_logits.argmax(-1) == ids).float() * valid).sum() / valid.sum()

  @staticmethod
  def accuracy_parts(mlm_logits: Tensor, masked_lm_ids: Tensor, masked_lm_weights: Tensor,
                     row_mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """(correct, total) float32 scalars for masked-LM accuracy = correct / total over a whole eval set.

    correct = sum(w * [argmax == id]), total = sum(w). `row_mask` (B,) of 1/0 drops padding rows of a
    partial last batch. Sum both parts across batches before dividing.
    """
    w = masked_lm_weights.float()
    if row_mask is not None:
      w = w * row_mask.float().reshape(-1, 1)
    hit = (mlm_logits.argmax(-1) == masked_lm_ids.cast(dtypes.int32)).float()
    return (w * hit).sum(), w.sum()
