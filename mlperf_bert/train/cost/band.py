"""The predicted step band (mlperf_bert/train/cost/): resources/predicted/steps.json, as the audit reads it.

    step_band("tinybox_green", 96)   # Band(platform, global_bs, step_ms, low_ms, high_ms, source) or None

The file holds one entry per (platform, global batch): the cost model's predicted train step and the band around it
that the model cannot see inside (tools/record_step_predictions.py writes it; schemas/step-predictions.schema.yaml
is its form). The audit holds a GPU run's logged step times to the band's low edge: a run faster than it trains
faster than its hardware can (audit/times.py for a workflow tree, audit/step_band.py for a received submission).
"""
from __future__ import annotations
import dataclasses, functools, json
from pathlib import Path

from mlperf_bert.config import SCHEMAS, load_schema
from mlperf_bert.constants import REPO
from mlperf_bert.errors import UserError

PREDICTED = REPO / "resources" / "predicted" / "steps.json"
PREDICTED_SCHEMA = SCHEMAS / "step-predictions.schema.yaml"


@dataclasses.dataclass(frozen=True)
class Band:
  """One platform's predicted train step at one global batch: the prediction and its band (ms), and the file."""
  platform: str
  global_bs: int
  step_ms: float
  low_ms: float
  high_ms: float
  source: str      # the file it was read from (relative to the repository when inside it)

  def describe(self) -> str:
    """'tinybox_green at BS 96 is predicted 372 ms (band 316-446 ms, resources/predicted/steps.json)'."""
    return (f"{self.platform} at BS {self.global_bs} is predicted {self.step_ms:.0f} ms (band {self.low_ms:.0f}-"
            f"{self.high_ms:.0f} ms, {self.source})")


def _shown(path: Path) -> str:
  try: return path.resolve().relative_to(REPO).as_posix()
  except ValueError: return str(path)


def read_predictions(path: Path = PREDICTED) -> dict | None:
  """The file's content, validated (schemas/step-predictions.schema.yaml; every entry low_ms <= step_ms <= high_ms, one
  entry a platform and batch); None when there is no file. UserError (one line, naming the file) when malformed.
  Read once per version of the file (the audit asks for each segment of each log)."""
  path = Path(path)
  try: st = path.stat()
  except OSError: return None
  if not path.is_file(): return None
  return _read(str(path), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=8)
def _read(name: str, mtime_ns: int, size: int) -> dict:
  import jsonschema
  path = Path(name)
  fix = "restore it (git checkout resources/predicted) or record it again with tools/record_step_predictions.py"
  try: data = json.loads(path.read_text())
  except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
    raise UserError(f"{_shown(path)}: not readable as JSON ({e}); {fix}") from None
  validator = jsonschema.Draft202012Validator(load_schema(PREDICTED_SCHEMA))
  err = jsonschema.exceptions.best_match(validator.iter_errors(data))
  if err is not None:
    where = "/".join(map(str, err.absolute_path)) or "the top level"
    raise UserError(f"{_shown(path)}: not a step-predictions file ({PREDICTED_SCHEMA.name}) at {where}: "
                    f"{err.message}; {fix}")
  seen = set()
  for i, p in enumerate(data["predictions"]):
    if not p["low_ms"] <= p["step_ms"] <= p["high_ms"]:
      raise UserError(f"{_shown(path)}: predictions/{i} ({p['platform']} at BS {p['global_bs']}): its band "
                      f"{p['low_ms']}-{p['high_ms']} ms does not hold its step {p['step_ms']} ms; {fix}")
    if (p["platform"], p["global_bs"]) in seen:
      raise UserError(f"{_shown(path)}: predictions/{i}: a second entry for {p['platform']} at BS {p['global_bs']}; "
                      f"{fix}")
    seen.add((p["platform"], p["global_bs"]))
  return data


def step_band(platform: str, global_bs: int, path: Path = PREDICTED) -> Band | None:
  """The predicted step of `platform` at global batch `global_bs`, or None (no such entry, or no file)."""
  data = read_predictions(path)
  if data is None: return None
  for p in data["predictions"]:
    if p["platform"] == platform and p["global_bs"] == global_bs:
      return Band(platform, int(global_bs), float(p["step_ms"]), float(p["low_ms"]), float(p["high_ms"]),
                  _shown(Path(path)))
  return None
