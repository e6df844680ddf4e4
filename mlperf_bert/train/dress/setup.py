"""The dress's setup: every input a dress needs checked, and its settings resolved, before tinygrad is imported.

    setup = set_up_dress(platform_file, config_depth(bert_config), layers=None, overrides={"BS": 72})

The platform's DRESS_TARGET and its compiler (compilers.py), the depths measured (2 and 4 extrapolated to the
config's, or one), the settings: the platform's, DEV=NULL:<target>, BEAM 0 (a kernel "runs" in a fixed 1 ms on
NULL, so a search means nothing). Nothing here imports tinygrad.
"""
from __future__ import annotations
import dataclasses, json, os
from pathlib import Path
from typing import Any

from mlperf_bert.constants import PLATFORM_FILE, PLATFORMS_DIR, platform_path
from mlperf_bert.errors import UserError
from mlperf_bert.train.dress.compilers import Compiler, find_compiler, parse_target
from mlperf_bert.train.hparams import load_platform, resolve
from mlperf_bert.train.settings import Settings

DEFAULT_BERT_CONFIG = Path(__file__).resolve().parents[3] / "resources" / "demo" / "bert_config.json"  # MLPerf's
SEQ, PRED = 512, 76                       # MLPerf BERT's max_seq_length and max_predictions_per_seq
DEFAULT_PAIR = (2, 4)                     # the default dress measures these depths and extrapolates linearly


@dataclasses.dataclass(frozen=True)
class DressSetup:
  platform: str
  target: str                       # CUDA:sm_89
  settings: Settings                # resolved, DEV=NULL:<target>, BEAM 0, the model depth of the first measurement
  depths: tuple[int, ...]           # the depths measured: (2, 4), or one
  full_depth: int                   # the config's num_hidden_layers (what the figures are extrapolated to)
  compiler: Compiler
  notes: tuple[str, ...]


def parse_layers(text: str | None) -> int | None:
  """--layers: None (the default pair), 0 for `full`, or a depth >= 1."""
  if text is None: return None
  if str(text).lower() == "full": return 0
  try: n = int(text)
  except ValueError: n = -1
  if n < 1: raise UserError(f"--layers {text}: expected a number of layers of at least 1 or `full`")
  return n


def set_up_dress(platform_file: str | os.PathLike, bert_layers: int, *, layers: int | None = None,
               pair: tuple[int, int] = DEFAULT_PAIR, overrides: dict[str, Any] | None = None,
               environ: dict[str, str] | None = None, on_cpu: bool = False) -> DressSetup:
  """Validate everything a dress needs (before tinygrad is imported): the platform's DRESS_TARGET, its compiler, the
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
  return DressSetup(path.parent.name, target, s, tuple(depths), bert_layers, compiler, tuple(notes))


def find_platform_file(name: str) -> Path:
  """--platform NAME: platforms/NAME/platform.yaml of this checkout, or a path to a platform file."""
  path = Path(name)
  if path.is_file(): return path
  repo = Path(__file__).resolve().parents[3]
  found = platform_path(repo, name)
  if not found.is_file():
    names = sorted(p.parent.name for p in (repo / PLATFORMS_DIR).glob(f"*/{PLATFORM_FILE}"))
    raise UserError(f"--platform {name}: no {PLATFORMS_DIR}/{name}/{PLATFORM_FILE}; use one of {', '.join(names)} "
                    f"or a path to a platform file")
  return found


def config_depth(bert_config: str | os.PathLike) -> int:
  """num_hidden_layers of a bert_config.json (read without tinygrad)."""
  try: return int(json.loads(Path(bert_config).read_text())["num_hidden_layers"])
  except (OSError, ValueError, KeyError, TypeError) as e:
    raise UserError(f"{bert_config}: expected a BERT config JSON with num_hidden_layers ({e}); use "
                    f"resources/demo/bert_config.json (MLPerf's)") from None


def parse_pair(text: str) -> tuple[int, int]:
  try: a, b = (int(x) for x in text.split(","))
  except ValueError: raise UserError(f"--pair {text}: expected two depths A,B (e.g. 2,4)") from None
  return a, b
