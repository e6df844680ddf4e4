"""The MLPerf Training submission package for one system, checked with mlperf-logging's own tools.

Layout (what mlperf-logging's package_checker and result_summarizer read):

  <out>/<org>/systems/<system>.json                                  every field system_desc_checker requires
  <out>/<org>/results/<system>/bert/result_<i>.txt                   the seeds' MLPerf logs, i = 0, 1, ...
  <out>/<org>/benchmarks/bert/implementations/<system>/README.md     how the results were produced
  <out>/<org>/benchmarks/bert/implementations/<system>/run_and_time.sh   the command that ran
  <out>/<org>.<system>.score.json                                    package checker verdict, score, per-run times

The package checker and the result summarizer run on a temporary copy, so the package holds only what a
submitter uploads. A CPU demo is an open-division package (see the README this module writes).
"""
from __future__ import annotations
import json, os, platform as _platform, re, shlex, shutil, tempfile
from pathlib import Path
from typing import Any

from mlperf_bert.audit.mlperf_tools import bert_in_ruleset, package_checker, package_checker_errors, result_summarizer
from mlperf_bert.audit.log_checks import RESULT_COUNT
from mlperf_bert.audit.org import audit_submission
from mlperf_bert.constants import RULESET
from mlperf_bert.errors import UserError
from mlperf_bert.fileio import atomic_path
from mlperf_bert.audit.logs import BERT_TARGET_ACCURACY, read_log

# the fields mlperf-logging's system_desc_checker requires (training), in its order
SYSTEM_FIELDS = [
  "submitter", "division", "status", "system_name", "number_of_nodes", "host_processors_per_node",
  "host_processor_model_name", "host_processor_core_count", "host_processor_vcpu_count", "host_processor_frequency",
  "host_processor_caches", "host_processor_interconnect", "host_memory_capacity", "host_storage_type",
  "host_storage_capacity", "host_networking", "host_networking_topology", "host_memory_configuration",
  "accelerators_per_node", "accelerator_model_name", "accelerator_host_interconnect", "accelerator_frequency",
  "accelerator_on-chip_memories", "accelerator_memory_configuration", "accelerator_memory_capacity",
  "accelerator_interconnect", "accelerator_interconnect_topology", "cooling", "hw_notes", "framework",
  "other_software_stack", "operating_system", "sw_notes",
]
STATUS = {"onprem": "Available on-premise", "cloud": "Available cloud", "preview": "Preview",
          "research": "Research, Development, or Internal (RDI)", "rdi": "Research, Development, or Internal (RDI)"}


def _cpu_model() -> str:
  try:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
      if line.startswith("model name"): return line.split(":", 1)[1].strip()
  except OSError: pass
  return _platform.processor() or _platform.machine()


def _mem_gb() -> str:
  try:
    kb = int(re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text()).group(1))
    return f"{round(kb / 1024 / 1024)}GB"
  except (OSError, AttributeError): return ""


def _os_name() -> str:
  try:
    m = re.search(r'^PRETTY_NAME="?([^"\n]+)', Path("/etc/os-release").read_text(), re.M)
    if m: return m.group(1)
  except OSError: pass
  return _platform.platform()


def system_description(*, org: str, system: str, division: str, status: str, overrides: dict | None = None) -> dict:
  """A systems/<system>.json: this host's facts, then the platform's `overrides` (e.g. the accelerator)."""
  from mlperf_bert.audit.provenance import versions
  v = versions()
  desc: dict[str, Any] = {k: "" for k in SYSTEM_FIELDS}
  desc.update({
    "submitter": org, "division": division, "status": STATUS.get(status.lower(), status), "system_name": system,
    "number_of_nodes": "1", "host_processors_per_node": "1", "host_processor_model_name": _cpu_model(),
    "host_processor_core_count": str(os.cpu_count() or ""), "host_processor_vcpu_count": str(os.cpu_count() or ""),
    "host_memory_capacity": _mem_gb(), "accelerators_per_node": "0", "accelerator_model_name": "none (CPU)",
    "cooling": "air", "framework": f"tinygrad {v.get('tinygrad', '?')}",
    "other_software_stack": {k: v[k] for k in ("python", "numpy", "mlperf-logging") if k in v},
    "operating_system": _os_name(),
    "sw_notes": "built by the mlperf-bert Snakemake workflow",
  })
  desc.update(overrides or {})
  missing = [k for k in SYSTEM_FIELDS if k not in desc]
  if missing: raise UserError(f"system description for {system}: missing fields {missing}")
  return desc


