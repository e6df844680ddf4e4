"""The tinygrad BERT against Hugging Face's BertForPreTraining (torch, CPU) on the same random weights."""
from __future__ import annotations
import json

import numpy as np
import pytest
from tinygrad import Context, Tensor, dtypes

from mlperf_bert.constants import FEATURES
from mlperf_bert.errors import UserError
from mlperf_bert.train.model import BertConfig, BertForPretraining, parameter_shapes

TINY = dict(vocab_size=300, hidden_size=48, num_hidden_layers=2, num_attention_heads=4, intermediate_size=96,
            max_position_embeddings=64, type_vocab_size=2)


def hf_name_map(num_layers: int) -> dict[str, tuple[str, bool]]:
  """Google-BERT name -> (Hugging Face BertForPreTraining name, transposed?); dense kernels are transposed."""
  m = {
    "bert/embeddings/word_embeddings": ("bert.embeddings.word_embeddings.weight", False),
    "bert/embeddings/position_embeddings": ("bert.embeddings.position_embeddings.weight", False),
    "bert/embeddings/token_type_embeddings": ("bert.embeddings.token_type_embeddings.weight", False),
    "bert/embeddings/LayerNorm/gamma": ("bert.embeddings.LayerNorm.weight", False),
    "bert/embeddings/LayerNorm/beta": ("bert.embeddings.LayerNorm.bias", False),
    "bert/pooler/dense/kernel": ("bert.pooler.dense.weight", True),
    "bert/pooler/dense/bias": ("bert.pooler.dense.bias", False),
    "cls/predictions/transform/dense/kernel": ("cls.predictions.transform.dense.weight", True),
    "cls/predictions/transform/dense/bias": ("cls.predictions.transform.dense.bias", False),
    "cls/predictions/transform/LayerNorm/gamma": ("cls.predictions.transform.LayerNorm.weight", False),
    "cls/predictions/transform/LayerNorm/beta": ("cls.predictions.transform.LayerNorm.bias", False),
    "cls/predictions/output_bias": ("cls.predictions.bias", False),
    "cls/seq_relationship/output_weights": ("cls.seq_relationship.weight", False),
    "cls/seq_relationship/output_bias": ("cls.seq_relationship.bias", False),
  }
  dense = {"attention/self/query": "attention.self.query", "attention/self/key": "attention.self.key",
           "attention/self/value": "attention.self.value", "attention/output/dense": "attention.output.dense",
           "intermediate/dense": "intermediate.dense", "output/dense": "output.dense"}
  norms = {"attention/output/LayerNorm": "attention.output.LayerNorm", "output/LayerNorm": "output.LayerNorm"}
  for i in range(num_layers):
    p, q = f"bert/encoder/layer_{i}", f"bert.encoder.layer.{i}"
    for gn, hn in dense.items():
      m[f"{p}/{gn}/kernel"] = (f"{q}.{hn}.weight", True)
      m[f"{p}/{gn}/bias"] = (f"{q}.{hn}.bias", False)
    for gn, hn in norms.items():
      m[f"{p}/{gn}/gamma"] = (f"{q}.{hn}.weight", False)
      m[f"{p}/{gn}/beta"] = (f"{q}.{hn}.bias", False)
  return m


def hf_state_dict(weights: dict[str, np.ndarray], num_layers: int) -> dict[str, np.ndarray]:
  """Google-BERT names/layouts -> a Hugging Face BertForPreTraining state dict (with the tied decoder)."""
  hf = {hn: (weights[gn].T if t else weights[gn]) for gn, (hn, t) in hf_name_map(num_layers).items()}
  hf["cls.predictions.decoder.weight"] = weights["bert/embeddings/word_embeddings"]
  hf["cls.predictions.decoder.bias"] = weights["cls/predictions/output_bias"]
  return hf


def needs_torch():
  """(torch, transformers), or the test skips naming the extra that brings them (the `test` extra)."""
  why = "needs torch and transformers: pip install -e '.[test]' (scripts/test.sh installs them)"
  return pytest.importorskip("torch", reason=why), pytest.importorskip("transformers", reason=why)


