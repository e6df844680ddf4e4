"""The dress rehearsal: a platform's train and eval steps at full size, compiled for its GPU, on no GPU.

    plan = plan_dress(profile_dir / "platform.yaml", layers=None, overrides={"BS": 72})
    for note in prepare_environment(plan, os.environ): print(note)   # before tinygrad is imported
    result = run_dress(plan, bert_config)       # mlperf_bert/train/dress_measure.py does the steps

tinygrad 0.14's NULL device with a target (DEV=NULL:CUDA:sm_89, tinygrad/helpers.py `Target`, runtime/ops_null.py)
schedules, optimizes, renders and compiles every kernel with the target's own compiler, and allocates and runs
nothing: what a GPU run would launch and hold is known before the first GPU hour. The platform key DRESS_TARGET
names the target (tinybox_green `CUDA:sm_89`); the dress runs the profile's ModelTrainer train step and eval step
(BS, EVAL_BS, GPUS, DEFAULT_FLOAT, SUM_DTYPE, LOSS_SCALER, FREE_INTERMEDIATE, PARALLEL as set) on GPUS NULL devices
with BEAM 0 (a kernel "runs" in a fixed 1 ms there, so a search means nothing), at the MLPerf BERT-large config,
sequence 512, 76 predictions, random weights and dummy batches.

Compilers: CUDA targets need NVIDIA's nvrtc even to render (PyPI nvidia-cuda-nvrtc-cu12, the `dress` extra; its
library is found from the package and named by NVRTC_PATH). AMDLLVM targets compile with LLVM 19 (Debian libllvm19,
named by LLVM_PATH): that is not the HIP/comgr code generator a real DEV=AMD uses first. `NULL:plain` is tinygrad's
own NULL renderer (no compiler: counts and memory only). Nothing here imports tinygrad.
"""
from __future__ import annotations
import dataclasses, glob, importlib.util, os, re
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Callable, Mapping

from mlperf_bert.errors import UserError
from mlperf_bert.train.hparams import load_platform, resolve, tinygrad_env
from mlperf_bert.train.settings import Settings

DEFAULT_BERT_CONFIG = Path(__file__).resolve().parents[2] / "resources" / "demo" / "bert_config.json"  # MLPerf's
SEQ, PRED = 512, 76                       # MLPerf BERT's max_seq_length and max_predictions_per_seq
DEFAULT_PAIR = (2, 4)                     # the default dress measures these depths and extrapolates linearly
NVRTC_WHEEL, NVRTC_LIB = "nvidia-cuda-nvrtc-cu12", "libnvrtc.so.12"
LLVM_CANDIDATES = ("/usr/lib/llvm-19/lib/libLLVM.so.1", "/usr/lib/llvm-19/lib/libLLVM-19.so",
                   "/usr/lib/*-linux-gnu/libLLVM.so.19.1", "/usr/lib/*-linux-gnu/libLLVM-19.so")
# renderer of a DRESS_TARGET -> (compiler, the pattern its arch must match, an example)
RENDERERS = {"CUDA": ("nvrtc", r"sm_\d{2,3}a?", "CUDA:sm_89"), "AMDLLVM": ("llvm19", r"gfx[0-9a-f]{3,4}", "AMDLLVM:gfx1100"),
             "NULL": ("none", r"plain", "NULL:plain")}   # tinygrad's own NULL renderer ("NULL" alone is YAML's null)


@dataclasses.dataclass(frozen=True)
class Compiler:
  name: str            # nvrtc | llvm19 | none
  library: str | None  # the shared library tinygrad loads
  env: dict[str, str]  # NVRTC_PATH / LLVM_PATH
  describe: str        # one line for the report


@dataclasses.dataclass(frozen=True)
class DressPlan:
  platform: str
  target: str                       # CUDA:sm_89
  settings: Settings                # resolved, DEV=NULL:<target>, BEAM 0, the model depth of the first measurement
  depths: tuple[int, ...]           # the depths measured: (2, 4), or one
  full_depth: int                   # the config's num_hidden_layers (what the figures are extrapolated to)
  compiler: Compiler
  notes: tuple[str, ...]


