"""The batch planner (`dress --sweep`): a grid of platform settings dressed one after another, compared and
recommended (batchplan.py).

    sweep = parse_sweep(["BS=72,78,84,90,96", "FREE_INTERMEDIATE=0,1"])   # {"BS": [72, ...], "FREE_INTERMEDIATE": [0, 1]}
    answer = sweep_files(platform_file, bert_config, sweep, json_out="plan.json", picture_out="plan.svg")

Each setting of the grid is the platform with --set and the setting's keys; EVAL_BS follows BS where the platform
ties them (the platform's EVAL_BS equals its BS, and neither --set nor the sweep names EVAL_BS), as the dress's own
second batch does (run.py). Every setting is checked before anything is measured.

What the settings share: settings whose tinygrad environment is the same (BS, EVAL_BS and FREE_INTERMEDIATE are not
tinygrad's settings) are dressed in this one process, so tinygrad is imported once and its in-process kernel cache and
its compile cache (CACHEDB) serve every setting: the model's init and LAMB kernels, and every kernel whose shape does
not change with the batch, are compiled once. A sweep of a tinygrad setting (DEFAULT_FLOAT, GPUS, ...) dresses each
setting in a process of its own (tinygrad reads its settings at import), which still share the compile cache on disk.
A setting that does not fit is not dressed again at a second batch (the sweep's own points say which batches fit).
"""
from __future__ import annotations
import itertools, json, os, subprocess, sys, tempfile, time
from pathlib import Path
from typing import Any

from mlperf_bert.errors import UserError
from mlperf_bert.train.dress.run import check_bounds
from mlperf_bert.train.dress.setup import DEFAULT_PAIR, DressSetup, config_depth, set_up_dress
from mlperf_bert.train.environment import tinygrad_env
from mlperf_bert.train.hparams import load_platform, resolve

HEAVY = ("measurements",)   # left out of the sweep's JSON (each setting's dress JSON holds them)


def parse_sweep(items: list[str] | None) -> dict[str, list[Any]]:
  """--sweep KEY=V1,V2 ...: each key's values (YAML values), in the order given."""
  from mlperf_bert.config import safe_yaml
  out: dict[str, list[Any]] = {}
  for it in items or []:
    k, sep, vals = it.partition("=")
    k = k.strip()
    if not sep or not k or not vals.strip():
      raise UserError(f"--sweep {it!r}: expected KEY=V1,V2,... (e.g. BS=72,78,84,90,96)")
    if k in out: raise UserError(f"--sweep {k} given twice; give its values once, comma-separated")
    values = [safe_yaml(v.strip(), f"--sweep {k}") for v in vals.split(",")]
    if len(set(map(repr, values))) != len(values): raise UserError(f"--sweep {it!r}: a value repeats; give each once")
    out[k] = values
  if not out: raise UserError("--sweep: expected at least one KEY=V1,V2,... (e.g. BS=72,78,84,90,96)")
  return out


def grid(sweep: dict[str, list[Any]]) -> list[dict[str, Any]]:
  """Every combination of the sweep's values, the first key slowest."""
  keys = list(sweep)
  return [dict(zip(keys, vals)) for vals in itertools.product(*(sweep[k] for k in keys))]


def eval_bs_follows(platform_file: str | os.PathLike, overrides: dict[str, Any], sweep: dict[str, list]) -> bool:
  """True when EVAL_BS follows BS: the platform (with --set) has EVAL_BS == BS and neither --set nor the sweep sets
  EVAL_BS."""
  if "EVAL_BS" in overrides or "EVAL_BS" in sweep or "BS" not in sweep: return False
  s = resolve(load_platform(Path(platform_file)), overrides, where=f"{platform_file} with --set")
  return s.eval.batch_size == s.batch_size


def _setups(platform_file, bert_config, sweep, overrides, layers, pair, on_cpu) -> tuple[list[dict], list[DressSetup], bool]:
  follows = eval_bs_follows(platform_file, overrides, sweep)
  settings, setups = [], []
  for point in grid(sweep):
    setting = {**point, **({"EVAL_BS": point["BS"]} if follows else {})}
    setups.append(set_up_dress(platform_file, config_depth(bert_config), layers=layers, pair=pair,
                               overrides={**overrides, **setting}, on_cpu=on_cpu))
    check_bounds(setups[-1], bert_config)   # a setting that cannot fit by far is refused before any capture
    settings.append(setting)
  return settings, setups, follows


def _env(setup: DressSetup) -> dict[str, str]:
  return tinygrad_env(setup.settings, parallel=True, libraries=setup.compiler.env)