def hf_forward(weights: dict[str, np.ndarray], cfg: BertConfig, batch: dict[str, np.ndarray]):
  """(mlm logits at the masked positions, nsp logits) from transformers' BertForPreTraining in eval mode."""
  torch, transformers = needs_torch()
  hcfg = transformers.BertConfig(vocab_size=cfg.vocab_size, hidden_size=cfg.hidden_size,
                                 num_hidden_layers=cfg.num_hidden_layers, num_attention_heads=cfg.num_attention_heads,
                                 intermediate_size=cfg.intermediate_size, hidden_act="gelu",
                                 max_position_embeddings=cfg.max_position_embeddings,
                                 type_vocab_size=cfg.type_vocab_size, layer_norm_eps=1e-12,
                                 attn_implementation="eager")
  model = transformers.BertForPreTraining(hcfg).eval()
  sd = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in hf_state_dict(weights, cfg.num_hidden_layers).items()}
  missing, unexpected = model.load_state_dict(sd, strict=False)
  assert not unexpected and all("position_ids" in k for k in missing), (missing, unexpected)
  with torch.no_grad():
    out = model(input_ids=torch.from_numpy(batch["input_ids"]).long(),
                token_type_ids=torch.from_numpy(batch["segment_ids"]).long(),
                attention_mask=torch.from_numpy(batch["input_mask"]).long())
  logits = out.prediction_logits.numpy()
  pos = batch["masked_lm_positions"]
  return np.take_along_axis(logits, pos[:, :, None].astype(np.int64), axis=1), out.seq_relationship_logits.numpy()


def random_batch(cfg: BertConfig, B=3, S=24, P=5, seed=0) -> dict[str, np.ndarray]:
  rng = np.random.default_rng(seed)
  lengths = [S, S - 7, S // 2][:B]
  ids = rng.integers(0, cfg.vocab_size, (B, S)).astype(np.int32)
  mask = np.zeros((B, S), np.int32)
  seg = np.zeros((B, S), np.int32)
  pos = np.zeros((B, P), np.int32)
  for b, n in enumerate(lengths):
    mask[b, :n] = 1
    seg[b, n // 2:n] = 1
    ids[b, n:] = 0
    pos[b] = rng.choice(np.arange(1, n), P, replace=False)
  weights = np.ones((B, P), np.float32)
  weights[2, 3:] = 0.0  # padding predictions
  pos[2, 3:] = 0
  return dict(input_ids=ids, segment_ids=seg, input_mask=mask, masked_lm_positions=pos,
              masked_lm_ids=rng.integers(0, cfg.vocab_size, (B, P)).astype(np.int32),
              masked_lm_weights=weights, next_sentence_labels=np.array([0, 1, 1], np.int32)[:B])


def randomize(model: BertForPretraining, seed=1) -> dict[str, np.ndarray]:
  """Give every parameter (biases and LayerNorm included) random values; return them as numpy."""
  rng = np.random.default_rng(seed)
  out = {}
  for name, t in model.state_dict().items():
    scale = 0.2 if ("LayerNorm" in name or "bias" in name) else 0.05
    v = (rng.standard_normal(t.shape) * scale).astype(np.float32)
    if name.endswith("gamma"): v += 1.0
    t.assign(Tensor(v)).realize()
    out[name] = v
  return out


def run_forward(model, batch):
  mlm, nsp = model(*(Tensor(batch[k]) for k in FEATURES[:4]))
  return mlm, nsp


@pytest.fixture(scope="module")
def tiny():
  cfg = BertConfig(**TINY)
  model = BertForPretraining(cfg, seed=0)
  weights = randomize(model)
  return cfg, model, weights


@pytest.fixture(params=[(0, False), (64, True)], ids=["train_bert-layout", "demo-layout"])
def layout(tiny, request):
  """Each test runs with train_bert's computation and with the demo's: the blocked masked-LM decoder (5 blocks of
  64 for a vocab of 300, the last one padded) and the last layer computed for the rows the heads read only."""
  _, model, _ = tiny
  model.decoder_block, model.last_layer_rows = request.param
  yield request.param
  model.decoder_block, model.last_layer_rows = 0, False


@pytest.mark.slow  # compiles a model's kernels or runs a real tool: tens of seconds on 2 cores
def test_forward_matches_huggingface(tiny, layout):
  cfg, model, weights = tiny
  batch = random_batch(cfg)
  mlm, nsp = run_forward(model, batch)
  assert mlm.shape == (3, 5, cfg.vocab_size) and nsp.shape == (3, 2)
  assert mlm.dtype == dtypes.float32 and nsp.dtype == dtypes.float32
  ref_mlm, ref_nsp = hf_forward(weights, cfg, batch)
  assert np.abs(ref_mlm).max() > 0.5  # not a degenerate comparison
  np.testing.assert_allclose(mlm.numpy(), ref_mlm, atol=1e-4, rtol=1e-4)
  np.testing.assert_allclose(nsp.numpy(), ref_nsp, atol=1e-4, rtol=1e-4)


def _log_softmax(x):
  x = x.astype(np.float64)
  m = x.max(-1, keepdims=True)
  return x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))


