"""The audit of a finished workflow tree (a basedir): Snakemake's dry run, every artifact re-hashed against the
provenance records and the shard checksum list, and the log checks of log_checks.py on every result log."""
from __future__ import annotations
import json, os, re, subprocess, sys, time
from pathlib import Path


from mlperf_bert.errors import UserError
from mlperf_bert.constants import REPO, RULESET
from mlperf_bert.audit.bounded import Budget
from mlperf_bert.audit.log_checks import check_logs, check_ruleset
from mlperf_bert.audit.path_kind import is_org_dir
from mlperf_bert.audit.rows import Audit, Row, shorten
from mlperf_bert.audit.org import audit_org
from mlperf_bert.audit.claims import check_claims
from mlperf_bert.audit.chain import check_chain, recorded_config, recorded_eval_examples, recorded_preprocessing
from mlperf_bert.audit.logs import MLPerfLog, read_log
from mlperf_bert.audit.rehearsal import rehearsal_config, rehearsal_settings_rows
from mlperf_bert.audit.runs import check_provenance, provenance_path, run_config, runs_of
from mlperf_bert.audit.software import check_software
from mlperf_bert.audit.text import check_text
from mlperf_bert.audit.untrusted import links_out
from mlperf_bert.machine import this_machine

# ----------------------------------------------------------------------------------------------------------------
# a finished workflow tree (basedir)
# ----------------------------------------------------------------------------------------------------------------
_JOB_HEAD = re.compile(r"^(?:local)?(?:rule|checkpoint) (\S+):\s*$")


def parse_dry_run(text: str) -> list[dict]:
  """Jobs of `snakemake -n` output: [{rule, output, wildcards, reason}] (the `all`-style target jobs left out)."""
  jobs, cur = [], None
  for line in text.splitlines():
    m = _JOB_HEAD.match(line.strip()) if not line.startswith("    ") else None
    if m:
      cur = {"rule": m.group(1), "output": "", "wildcards": "", "reason": ""}
      jobs.append(cur)
      continue
    if cur is not None and line.startswith("    "):
      k, _, v = line.strip().partition(": ")
      if k in ("output", "wildcards", "reason"): cur[k] = v
    elif cur is not None and line.strip() and not line.startswith("["):
      cur = None
  return [j for j in jobs if j["output"]]


DRY_RUN_TRIGGERS = ("mtime", "params", "input", "software-env")  # Snakemake's, but `code` (snakemake_dry_run)


def snakemake_dry_run(workflow_dir: Path, workdir: Path, configfiles: list[str], overrides: dict[str, str],
                      targets: list[str] | None = None, timeout: int = 1800) -> tuple[int, list[dict], str]:
  """`snakemake -n` on the run's workflow, working directory and config; returns (rc, jobs, output). Every rerun
  trigger but `code`: that one compares the auditor's checkout's script mtimes (a fresh clone's are the clone's time)
  with the tree's outputs, which says nothing about the tree; the code a run used is its provenance's git commit."""
  # targets first: --configfile and --config take several values and would swallow them; -n ends the triggers' list
  cmd = [sys.executable, "-m", "snakemake", *(targets or []), "-s", str(workflow_dir / "Snakefile"), "-d", str(workdir),
         "--rerun-triggers", *DRY_RUN_TRIGGERS, "-n", "--nolock"]
  if configfiles: cmd += ["--configfile", *map(str, configfiles)]
  if overrides: cmd += ["--config", *(f"{k}={v}" for k, v in overrides.items())]
  try:
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=workdir)
  except subprocess.TimeoutExpired:
    return 124, [], f"snakemake -n did not finish in {timeout} s"
  out = p.stdout + p.stderr
  return p.returncode, parse_dry_run(out), out


def current_config(workflow_dir: Path, configfiles: list[str], overrides: dict[str, str]) -> dict:
  """The config Snakemake resolves: the Snakefile's config.yaml, then each --configfile, then --config (parsed and
  merged by Snakemake's own parse_config and update_config), typed as the workflow types it (config.typed_config)."""
  from snakemake.cli import parse_config
  from snakemake.utils import update_config
  from mlperf_bert.config import safe_yaml, typed_config  # aliases refused, as the workflow refuses them
  cfg: dict = {}
  for f in [workflow_dir / "config.yaml", *map(Path, configfiles)]:
    if f.is_file():
      update_config(cfg, safe_yaml(f.read_text(), str(f)) or {})
  for k, v in overrides.items():
    if isinstance(v, str):
      try: update_config(cfg, parse_config([f"{k}={v}"]))
      except ValueError as e: raise UserError(f"--config {k}={v}: {e}") from None
    else: cfg[k] = v
  return typed_config(cfg)