def sweep_files(platform_file: str | os.PathLike, bert_config: str | os.PathLike, sweep: dict[str, list[Any]], *,
                overrides: dict[str, Any] | None = None, layers: int | None = None,
                pair: tuple[int, int] = DEFAULT_PAIR, on_cpu: bool = False,
                json_out: str | os.PathLike | None = None, table_out: str | os.PathLike | None = None,
                picture_out: str | os.PathLike | None = None, log=print) -> dict[str, Any]:
  """Dress every setting of the grid, compare them (batchplan.py) and write the answer (JSON, table, picture), each
  file atomically. Returns the answer with its table."""
  from mlperf_bert.train.dress.batchplan import format_sweep, point_row, recommend, write_sweep_picture
  from mlperf_bert.fileio import atomic_path
  overrides = dict(overrides or {})
  clash = sorted(set(overrides) & set(sweep))
  if clash: raise UserError(f"--set and --sweep both set {', '.join(clash)}; set each key in one of them")
  settings, setups, follows = _setups(platform_file, bert_config, sweep, overrides, layers, pair, on_cpu)
  st, cpu0 = time.perf_counter(), time.process_time()
  one_env = all(_env(s) == _env(setups[0]) for s in setups)
  if one_env: answers = _dress_here(setups, settings, platform_file, overrides, bert_config, log)
  else: answers = _dress_apart(platform_file, bert_config, settings, overrides, layers, pair, on_cpu, log)
  rows = [point_row(setting, a) for setting, a in zip(settings, answers)]
  first = answers[0]
  how = ("measured at {} and {} layers, extrapolated to {}".format(*setups[0].depths, setups[0].full_depth)
         if len(setups[0].depths) == 2 else f"measured at {setups[0].depths[0]} layer{'s' * (setups[0].depths[0] != 1)}")
  out: dict[str, Any] = {
    "platform": setups[0].platform, "target": setups[0].target, "card": (first.get("card") or {}).get("name"),
    "sweep": sweep, "fixed": overrides, "how": how,
    "eval_bs_rule": "follows BS (the platform ties them)" if follows else
                    ("swept" if "EVAL_BS" in sweep else f"as the platform (with --set) sets it"),
    "shared": "one process, one tinygrad import, its kernel and compile caches" if one_env else
              "a process a setting (they differ in tinygrad settings); the compile cache on disk",
    "rows": rows, "recommendation": recommend(rows),
    "wall_s": round(time.perf_counter() - st, 1), "cpu_s_this_process": round(time.process_time() - cpu0, 1),
    "answers": [{k: v for k, v in a.items() if k not in HEAVY and k != "table"} for a in answers],
  }
  for a in out["answers"]:
    if a.get("cost"): a["cost"] = {k: v for k, v in a["cost"].items() if k != "events"}
  out["table"] = format_sweep(out)
  for path, text in ((json_out, json.dumps(out, indent=1) + "\n"), (table_out, out["table"] + "\n")):
    if path is None: continue
    with atomic_path(path) as tmp: tmp.write_text(text)
  if picture_out is not None: write_sweep_picture(picture_out, out)
  return out


def _dress_here(setups: list[DressSetup], settings: list[dict[str, Any]], platform_file, overrides: dict[str, Any],
                bert_config, log) -> list[dict[str, Any]]:
  """Each setting dressed in this process (one tinygrad environment, exported once)."""
  from mlperf_bert.train.dress.run import export_environment
  if "tinygrad" in sys.modules:
    raise UserError("the sweep must export its tinygrad settings before tinygrad is imported, but this process "
                    "imported it already; run python -m mlperf_bert dress --sweep")
  for note in export_environment(setups[0], os.environ): log(note)
  from mlperf_bert.train.dress.run import add_costs, run_dress
  out = []
  for i, (s, setting) in enumerate(zip(setups, settings)):
    t0, c0 = time.perf_counter(), time.process_time()
    log(f"sweep: setting {i + 1} of {len(setups)}: BS {s.settings.batch_size}, EVAL_BS {s.settings.eval.batch_size}, "
        f"FREE_INTERMEDIATE {s.settings.free_intermediate}")
    a = run_dress(s, bert_config, log=log, second_batch=False)
    add_costs(a, s, platform_file, {**overrides, **setting})
    log(f"sweep: setting {i + 1} dressed in {time.perf_counter() - t0:.1f} s ({time.process_time() - c0:.1f} CPU s)")
    out.append(a)
  return out


def _dress_apart(platform_file, bert_config, settings, overrides, layers, pair, on_cpu, log) -> list[dict[str, Any]]:
  """Each setting dressed in a process of its own (`dress --sweep` of that one setting), the answers read back."""
  out = []
  with tempfile.TemporaryDirectory(prefix="sweep-") as tmp:
    for i, setting in enumerate(settings):
      js = Path(tmp) / f"{i}.json"
      (k, v), *rest = setting.items()
      args = [sys.executable, "-m", "mlperf_bert", "dress", "--platform", str(platform_file), "--bert-config",
              str(bert_config), "--pair", f"{pair[0]},{pair[1]}", "--sweep", f"{k}={json.dumps(v)}", "--json", str(js),
              "--set", *(f"{kk}={json.dumps(vv)}" for kk, vv in {**overrides, **dict(rest)}.items())]
      if layers is not None: args += ["--layers", str(layers or "full")]
      if on_cpu: args.append("--cpu")
      log(f"sweep: setting {i + 1} of {len(settings)} ({setting}) in a process of its own")
      p = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
      if not js.exists():
        tail = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise UserError(f"the dress of {setting} failed: {tail}; run it alone with --set to see why")
      out.append(json.loads(js.read_text())["answers"][0])
  return out