@pytest.mark.slow  # compiles a model's kernels or runs a real tool: tens of seconds on 2 cores
def test_loss_and_accuracy_match_numpy(tiny):
  cfg, model, _ = tiny
  batch = random_batch(cfg, seed=3)
  mlm, nsp = run_forward(model, batch)
  ids, w, lab = batch["masked_lm_ids"], batch["masked_lm_weights"], batch["next_sentence_labels"]
  loss = model.loss(mlm, nsp, Tensor(ids), Tensor(w), Tensor(lab)).numpy()
  mlm_np, nsp_np = mlm.numpy(), nsp.numpy()
  nll = -np.take_along_axis(_log_softmax(mlm_np), ids[..., None].astype(np.int64), -1)[..., 0]
  ref_mlm = (w * nll).sum() / (w.sum() + 1e-5)
  # tinygrad's next-sentence loss: binary cross-entropy of both logits against the label broadcast to (B, 2)
  y = lab.reshape(-1, 1).astype(np.float64)
  z = nsp_np.astype(np.float64)
  ref_nsp = -(y * -np.logaddexp(0, -z) + (1 - y) * -np.logaddexp(0, z)).mean()
  np.testing.assert_allclose(loss, ref_mlm + ref_nsp, rtol=1e-5)
  a, b = model.loss_terms(mlm, nsp, Tensor(ids), Tensor(w), Tensor(lab))
  np.testing.assert_allclose([a.numpy(), b.numpy()], [ref_mlm, ref_nsp], rtol=1e-5)

  # accuracy parts: make some predictions right by choosing the labels as the argmax
  ids2 = ids.copy()
  ids2[0] = mlm_np[0].argmax(-1)
  ids2[2, :2] = mlm_np[2, :2].argmax(-1)
  correct, total = model.accuracy_parts(mlm, Tensor(ids2), Tensor(w))
  hit = (mlm_np.argmax(-1) == ids2)
  assert correct.numpy() == pytest.approx((w * hit).sum()) and total.numpy() == pytest.approx(w.sum())
  assert (w * hit).sum() >= 7
  correct, total = model.accuracy_parts(mlm, Tensor(ids2), Tensor(w), row_mask=Tensor(np.array([1, 1, 0], np.int32)))
  assert correct.numpy() == pytest.approx((w * hit)[:2].sum()) and total.numpy() == pytest.approx(w[:2].sum())
  # tinygrad's per-batch accuracy counts positions whose label id is not 0
  valid = ids2 != 0
  assert model.batch_accuracy(mlm, Tensor(ids2)).numpy() == pytest.approx((hit * valid).sum() / valid.sum())


