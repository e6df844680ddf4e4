"""What a train record claims, against what confirms it: a claim of the record may lower the audit's guard (keep no
states, name a GPU whose kernels round otherwise, name more cores than the CPU time floor divides by) only when
something the tree's holder did not write with it confirms it.

For each result log (`check_claims`, one `claims` row each finding, needing no re-execution):
  - settings: every setting the train record holds against those the audit's config and platform file give for the
    log's run and seed (mlperf_bert/plan.py, as the train rule resolves them; a rehearsal's CPU devices capped at
    its provenance machine's CPUs); DEV is read as tinygrad reads it (machine.device_kind: cpu, CPU:1 -> CPU), and
    the record's GPU target (the roofline's card) against the platform's DRESS_TARGET;
  - evidence (downgrades): a tree whose provenance names this version (its mlperf-bert version and the form this
    version's provenance rule writes) and this project's trainer is held to what this version's train process
    writes: a train record of this schema, with final weights and the last eval's batches, its kept states every
    EVIDENCE_STATE_FREQ-th eval, and none of the state files on disk missing from it;
  - machine: the record's host, CPU model, SIMD flags and cores against the provenance record's machine (when the
    record names that host) and this machine (when it names this one); the last eval's devices against the settings.
`Confirmed` tells the segment and time checks what they may rely on: the state frequency the config gives, and the
cores of a machine when the record's were refuted; `trust` names what nothing confirmed.
"""
from __future__ import annotations
import dataclasses, json
from pathlib import Path

from mlperf_bert.audit.rows import RETRAIN, Audit, shorten
from mlperf_bert.errors import UserError
from mlperf_bert.machine import device_kind

CLAIMS = "claims"
DOWNGRADE = "downgrade"
FREQ = "EVIDENCE_STATE_FREQ"
EVIDENCE = {"final_weights": "final weights", "last_eval": "last-eval batches", "kept_states": "kept states"}
# the settings that set how strictly the audit compares a re-execution, and what a false claim of one would lower
GUARDS = {FREQ: "fewer kept states, fewer segments trained again",
          "DEV": "another device kind, compared in a band instead of bit for bit",
          "GPUS": "another device count, whose segments are not trained again",
          "BEAM": "searched kernels, compared in a band", "TRAIN_BEAM": "searched train kernels, compared in a band",
          "EVAL_BEAM": "searched eval kernels, compared in a band",
          "FLOAT": "another float type, whose eval band is wider"}


@dataclasses.dataclass
class Confirmed:
  """What the segment and time checks of one log may rely on (None: the record's own value, unrefuted)."""
  every: int | None = None        # EVIDENCE_STATE_FREQ as the config and platform file give it
  cores: int | None = None        # the most cores the run's machine has, where the record claims more
  platform: str | None = None     # a GPU record's platform, where its GPU target, device kind and count are the file's
  trust: list[str] = dataclasses.field(default_factory=list)   # what nothing confirmed


def this_version(prov: dict | None) -> str:
  """'' unless the provenance record was written by this version of the workflow (the installed mlperf-bert version,
  and the record's form since train-record/2: `platform_file`), else what it names."""
  from mlperf_bert.audit.provenance import versions
  if not isinstance(prov, dict): return "no provenance record"
  named, mine = (prov.get("versions") or {}).get("mlperf-bert"), versions().get("mlperf-bert")
  if named != mine: return f"its provenance names mlperf-bert {named}, this is {mine}"
  if "platform_file" not in prov: return "its provenance is of the form written before train-record/2"
  return ""


def expected_settings(run_cfg: dict, workflow_dir: Path, seed: int, cpus: int | None,
                      source: str = "the audit's config") -> tuple[dict, dict, str]:
  """(the rule's settings, the run-time knobs, where they come from) of a seed's run of `run_cfg`, resolved as the
  workflow's plan resolves them (mlperf_bert/plan.py, which the audit wing does not import): the platform file, a
  rehearsal's CPU stand-in (its CPU devices capped at `cpus`, the run machine's), the `train` overrides (tinygrad's
  trainer: its eval widened). UserError when the config and platform file give none."""
  from mlperf_bert.constants import PLATFORMS_DIR, platform_path
  from mlperf_bert.train.hparams import load_platform, resolve, rule_params, run_time_knobs
  from mlperf_bert.train.rehearsal import rehearsal_settings
  from mlperf_bert.train.tinygrad_trainer.checks import eval_overrides
  name, rehearse = str(run_cfg.get("platform", "cpu")), bool(run_cfg.get("rehearse"))
  try:
    platform_file, examples = platform_path(workflow_dir, name), int(run_cfg.get("eval_examples", 10000))
    platform = load_platform(platform_file)
    settings = rehearsal_settings(platform, cpus)[0] if rehearse else platform
    train = dict(run_cfg.get("train") or {})
    if run_cfg.get("trainer") == "tinygrad": train = eval_overrides(resolve(settings, train, 0, examples), train)
    s = resolve(settings, train, seed=seed, eval_examples=examples)
  except (KeyError, TypeError, ValueError) as e:
    raise UserError(f"the config is not one the workflow resolves ({type(e).__name__}: {e})") from None
  where = f"{PLATFORMS_DIR}/{name}/{platform_file.name}{' (rehearse=true)' if rehearse else ''} with {source}"
  return json.loads(json.dumps(rule_params(s), default=str)), run_time_knobs(s), where