class _Hasher:
  """md5+sha256 of each file once per audit (the checksum list and the provenance records share the work). A file
  whose size a record states (`sizes`: recorded_sizes) is compared by size first and not hashed when it differs; a
  file it cannot read is not hashed either: both get digests that match nothing, which say why."""
  def __init__(self, sizes: dict[str, int] | None = None):
    self.cache: dict[tuple, dict] = {}
    self.sizes = sizes or {}

  def __call__(self, path) -> dict:
    from mlperf_bert.audit.provenance import hashes
    try:
      st, where = Path(path).stat(), str(Path(path).resolve())
      key = (where, st.st_size, st.st_mtime_ns)
      if key not in self.cache:
        want = self.sizes.get(where)
        self.cache[key] = hashes(path) if want in (None, st.st_size) else \
          not_hashed(st.st_size, f"{st.st_size} bytes, the record says {want}")
      return self.cache[key]
    except (OSError, RuntimeError) as e:  # unreadable, a symlink loop
      return not_hashed(-1, f"not readable: {e}")


def not_hashed(size: int, why: str) -> dict:
  """The digests of a file that was not hashed: they match no recorded digest and say why."""
  text = f"(not hashed: {why})"
  return {"bytes": size, "md5": text, "sha256": text, "not_hashed": why}


def recorded_sizes(base: Path, logs: list[Path], workflow_dir: Path) -> dict[str, int]:
  """{resolved path: bytes} of every file a provenance record or train record beside a log states the size of."""
  from mlperf_bert.audit.provenance import locate
  from mlperf_bert.train.record import record_path
  out: dict[str, int] = {}
  for log in logs:
    for f, inside in ((provenance_path(log), True), (record_path(log), False)):
      try:
        rec = json.loads(f.read_text())
        entries = ([rec["log"]] + [e for es in (rec.get("inputs") or {}).values() for e in es]) if inside else \
          [*(rec.get("shards") or []), *(rec.get(k) for k in ("eval_set", "init_weights", "bert_config",
                                                                "final_weights", "log"))]
        for e in entries:
          if not isinstance(e, dict) or isinstance(e.get("bytes"), bool) or not isinstance(e.get("bytes"), int): continue
          p = locate(e, base, workflow_dir) if inside else f.parent / str(e.get("path"))
          out.setdefault(str(p.resolve()), e["bytes"])
      except (OSError, RuntimeError, ValueError, KeyError, TypeError, AttributeError):
        continue  # an unreadable or malformed record: its own rows say so
  return out


def _sums(path: Path) -> dict[str, str] | str:
  """A sha256sum-format file -> {name: hex}, or an error string."""
  out = {}
  try: text = path.read_text()
  except (OSError, UnicodeDecodeError) as e: return f"unreadable ({e})"
  for n, line in enumerate(text.splitlines(), 1):
    if not line.strip(): continue
    h, sep, name = line.partition("  ")
    if not sep or not re.fullmatch(r"[0-9a-f]{64}", h):
      return f"line {n} is not '<sha256>  <name>'"
    out[name.strip()] = h
  return out


def check_checksums(audit: Audit, base: Path, hasher: _Hasher) -> None:
  """Every shard and the eval set against SHA256SUMS and their `.sha256` sidecars."""
  shards = base / "shards"
  listed: dict[str, str] = {}
  if shards.is_dir():
    sums = shards / "SHA256SUMS"
    if not sums.is_file():
      audit.add("FAIL", "checksums", "shards/SHA256SUMS", "missing: rebuild it (rule shard_checksums)")
    else:
      r = _sums(sums)
      if isinstance(r, str): audit.add("FAIL", "checksums", "shards/SHA256SUMS", r)
      else: listed = r
  files = sorted(shards.glob("*.shard")) if shards.is_dir() else []
  evals = sorted((base / "eval").glob("*.shard")) if (base / "eval").is_dir() else []
  bad = 0
  for f in [f for f in files + evals if not f.is_file()]:  # a directory, FIFO or device in place of a shard
    audit.add("FAIL", "checksums", str(f.relative_to(base)), "is not a regular file: not read; rebuild it"); bad += 1
  files, evals = [f for f in files if f.is_file()], [f for f in evals if f.is_file()]
  for name in sorted(set(listed) - {p.name for p in files}):
    audit.add("FAIL", "checksums", f"shards/{name}", "listed in SHA256SUMS but missing"); bad += 1
  for f in files + evals:
    rel = str(f.relative_to(base))
    h = hasher(f)
    actual = h["sha256"]
    side = f.with_name(f.name + ".sha256")
    problems = []
    if f.parent == shards and shards.is_dir() and (shards / "SHA256SUMS").is_file() and listed is not None:
      if f.name not in listed: problems.append("not listed in SHA256SUMS")
      elif listed[f.name] != actual: problems.append("sha256 differs from SHA256SUMS")
    if not side.is_file():
      problems.append(f"no sidecar {side.name}")
    else:
      r = _sums(side)
      if isinstance(r, str): problems.append(f"sidecar {side.name}: {r}")
      elif r.get(f.name) != actual: problems.append(f"sha256 differs from its sidecar {side.name}")
    if problems:
      now = f" {h['md5']}" if h.get("not_hashed") else f" (sha256 now {actual[:12]}...)"
      audit.add("FAIL", "checksums", rel, "; ".join(problems) + now); bad += 1
  if files or evals or bad:
    if not bad:
      audit.add("PASS", "checksums", "shards, eval", f"{len(files)} shard(s) and {len(evals)} eval set(s) match "
                "SHA256SUMS and their sidecars")
  else:
    audit.add("SKIP", "checksums", "shards, eval", "no shards or eval set in this basedir")


