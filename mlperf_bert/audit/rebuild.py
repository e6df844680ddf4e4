"""Re-execution of the data: the tree's eval set and a random sample of its topics' shards rebuilt from their text.

The eval set (eval/eval.shard) is rebuilt every time, first: every log's accuracy was measured on it, so it must be
what results4/eval.txt gives with the recorded preprocessing settings and eval_examples (the reference's picks), not
merely a well-formed file whose header names that text. Then topics drawn at random are rebuilt, as many as the
budget allows. Both are built by the workflow's own builders (data/evalset.build_evalset, data/instances.build_shard)
in a process of its own (`python -m mlperf_bert.audit.rebuild REQUEST.json`, one JSON line per file rebuilt), in a
temporary folder outside the tree, stopped with its process group at the end of its share of the budget; the bytes
must equal the file on disk (shards are deterministic: the oracle digests prove it).

    proven = reexecute_data(audit, base, preprocessing, eval_examples, seed, budget, deadline, hasher)
"""
from __future__ import annotations
import json, os, sys, tempfile, time
from pathlib import Path
from typing import Callable

from mlperf_bert.audit.bounded import Budget, catch_chance, draw_order, run_json_lines
from mlperf_bert.audit.rows import REEXECUTION, Audit
from mlperf_bert.errors import UserError

NOT_REEXECUTABLE = "not re-executable"
EVAL_SET = "eval/eval.shard"


def rebuild_inputs(base: Path, shard: Path, preprocessing: dict, hasher: Callable,
                   eval_examples: int | None = None) -> dict | tuple[str, str]:
  """What rebuilding `shard` takes (its text, the vocab, the settings; eval_examples for the eval set), or (WARN,
  why) when it is not re-executable: its inputs absent, or not those its header names (the chain rows say which)."""
  from mlperf_bert.audit.chain import source_text
  from mlperf_bert.data.corpus import preprocessing_settings
  from mlperf_bert.data.shards import Shard
  text, vocab = source_text(base, shard), base / "download" / "vocab.txt"
  is_eval = shard.parent.name == "eval"
  try:
    sh = Shard(shard, check=False)
    head = (sh.source_sha256, sh.settings_sha256, sh.vocab_sha256)
    sh.close()
    st = preprocessing_settings(**preprocessing)
  except (UserError, TypeError) as e:
    return "WARN", f"{NOT_REEXECUTABLE}: {e}"
  for what, path, want in (("text", text, head[0]), ("vocab", vocab, head[2])):
    if not path.is_file():
      return "WARN", f"{NOT_REEXECUTABLE}: its {what} {path.relative_to(base)} is not present"
    if hasher(path)["sha256"] != want:
      return "WARN", f"{NOT_REEXECUTABLE}: {path.relative_to(base)} is not the {what} its header names (chain rows)"
  if st.sha256() != head[1]:
    return "WARN", f"{NOT_REEXECUTABLE}: its header's settings are not the preprocessing on record (chain rows)"
  if is_eval and not isinstance(eval_examples, int):
    return "WARN", f"{NOT_REEXECUTABLE}: no eval_examples on record"
  return {"name": str(shard.relative_to(base)), "text": str(text), "vocab": str(vocab),
          "preprocessing": {k: getattr(st, k) for k in preprocessing},
          "eval_examples": eval_examples if is_eval else None}


def build_item(item: dict, out: Path) -> str:
  """Build one request item into `out` (the eval set when it has eval_examples, else a topic's shard); its sha256."""
  from mlperf_bert.data.evalset import build_evalset
  from mlperf_bert.data.instances import build_shard
  from mlperf_bert.fileio import file_digest
  if item.get("eval_examples") is not None:
    build_evalset(item["text"], item["vocab"], out, num_examples=int(item["eval_examples"]), log=None,
                  **item["preprocessing"])
  else:
    build_shard(item["text"], item["vocab"], out, log=None, **item["preprocessing"])
  try:
    return file_digest(out, "sha256")
  finally:
    out.unlink(missing_ok=True)
    out.with_name(out.name + ".sha256").unlink(missing_ok=True)


def compare_rebuilt(base: Path, shard: Path, item: dict, now: str, again: str) -> tuple[str, str]:
  """(PASS, ...) when the rebuilt bytes are the file's, else (FAIL, what differs and the way back)."""
  text = Path(item["text"]).relative_to(base)
  if now == again:
    return "PASS", "rebuilt byte-identical"
  if item.get("eval_examples") is not None:
    return "FAIL", (f"rebuilt from {text} with the recorded settings and eval_examples {item['eval_examples']}, the "
                    f"eval set is {again[:12]}..., the one on disk {now[:12]}...: it is not the eval set {text} gives "
                    f"(whatever its header and records say), so no accuracy measured on it is MLPerf's; rebuild it: "
                    f"snakemake --force {shard}, then retrain")
  return "FAIL", (f"rebuilt from {text} with the recorded settings and vocab, the shard is {again[:12]}..., the one "
                  f"on disk {now[:12]}...: it was not built from that text and those settings (whatever its records "
                  f"say); rebuild it: snakemake --force {shard}, then retrain")