def _same(key: str, a, b) -> bool:
  return device_kind(a) == device_kind(b) if key == "DEV" else a == b


def _settings_rows(rec: dict, exp: dict, knobs: dict, where: str, strict: bool) -> list[tuple[str, str]]:
  """(status, reason) of the settings the record claims otherwise than `exp`: one row each for those that set how
  strictly the audit compares (GUARDS), one for the rest; `strict`: keys only one side has too."""
  have = rec.get("settings") if isinstance(rec.get("settings"), dict) else {}
  keys = sorted(set(exp) | set(have)) if strict else sorted(set(exp) & set(have))
  differ = [k for k in keys if not _same(k, have.get(k), exp.get(k))]
  said = lambda k: (f"{k}: the train record says {have[k]!r}" if k in have else f"{k}: the train record has none") + \
    f", {where} gives {exp.get(k)!r}"
  out = [("FAIL", f"{DOWNGRADE + ': ' if k == FREQ else ''}{said(k)}: {GUARDS[k]}; {RETRAIN}")
         for k in differ if k in GUARDS]
  rest = [k for k in differ if k not in GUARDS]
  if rest:
    out.append(("FAIL", f"settings: {shorten([said(k) for k in rest], 3)}: a record may not change what the run was "
                f"(the train rule resolved its settings from them); {RETRAIN}"))
  every = (rec.get("kept_states") or {}).get("every") if isinstance(rec.get("kept_states"), dict) else None
  if every is not None and every != exp.get(FREQ) and FREQ not in differ:
    out.append(("FAIL", f"{DOWNGRADE}: {FREQ}: the train record's kept_states says every {every}, {where} gives "
                f"{exp.get(FREQ)!r}: {GUARDS[FREQ]}; {RETRAIN}"))
  target = (rec.get("machine") or {}).get("gpu_target") if isinstance(rec.get("machine"), dict) else None
  if target != knobs.get("DRESS_TARGET"):
    out.append(("FAIL", f"GPU target: the train record says {target!r}, {where} gives {knobs.get('DRESS_TARGET')!r} "
                f"(DRESS_TARGET): the time would be held to another card's roofline; {RETRAIN}"))
  return out


def gpu_platform(rec: dict, exp: dict, knobs: dict, name: str) -> str | None:
  """`name`, the platform of the run's config, when the record is a GPU run of it: its GPU target is the platform's
  DRESS_TARGET and its device kind and count are the platform's (a GPU kind); None otherwise (the settings rows FAIL
  a record that differs)."""
  have = rec.get("settings") if isinstance(rec.get("settings"), dict) else {}
  target = (rec.get("machine") or {}).get("gpu_target") if isinstance(rec.get("machine"), dict) else None
  kind = device_kind(have.get("DEV"))
  if target is None or target != knobs.get("DRESS_TARGET") or kind in ("CPU", "") or \
     kind != device_kind(exp.get("DEV")) or have.get("GPUS") != exp.get("GPUS"): return None
  return name


def _evidence_rows(rp: Path, raw: dict, rec: dict, every: int | None, why_old: str) -> list[tuple[str, str]]:
  """This version's evidence, where its provenance names this version and trainer (why_old ''): the record's schema,
  final weights, last-eval batches and (EVIDENCE_STATE_FREQ > 0) kept states."""
  from mlperf_bert.audit.provenance import versions
  from mlperf_bert.train.record import RECORD_SCHEMA
  if why_old: return []
  out = []
  lacks = [name for k, name in EVIDENCE.items() if not rec.get(k) and (k != "kept_states" or every != 0)]
  if raw.get("schema") != RECORD_SCHEMA:
    out.append(("FAIL", f"{DOWNGRADE}: {rp.name} is {raw.get('schema')!r}, an older schema"
                f"{' without ' + ', '.join(lacks) if lacks else ''}, where its provenance names this version's train "
                f"process (mlperf-bert {versions().get('mlperf-bert')}, trainer project), which writes {RECORD_SCHEMA}: "
                f"the record was rewritten; {RETRAIN}"))
  elif lacks:
    out.append(("FAIL", f"{DOWNGRADE}: {rp.name} holds no {', '.join(lacks)}, which this version's train process "
                f"writes with every record: the record was rewritten; {RETRAIN}"))
  return out