def check_eval_rows(audit: Audit, base: Path) -> None:
  """A WARN row when the eval set repeats rows (eval_examples larger than the eval text's instances)."""
  from mlperf_bert.data.evalset import repeated_rows
  path = base / "eval" / "eval.shard"
  if not path.is_file():
    return
  try:
    rows, dup = repeated_rows(path)
  except UserError as e:
    audit.add("FAIL", "eval set", str(path.relative_to(base)), str(e)); return
  if dup:
    audit.add("WARN", "eval set", str(path.relative_to(base)), f"{dup} of its {rows} rows repeat the row before them: "
              f"eval_examples ({rows}) is more than the {rows - dup} instances of the eval text; lower eval_examples")
  else:
    audit.add("PASS", "eval set", str(path.relative_to(base)), f"{rows} distinct rows")


def config_overrides(config: list[str] | None) -> dict[str, str]:
  """--config KEY=VALUE items -> {KEY: VALUE}."""
  overrides: dict[str, str] = {}
  for item in config or []:
    k, sep, v = item.partition("=")
    if not sep: raise UserError(f"--config {item!r}: expected KEY=VALUE")
    overrides[k] = v
  return overrides


def config_now(base: Path, wf: Path, wd: Path, configfiles: list[str], overrides: dict[str, str],
               resolved_config: dict | None) -> dict | None:
  """The config the tree would be rebuilt with (None without a Snakefile). When neither the overrides nor the
  config name this basedir, it is added to both (`overrides` is updated), as the workflow is run on it."""
  if resolved_config is not None:
    return dict(resolved_config)
  if not (wf / "Snakefile").is_file():
    return None
  now_cfg = current_config(wf, configfiles, overrides)
  cb = now_cfg.get("basedir")
  if "basedir" not in overrides and not (cb and (wd / cb).resolve() == base.resolve()):
    overrides["basedir"] = str(base.resolve())
    now_cfg["basedir"] = overrides["basedir"]
  return now_cfg


def check_dry_run(base: Path, logs: list[Path], wf: Path, wd: Path, configfiles: list[str], overrides: dict[str, str],
                  now_cfg: dict | None) -> list[Row]:
  """What Snakemake would run, and why: nothing, on a finished and intact tree."""
  if not (wf / "Snakefile").is_file():
    return [Row("FAIL", "dry run", str(wf), "no Snakefile there; pass --workflow-dir (the run's workflow directory)")]
  # name the records as the workflow's outputs are named: under the config's basedir, relative or absolute
  cfg_base = overrides.get("basedir") or (now_cfg or {}).get("basedir") or str(base.resolve())
  targets = ["all"] + [str(Path(cfg_base) / provenance_path(l).relative_to(base)) for l in logs
                       if provenance_path(l).is_file()] \
    if re.search(r"^rule all\b", (wf / "Snakefile").read_text(), re.M) else []
  rows = []
  rc, jobs, out = snakemake_dry_run(wf, wd, configfiles, overrides, targets)
  if rc != 0 and "MissingRuleException" in out and ".provenance.json" in out:
    rows.append(Row("WARN", "dry run", str(wf), "the workflow has no rule for the provenance records (include "
                    "rules/audit.smk); they are checked by hash only"))
    rc, jobs, out = snakemake_dry_run(wf, wd, configfiles, overrides, ["all"])
  if rc != 0:
    tail = [l for l in out.strip().splitlines() if l.strip()][-3:]
    return rows + [Row("FAIL", "dry run", str(wf), f"snakemake -n failed ({rc}): " + " | ".join(tail))]
  if not jobs:
    return rows + [Row("PASS", "dry run", str(wf), "snakemake -n: nothing to be done, every artifact is up to date")]
  for j in jobs[:40]:
    subj = j["rule"] + (f" ({j['wildcards']})" if j["wildcards"] else "")
    reason = j["reason"] or "no reason given"
    rows.append(Row("FAIL", "dry run", subj, "would run: " + (reason if len(reason) < 400 else reason[:400] + " ...")))
  if len(jobs) > 40:
    rows.append(Row("FAIL", "dry run", "...", f"{len(jobs) - 40} more jobs would run"))
  return rows