def readme_text(*, org: str, system: str, division: str, ruleset: str, logs: list[Path], command: str,
                below_target: bool = False) -> str:
  """below_target: the runs stop at a target under MLPerf's 0.720 masked-LM accuracy (a demo target)."""
  open_note = ""
  if division == "open":
    why = ("a CPU demo trains a reduced BERT on a small corpus (shorter sequences, fewer steps, a small eval set) and "
           "stops at a demo target below the 0.720 masked-LM accuracy target, so its logs cannot be compared with "
           "closed BERT results" if below_target else
           "the platform's logs declare the open division (its SUBMISSION_DIVISION); they are not closed-division "
           "submission runs")
    open_note = (
      f"\n## Why open division\n\n{why[0].upper() + why[1:]}. The open division allows such changes; the package "
      "still goes through mlperf-logging's package checker and result summarizer.\n")
  runs = "\n".join(f"- `result_{i}.txt` <- `{p.name}`" for i, p in enumerate(logs))
  return (f"# BERT on {system} ({org}, {division} division)\n\n"
          f"Produced by the mlperf-bert Snakemake workflow: MLPerf Wikipedia data -> reference-identical pretraining "
          f"shards and eval set -> the MLPerf TF checkpoint converted to safetensors -> BERT trained with tinygrad -> "
          f"MLPerf logs. Checked with mlperf-logging (MLPerf Training ruleset {ruleset}).\n\n"
          f"## Command\n\n```\n{command}\n```\n\n## Runs\n\n{runs}\n{open_note}")


def read_system_json(path: str | os.PathLike | None, missing_ok: bool = False) -> dict | None:
  """System description fields that override the detected ones (platforms/<platform>/system.json); None if no path
  (or, with missing_ok, no such file)."""
  if not path or (missing_ok and not Path(path).is_file()): return None
  try: data = json.loads(Path(path).read_text())
  except (OSError, json.JSONDecodeError) as e:
    raise UserError(f"{path}: cannot read the system description ({e}); fix the file or pass another one") from None
  if not isinstance(data, dict): raise UserError(f"{path}: expected a JSON object of system description fields")
  return data


def provenance_command(records: list[str | os.PathLike], fallback: list[str] | str | None = None) -> str:
  """The command(s) that produced the logs, as their provenance records hold them (one line each, first seen first);
  `fallback` (e.g. this Snakemake run's command) when no record names one."""
  as_text = lambda c: shlex.join(c) if isinstance(c, list) else str(c or "")
  commands: list[str] = []
  for rec in records:
    c = as_text(json.loads(Path(rec).read_text()).get("command"))
    if c and c not in commands: commands.append(c)
  return "\n".join(commands) or as_text(fallback)