def test_no_decay_split_and_names(tiny):
  cfg, model, _ = tiny
  sd = model.state_dict()
  nd = set(model.no_decay_names())
  assert "cls/predictions/output_bias" in nd and "bert/encoder/layer_1/output/LayerNorm/gamma" in nd
  assert "bert/encoder/layer_0/attention/self/query/bias" in nd
  assert "cls/seq_relationship/output_weights" not in nd and "bert/embeddings/word_embeddings" not in nd
  assert nd.isdisjoint(model.decay_names()) and len(nd) + len(model.decay_names()) == len(sd)
  assert [id(t) for t in model.no_decay_parameters()] == [id(sd[n]) for n in model.no_decay_names()]
  assert len(model.parameters()) == len(sd) and list(sd) == list(parameter_shapes(cfg))
  assert model.num_parameters() == sum(int(np.prod(s)) for s in parameter_shapes(cfg).values())


@pytest.mark.slow  # compiles a model's kernels or runs a real tool: tens of seconds on 2 cores
def test_dropout_only_under_training():
  cfg = BertConfig(**TINY)
  model = BertForPretraining(cfg, seed=0)
  batch = random_batch(cfg, seed=5)
  a = run_forward(model, batch)[0].numpy()
  b = run_forward(model, batch)[0].numpy()
  np.testing.assert_array_equal(a, b)
  with Context(TRAINING=1):
    c = run_forward(model, batch)[0].numpy()
  assert np.abs(a - c).max() > 1e-4


def test_mlperf_initialization_truncated_normal_and_seeded():
  cfg = BertConfig(**{**TINY, "num_hidden_layers": 1, "initializer_range": 0.02})
  m1, m2, m3 = BertForPretraining(cfg, seed=7), BertForPretraining(cfg, seed=7), BertForPretraining(cfg, seed=8)
  s1, s2, s3 = ({k: v.numpy() for k, v in m.state_dict().items()} for m in (m1, m2, m3))
  for name, v in s1.items():
    np.testing.assert_array_equal(v, s2[name])
    if name.endswith("gamma"):
      assert (v == 1).all(), name
    elif name.endswith("bias") or name.endswith("beta"):
      assert (v == 0).all(), name
    else:
      assert np.abs(v).max() <= 2 * 0.02 + 1e-7, name
      assert not np.array_equal(v, s3[name]), name
  big = s1["bert/embeddings/word_embeddings"]
  assert np.abs(big.mean()) < 1e-3
  # std of a normal truncated at +-2 sigma is 0.8796 sigma
  assert big.std() == pytest.approx(0.02 * 0.8796, rel=0.03)
  assert np.abs(big).max() > 1.9 * 0.02


@pytest.mark.slow  # compiles a model's kernels or runs a real tool: tens of seconds on 2 cores
def test_half_compute_close_to_float32(tiny):
  cfg, model, weights = tiny
  half = BertForPretraining(cfg, seed=0, dtype=dtypes.half)
  for name, t in half.state_dict().items():
    t.assign(Tensor(weights[name])).realize()
  batch = random_batch(cfg, seed=6)
  ref = run_forward(model, batch)
  got = run_forward(half, batch)
  assert got[0].dtype == dtypes.float32
  for r, g in zip(ref, got):
    np.testing.assert_allclose(g.numpy(), r.numpy(), atol=3e-2, rtol=3e-2)


def _write(tmp_path, cfg):
  p = tmp_path / "bert_config.json"
  p.write_text(json.dumps(cfg))
  return p


