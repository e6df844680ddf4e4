"""The chain of evidence of a workflow basedir: text -> shard -> train record -> result log.

Each link was recorded by the process that made the artifact, at the moment it made it, from the bytes it read:
  - a shard's header holds the sha256 of the text it was built from, of its settings and of the vocab (shard job);
  - `result_bert_<seed>.train.json` holds the sha256 of every shard and of the eval set the trainer mapped, of the
    initial weights and bert_config it loaded, and of the result log it wrote (train job; train/record.py).
No later rule writes either, so re-running the workflow after a change (the provenance rule, shard_checksums)
cannot make a changed file agree with them. `check_chain` checks every link against the files present; each
broken link is one FAIL row whose reason starts with the link's name.

    check_chain(audit, base, logs, hasher, preprocessing)
"""
from __future__ import annotations
import json
from pathlib import Path
from typing import Callable

from mlperf_bert.audit.rows import CHAIN, RETRAIN, Audit
from mlperf_bert.errors import UserError
from mlperf_bert.mlperf_log import LogEvent, parse_line

RETRAIN_OR_RESTORE = f"{RETRAIN} (or restore the files the run read)"


def _short_sha(h: str | None) -> str:
  return h if h and h.startswith("(not hashed") else f"{h[:12]}..." if h else "none"


def _few(names: list[str]) -> str:
  """A row's subject for several files: the first, and how many more."""
  return names[0] + (f" (+{len(names) - 1})" if len(names) > 1 else "")


def _headers(base: Path, files: list[Path]) -> dict[Path, object]:
  """Each shard's header (a Shard opened without reading its body), or the error that refused it."""
  from mlperf_bert.data.shards import Shard
  out: dict[Path, object] = {}
  for f in files:
    try:
      sh = Shard(f, check=False)
      out[f] = {"source": sh.source_sha256, "settings": sh.settings_sha256, "vocab": sh.vocab_sha256,
                "version": sh.version}
      sh.close()
    except UserError as e:
      out[f] = str(e)
  return out


def source_text(base: Path, shard: Path) -> Path:
  """The text a shard is built from: results4/<topic> for shards/<topic>.shard, results4/eval.txt for the eval set."""
  return base / "results4" / ("eval.txt" if shard.parent.name == "eval" else shard.name[:-len(".shard")])


def check_text_links(audit: Audit, base: Path, heads: dict, hasher: Callable) -> None:
  """text -> shard: the source sha256 in each shard's header equals the sha256 of the text beside it."""
  texts = sorted((base / "results4").glob("*")) if (base / "results4").is_dir() else []
  by_hash = {}
  bad = checked = 0
  for f, h in heads.items():
    rel = str(f.relative_to(base))
    if isinstance(h, str):
      audit.add("FAIL", CHAIN, rel, f"text -> shard: {h}"); bad += 1; continue
    if not h["source"]:
      audit.add("FAIL", CHAIN, rel, f"text -> shard: the shard records no source text (format version {h['version']}, "
                "built before shards recorded it); rebuild the shards: snakemake --forcerun shard evalset"); bad += 1
      continue
    text = source_text(base, f)
    if not text.is_file():
      audit.add("WARN", CHAIN, rel, f"text -> shard: {text.relative_to(base)} is not present; the link is not checked")
      continue
    now = hasher(text)["sha256"]
    checked += 1
    if now == h["source"]: continue
    if not by_hash:
      by_hash = {hasher(t)["sha256"]: t for t in texts if t.is_file()}
    other = by_hash.get(h["source"])
    src = f"that of {other.relative_to(base)}" if other is not None else "no text present"
    audit.add("FAIL", CHAIN, rel, f"text -> shard: built from other text: its header's source sha256 "
              f"{_short_sha(h['source'])} is {src}, not {text.relative_to(base)} ({_short_sha(now)}); rebuild it: "
              f"snakemake --force {f} (then retrain)"); bad += 1
  if checked and not bad:
    audit.add("PASS", CHAIN, "shards, eval", f"text -> shard: each of {checked} shard(s) was built from the text "
              "beside it (the source sha256 in its header)")


