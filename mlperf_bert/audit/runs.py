"""The runs of one workflow basedir, and the config each was made with.

A basedir may hold several runs: the demo's `results/cpu/` and a rehearsal's `results/tinybox_green-rehearsal/`
share its downloads, shards and eval set. The audit is given one config (the workflow's config.yaml, --configfile,
--config), which names one run (`results/<platform>/`, or `<platform>-rehearsal/` under rehearse=true): its logs are
compared with that config key for key. Another run's log is compared with the same config but for the keys that
make a run of its own: its platform and rehearse, which its folder names (the train rule's output path), and
RUN_KEYS, its provenance record's (taken on trust, and the row says so: give that run's --config to check them). A
tree that holds none of the configured run's logs is compared with the config as given (the config row then names
what differs).

    run_name(cfg)                                    # "cpu", "tinybox_green-rehearsal"
    cfg, note = run_config(now_cfg, log, recorded)   # the config a log's run was made with
"""
from __future__ import annotations
import json, re
from pathlib import Path

from mlperf_bert.audit.rehearsal import REHEARSAL_SUFFIX
from mlperf_bert.audit.rows import Audit, shorten
from mlperf_bert.errors import UserError

RUN_KEYS = ("train", "seeds", "trainer", "preflight")  # a run's own keys besides platform and rehearse


def run_name(cfg: dict | None) -> str | None:
  """The results/ folder of the run a config names (None without a config)."""
  if not isinstance(cfg, dict): return None
  return str(cfg.get("platform", "cpu")) + (REHEARSAL_SUFFIX if cfg.get("rehearse") else "")


def runs_of(logs: list[Path], now_cfg: dict | None) -> tuple[list[Path], list[Path]]:
  """(the configured run's logs, every other run's): all are the configured run's when none of them is."""
  name = run_name(now_cfg)
  mine = [l for l in logs if l.parent.name == name]
  return (mine, [l for l in logs if l not in mine]) if mine else (list(logs), [])


def run_config(now_cfg: dict | None, log: Path, other: bool) -> tuple[dict | None, str]:
  """The config `log`'s run was made with, and what of it was taken from its provenance record ('' for the
  configured run: `now_cfg` itself)."""
  if not other or now_cfg is None: return now_cfg, ""
  try: recorded = json.loads(provenance_path(log).read_text()).get("config") or {}
  except (OSError, ValueError, AttributeError): recorded = {}
  recorded = recorded if isinstance(recorded, dict) else {}
  folder = log.parent.name
  rehearse = folder.endswith(REHEARSAL_SUFFIX)
  cfg = {k: v for k, v in now_cfg.items() if k not in RUN_KEYS and k != "rehearse"}
  cfg["platform"] = folder.removesuffix(REHEARSAL_SUFFIX)
  if rehearse or recorded.get("rehearse", True) is False: cfg["rehearse"] = rehearse  # absent when the record says none
  own = {k: recorded[k] for k in RUN_KEYS if k in recorded}
  cfg.update(own)
  shown = ", ".join(f"{k} {v!r}" for k, v in own.items()) or "none"
  return cfg, (f"another run of this basedir than the config's: its platform {cfg['platform']} and rehearse "
               f"{str(rehearse).lower()} from its folder, its own keys from its provenance record, taken on trust "
               f"({shown}); audit it with its --config to check them")


def diff_config(recorded, now, prefix: str = "") -> list[str]:
  """Keys whose values differ, as 'key.sub: recorded X, now Y'."""
  out = []
  if isinstance(recorded, dict) and isinstance(now, dict):
    for k in sorted(set(recorded) | set(now), key=str):
      key = f"{prefix}.{k}" if prefix else str(k)
      if k not in now: out.append(f"{key}: recorded {recorded[k]!r}, now absent")
      elif k not in recorded: out.append(f"{key}: not recorded, now {now[k]!r}")
      else: out += diff_config(recorded[k], now[k], key)
  elif recorded != now:
    out.append(f"{prefix}: recorded {recorded!r}, now {now!r}")
  return out


def provenance_path(log: Path) -> Path:
  return log.with_name(log.name[:-len(".log")] + ".provenance.json")


def check_provenance(audit: Audit, base: Path, log_path: Path, run_cfg: dict | None, repo_head: str | None,
                     hasher, workflow_dir: Path | None = None, workdir: Path | None = None, note: str = "") -> None:
  """The log's provenance record: present, of its seed and platform, every file it names as hashed then; its config
  against `run_cfg`, the config of the log's run (run_config, which took `note` from the record; None: not compared);
  its git state."""
  from mlperf_bert.audit.provenance import read_provenance, relocatable, verify_provenance
  from mlperf_bert.config import without_operational
  rel = str(log_path.relative_to(base))
  pp = provenance_path(log_path)
  if not pp.is_file():
    audit.add("FAIL", "provenance", rel, f"no {pp.name}: build it (rule provenance) so the log's inputs are on record")
    return
  try:
    rec = read_provenance(pp)
  except UserError as e:
    audit.add("FAIL", "provenance", str(pp.relative_to(base)), str(e)); return
  m = re.fullmatch(r"result_bert_(.+)\.log", log_path.name)
  if m and str(rec.get("seed")) != m.group(1):
    audit.add("FAIL", "provenance", rel, f"record is for seed {rec.get('seed')}, the log file is seed {m.group(1)}")
  if rec.get("platform") != log_path.parent.name:
    audit.add("FAIL", "provenance", rel, f"record is for platform {rec.get('platform')!r}, the log sits under "
              f"{log_path.parent.name!r}")
  results = verify_provenance(rec, base, hasher=hasher, repo_dir=workflow_dir)
  fails = [(p, why) for s, p, why in results if s == "FAIL"]
  for p, why in fails:
    audit.add("FAIL", "provenance", p, why + f" (record {pp.name})")
  if not fails:
    audit.add("PASS", "provenance", rel, f"log and {len(results) - 1} input files match {pp.name} (md5, sha256)")
  if run_cfg is not None:
    # both sides relocatable: paths under the checkout, working directory or basedir compare by their place in it
    # neither side's operational settings (space_check, download: the schema's `x-operational`), which change no output
    recorded = without_operational(dict(rec.get("config") or {}))
    now = without_operational(relocatable(dict(run_cfg), repo_dir=workflow_dir, basedir=base, workdir=workdir))
    # tinygrad_source is not recorded (a local path); the record's `trainer` names the verified commit instead
    for k in ("basedir", "tinygrad_source"): recorded.pop(k, None); now.pop(k, None)
    diffs = diff_config(recorded, now)
    if diffs:
      audit.add("FAIL", "config", rel, "the config differs from the one on record: " + shorten(diffs, 4) +
                (f" ({note})" if note else ""))
    else:
      audit.add("PASS", "config", rel, "the current config equals the recorded one" + (f"; {note}" if note else ""))
  git = rec.get("git") or {}
  if git.get("dirty"):
    audit.add("WARN", "git", rel, f"the run's repository had {git.get('changed_count', '?')} uncommitted change(s) at "
              f"{str(git.get('commit'))[:12]}")
  elif repo_head and git.get("commit") and git["commit"] != repo_head:
    audit.add("WARN", "git", rel, f"recorded at commit {git['commit'][:12]}, the workflow is now at {repo_head[:12]}")