def _states_rows(base: Path, log: Path, rec: dict) -> list[tuple[str, str]]:
  """The state files on disk (result_bert_<seed>.states/) that the record's kept_states leaves out."""
  from mlperf_bert.train.states import list_states, states_path
  try: on_disk = {step: p for step, p in list_states(states_path(log))}
  except OSError: return []
  kept = rec.get("kept_states") if isinstance(rec.get("kept_states"), dict) else {}
  listed = set()
  for e in kept.get("states") or []:
    try: listed.add(int(e["step"]))
    except (KeyError, TypeError, ValueError): pass
  left = sorted(set(on_disk) - listed)
  if not left: return []
  folder = states_path(log).relative_to(base).as_posix()
  return [("FAIL", f"{DOWNGRADE}: {len(left)} kept state(s) on disk ({folder}/: steps "
           f"{', '.join(map(str, left[:5]))}{' ...' if len(left) > 5 else ''}) are missing from the train record's "
           f"kept_states ({sorted(listed) or 'none'}): states were left out so that their segments are not trained "
           f"again; {RETRAIN}")]


def _machine_rows(rec: dict, prov: dict | None, here: dict, conf: Confirmed) -> list[tuple[str, str]]:
  """The record's host, CPU, flags and cores against its provenance's machine and this one (see the module doc)."""
  m = rec.get("machine") if isinstance(rec.get("machine"), dict) else {}
  host = (prov or {}).get("host") if isinstance((prov or {}).get("host"), dict) else {}
  seen = [("its provenance", {"host": host.get("hostname"), "cpu": host.get("cpu"), "flags": host.get("cpu_flags"),
                              "cpus": host.get("cpu_count")})]
  seen.append(("this machine", {**here, "cpus": here.get("cpus")}))
  out, confirmed = [], False
  for who, w in seen:
    if confirmed or not m.get("host") or m.get("host") != w.get("host"): continue
    confirmed = True  # the first that names the record's host: its provenance, else this machine
    for k, what in (("cpu", "CPU"), ("flags", "SIMD flags")):
      if w.get(k) is not None and m.get(k) != w.get(k):
        out.append(("FAIL", f"machine: the train record says {what} {m.get(k)!r} on host {m.get('host')}; {who}, "
                    f"written on {w['host']}, says {w.get(k)!r}: the record names another machine than the run's; "
                    f"{RETRAIN}"))
    cores, cpus = m.get("cores"), w.get("cpus")
    if isinstance(cpus, int) and (not isinstance(cores, int) or isinstance(cores, bool) or not 0 < cores <= cpus):
      out.append(("FAIL", f"machine: the train record says {cores!r} cores on host {m.get('host')}; {who}, written on "
                  f"{w['host']}, says it has {cpus} CPUs: the CPU time floor divides by {cpus}, not {cores!r}; "
                  f"{RETRAIN}"))
      conf.cores = cpus
  if not confirmed and m.get("host"):  # a record that names no machine (an older version's) holds no CPU floor either
    conf.trust.append(f"the machine the record names ({m.get('cpu')}, {m.get('cores')} cores on {m.get('host')}) is "
                      f"neither its provenance's ({host.get('hostname')}) nor this one: taken on trust")
    out.append(("WARN", f"machine: the train record names host {m.get('host')!r}, which is neither its provenance "
                f"record's ({host.get('hostname')!r}) nor this machine: its CPU, flags and {m.get('cores')} cores "
                "are taken on trust (the CPU time floor divides by them)"))
  return out


