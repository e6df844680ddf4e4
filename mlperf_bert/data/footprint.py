"""What the data jobs write, planned from measured ratios, and the check each makes before it writes.

The ratios (resources/footprint/ratios.json, measured by tools/record_footprint_ratios.py on the demo corpus with
this project's shard builder): a shard's bytes per byte of its topic's text at the demo's settings (max_seq_length
128, 20 predictions) and MLPerf's (512 / 76), split into the token stream, stored once, and the instances, stored once
per duplicate (dupe_factor); an eval set's bytes per row; the text's gzip ratio. Between and beyond the two measured
sequence lengths a ratio is interpolated linearly in max_seq_length (and held at the nearest end).

The real dataset, before anything of it is on disk: MLCommons' BERT README (mlcommons/training,
language_model/tensorflow/bert/README.md, as copied into mlcommons/training_results_v1.0) says results4/ holds 502
files "for a total of about 13Gbytes" and lists the download sizes (MLPERF_FILE_BYTES); its eval.txt is taken as
EVAL_TEXT_PER_TOPIC topics' worth of text (the README's eval TFRecord, 843,343,183 bytes, over the mean of its 500 topic
TFRecords, 391,434,110,129 / 500 bytes).

    need = shard_bytes(text_bytes, 512, 76, 10)      # bytes of the shard of a topic
    check_shard_space(text, out, max_seq_length=512, ...)  # the shard job, before it reads the text
"""
from __future__ import annotations
import functools, json, os, tarfile
from pathlib import Path

from mlperf_bert.errors import UserError
from mlperf_bert.space import check_space, human

RATIOS_FILE = Path(__file__).resolve().parents[2] / "resources" / "footprint" / "ratios.json"
MLPERF_TEXT_BYTES = 13_000_000_000   # results4/: 500 topics and eval.txt, "about 13Gbytes" (the README)
EVAL_TEXT_PER_TOPIC = 843_343_183 / (391_434_110_129 / 500)  # eval.txt against a mean topic (the README's TFRecords)
MLPERF_FILE_BYTES = {                # the README's MD5sums table
  "bert_config.json": 314, "vocab.txt": 231_508, "model.ckpt-28252.index": 17_371,
  "model.ckpt-28252.meta": 24_740_228, "model.ckpt-28252.data-00000-of-00001": 4_034_713_312,
}
LIST_LIMIT = 64 << 20  # a tarball up to this size is listed (exact sizes); a larger one is estimated by its gzip ratio
SHRINK = "point the config's basedir at a larger disk"


@functools.lru_cache(maxsize=None)
def ratios() -> dict:
  """resources/footprint/ratios.json."""
  try:
    return json.loads(RATIOS_FILE.read_text())
  except (OSError, ValueError) as e:
    raise UserError(f"{RATIOS_FILE}: cannot read the measured ratios ({e}); restore it from the checkout "
                    "(git checkout resources/footprint)") from None


def _by_seq(max_seq_length: int, key: str) -> float:
  """A shard ratio at `max_seq_length`: measured, or on the line through the two measured settings (held at the ends)."""
  pts = sorted((int(k.split("/")[0]), v[key]) for k, v in ratios()["shards"].items() if "/" in k)
  (s0, r0), (s1, r1) = pts[0], pts[-1]
  s = min(max(int(max_seq_length), s0), s1)
  return r0 if s1 == s0 else r0 + (r1 - r0) * (s - s0) / (s1 - s0)


def shard_bytes(text_bytes: int, max_seq_length: int, max_predictions_per_seq: int, dupe_factor: int) -> int:
  """The bytes of a topic's shard from the bytes of its text (the token stream once, the instances per duplicate)."""
  whole, per_dupe = _by_seq(max_seq_length, "shard_per_text_byte"), _by_seq(max_seq_length, "per_duplicate")
  return int(text_bytes * (whole - (10 - int(dupe_factor)) * per_dupe))


