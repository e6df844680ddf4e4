"""The time rows of the segment evidence (audit/segments.py): each segment's logged time against what its machine can
physically do.

    check_times(audit, base, segments, this_machine())

Floors of a segment of n steps (its logged time: run_start, or the eval_stop of the kept state it starts from, to the
eval_start of its last step):
  - roofline: n x a step's matmul FLOPs (train/dress/report.py step_flops, of the record's model, batch, sequence and
    predictions) at the devices' published dense fp16 peak (the card of the GPU target the train record names);
  - the predicted band (GPU devices, the platform claims.py confirmed: the record's GPU target, device kind and count
    those of the platform file): n x the low edge of the step the cost model predicts for the platform at the
    record's BS (resources/predicted/steps.json, train/cost/band.py); no prediction: the roofline alone;
  - CPU devices: the CPU seconds of its steps over the run machine's cores. They are what the train process recorded
    for the steps before each kept state; on a machine of the run's kind they are checked against the least CPU
    seconds a step took re-executed here (over TIME_BAND: a record claiming fewer FAILs). Runs of one tree logged on
    one host share its cores: every window [a segment's start, a segment's end] of their logged times must last at
    least the CPU seconds of the segments inside it over the cores.
A window shorter than its floor FAILs (the log trains faster than its hardware can: it is not a run's); the rows say
what was taken on trust where no floor applies or the recorded CPU seconds could not be checked. Each bound is a
function of BOUNDS giving Observations (a floor, and a ceiling where the bound has one).
"""
from __future__ import annotations
import dataclasses, json
from pathlib import Path
from types import SimpleNamespace

from mlperf_bert.audit.rows import RETRAIN, Audit
from mlperf_bert.machine import describe_machine, device_kind, same_kind
from mlperf_bert.train.cost.band import PREDICTED, Band, step_band

TIME = "time"
FASTER = "the log trains faster than its hardware can"
TIME_BAND = 1.25  # the least CPU seconds of a step re-executed here over the run's, at most (measured: docs/audit.md)


def roofline_step_s(seg) -> tuple[float, str] | None:
  """(seconds, card name) of one train step at the card's peak, or None (no known card, no model on record)."""
  from mlperf_bert.data.shards import Shard
  from mlperf_bert.errors import UserError
  from mlperf_bert.train.dress.report import CARDS, step_flops
  card = CARDS.get(str(seg.machine.get("gpu_target")))
  if card is None: return None
  hp = seg.settings
  try:
    rec = json.loads(seg.record.read_text())
    cfg = json.loads((seg.record.parent / rec["bert_config"]["path"]).read_text())
    with Shard(seg.record.parent / rec["eval_set"]["path"], check=False) as sh:
      seq, pred = sh.max_seq_length, sh.max_predictions_per_seq
    m = SimpleNamespace(hidden_size=int(hp.get("BERT_HIDDEN_SIZE") or cfg["hidden_size"]),
                        intermediate_size=int(hp.get("BERT_INTERMEDIATE_SIZE") or cfg["intermediate_size"]),
                        num_hidden_layers=int(hp.get("BERT_LAYERS") or cfg["num_hidden_layers"]),
                        vocab_size=int(cfg["vocab_size"]))
    flops = step_flops(m, int(hp["BS"]), seq, pred)
  except (OSError, KeyError, TypeError, ValueError, UserError):
    return None
  return flops / (int(hp.get("GPUS", 1)) * card.tflops * 1e12), card.name


def windows(items: list[tuple[float, float, float, object]]) -> list[tuple[float, float, float, list]]:
  """Every window [an item's start, an item's end] with the items inside it: (start ms, end ms, floor s, items)."""
  out = []
  for a in sorted({i[0] for i in items}):
    for b in sorted({i[1] for i in items}):
      if b <= a: continue
      inside = [i for i in items if i[0] >= a and i[1] <= b]
      if inside: out.append((a, b, sum(i[2] for i in inside), inside))
  return out


def _steps(segs) -> str:
  return ", ".join(f"{Path(s.rel).name} steps {s.start}-{s.end}" for s in segs)


