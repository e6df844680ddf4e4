"""The train record: what a finished training run read and what it wrote, written by the train process itself.

    publish_result(work_log, log_path, shards=..., eval_shard=..., init_weights=..., bert_config=..., hp=...,
                   status="success", accuracies=[(step, acc), ...])

puts the result log in place and, beside it, `<log stem>.train.json` (both atomically; the log first, and
removed again if the record cannot be written, so a log never stands without its record). The record holds the
sha256 of every shard and of the eval set as this process mapped them (the bytes it trained and evaluated on, even
if a file was replaced since), of the initial weights and bert_config it loaded, and of the exact bytes of the
result log it wrote, with the eval accuracies it measured; and, from this project's train process (not tinygrad's
own trainer), the sha256 of the final weights it wrote (train/evidence.py) and the counts of each batch of its last eval
(train/evaluation.py), and the states it kept at its evals (train/states.py: step, loader position, sha256 of each), with
the machine it ran on (host, CPU model, cores: mlperf_bert/machine.py). No later job writes it: the provenance rule and the audit only read it (mlperf_bert/audit/chain.py checks text -> shard -> train record -> log).

Paths are relative to the record's folder (a moved tree keeps its record valid); no absolute path is written.
"""
from __future__ import annotations
import datetime as _dt, hashlib, json, os
from pathlib import Path
from typing import Any, Sequence

from mlperf_bert.data.shards import Shard
from mlperf_bert.errors import UserError
from mlperf_bert.fileio import atomic_path, file_digest
from mlperf_bert.machine import this_machine
from mlperf_bert.train.hparams import rule_params
from mlperf_bert.train.settings import Settings

RECORD_SCHEMA = "mlperf-bert/train-record/2"
# the first form named the settings `hparams` and the initial weights `init_checkpoint`; read_record reads it as this
# one (trees trained before 2026-12-03)
FIRST_FORM_KEYS = {"hparams": "settings", "init_checkpoint": "init_weights"}
FIRST_RECORD_SCHEMA = "mlperf-bert/train-record/1"


def record_path(log_path: str | os.PathLike) -> Path:
  """Where the train record of a result log goes: result_bert_0.log -> result_bert_0.train.json."""
  p = Path(log_path)
  return p.with_name((p.name[:-len(".log")] if p.name.endswith(".log") else p.name) + ".train.json")


def _rel(path: str | os.PathLike, folder: Path) -> str:
  return os.path.relpath(os.path.abspath(path), os.path.abspath(folder))


def _shard_entry(sh: Shard, folder: Path) -> dict[str, Any]:
  return {"path": _rel(sh.path, folder), "bytes": sh.size, "sha256": sh.sha256(),
          "source_sha256": sh.source_sha256, "settings_sha256": sh.settings_sha256}


def _file_entry(path: str | os.PathLike | None, folder: Path) -> dict[str, Any] | None:
  if path is None: return None
  return {"path": _rel(path, folder), "bytes": os.path.getsize(path), "sha256": file_digest(path, "sha256")}


def build_train_record(log_bytes: bytes, log_path: Path, *, shards: Sequence[Shard], eval_shard: Shard,
                       init_weights, bert_config, settings: Settings, status: str,
                       accuracies: Sequence[tuple[int, float]], final_weights: dict | None = None,
                       last_eval: dict | None = None, kept_states: dict | None = None) -> dict:
  folder = record_path(log_path).parent
  evidence = {"final_weights": final_weights, "last_eval": last_eval} if final_weights else {}
  if kept_states is not None: evidence["kept_states"] = kept_states
  return {"schema": RECORD_SCHEMA,
          "created_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
          "seed": settings.seed, "status": status,
          "eval_accuracy": [[int(s), float(a)] for s, a in accuracies],
          "log": {"path": _rel(log_path, folder), "bytes": len(log_bytes),
                  "sha256": hashlib.sha256(log_bytes).hexdigest()},
          "shards": [_shard_entry(sh, folder) for sh in shards],
          "eval_set": _shard_entry(eval_shard, folder),
          "init_weights": _file_entry(init_weights, folder),
          "bert_config": _file_entry(bert_config, folder),
          "settings": rule_params(settings), "machine": {**this_machine(), "gpu_target": settings.dress_target}, **evidence}


def publish_result(work_log: str | os.PathLike, log_path: str | os.PathLike, **what) -> dict:
  """Copy the finished work log to `log_path` and write its train record beside it (see the module doc);
  `what`: build_train_record's keyword arguments (final_weights: the entry of the weights already written,
  last_eval: the eval's batches, train/evaluation.py). Returns the record."""
  log_path = Path(log_path)
  data = Path(work_log).read_bytes()  # the bytes written and the bytes hashed are one and the same
  rec = build_train_record(data, log_path, **what)
  try:
    text = json.dumps(rec, indent=1, default=str) + "\n"
  except (TypeError, ValueError) as e:
    raise UserError(f"{record_path(log_path)}: the train record is not JSON-serialisable ({e}); a bug") from None
  with atomic_path(log_path) as tmp:
    tmp.write_bytes(data)
  try:
    with atomic_path(record_path(log_path)) as tmp:
      tmp.write_text(text)
  except BaseException:
    log_path.unlink(missing_ok=True)
    raise
  return rec


def read_record(path: str | os.PathLike) -> dict[str, Any]:
  """A train record, or a UserError naming the file and the fix."""
  try:
    rec = json.loads(Path(path).read_text())
  except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
    raise UserError(f"{path}: not a readable train record ({e}); retrain (snakemake --forcerun train)") from None
  if isinstance(rec, dict) and rec.get("schema") == FIRST_RECORD_SCHEMA and "settings" not in rec:
    rec = {FIRST_FORM_KEYS.get(k, k): v for k, v in rec.items()} | {"schema": RECORD_SCHEMA}
  if not isinstance(rec, dict) or rec.get("schema") != RECORD_SCHEMA:
    raise UserError(f"{path}: not a {RECORD_SCHEMA} record; retrain (snakemake --forcerun train)")
  return rec