def parse_target(text: Any, where: str) -> tuple[str, str]:
  """(renderer, arch) of a DRESS_TARGET such as CUDA:sm_89, AMDLLVM:gfx942 or NULL; a one-line error otherwise."""
  ren, _, arch = str(text).partition(":")
  ren = ren.upper()
  known = ", ".join(f"{r} ({ex})" for r, (_, _, ex) in RENDERERS.items())
  if ren not in RENDERERS or not re.fullmatch(RENDERERS[ren][1], arch):
    raise UserError(f"{where}: DRESS_TARGET={text!r} is not a target the dress can compile for; use one of {known}")
  return ren, arch


def wheel_nvrtc() -> str | None:
  """libnvrtc.so.12 of the nvidia-cuda-nvrtc-cu12 wheel, or None."""
  spec = importlib.util.find_spec("nvidia")
  for root in (spec.submodule_search_locations or []) if spec else []:
    for name in (NVRTC_LIB, "libnvrtc.so"):
      if (lib := Path(root) / "cuda_nvrtc" / "lib" / name).is_file(): return str(lib)
  return None


def debian_llvm19() -> str | None:
  """libLLVM of Debian's libllvm19 (the first of LLVM_CANDIDATES present), or None."""
  for pattern in LLVM_CANDIDATES:
    if hits := sorted(glob.glob(pattern)): return hits[0]
  return None


def _nvrtc_line(lib: str, target: str) -> str:
  try: ver = f"{NVRTC_WHEEL} {version(NVRTC_WHEEL)}"
  except PackageNotFoundError: ver = "NVRTC_PATH"
  return f"NVIDIA nvrtc ({ver}, {Path(lib).name}) for {target}"


@dataclasses.dataclass(frozen=True)
class CompilerSource:
  """Where a renderer's compiler library comes from: the variable that names it, else `locate`, else what to install."""
  name: str                              # nvrtc | llvm19 (RENDERERS' names)
  env_var: str                           # NVRTC_PATH | LLVM_PATH: overrides `locate`; tinygrad reads it
  locate: Callable[[], str | None]       # the library when env_var names none
  library: str                           # what env_var must name
  needs: str                             # what is missing, for the error: "the CUDA renderer needs NVIDIA's nvrtc"
  install: str                           # how to get it, for the error
  describe: Callable[[str, str], str]    # (library, target) -> the report's line


COMPILER_SOURCES = {s.name: s for s in (
  CompilerSource("nvrtc", "NVRTC_PATH", wheel_nvrtc, NVRTC_LIB, "the CUDA renderer needs NVIDIA's nvrtc",
                 f"install it with `bash scripts/setup.sh dress` (pip {NVRTC_WHEEL}) or set NVRTC_PATH to {NVRTC_LIB}",
                 _nvrtc_line),
  CompilerSource("llvm19", "LLVM_PATH", debian_llvm19, "LLVM 19's libLLVM", "the AMDLLVM renderer needs LLVM 19",
                 "install Debian's libllvm19 (`bash scripts/setup.sh dress` or apt-get install libllvm19) or set LLVM_PATH",
                 lambda lib, target: f"LLVM 19 ({Path(lib).name}) for {target}: not the HIP/comgr code generator a "
                                     f"real DEV=AMD uses first"))}


def find_library(source: CompilerSource, override: str | None, target: str) -> str:
  """The library of `source`: `override` (its env_var's value) when set, else the one `locate` finds; a one-line error
  when the override is not a file or nothing is found."""
  if override and not Path(override).is_file():
    raise UserError(f"DRESS_TARGET {target}: {source.env_var}={override} is not a file; unset it or point it at "
                    f"{source.library}")
  if lib := override or source.locate(): return lib
  raise UserError(f"DRESS_TARGET {target}: {source.needs} and none was found; {source.install}")


def find_compiler(renderer: str, target: str, environ: Mapping[str, str]) -> Compiler:
  """The compiler of a target's renderer, or a one-line error that says what to install."""
  if (source := COMPILER_SOURCES.get(RENDERERS[renderer][0])) is None:
    return Compiler("none", None, {}, "tinygrad's NULL renderer: no compiler (kernels are rendered, never compiled)")
  lib = find_library(source, environ.get(source.env_var), target)
  return Compiler(source.name, lib, {source.env_var: lib}, source.describe(lib, target))