def check_seed_names(base: Path, plat: Path, plogs: list[MLPerfLog]) -> list[Row]:
  """Each log's seed against the seed its file name (result_bert_<seed>.log) says."""
  rows = []
  for lg in plogs:
    m = re.fullmatch(r"result_bert_(.+)\.log", lg.path.name)
    if m and lg.seed is not None and str(lg.seed) != m.group(1):
      rows.append(Row("FAIL", "seed", f"{plat.relative_to(base)}/{lg.path.name}",
                      f"the log's seed is {lg.seed}, its file name says {m.group(1)}"))
  return rows


def check_links(audit: Audit, base: Path) -> None:
  """A WARN naming the tree's symlinks that resolve outside it: the checks follow them, to files not the tree's."""
  out = links_out(base)
  if out:
    audit.add("WARN", "links", str(base), f"{len(out)}{'+' if len(out) >= 1000 else ''} path(s) of the tree are "
              f"symlinks resolving outside it (or nowhere), followed by the checks: " +
              shorten([f"{p} -> {t}" for p, t in out], 5))


def check_result_logs(audit: Audit, base: Path, logs: list[Path], ruleset: str) -> None:
  """The log checks of log_checks.py on each platform's result logs (a tree's logs are not scored)."""
  for plat in sorted({l.parent for l in logs}):
    plogs = [read_log(l) for l in logs if l.parent == plat]
    check_logs(audit, plogs, system=plat.name, division=None, ruleset=ruleset,
               subject_prefix=f"{plat.relative_to(base)}/",
               expect_count=None, scoring=False, received=False)
    audit.extend(check_seed_names(base, plat, plogs))


def guarded(audit: Audit, check: str, subject: str, fn, *args, **kw):
  """fn(*args, **kw), whose result it returns; a path it cannot follow or read (a symlink loop, a file it may not
  open) is one FAIL row of `check` naming it, never a traceback (the check's other rows stop there)."""
  try:
    return fn(*args, **kw)
  except (OSError, RuntimeError) as e:  # Python 3.11's Path.resolve: RuntimeError("Symlink loop from ...")
    if isinstance(e, RuntimeError) and "symlink loop" not in str(e).lower(): raise
    audit.add("FAIL", check, subject, f"stopped at a path it cannot follow or read ({e}); repair or remove it")
    return None