def _finite_rows(rp: Path, rec: dict) -> list[tuple[str, str]]:
  """A NaN or an infinity in the final weights (of the size the record gives: a file of another size is not read,
  the re-execution's rows name it)."""
  from mlperf_bert.audit.bounded import nonfinite_within
  from mlperf_bert.audit.provenance import size_differs
  entry = rec.get("final_weights") if isinstance(rec.get("final_weights"), dict) else {}
  w = rp.parent / str(entry.get("path"))
  try:
    if not entry or not w.is_file() or size_differs(w, entry.get("bytes")): return []
    bad = nonfinite_within(w, None)
  except (UserError, OSError, RuntimeError) as e:
    return [("FAIL", f"the final weights {entry.get('path')} are not readable: {e}; {RETRAIN}")]
  if not bad: return []
  return [("FAIL", f"the final weights {w.name} hold a NaN or an infinity ({', '.join(bad[:3])}"
           f"{f' and {len(bad) - 3} more' if len(bad) > 3 else ''}): no finished run's weights; {RETRAIN}")]


def _device_rows(rec: dict) -> list[tuple[str, str]]:
  """The last eval's devices and float type (what the train process used) against the settings' DEV, GPUS, FLOAT."""
  hp, ev = rec.get("settings") or {}, rec.get("last_eval")
  if not isinstance(ev, dict) or not isinstance(hp, dict): return []
  if device_kind(ev.get("device")) == device_kind(hp.get("DEV")) and ev.get("devices") == hp.get("GPUS", 1) and \
     ("FLOAT" not in hp or ev.get("float_type") == hp.get("FLOAT")): return []
  return [("FAIL", f"device: the train record's last eval ran on {ev.get('devices')} {ev.get('device')} device(s) in "
           f"{ev.get('float_type')}, its settings say DEV {hp.get('DEV')}, GPUS {hp.get('GPUS', 1)}, FLOAT "
           f"{hp.get('FLOAT')}: the record was rewritten; {RETRAIN}")]


def check_claims(audit: Audit, base: Path, log: Path, run_cfg: dict | None, workflow_dir: Path, here: dict,
                 note: str = "") -> Confirmed:
  """The `claims` rows of one result log (see the module doc); `run_cfg`: the config of the log's run (None: no
  config: the settings are not compared), `here`: this machine (machine.this_machine, with its `cpus`), `note`: what
  of the run's config was taken from its provenance (runs.run_config)."""
  from mlperf_bert.audit.provenance import read_provenance
  from mlperf_bert.train.record import read_record, record_path
  rel, rp, conf = log.relative_to(base).as_posix(), record_path(log), Confirmed()
  try:
    raw, rec = json.loads(rp.read_text()), read_record(rp)
  except (OSError, ValueError, UserError):
    return conf  # the chain's rows name an unreadable record
  try: prov = read_provenance(log.with_name(log.name[:-len(".log")] + ".provenance.json"))
  except UserError: prov = None  # the provenance rows name it
  trainer = (run_cfg or {}).get("trainer") or ((prov or {}).get("trainer") or {}).get("name") or "project"
  why_old = this_version(prov) or ("" if trainer == "project" else f"trainer {trainer}")
  rows: list[tuple[str, str]] = []
  compared = "not compared (no config)"
  if run_cfg is not None:
    cpus = ((prov or {}).get("host") or {}).get("cpu_count")
    try:
      exp, knobs, where = expected_settings(run_cfg, workflow_dir, int(rec.get("seed", 0)), cpus, "its run's config "
                                            "(its own keys from its provenance)" if note else "the audit's config")
    except (UserError, TypeError, ValueError) as e:
      rows.append(("WARN", f"the train record's settings are not compared: {e}"))
    else:
      # this version's evidence is held to the config's frequency; an older version's (or tinygrad's trainer's): its own
      conf.every, compared = (None if why_old else exp.get(FREQ)), f"those {where} gives"
      rows += _settings_rows(rec, exp, knobs, where, strict=not why_old)
      conf.platform = gpu_platform(rec, exp, knobs, str(run_cfg.get("platform")))
  rows += _evidence_rows(rp, raw, rec, conf.every, why_old)
  if not why_old: rows += _states_rows(base, log, rec)
  rows += _finite_rows(rp, rec) + _device_rows(rec) + _machine_rows(rec, prov, here, conf)
  for status, reason in rows:
    audit.add(status, CLAIMS, rel, reason)
  if not any(s == "FAIL" for s, _ in rows):
    hp = rec.get("settings") or {}
    evidence = "this version's" if not why_old else f"taken as it is ({why_old})"
    machine = "taken on trust" if conf.trust else "the one its provenance or this machine names"
    audit.add("PASS", CLAIMS, rel, f"the train record's settings (DEV {hp.get('DEV')}, GPUS {hp.get('GPUS')}, {FREQ} "
              f"{hp.get(FREQ)}, ...): {compared}; its evidence: {evidence}; its machine: {machine}")
  return conf