def cpu_floors(audit: Audit, segments: list, here: dict, fails: dict[str, str]) -> dict[int, float]:
  """{id(segment): the least CPU seconds its steps took} of the segments on CPU devices: what the train process
  recorded, checked (on a machine of the run's kind) against the least a step took re-executed here over TIME_BAND;
  a record claiming fewer FAILs (into `fails`)."""
  least: dict[str, float] = {}
  for s in segments:
    if s.cpu_step: least[s.shape] = min(least.get(s.shape, s.cpu_step), s.cpu_step)
  out = {}
  for s in segments:
    if device_kind(s.settings.get("DEV")) != "CPU": continue
    here_step = least.get(s.shape) if same_kind(here, s.machine) else None
    need = s.steps * here_step / TIME_BAND if here_step else 0.0
    got = s.steps * s.cpu_recorded if s.cpu_recorded is not None else None
    if got is not None and got < need:
      fails.setdefault(s.rel, f"steps {s.start}-{s.end}: the train record says they took {got:.1f} CPU s "
                       f"({s.cpu_recorded:.3f} a step); re-executed on this machine, of the run's kind, a step takes "
                       f"at least {here_step:.3f} CPU s, so {s.steps} steps no less than {need:.1f} (over TIME_BAND "
                       f"{TIME_BAND:g}): {FASTER}")
    if max(got or 0.0, need) > 0: out[id(s)] = max(got or 0.0, need)
  return out


@dataclasses.dataclass
class Observation:
  """One window of logged time held to a bound: the logs it concerns, its logged seconds, the least its hardware
  needs (`floor`), and the most a bound allows (`ceiling`: None for a floor alone), with what the bound is."""
  rels: set[str]
  have: float
  floor: float
  what: str
  ceiling: float | None = None


def roofline_bound(segments: list, cpu: dict[int, float], predicted: Path) -> list[Observation]:
  """Each segment alone: its steps' matmul FLOPs at its GPU card's published peak (roofline_step_s)."""
  out = []
  for s in segments:
    roof = roofline_step_s(s)
    if roof is None or s.claimed is None: continue
    have, floor = (s.claimed[1] - s.claimed[0]) / 1000, s.steps * roof[0]
    out.append(Observation({s.rel}, have, floor, f"steps {s.start}-{s.end} logged in {have:.1f} s; at {roof[1]}'s "
                           f"published peak ({s.settings.get('GPUS')} of them) those {s.steps} steps' matmuls alone "
                           f"take {floor:.1f} s (the roofline)"))
  return out


def cpu_bound(segments: list, cpu: dict[int, float], predicted: Path) -> list[Observation]:
  """The runs of one host on CPU devices: every window of their logged times holds the CPU seconds of the segments
  inside it over the host's cores (`cpu`: cpu_floors')."""
  hosts: dict[str, list] = {}
  for s in segments:
    if s.claimed and id(s) in cpu:
      hosts.setdefault(f"{s.machine.get('host')}|{s.machine.get('cpu')}|{s.machine.get('cores')}", []).append(s)
  out = []
  for segs in hosts.values():  # the cores of one host, shared by the runs logged at the same time on it
    cores = int(segs[0].machine.get("cores") or 1)
    for a, b, floor, inside in windows([(s.claimed[0], s.claimed[1], cpu[id(s)] / cores, s) for s in segs]):
      ss, have = [i[3] for i in inside], (b - a) / 1000
      out.append(Observation({s.rel for s in ss}, have, floor,
                             f"{_steps(ss)} logged in {have:.1f} s on {segs[0].machine.get('host')}: their steps take "
                             f"{floor * cores:.1f} CPU s, which {cores} cores give in no less than {floor:.1f} s"))
  return out