def audit_basedir(path: str | os.PathLike, *, ruleset: str = RULESET, strict: bool = False,
                  workflow_dir: str | os.PathLike | None = None, workdir: str | os.PathLike | None = None,
                  configfiles: list[str] | None = None, config: list[str] | None = None,
                  dry_run: bool = True, resolved_config: dict | None = None, reexecute: bool = True,
                  reexecute_seed: int | None = None, reexecute_budget: float | str | Budget | None = None,
                  reexecute_parts: tuple[str, ...] | None = None) -> Audit:
  """Audit a finished workflow tree: Snakemake's dry run (what would run, and why), every shard against
  SHA256SUMS and its sidecar, every result log against its provenance record (and the record's config against
  the current one), and the log checks on every result log; a submission package under it is audited too.

  resolved_config: the config as Snakemake resolved it (from inside a workflow job); otherwise it is rebuilt from
  the workflow's config.yaml, `configfiles` and the `config` KEY=VALUE overrides. reexecute: rebuild a random
  sample of shards and evaluate a random sample of eval batches on the final weights (audit/reexec.py), and train a
  random sample of segments between the kept states again and check the logged times (audit/segments.py), drawn
  with `reexecute_seed` (None: drawn now) within `reexecute_budget` (seconds, a Budget, or its text: `300s`, a
  coverage `20%`); `reexecute_parts`: which of reexec.PARTS (None: all), a budget's seconds shared equally among
  them."""
  from mlperf_bert.audit.provenance import git_state
  if reexecute_budget is not None and not isinstance(reexecute_budget, Budget):
    reexecute_budget = Budget.parse(reexecute_budget)  # a bad one stops the audit before any check
  base = Path(path)
  audit = Audit(str(base), "basedir", ruleset, strict)
  check_ruleset(audit, ruleset)
  wf = Path(workflow_dir) if workflow_dir else REPO
  wd = Path(workdir) if workdir else wf
  configfiles = list(configfiles or [])
  overrides = config_overrides(config)
  logs = sorted(base.glob("results/*/result_bert_*.log"))
  rehearsal_config(logs, overrides)  # a rehearsal's tree is rebuilt as a rehearsal (audit/rehearsal.py)
  now_cfg = config_now(base, wf, wd, configfiles, overrides, resolved_config)
  mine, others = runs_of(logs, now_cfg)  # the configured run's logs, another run's (audit/runs.py)
  if dry_run:
    audit.extend(check_dry_run(base, mine, wf, wd, configfiles, overrides, now_cfg))
    for run in sorted({l.parent for l in others}):
      audit.add("SKIP", "dry run", run.relative_to(base).as_posix(), f"another run than the config's: dry-run it "
                f"with its config (--config platform={run.name.removesuffix('-rehearsal')}"
                f"{' rehearse=true' if run.name.endswith('-rehearsal') else ''} and its other keys)")
  else:
    audit.add("SKIP", "dry run", str(wf), "skipped (--no-dry-run)")
  hasher = _Hasher(recorded_sizes(base, logs, wf))
  check_links(audit, base)
  guarded(audit, "checksums", "shards, eval", check_checksums, audit, base, hasher)
  check_eval_rows(audit, base)
  head = git_state(wf).get("commit")
  if not logs:
    audit.add("FAIL", "result logs", str(base), "no results/<platform>/result_bert_<seed>.log")
  runs = {log: run_config(now_cfg, log, log in others) for log in logs}
  for log in logs:
    guarded(audit, "provenance", str(log.relative_to(base)), check_provenance, audit, base, log, runs[log][0], head,
            hasher, workflow_dir=wf, workdir=wd, note=runs[log][1])
  # the versions that made each log against its commit's lock, and that lock against this checkout's (software.py)
  guarded(audit, "software", str(base), check_software, audit, base, logs, wf)
  # md5 list -> text -> shard -> train record -> log: the download's md5s and what each producing process recorded
  guarded(audit, "chain", "results4", check_text, audit, base, hasher,
          now_cfg if now_cfg is not None else recorded_config(logs), wf)
  guarded(audit, "chain", "shards, eval", check_chain, audit, base, logs, hasher, recorded_preprocessing(logs, now_cfg))
  # what the train records claim, against the config, platform file, provenance and this machine (audit/claims.py)
  here = {**this_machine(), "cpus": os.cpu_count()}
  confirmed = {log: guarded(audit, "claims", str(log.relative_to(base)), check_claims, audit, base, log, runs[log][0],
                            wf, here, runs[log][1]) for log in logs}
  if reexecute:
    from mlperf_bert.audit.reexec import DEFAULT_BUDGET_S, PARTS, draw_seed, reexecute as redo
    from mlperf_bert.audit.segments import reexecute_segments
    parts = tuple(p for p in PARTS if p in (reexecute_parts or PARTS))
    seed = draw_seed() if reexecute_seed is None else int(reexecute_seed)
    budget = reexecute_budget if reexecute_budget is not None else Budget(seconds=DEFAULT_BUDGET_S)
    t0, share = time.perf_counter(), None if budget.seconds is None else budget.seconds / len(parts)
    data = tuple(p for p in parts if p in ("shards", "evals"))
    if data:
      guarded(audit, "re-execution", str(base), redo, audit, base, logs, recorded_preprocessing(logs, now_cfg), hasher,
              seed=seed,
           budget=budget if share is None else Budget(seconds=share * len(data)),
           eval_examples=recorded_eval_examples(logs, now_cfg), parts=data)
    if "segments" in parts:
      guarded(audit, "re-execution", str(base), reexecute_segments, audit, base, logs, hasher, seed=seed,
              budget=budget, end=None if share is None else t0 + budget.seconds, confirmed=confirmed)
  else:
    audit.add("SKIP", "re-execution", str(base), "skipped (--no-reexecute): nothing was redone")
  guarded(audit, "read", str(base), check_result_logs, audit, base, logs, ruleset)
  audit.extend(rehearsal_settings_rows(base, logs, wf))
  sub = base / "submission"
  if sub.is_dir():
    for org in sorted(c for c in sub.iterdir() if c.is_dir() and is_org_dir(c)):
      audit_org(audit, org, ruleset)
  return audit