def parse_layers(text: str | None) -> int | None:
  """--layers: None (the default pair), 0 for `full`, or a depth >= 1."""
  if text is None: return None
  if str(text).lower() == "full": return 0
  try: n = int(text)
  except ValueError: n = -1
  if n < 1: raise UserError(f"--layers {text}: expected a number of layers of at least 1 or `full`")
  return n


def plan_dress(platform_file: str | os.PathLike, bert_layers: int, *, layers: int | None = None,
               pair: tuple[int, int] = DEFAULT_PAIR, overrides: dict[str, Any] | None = None,
               environ: dict[str, str] | None = None, on_cpu: bool = False) -> DressPlan:
  """Validate everything a dress needs (before tinygrad is imported): the profile's DRESS_TARGET, its compiler, the
  depths. `bert_layers` is the config's depth; `layers` None measures `pair` and extrapolates, 0 the full depth, n
  that depth. `on_cpu` runs the same steps on this machine's CPU (small models only: what NULL's counts are checked
  against)."""
  path = Path(platform_file)
  platform = load_platform(path)
  over = dict(overrides or {})
  raw_target = over.pop("DRESS_TARGET", platform.get("DRESS_TARGET"))
  if raw_target is None and not on_cpu:
    raise UserError(f"{path}: no DRESS_TARGET; set it to the platform's GPU target (e.g. CUDA:sm_89 for an RTX 4090, "
                    f"AMDLLVM:gfx1100 for an RX 7900 XTX) or pass --set DRESS_TARGET=...")
  if pair[0] < 1 or pair[1] <= pair[0]: raise UserError(f"--pair {pair}: expected two depths A < B, both at least 1")
  renderer, arch = parse_target(raw_target or "NULL:plain", f"{path}")
  target = renderer + (f":{arch}" if arch else "")
  compiler = find_compiler(renderer, target, dict(environ if environ is not None else os.environ)) if not on_cpu else \
    Compiler("clang", None, {}, "this machine's CPU (clang): the step runs")
  depths = pair if layers is None else (layers or bert_layers,)
  beams = {k: 0 for k in ("BEAM", "TRAIN_BEAM", "EVAL_BEAM")}
  dev = "CPU" if on_cpu else "NULL" + (f":{target}" if renderer != "NULL" else "")
  where = f"{path} with --set"
  s = resolve(platform, {**over, "DRESS_TARGET": target, "DEV": dev, **beams, "BERT_LAYERS": depths[0]}, where=where)
  notes = []
  if platform.get("BEAM"): notes.append(f"BEAM {platform['BEAM']} -> 0: on NULL every kernel 'runs' in a fixed 1 ms, "
                                        "so a search means nothing; BEAM's kernels are not the ones compiled here")
  return DressPlan(path.parent.name, target, s, tuple(depths), bert_layers, compiler, tuple(notes))


def dress_env(plan: DressPlan) -> dict[str, str]:
  """The environment of the dress: the platform's tinygrad settings (tinygrad_env), PARALLEL as the RUN phase sets
  it (tinygrad_env leaves it to run.py), the compiler's library."""
  env = tinygrad_env(plan.settings)
  if plan.settings.tinygrad.parallel is not None: env["PARALLEL"] = str(plan.settings.tinygrad.parallel)
  env.update(plan.compiler.env)
  return env


def prepare_environment(plan: DressPlan, environ: dict[str, str]) -> list[str]:
  """Export dress_env into `environ` (before tinygrad is imported); one note per value it replaced."""
  notes = []
  for k, v in dress_env(plan).items():
    if environ.get(k, v) != v: notes.append(f"note: {k}={environ[k]} in the environment; the dress sets {k}={v}")
    environ[k] = v
  return notes


def profile_file(name: str) -> Path:
  """--platform NAME: profiles/NAME/platform.yaml of this checkout, or a path to a platform file."""
  path = Path(name)
  if path.is_file(): return path
  prof = Path(__file__).resolve().parents[2] / "profiles" / name / "platform.yaml"
  if not prof.is_file():
    names = sorted(p.parent.name for p in prof.parents[1].glob("*/platform.yaml"))
    raise UserError(f"--platform {name}: no profiles/{name}/platform.yaml; use one of {', '.join(names)} or a path "
                    f"to a platform file")
  return prof