def rebuild_shard(base: Path, shard: Path, preprocessing: dict, tmp: Path, hasher: Callable,
                  eval_examples: int | None = None) -> tuple[str, str]:
  """Rebuild one shard (or the eval set) in this process, in `tmp`: (PASS|FAIL|WARN, reason)."""
  item = rebuild_inputs(base, shard, preprocessing, hasher, eval_examples)
  if isinstance(item, tuple): return item
  return compare_rebuilt(base, shard, item, hasher(shard)["sha256"], build_item(item, tmp / shard.name))


def _worker(items: list[dict], deadline: float | None) -> tuple[dict[str, str], str, bool]:
  """The rebuild process on `items`: ({name: sha256 rebuilt}, stderr tail, stopped at the deadline)."""
  with tempfile.TemporaryDirectory(prefix="mlperf-bert-rebuild-") as tmp:
    req = Path(tmp) / "request.json"
    req.write_text(json.dumps({"items": items, "tmp": tmp}))
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    lines, tail, stopped = run_json_lines([sys.executable, "-m", "mlperf_bert.audit.rebuild", str(req)], env, deadline)
  errors = [l["error"] for l in lines if "error" in l]
  return {l["name"]: l["sha256"] for l in lines if "sha256" in l}, errors[0] if errors else tail, stopped


def reexecute_data(audit: Audit, base: Path, preprocessing: dict | None, eval_examples: int | None, seed: int,
                   budget: Budget, deadline: float | None, hasher: Callable, with_shards: bool = True) -> bool | None:
  """The eval set, then (`with_shards`) the drawn shards (a share `budget.coverage` of them, or as many as `deadline`
  allows). Returns whether the eval set is the one eval.txt gives: True, False, or None (not rebuilt)."""
  shards = sorted((base / "shards").glob("*.shard")) if with_shards and (base / "shards").is_dir() else []
  ev = base / EVAL_SET
  if not shards and not ev.is_file(): return None
  if not isinstance(preprocessing, dict):
    audit.add("WARN", REEXECUTION, "shards, eval", f"{NOT_REEXECUTABLE}: no preprocessing settings on record"); return None
  order = [shards[i] for i in draw_order(len(shards), seed, "shards")][:budget.count(len(shards))]
  todo: list[tuple[Path, dict]] = []
  bad = 0
  for f in ([ev] if ev.is_file() else []) + order:
    item = rebuild_inputs(base, f, preprocessing, hasher, eval_examples if f == ev else None)
    if isinstance(item, tuple):
      audit.add(item[0], REEXECUTION, str(f.relative_to(base)), f"rebuilt (seed {seed}): {item[1]}"); bad += f != ev
    else:
      todo.append((f, item))
  t0 = time.perf_counter()
  got, err, stopped = _worker([i for _, i in todo], deadline) if todo else ({}, "", False)
  share = f"{time.perf_counter() - t0:.1f} s" + (f" of a {max(deadline - t0, 0):.0f} s share"
                                                 if deadline is not None else f" ({budget.describe()})")
  cut = "was stopped at the end of its share" if stopped else f"ended early{': ' + err if err else ''}"
  proven, done = None, 0
  for f, item in todo:
    rel = str(f.relative_to(base))
    if rel not in got:
      if f == ev:
        audit.add("WARN", REEXECUTION, rel, f"not redone: the rebuild process {cut} ({share}) before the eval set was "
                  "rebuilt, so it is not proven to be what results4/eval.txt gives; give a larger --reexecute-budget")
      continue
    status, why = compare_rebuilt(base, f, item, hasher(f)["sha256"], got[rel])
    if f == ev:
      proven = status == "PASS"
      audit.add(status, REEXECUTION, rel, f"eval set rebuilt from {Path(item['text']).relative_to(base)} with the recorded "
                f"settings and eval_examples {eval_examples}: byte-identical" if proven else f"eval set rebuilt: {why}")
      continue
    done += 1
    if status != "PASS":
      audit.add(status, REEXECUTION, rel, f"shard rebuilt (seed {seed}): {why}"); bad += 1
  if shards and not bad:
    n, rest = len(shards), len(shards) - done
    if not done:
      audit.add("WARN", REEXECUTION, "shards", f"0 of {n} topics' shards rebuilt: the rebuild process {cut} ({share}) "
                f"before its first topic; not redone: {n} topic(s); give a larger --reexecute-budget")
    else:
      audit.add("PASS", REEXECUTION, "shards", f"{done} of {n} topics' shards (drawn with seed {seed}) rebuilt from their "
                f"text with the recorded settings: byte-identical, {share}; {catch_chance(done, n)}" +
                (f"; not redone: {rest} topic(s), the rebuild process {cut}" if stopped or done < len(order) else ""))
  return proven


def run_request(argv: list[str]) -> int:
  """REQUEST.json {"items": [rebuild_inputs' dicts], "tmp": folder}: one JSON line per item rebuilt
  ({"name", "sha256"}), or {"name", "error"} and exit 1."""
  req = json.loads(Path(argv[0]).read_text())
  for item in req["items"]:
    try:
      print(json.dumps({"name": item["name"], "sha256": build_item(item, Path(req["tmp"]) / Path(item["name"]).name)}),
            flush=True)
    except (UserError, OSError, ValueError) as e:
      print(json.dumps({"name": item["name"], "error": f"{item['name']}: {e}"}), flush=True)
      return 1
  return 0


if __name__ == "__main__":
  sys.exit(run_request(sys.argv[1:]))