def check_shard_settings(audit: Audit, base: Path, heads: dict, hasher: Callable, preprocessing: dict | None) -> None:
  """One settings and one vocab sha256 for every shard; equal to the config's preprocessing and the vocab present."""
  from mlperf_bert.data.corpus import preprocessing_settings
  good = {f: h for f, h in heads.items() if isinstance(h, dict) and h["source"]}
  if not good: return
  expect: dict[str, tuple[str, str]] = {}
  try:
    if preprocessing:
      expect["settings"] = (preprocessing_settings(**preprocessing).sha256(), "the config's preprocessing")
  except (TypeError, UserError):
    pass
  vocab = base / "download" / "vocab.txt"
  if vocab.is_file(): expect["vocab"] = (hasher(vocab)["sha256"], "download/vocab.txt")
  bad = 0
  for key in ("settings", "vocab"):
    groups: dict[str, list[str]] = {}
    for f, h in good.items(): groups.setdefault(h[key], []).append(str(f.relative_to(base)))
    want, what = expect.get(key, (max(groups, key=lambda k: len(groups[k])), "the other shards"))
    for h, names in sorted(groups.items()):
      if h != want:
        audit.add("FAIL", CHAIN, _few(names), f"text -> shard: built with another {key} ({_short_sha(h)}) than "
                  f"{what} ({_short_sha(want)}); rebuild: snakemake --forcerun shard evalset"); bad += 1
  if not bad:
    audit.add("PASS", CHAIN, "shards, eval", f"text -> shard: {len(good)} shard(s) built with one vocab and the "
              "preprocessing settings" + (" of the config" if "settings" in expect else ""))


def check_duplicates(audit: Audit, base: Path, heads: dict, hasher: Callable) -> None:
  """No two shards (the eval set included) with the same bytes, or built from the same text."""
  bad = 0
  for key, what in (("content", "are identical (sha256 {})"), ("source", "were built from the same text "
                                                                        "(source sha256 {})")):
    groups: dict[str, list[str]] = {}
    for f, h in heads.items():
      v = hasher(f)["sha256"] if key == "content" else (h.get("source") if isinstance(h, dict) else None)
      if v: groups.setdefault(v, []).append(str(f.relative_to(base)))
    for v, names in sorted(groups.items()):
      if len(names) > 1:
        audit.add("FAIL", CHAIN, _few(names), f"duplicate shards: {' and '.join(names)} {what.format(_short_sha(v))}; "
                  f"rebuild them: snakemake --force {' '.join(str(base / n) for n in names)}"); bad += 1
    if bad: break  # identical shards share their source too: one row each
  if not bad and heads:
    audit.add("PASS", CHAIN, "shards, eval", f"no duplicate shards: {len(heads)} distinct file(s) from distinct texts")


def logged_accuracies(log: Path) -> list[float]:
  """The eval_accuracy values a result log holds, in its order."""
  events = (parse_line(line) for line in log.read_text(errors="replace").splitlines())
  return [ev.value for ev in events if isinstance(ev, LogEvent) and ev.key == "eval_accuracy"]


def _accuracy_diff(log: Path, rec: dict) -> str:
  measured = [a for _, a in rec.get("eval_accuracy") or []]
  for i, (a, b) in enumerate(zip(logged_accuracies(log), measured)):
    if a != b:
      return f"; eval_accuracy #{i + 1}: the log says {a}, the train process measured {b}"
  return ""


def _placement(base: Path, rp: Path, rec: dict) -> list[tuple[str, str]]:
  """(file, why) for each file the record says the run read from the wrong place: its eval set must be this tree's
  eval/eval.shard (built from results4/eval.txt) and its training shards the tree's shards/, whatever else the
  record names (a crafted eval set beside the real one, the eval set among the training shards)."""
  root, out = base.resolve(), []
  def name(p: Path) -> str: return str(p.relative_to(root)) if p.is_relative_to(root) else str(p)
  ev = rec.get("eval_set") or {}
  p = (rp.parent / str(ev.get("path"))).resolve()
  if p != (base / "eval" / "eval.shard").resolve():
    out.append((name(p), f"the eval set the train process read is {ev.get('path')} ({name(p)}), not this tree's "
                "eval/eval.shard, the one built from results4/eval.txt: its accuracies are not on the tree's eval "
                "set"))
  for e in rec.get("shards") or []:
    p = (rp.parent / str(e.get("path"))).resolve()
    if p.parent != (base / "shards").resolve() or p.suffix != ".shard":
      out.append((name(p), f"the train process read {e.get('path')} as a training shard: not one of this tree's "
                  "shards/"))
  return out


