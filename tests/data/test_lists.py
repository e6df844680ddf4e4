"""What the workflow's planning reads of the lists its jobs wrote (mlperf_bert/data/lists.py): the topics of the md5
manifest and of an R2 dataset's list, the md5 a list gives a download, the digest of the text's md5s; each file read
once per version (path and mtime), a list not fetched yet or broken read as nothing. Milliseconds."""
import os

import pytest

from mlperf_bert.data.lists import dataset_topics, listed, listed_md5, manifest_topics, text_digest, text_md5s
from mlperf_bert.errors import UserError

SOURCE = {"url": "mlcommons-r2:https://training.mlcommons-storage.org/metadata/bert-input-files.uri", "md5": None}


def _write(path, lines: dict[str, str], mtime_ns: int | None = None):
  path.write_text("".join(f"{md5}  ./{rel}\n" for rel, md5 in lines.items()))
  if mtime_ns is not None:
    os.utime(path, ns=(mtime_ns, mtime_ns))
  return path


def test_a_list_is_read_once_per_version(tmp_path):
  parts = {"results/part-00000-of-00002": "a" * 32, "results/part-00001-of-00002": "b" * 32}
  lst = _write(tmp_path / "bert-demo-text.md5", {**parts, "results/eval.txt": "c" * 32}, mtime_ns=1_000_000_000)
  listing, text = listed(lst)
  assert text == {"part-00000-of-00002": "a" * 32, "part-00001-of-00002": "b" * 32, "eval.txt": "c" * 32}
  assert listing["results/eval.txt"] == "c" * 32 and text_md5s(lst) == text
  assert dataset_topics(lst, "bert-demo-text") == ["part-00000-of-00002", "part-00001-of-00002"]
  digest = text_digest(lst)
  # the same version (path, mtime) is not read again; a new one is
  _write(lst, {"results/part-00000-of-00002": "d" * 32, "results/eval.txt": "c" * 32}, mtime_ns=1_000_000_000)
  assert text_md5s(lst)["part-00000-of-00002"] == "a" * 32 and text_digest(lst) == digest
  _write(lst, {"results/part-00000-of-00002": "d" * 32, "results/eval.txt": "c" * 32}, mtime_ns=2_000_000_000)
  assert text_md5s(lst) == {"part-00000-of-00002": "d" * 32, "eval.txt": "c" * 32} and text_digest(lst) != digest
  # the text's md5s unchanged, the list fetched again (another order, another mtime): the same digest, so the
  # manifest written from it is not rewritten
  digest = text_digest(lst)
  _write(lst, {"results/eval.txt": "c" * 32, "results/part-00000-of-00002": "d" * 32}, mtime_ns=3_000_000_000)
  assert listed(lst)[0] == {"results/eval.txt": "c" * 32, "results/part-00000-of-00002": "d" * 32}
  assert text_digest(lst) == digest


def test_a_list_not_fetched_or_broken_reads_as_nothing(tmp_path):
  assert listed(tmp_path / "none.md5") == (None, None) and text_md5s(tmp_path / "none.md5") == {}
  (tmp_path / "broken.md5").write_text("not an md5 list\n")
  assert listed(tmp_path / "broken.md5") == (None, None)
  inputs = _write(tmp_path / "bert-input-files.md5", {"bert_config.json": "e" * 32, "tf1_ckpt/vocab.txt": "f" * 32})
  assert listed(inputs)[1] == {}  # no extracted text in it
  with pytest.raises(UserError, match="dataset bert-input-files: its md5 list names no part-XXXXX-of-NNNNN"):
    dataset_topics(inputs, "bert-input-files")


def test_the_md5_a_list_gives_a_download(tmp_path):
  _write(tmp_path / "bert-input-files.md5", {"bert_config.json": "e" * 32, "tf1_ckpt/vocab.txt": "f" * 32})
  assert listed_md5(SOURCE, "bert_config.json", tmp_path, root=tmp_path) == "e" * 32
  assert listed_md5(SOURCE, "vocab.txt", tmp_path, root=tmp_path) == "f" * 32  # nested in a folder
  assert listed_md5({**SOURCE, "path": "tf1_ckpt/vocab.txt"}, "x.txt", tmp_path, root=tmp_path) == "f" * 32
  assert listed_md5(SOURCE, "model.ckpt-28252.index", tmp_path, root=tmp_path) is None  # not in the list
  assert listed_md5({"url": "resources/demo/vocab.txt"}, "vocab.txt", tmp_path, root=tmp_path) is None  # no dataset
  assert listed_md5(SOURCE, "bert_config.json", tmp_path / "elsewhere", root=tmp_path) is None  # not listed yet


def test_manifest_topics(tmp_path):
  m = _write(tmp_path / "bert_reference_results_text_md5.txt",
             {"part-00001-of-00002": "a" * 32, "part-00000-of-00002": "b" * 32, "eval.txt": "c" * 32})
  assert manifest_topics(m) == ["part-00000-of-00002", "part-00001-of-00002"]