def test_config_from_json(tmp_path):
  full = {**TINY, "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1, "initializer_range": 0.02,
          "hidden_act": "gelu", "extra_hf_key": 1}
  cfg = BertConfig.from_json(_write(tmp_path, full))
  assert cfg == BertConfig(**TINY)
  assert BertConfig.from_json(_write(tmp_path, full), num_hidden_layers=1).num_hidden_layers == 1
  assert BertConfig() .num_hidden_layers == 24 and BertConfig().hidden_size == 1024

  with pytest.raises(UserError, match=r"bert_config\.json.*missing key 'intermediate_size'"):
    BertConfig.from_json(_write(tmp_path, {k: v for k, v in full.items() if k != "intermediate_size"}))
  with pytest.raises(UserError, match=r"bert_config\.json.*'hidden_size' must be of type int"):
    BertConfig.from_json(_write(tmp_path, {**full, "hidden_size": "48"}))
  with pytest.raises(UserError, match=r"bert_config\.json.*not a multiple"):
    BertConfig.from_json(_write(tmp_path, {**full, "num_attention_heads": 5}))
  with pytest.raises(UserError, match=r"bert_config\.json.*hidden_act"):
    BertConfig.from_json(_write(tmp_path, {**full, "hidden_act": "relu"}))
  with pytest.raises(UserError, match=r"bert_config\.json.*num_hidden_layers"):
    BertConfig.from_json(_write(tmp_path, full), num_hidden_layers=0)
  with pytest.raises(UserError, match="not found"):
    BertConfig.from_json(tmp_path / "nope.json")
  (tmp_path / "bad.json").write_text("{")
  with pytest.raises(UserError, match="not valid JSON"):
    BertConfig.from_json(tmp_path / "bad.json")


@pytest.mark.slow  # compiles a model's kernels or runs a real tool: tens of seconds on 2 cores
def test_blocked_decoder_is_the_plain_decoder(tiny):
  """blocked_decoder gives h @ table.T to float32 rounding: logits and both gradients (h's summed per block)."""
  from mlperf_bert.train.model import blocked_decoder
  rng = np.random.default_rng(3)
  hv, tv, gv = (rng.standard_normal(s).astype(np.float32) for s in ((3, 5, 48), (300, 48), (3, 5, 300)))
  out = {}
  for block in (0, 64, 300, 512):
    h, table = Tensor(hv), Tensor(tv)
    logits = blocked_decoder(h, table, block) if block else h.matmul(table.T)
    (logits * Tensor(gv)).sum().backward()
    out[block] = [logits.numpy(), h.grad.numpy(), table.grad.numpy()]
    assert out[block][0].shape == (3, 5, 300) and out[block][2].shape == (300, 48)
  for block in (64, 300, 512):
    for got, want in zip(out[block], out[0]):
      np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
  with pytest.raises(UserError, match="DECODER_BLOCK"):
    BertForPretraining(BertConfig(**TINY), decoder_block=-1)