def check_record(audit: Audit, base: Path, log: Path, files: list[Path], hasher: Callable) -> None:
  """shard -> train record -> log for one result log: the files the train process read equal those present
  (shards/ and the eval set, no more, no fewer, each from its place), and the log is byte for byte the one it wrote."""
  from mlperf_bert.audit.provenance import size_differs
  from mlperf_bert.train.record import read_record, record_path
  rel, rp = str(log.relative_to(base)), record_path(log)
  if not rp.is_file():
    audit.add("FAIL", CHAIN, rel, f"shard -> train record: no {rp.name} (the train process's record of what it read "
              f"and wrote); {RETRAIN_OR_RESTORE}"); return
  try:
    rec = read_record(rp)
  except UserError as e:
    audit.add("FAIL", CHAIN, str(rp.relative_to(base)), f"shard -> train record: {e}"); return
  bad = 0
  for name, why in _placement(base, rp, rec):
    audit.add("FAIL", CHAIN, name, f"shard -> train record: {why} ({rp.name}); {RETRAIN_OR_RESTORE}"); bad += 1
  entries = [("shard", e) for e in rec.get("shards") or []] + [("eval set", rec.get("eval_set")),
             ("initial weights", rec.get("init_weights")), ("bert_config", rec.get("bert_config"))]
  read = set()
  for what, e in entries:
    if not e: continue
    p = (rp.parent / e["path"]).resolve()
    read.add(p)
    name = str(p.relative_to(base.resolve())) if p.is_relative_to(base.resolve()) else str(p)
    if not p.is_file():
      audit.add("FAIL", CHAIN, name, f"shard -> train record: the train process read this {what}, now missing "
                f"({rp.name}); {RETRAIN_OR_RESTORE}"); bad += 1
    elif why := size_differs(p, e.get("bytes")):
      audit.add("FAIL", CHAIN, name, f"shard -> train record: sha256 now unknown (not hashed: {why}), the train "
                f"process read {_short_sha(e.get('sha256'))} ({rp.name}): the {what} changed after training; {RETRAIN_OR_RESTORE}")
      bad += 1
    elif (now := hasher(p)["sha256"]) != e.get("sha256"):
      audit.add("FAIL", CHAIN, name, f"shard -> train record: sha256 now {_short_sha(now)}, the train process read "
                f"{_short_sha(e.get('sha256'))} ({rp.name}): the {what} changed after training; {RETRAIN_OR_RESTORE}"); bad += 1
  for f in files:
    if f.resolve() not in read:
      audit.add("FAIL", CHAIN, str(f.relative_to(base)), f"shard -> train record: not among the files the train "
                f"process read ({rp.name}); {RETRAIN_OR_RESTORE}"); bad += 1
  if not bad:
    audit.add("PASS", CHAIN, rel, f"shard -> train record: the {len(rec.get('shards') or [])} shard(s), the eval set "
              f"and the checkpoint present are those the train process read ({rp.name})")
  logged = rec.get("log") or {}
  if (rp.parent / str(logged.get("path"))).resolve() != log.resolve():
    audit.add("FAIL", CHAIN, rel, f"train record -> log: {rp.name} is the record of {logged.get('path')}, not of "
              f"{log.name}; {RETRAIN_OR_RESTORE}")
  elif (now := hasher(log)["sha256"]) != logged.get("sha256"):
    audit.add("FAIL", CHAIN, rel, f"train record -> log: the log's sha256 {_short_sha(now)} is not the "
              f"{_short_sha(logged.get('sha256'))} the train process wrote ({rp.name}): the log was changed after "
              f"training{_accuracy_diff(log, rec)}; {RETRAIN_OR_RESTORE}")
  else:
    audit.add("PASS", CHAIN, rel, "train record -> log: the log is byte for byte what the train process wrote")


def recorded_config(logs: list[Path]) -> dict | None:
  """The config on record: that of the first readable provenance record beside a result log."""
  for log in logs:
    try:
      cfg = json.loads(log.with_name(log.name[:-len(".log")] + ".provenance.json").read_text()).get("config")
    except (OSError, ValueError, AttributeError):
      continue
    if isinstance(cfg, dict): return cfg
  return None


def recorded_preprocessing(logs: list[Path], now_cfg: dict | None) -> dict | None:
  """The preprocessing settings the shards must have been built with: those of the config on record (the first
  readable provenance record), else the current config's (the config check compares the two)."""
  cfg = recorded_config(logs) or {}
  if isinstance(cfg.get("preprocessing"), dict): return cfg["preprocessing"]
  return (now_cfg or {}).get("preprocessing")


def recorded_eval_examples(logs: list[Path], now_cfg: dict | None) -> int | None:
  """The eval_examples the eval set must have been picked with: the config on record's, else the current one's."""
  for cfg in (recorded_config(logs) or {}, now_cfg or {}):
    v = cfg.get("eval_examples")
    if isinstance(v, int) and not isinstance(v, bool): return v
  return None


def check_chain(audit: Audit, base: Path, logs: list[Path], hasher: Callable, preprocessing: dict | None) -> None:
  """Every link of text -> shard -> train record -> log in the basedir `base` (see the module doc).
  hasher(path) -> {"sha256": ...}; preprocessing: the config's preprocessing settings (None: not compared)."""
  shards = sorted((base / "shards").glob("*.shard")) if (base / "shards").is_dir() else []
  files = shards + ([base / "eval" / "eval.shard"] if (base / "eval" / "eval.shard").is_file() else [])
  heads = _headers(base, files)
  if files:
    check_text_links(audit, base, heads, hasher)
    check_shard_settings(audit, base, heads, hasher, preprocessing)
    check_duplicates(audit, base, heads, hasher)
  for log in logs:
    check_record(audit, base, log, files, hasher)