def instances(text_bytes: int, max_seq_length: int, dupe_factor: int) -> int:
  """The instances (rows) a topic's text gives, measured a byte of text (at dupe_factor 10, scaled to `dupe_factor`)."""
  return int(text_bytes * _by_seq(max_seq_length, "instances_per_text_byte") * int(dupe_factor) / 10)


def evalset_bytes(text_bytes: int, rows: int, max_seq_length: int) -> int:
  """The bytes of the eval set: eval.txt's token stream (as a shard's, at dupe_factor 1 less its instances) and the
  picked rows (measured bytes a row, less the demo eval text's stream)."""
  stream = _by_seq(max_seq_length, "shard_per_text_byte") - 10 * _by_seq(max_seq_length, "per_duplicate")
  demo = ratios()["shards"][_nearest(max_seq_length)]
  per_row = (demo["eval_bytes"] - stream * demo["eval_text_bytes"]) / demo["eval_rows"]
  return int(max(stream, 0) * text_bytes + max(per_row, 0) * rows)


def _nearest(max_seq_length: int) -> str:
  keys = [k for k in ratios()["shards"] if "/" in k]
  return min(keys, key=lambda k: abs(int(k.split("/")[0]) - int(max_seq_length)))


def tarball_text_bytes(tarball: str | os.PathLike) -> tuple[dict[str, int], bool]:
  """{name: bytes} of results4/ in `tarball` and whether it is exact: a tarball up to LIST_LIMIT is listed (a pass
  over its gzip stream), a larger one estimated ({"*": bytes}) as its size times the measured gzip ratio."""
  p = Path(tarball)
  size = p.stat().st_size
  if size > LIST_LIMIT:
    return {"*": int(size * ratios()["shards"]["text_per_gzip_byte"])}, False
  try:
    with tarfile.open(p) as tar:
      return {Path(m.name).name: m.size for m in tar.getmembers() if m.isfile()}, True
  except (tarfile.TarError, OSError, EOFError):
    return {"*": int(size * ratios()["shards"]["text_per_gzip_byte"])}, False


def check_extract_space(tarball: str | os.PathLike, dest: str | os.PathLike) -> None:
  """The extract job, before it writes: the text of `tarball` must fit beside `dest` (it is staged there whole)."""
  names, exact = tarball_text_bytes(tarball)
  need = sum(names.values())
  how = f"{len(names)} files listed in {Path(tarball).name}" if exact else \
    f"{Path(tarball).name}'s {human(Path(tarball).stat().st_size)} times the measured gzip ratio"
  check_space({Path(dest).parent: need}, what=f"extracting {Path(tarball).name}", detail=how, shrink=SHRINK)


def _text_bytes(text: str | os.PathLike) -> int | None:
  """The size of a job's input text, or None where it is missing: that is left to the reader, whose error names it."""
  p = Path(text)
  return p.stat().st_size if p.is_file() else None


def check_shard_space(text: str | os.PathLike, out: str | os.PathLike, *, max_seq_length: int,
                      max_predictions_per_seq: int, dupe_factor: int) -> None:
  """A shard job, before it reads its text: the planned shard must fit where it goes."""
  if (n := _text_bytes(text)) is None: return
  need = shard_bytes(n, max_seq_length, max_predictions_per_seq, dupe_factor)
  check_space({Path(out).parent: need}, what=f"the shard {Path(out).name}",
              detail=f"{human(n)} of text at {max_seq_length} / {max_predictions_per_seq}, dupe_factor {dupe_factor}: "
                     "the measured bytes of a shard per byte of text", shrink=SHRINK)


def check_evalset_space(text: str | os.PathLike, out: str | os.PathLike, *, rows: int, max_seq_length: int) -> None:
  """The evalset job, before it reads eval.txt."""
  if (n := _text_bytes(text)) is None: return
  check_space({Path(out).parent: evalset_bytes(n, rows, max_seq_length)}, what=f"the eval set {Path(out).name}",
              detail=f"{rows} rows from {human(n)} of eval text", shrink=SHRINK)
