"""Data subcommands: `shard` (topic text -> shard), `evalset` (eval.txt -> picked eval set), `features` (-> .npz)."""
from __future__ import annotations
import argparse, sys
from pathlib import Path

import numpy as np



def _log(msg: str) -> None:
  print(msg, file=sys.stderr)


def _add_settings(p: argparse.ArgumentParser) -> None:
  g = p.add_argument_group("create_pretraining_data.py settings (defaults: MLPerf's)")
  g.add_argument("--max-seq-length", type=int, default=512)
  g.add_argument("--max-predictions-per-seq", type=int, default=76)
  g.add_argument("--masked-lm-prob", type=float, default=0.15)
  g.add_argument("--short-seq-prob", type=float, default=0.1)
  g.add_argument("--random-seed", type=int, default=12345)
  g.add_argument("--dupe-factor", type=int, default=10)
  p.add_argument("--engine", choices=["auto", "numba", "python"], default="auto",
                 help="instance engine (same output; 'auto' = numba when installed)")
  p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


def _settings(args) -> dict:
  return dict(max_seq_length=args.max_seq_length, max_predictions_per_seq=args.max_predictions_per_seq,
              masked_lm_prob=args.masked_lm_prob, short_seq_prob=args.short_seq_prob, random_seed=args.random_seed,
              dupe_factor=args.dupe_factor, engine=args.engine, progress=not args.no_progress, log=_log)


def _shard(args) -> int:
  from mlperf_bert.instances import build_shard
  build_shard(args.input, args.vocab, args.output, **_settings(args))
  return 0


def _evalset(args) -> int:
  from mlperf_bert.evalset import build_evalset
  build_evalset(args.input, args.vocab, args.output, num_examples=args.num_examples, **_settings(args))
  return 0


def write_features_npz(shard_path, npz_path) -> int:
  """Write a shard's seven features, in instance order, to an .npz (as tests/feature_digest.py reads it)."""
  from mlperf_bert.fileio import atomic_path
  from mlperf_bert.shards import read_features
  feats = read_features(shard_path)
  with atomic_path(npz_path) as tmp:
    with open(tmp, "wb") as f:
      np.savez(f, **feats)
  return len(feats["input_ids"])


def _features(args) -> int:
  n = write_features_npz(args.shard, args.npz)
  _log(f"{args.npz}: {n} instances")
  return 0


def add_parser(sub) -> None:
  p = sub.add_parser("shard", help="tokenize one topic text file and write its pretraining shard",
                     description="Reference-identical masked-LM/next-sentence instances of one text file, as a shard "
                                 "(+ .sha256 sidecar).")
  p.add_argument("--input", required=True, type=Path, help="topic text (one sentence per line, blank line between documents)")
  p.add_argument("--vocab", required=True, type=Path, help="WordPiece vocab.txt")
  p.add_argument("--output", required=True, type=Path, help="shard to write")
  _add_settings(p)
  p.set_defaults(func=_shard)

  p = sub.add_parser("evalset", help="make the eval set from eval.txt (instances, then rows picked as MLPerf does)")
  p.add_argument("--input", required=True, type=Path, help="eval.txt")
  p.add_argument("--vocab", required=True, type=Path, help="WordPiece vocab.txt")
  p.add_argument("--output", required=True, type=Path, help="eval set shard to write")
  p.add_argument("--num-examples", type=int, default=10000, help="rows to pick (default 10000)")
  _add_settings(p)
  p.set_defaults(func=_evalset)

  p = sub.add_parser("features", help="dump a shard's seven features to an .npz (instance order)")
  p.add_argument("shard", type=Path, help="a shard or eval set")
  p.add_argument("--npz", required=True, type=Path, help=".npz to write")
  p.set_defaults(func=_features)