def segment_band(s, predicted: Path) -> Band | str:
  """The predicted band of a GPU segment's step (its confirmed platform at its BS), or why it has none ('' for a
  segment on CPU devices)."""
  if device_kind(s.settings.get("DEV")) in ("CPU", ""): return ""
  if not getattr(s, "platform", None):
    return "its platform is not confirmed (the claims row: no config, or the record's GPU and the platform file differ)"
  try: bs = int(s.settings.get("BS"))
  except (TypeError, ValueError): return f"its BS {s.settings.get('BS')!r} is no batch"
  return step_band(s.platform, bs, predicted) or f"{predicted.name} holds no prediction for {s.platform} at BS {bs}"


def predicted_bound(segments: list, cpu: dict[int, float], predicted: Path) -> list[Observation]:
  """Each GPU segment alone: its steps at the low edge of the band predicted for its platform and BS (segment_band).
  The band's high edge is no ceiling: a run slower than predicted is slow, not forged."""
  out = []
  for s in segments:
    band = segment_band(s, predicted)
    if not isinstance(band, Band) or s.claimed is None or s.steps <= 0: continue
    have, floor = (s.claimed[1] - s.claimed[0]) / 1000, s.steps * band.low_ms / 1000
    out.append(Observation({s.rel}, have, floor, f"steps {s.start}-{s.end} logged in {have:.1f} s, {1000 * have / s.steps:.1f} "
                           f"ms a step; {band.describe()}, so those {s.steps} steps no less than {floor:.1f} s"))
  return out


# The bounds every segment's logged time is held to, each a function (segments, their CPU floors, the predicted
# steps file) -> observations. A bound with a ceiling gives `ceiling`: check_times judges floors and ceilings alike.
BOUNDS = (roofline_bound, predicted_bound, cpu_bound)


def _gpu_trust(s, predicted: Path) -> str:
  """What the time row of a GPU log says of the bounds above its floor: the band's low edge, or the roofline only."""
  band = segment_band(s, predicted)
  if isinstance(band, Band):
    return f"; held to the low edge of its predicted band ({band.describe()}), above it its step time is taken on trust"
  return f"; {band}: its step is held to the roofline only, and above the roofline its step time is taken on trust"


def check_times(audit: Audit, base: Path, segments: list, here: dict, predicted: Path = PREDICTED) -> None:
  """The time rows, one per log (see the module doc); `predicted`: the cost model's step predictions."""
  by_log: dict[str, list] = {}
  for s in segments: by_log.setdefault(s.rel, []).append(s)
  worst: dict[str, tuple[float, str]] = {}   # log -> (logged / floor, what) of the tightest window it is in
  fails: dict[str, str] = {}
  cpu = cpu_floors(audit, segments, here, fails)
  for bound in BOUNDS:
    for o in bound(segments, cpu, predicted):
      for rel in o.rels:
        if o.have < o.floor: fails.setdefault(rel, f"{o.what}: {FASTER}")
        elif o.ceiling is not None and o.have > o.ceiling: fails.setdefault(rel, f"{o.what}: above its ceiling")
        elif rel not in worst or o.have / o.floor < worst[rel][0]: worst[rel] = (o.have / o.floor, o.what)
  for rel, segs in by_log.items():
    if rel in fails:
      audit.add("FAIL", TIME, rel, f"{fails[rel]}; {RETRAIN}"); continue
    m, cpu_run = segs[0].machine, device_kind(segs[0].settings.get("DEV")) == "CPU"
    checked = cpu_run and same_kind(here, m) and any(s.cpu_step for s in segments if s.shape == segs[0].shape)
    trust = "" if checked else (f"; the CPU seconds it recorded are taken on trust ({describe_machine(m)} is not of this "
                                f"machine's kind, or none of its steps was re-executed here)" if cpu_run else
                                _gpu_trust(segs[0], predicted))
    if rel in worst:
      audit.add("PASS", TIME, rel, f"every window of its logged times holds its floor; the tightest: {worst[rel][1]}"
                f"{trust}")
    elif any(s.claimed is None for s in segs):
      audit.add("WARN", TIME, rel, "the log's evals carry no step_num: the segments' times were not checked")
    else:
      audit.add("WARN", TIME, rel, f"time taken on trust: no floor bounds its steps' time (no CPU seconds on record, "
                f"no GPU card with published peaks for {m.get('gpu_target')!r})")
