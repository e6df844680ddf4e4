"""What a training run reads and writes (`RunInputs`, one value from the train rule to TrainRun), and the checks of
it before anything is written: the --eval file is the eval set (its header says so) and not among the training
shards, and the model's vocabulary holds every token id of the shards. The checks read only the shards' headers (and
the token ids of a shard that records no vocabulary size)."""
from __future__ import annotations
import dataclasses, json, os, warnings
from pathlib import Path
from typing import Sequence

from mlperf_bert.data.shards import Shard
from mlperf_bert.errors import UserError


@dataclasses.dataclass(frozen=True)
class RunInputs:
  """The files of one training run and the shards' shape."""
  shards: tuple[Path, ...]          # the training shards
  eval_set: Path                    # <basedir>/eval/eval.shard
  bert_config: Path
  log: Path                         # the result log, written whole when the run finished
  work_log: Path                    # the MLPerf log while the run is unfinished
  ckpt_dir: Path                    # resume checkpoints
  max_seq_length: int
  max_predictions_per_seq: int
  init_weights: Path | None = None  # the initial weights; None: a seeded random init
  space_check: bool = True          # check that what the run writes fits before it writes (train/footprint.py)

  @classmethod
  def of(cls, *, shards: Sequence[str | os.PathLike], eval_set, bert_config, log, work_log=None, ckpt_dir,
         max_seq_length: int, max_predictions_per_seq: int, init_weights=None, space_check: bool = True
         ) -> "RunInputs":
    """From paths as given (the work log defaults to `<log>.partial`)."""
    log = Path(log)
    return cls(tuple(Path(p) for p in shards), Path(eval_set), Path(bert_config), log,
               Path(work_log) if work_log else log.with_name(log.name + ".partial"), Path(ckpt_dir),
               int(max_seq_length), int(max_predictions_per_seq), Path(init_weights) if init_weights else None,
               bool(space_check))

  def argv(self) -> list[str]:
    """The same inputs as arguments of `python -m mlperf_bert train` (cli/train.py reads them back with `of`)."""
    args = ["--shards", *map(str, self.shards), "--eval", str(self.eval_set), "--bert-config", str(self.bert_config),
            "--max-seq-length", str(self.max_seq_length), "--max-predictions-per-seq", str(self.max_predictions_per_seq),
            "--out", str(self.log), "--work-log", str(self.work_log), "--ckpt-dir", str(self.ckpt_dir)]
    return args + (["--init-weights", str(self.init_weights)] if self.init_weights else []) + \
      ([] if self.space_check else ["--no-space-check"])


def _same_file(a: Path, b: Path) -> bool:
  try: return os.path.samefile(a, b)
  except OSError: return False


def check_train_inputs(shard_paths: Sequence[Path], eval_path: str | os.PathLike,
                       bert_config: str | os.PathLike) -> None:
  """UserError (one line) when the --eval file is not an eval set (check_eval_set), when a training shard is the
  eval set (its header's eval flag, or the --eval file itself), or when bert_config.json's vocab_size is below the
  vocabulary a shard's token ids come from."""
  eval_path = Path(eval_path)
  try: vocab = int(json.loads(Path(bert_config).read_text())["vocab_size"])
  except (OSError, ValueError, KeyError, TypeError) as e:
    raise UserError(f"{bert_config}: cannot read vocab_size ({type(e).__name__}: {e}); pass BERT's "
                    "bert_config.json") from None
  with Shard(eval_path, check=False) as sh:  # the header only
    check_eval_set(sh, among_shards=any(_same_file(p, eval_path) for p in shard_paths))
  for p in [*shard_paths, eval_path]:
    with Shard(p, check=False) as sh:  # the header only
      if p is not eval_path and (sh.eval_set or _same_file(p, eval_path)):
        raise UserError(f"{p} is the eval set, not a training shard; pass the training shards to --shards "
                        "(<basedir>/shards) and the eval set to --eval (<basedir>/eval/eval.shard)")
      if sh.vocab_size > vocab:
        raise UserError(f"{bert_config}: vocab_size {vocab} is below the {sh.vocab_size}-token vocabulary {p} was "
                        f"built with (its header): {_LOST}")
      top = 0 if sh.vocab_size else _max_token_id(sh)  # a shard that records no vocabulary: its ids themselves
      if top >= vocab:
        raise UserError(f"{bert_config}: vocab_size {vocab}, but {p} holds token id {top}: {_LOST}")


def check_eval_set(sh: Shard, *, among_shards: bool = False) -> None:
  """The --eval file must prove it is the eval set: its header's eval flag, which only the eval set's builder
  (data/evalset.py: eval.txt, then the reference's picks) sets. A format-2 shard without the flag was built from a
  training topic: UserError naming the real mistake (`among_shards`: the same file is also among --shards). A
  format-1 shard (written before shards recorded their source) cannot tell: a warning, and it is read."""
  if sh.eval_set:
    return
  also = " (it is also among --shards)" if among_shards else ""
  if sh.version >= 2:
    raise UserError(f"{sh.path} is a training shard given as the eval set{also}: its header has no eval-set flag "
                    f"(the eval set is built from eval.txt and the reference's eval picks); pass the eval set to "
                    "--eval (<basedir>/eval/eval.shard, built by the workflow's evalset rule) and the training "
                    "shards to --shards")
  warnings.warn(f"{sh.path}: a format-{sh.version} shard, which cannot say whether it is the eval set (it records no "
                "source); it is used as the eval set as given. Rebuild it (snakemake --force "
                "<basedir>/eval/eval.shard) for an eval set that proves it is one", stacklevel=2)


_LOST = ("the ids above it would lose their masked-LM labels; pass the bert_config.json of the shards' vocabulary, "
         "or rebuild the shards with the model's vocab.txt")


def _max_token_id(sh: Shard) -> int:
  sh.verify()
  return max([int(a.max()) for a in (sh._stream, sh._inputs) if len(a)] or [0])