@pytest.mark.slow  # compiles a model's kernels or runs a real tool: tens of seconds on 2 cores
# the eval case (no dropout) is the training case's computation without its masks: a second compile of the same path
@pytest.mark.parametrize("train", [pytest.param(False, marks=pytest.mark.full), True], ids=["eval", "training-with-dropout"])
def test_last_layer_rows_same_outputs_and_dropout_masks(train):
  """LAST_LAYER_ROWS: the heads' outputs and every gradient equal the full computation's, with dropout on too
  (its masks are drawn for the whole layer and the used rows kept, so both consume the same random numbers). Two
  computations compared with each other, not kernels: lowered without optimizations (NOOPT), which halves the compile
  of the two un-jitted steps."""
  cfg = BertConfig(**{**TINY, "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1})
  model = BertForPretraining(cfg, seed=0)
  randomize(model, seed=4)
  batch = random_batch(cfg, seed=5)
  out = {}
  for rows in (False, True):
    model.last_layer_rows = rows
    Tensor.manual_seed(11)
    with Context(TRAINING=int(train), NOOPT=1):
      mlm, nsp = run_forward(model, batch)
      loss = model.loss(mlm, nsp, *(Tensor(batch[k]) for k in ("masked_lm_ids", "masked_lm_weights", "next_sentence_labels")))
      loss.backward()
      sd = model.state_dict()
      Tensor.realize(loss, *[t.grad for t in sd.values()])
    out[rows] = (mlm.numpy(), nsp.numpy(), {k: t.grad.numpy() for k, t in sd.items()})
    for t in sd.values(): t.grad = None
  np.testing.assert_allclose(out[True][0], out[False][0], rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(out[True][1], out[False][1], rtol=1e-5, atol=1e-6)
  for k, g in out[False][2].items():
    np.testing.assert_allclose(out[True][2][k], g, rtol=1e-4, atol=1e-6, err_msg=k)
  if train:  # dropout really acted: the same model without it gives other logits
    model.last_layer_rows = False
    mlm_eval, _ = run_forward(model, batch)
    assert np.abs(mlm_eval.numpy() - out[False][0]).max() > 1e-3


def test_demo_bert_config_is_bert_large():
  from pathlib import Path
  cfg = BertConfig.from_json(Path(__file__).parents[2] / "resources/demo/bert_config.json")
  assert cfg == BertConfig()
  n = sum(int(np.prod(s)) for s in parameter_shapes(cfg).values())
  assert 334_000_000 < n < 337_000_000  # BERT-large with the pretraining heads


def test_gradients_match_torch(tiny, layout):
  """Backward through the tinygrad model equals torch autograd through HF's model with the same loss."""
  torch, transformers = needs_torch()
  cfg, model, weights = tiny
  batch = random_batch(cfg, seed=8)
  mlm, nsp = run_forward(model, batch)
  loss = model.loss(mlm, nsp, *(Tensor(batch[k]) for k in ("masked_lm_ids", "masked_lm_weights", "next_sentence_labels")))
  loss.backward()
  sd = model.state_dict()
  Tensor.realize(loss, *[t.grad for t in sd.values()])  # one schedule for all gradients
  grads = {k: t.grad.numpy() for k, t in sd.items()}
  for k, t in sd.items():
    assert grads[k].shape == t.shape and np.isfinite(grads[k]).all() and np.abs(grads[k]).sum() > 0, k
    t.grad = None

  hcfg = transformers.BertConfig(vocab_size=cfg.vocab_size, hidden_size=cfg.hidden_size,
                                 num_hidden_layers=cfg.num_hidden_layers, num_attention_heads=cfg.num_attention_heads,
                                 intermediate_size=cfg.intermediate_size, max_position_embeddings=cfg.max_position_embeddings,
                                 layer_norm_eps=1e-12, attn_implementation="eager")
  hf = transformers.BertForPreTraining(hcfg).eval()
  hf.load_state_dict({k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in hf_state_dict(weights, 2).items()}, strict=False)
  out = hf(input_ids=torch.from_numpy(batch["input_ids"]).long(), token_type_ids=torch.from_numpy(batch["segment_ids"]).long(),
           attention_mask=torch.from_numpy(batch["input_mask"]).long())
  pos = torch.from_numpy(batch["masked_lm_positions"]).long()
  logits = torch.gather(out.prediction_logits, 1, pos[:, :, None].expand(-1, -1, cfg.vocab_size))
  nll = torch.nn.functional.cross_entropy(logits.reshape(-1, cfg.vocab_size), torch.from_numpy(batch["masked_lm_ids"]).long().reshape(-1),
                                          reduction="none")
  w = torch.from_numpy(batch["masked_lm_weights"]).reshape(-1)
  ref = (w * nll).sum() / (w.sum() + 1e-5) + torch.nn.functional.binary_cross_entropy_with_logits(  # tinygrad's NSP loss
    out.seq_relationship_logits, torch.from_numpy(batch["next_sentence_labels"]).float().reshape(-1, 1).expand(-1, 2))
  ref.backward()
  assert float(ref.detach()) == pytest.approx(float(loss.numpy()), rel=1e-5)
  named = dict(hf.named_parameters())
  mapping = hf_name_map(cfg.num_hidden_layers)
  assert set(mapping) == set(grads) and {h for h, _ in mapping.values()} == set(named)  # every parameter, tied once
  for ours, (theirs, transposed) in mapping.items():
    g = named[theirs].grad.numpy()
    np.testing.assert_allclose(grads[ours], g.T if transposed else g, atol=2e-5, rtol=1e-3, err_msg=ours)