def config_depth(bert_config: str | os.PathLike) -> int:
  """num_hidden_layers of a bert_config.json (read without tinygrad)."""
  import json
  try: return int(json.loads(Path(bert_config).read_text())["num_hidden_layers"])
  except (OSError, ValueError, KeyError, TypeError) as e:
    raise UserError(f"{bert_config}: expected a BERT config JSON with num_hidden_layers ({e}); use "
                    f"resources/demo/bert_config.json (MLPerf's)") from None


def parse_pair(text: str) -> tuple[int, int]:
  try: a, b = (int(x) for x in text.split(","))
  except ValueError: raise UserError(f"--pair {text}: expected two depths A,B (e.g. 2,4)") from None
  return a, b


def dress_files(platform_file: str | os.PathLike, bert_config: str | os.PathLike, *, layers: int | None = None,
                pair: tuple[int, int] = DEFAULT_PAIR, overrides: dict[str, Any] | None = None, on_cpu: bool = False,
                json_out: str | os.PathLike | None = None, table_out: str | os.PathLike | None = None,
                log=print, timeline: bool = False) -> dict[str, Any]:
  """The whole dress of a platform file: checked, the environment exported (tinygrad must not be imported yet),
  measured, and the answer written (JSON, table), each file atomically. Returns the answer with its table (and with
  `timeline`, each step's memory plan on the device that holds most, at the deepest depth measured)."""
  import json, sys
  plan = plan_dress(platform_file, config_depth(bert_config), layers=layers, pair=pair, overrides=overrides,
                    on_cpu=on_cpu)
  if "tinygrad" in sys.modules:
    raise UserError("the dress must export its tinygrad settings before tinygrad is imported, but this process "
                    "imported it already; run python -m mlperf_bert dress")
  for note in prepare_environment(plan, os.environ): log(note)
  from mlperf_bert.fileio import atomic_path
  from mlperf_bert.train.dress_report import format_table, format_timelines
  result = run_dress(plan, bert_config, log=log)
  result["table"] = format_table(result) + ("\n" + format_timelines(result) if timeline else "")
  for out, text in ((json_out, json.dumps(result, indent=1) + "\n"), (table_out, result["table"] + "\n")):
    if out is None: continue
    with atomic_path(out) as tmp: tmp.write_text(text)
  return result


def run_dress(plan, bert_config, log=print) -> dict[str, Any]:
  """The dress of a plan (dress.plan_dress): each depth measured, the answer summarized (dress_report.summarize);
  when it does not fit, a second batch size (half, a multiple of GPUS) measured the same way for the largest BS that
  fits (memory is close to linear in BS)."""
  from mlperf_bert.train.dress_measure import measure     # imports tinygrad: after prepare_environment
  from mlperf_bert.train.dress_report import summarize
  from mlperf_bert.train.trainer import model_config

  def dress(p):
    points = []
    for d in p.depths:
      s = p.settings.replace(BERT_LAYERS=d)
      points.append(measure(s, model_config(bert_config, s.model), SEQ, PRED, log))
    return summarize(p, model_config(bert_config, p.settings.model), points, SEQ, PRED)

  result = dress(plan)
  s = plan.settings
  if result["fits"] is False:
    bs2 = max(s.gpus, s.batch_size // 2 // s.gpus * s.gpus)
    if bs2 == s.batch_size:
      result["largest_batch_size"] = 0
    else:
      keys = {"BS": bs2, **({"EVAL_BS": bs2} if s.eval.batch_size == s.batch_size else {})}
      log(f"dress: does not fit; measuring BS {bs2} for the largest BS that fits")
      second = dress(dataclasses.replace(plan, settings=s.replace(**keys)))
      result = summarize(plan, model_config(bert_config, s.model), result["measurements"], SEQ, PRED,
                         bs_points=[result, second])
      result["second_batch_size"] = {k: second[k] for k in ("batch_size", "eval_batch_size", "memory")}
  return result