def build_package(out_dir: str | os.PathLike, *, logs: list[str | os.PathLike], system: str | None = None,
                  org: str | None = None, ruleset: str = RULESET, command: str = "",
                  system_overrides: dict | None = None, score_path: str | os.PathLike | None = None) -> dict:
  """Assemble `<out_dir>/<org>/` from the logs, run package_checker and result_summarizer, write the score file.

  org, system and division default to what the logs say (submission_org, submission_platform,
  submission_division). Returns the score record, also written to `score_path` (default
  `<out_dir>/<org>.<system>.score.json`) with the two tools' logs beside it (`<name>.package_checker.log`, ...).
  """
  if not logs: raise UserError("no result logs given; pass the seeds' result_bert_<seed>.log files")
  paths = [Path(p) for p in logs]
  parsed = [read_log(p) for p in paths]
  for p, lg in zip(paths, parsed):
    if lg.malformed:
      raise UserError(f"{p}: {len(lg.malformed)} malformed :::MLLOG line(s) ({lg.malformed[0]}); rerun the seed")
    if lg.benchmark != "bert":
      raise UserError(f"{p}: submission_benchmark is {lg.benchmark!r}, expected 'bert'")
  def one(attr, given):
    vals = {getattr(l, attr) for l in parsed}
    if given: return given
    if len(vals) != 1 or None in vals:
      raise UserError(f"the logs disagree on or lack submission_{attr} ({sorted(map(str, vals))}); pass --{attr}")
    return vals.pop()
  org, system = one("org", org), one("platform", system)
  division, status = one("division", None), one("submission_status", None) if all(l.submission_status for l in parsed) else "onprem"
  if not bert_in_ruleset(ruleset):
    raise UserError(f"ruleset {ruleset} has no BERT benchmark (the last is 5.0.0); use --ruleset 5.0.0")
  out_dir = Path(out_dir)
  org_dir = out_dir / org
  # assemble in a temporary folder beside the target, then swap it in (no half-built package on error)
  out_dir.mkdir(parents=True, exist_ok=True)
  with tempfile.TemporaryDirectory(prefix=f".{org}.", dir=out_dir) as tmp:
    pkg = Path(tmp) / org
    if org_dir.is_dir(): shutil.copytree(org_dir, pkg)
    for sub in (pkg / "results" / system, pkg / "benchmarks" / "bert" / "implementations" / system):
      shutil.rmtree(sub, ignore_errors=True)
    bert = pkg / "results" / system / "bert"
    bert.mkdir(parents=True)
    order = sorted(range(len(paths)), key=lambda i: (parsed[i].seed is None, parsed[i].seed, str(paths[i])))
    ordered = [paths[i] for i in order]
    for i, p in enumerate(ordered):
      shutil.copyfile(p, bert / f"result_{i}.txt")
    (pkg / "systems").mkdir(parents=True, exist_ok=True)
    desc = system_description(org=org, system=system, division=division, status=status, overrides=system_overrides)
    (pkg / "systems" / f"{system}.json").write_text(json.dumps(desc, indent=2) + "\n")
    impl = pkg / "benchmarks" / "bert" / "implementations" / system
    impl.mkdir(parents=True)
    below = any(l.final_eval_accuracy is not None and l.final_eval_accuracy < BERT_TARGET_ACCURACY for l in parsed)
    (impl / "README.md").write_text(readme_text(org=org, system=system, division=division, ruleset=ruleset,
                                                logs=ordered, command=command or "(not recorded)", below_target=below))
    (impl / "run_and_time.sh").write_text("#!/bin/sh\n# the command that produced these results\n"
                                          f"{command or 'snakemake --cores all'}\n")
    if org_dir.exists(): shutil.rmtree(org_dir)
    shutil.move(str(pkg), str(org_dir))
  # mlperf-logging's verdicts (on copies), and our own audit for the per-run table
  passed, out = package_checker(org_dir, ruleset)
  summ = result_summarizer(org_dir, ruleset)
  audit = audit_submission(org_dir, ruleset)
  score = summ["scores"].get(system)
  rec = {
    "org": org, "system": system, "division": division, "ruleset": ruleset, "package": str(org_dir),
    "logs": [str(p) for p in ordered], "result_count": len(ordered), "required_count": RESULT_COUNT,
    "package_checker": {"passed": passed, "errors": package_checker_errors(out)},
    "score_minutes": score, "score_rounded": None if score is None else round(score, 2),
    "runs": [{"file": r.file, "seed": r.seed, "minutes": r.minutes, "accuracy": r.accuracy, "verdict": r.verdict}
             for r in audit.runs],
    "audit": {"verdict": "FAIL" if audit.failed else "PASS", "counts": audit.counts(),
              "fails": [f"{r.check} {r.subject}: {r.reason}" for r in audit.rows if r.status == "FAIL"]},
  }
  score_path = Path(score_path) if score_path else out_dir / f"{org}.{system}.score.json"
  stem = score_path.name.removesuffix(".score.json").removesuffix(".json")
  with atomic_path(score_path.with_name(f"{stem}.package_checker.log")) as t:
    t.write_text(out)
  with atomic_path(score_path.with_name(f"{stem}.result_summarizer.log")) as t:
    t.write_text(summ["output"])
  with atomic_path(score_path) as t:  # last: the rule's output, written once everything else is there
    t.write_text(json.dumps(rec, indent=2) + "\n")
  return rec
