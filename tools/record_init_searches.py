#!/usr/bin/env python3
"""The INIT phase predicted from its BEAM searches (mlperf_bert/train/cost/init.py) for tinygrad's own BERT step (a
checkout's examples/mlperf, e.g. e0139fa) and this project's, at the platform's INIT depth (INIT_BERT_LAYERS), against
tinycorp's v5.0 INIT phases (resources/published/tinycorp-v5.0-overheads.json; compared, never used).

    git -C <mirror of github:tinygrad/tinygrad> archive e0139fafc15d9dd945eb7b6b7d97e43ca6e2f178 examples extra | tar -x -C /tmp/tg
    python tools/record_init_searches.py /tmp/tg --commit e0139fafc15d9dd945eb7b6b7d97e43ca6e2f178 \\
        --platform tinybox_green --set BS=96 EVAL_BS=96 --out resources/predicted/init-e0139fa-tinybox_green.json

Both steps are captured as tools/program_census.py captures them (tinygrad 0.14, the platform's NULL target) with
their call records; the record keeps each side's distinct programs (kind, name, devices, FLOPs, bytes, launch), the CPU
seconds the capture took on this machine (the INIT process outside the searches) and the prediction: tinygrad's step
with its searches keyed as its own tinygrad (0.11.0 at e0139fa) keys them and as 0.14 does, this project's as 0.14.
"""
from __future__ import annotations
import argparse, dataclasses, json, resource, sys, time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


sys.path.insert(0, str(REPO / "tools"))
from predict_tinygrad_step import _census  # noqa: E402  (tools/program_census.py, loaded from its file)


def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("checkout", type=Path, help="a tinygrad work tree (git archive of the commit); its examples/ and extra/")
  ap.add_argument("--commit", required=True)
  ap.add_argument("--commit-tinygrad", default="0.11.0", help="the tinygrad version of the commit (e0139fa: 0.11.0)")
  ap.add_argument("--platform", default="tinybox_green")
  ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE")
  ap.add_argument("--samples", type=Path, help="the BEAM sample record to price with (default: the target's in "
                  "resources/beam-samples/; another round's settings: tools/record_beam_samples.py --set ...)")
  ap.add_argument("--round", default="5.0", help="the MLPerf round whose tinycorp INIT median the record is held "
                  "against (resources/published/tinycorp-runs.json; default 5.0)")
  ap.add_argument("--tinygrad-only", action="store_true", help="price tinygrad's step alone (another round's code)")
  ap.add_argument("--out", type=Path, required=True)
  ap.add_argument("--reprice", action="store_true",
                  help="only price the programs of the record at --out again (after new beam samples) and rewrite it")
  a = ap.parse_args()
  sys.path.insert(0, str(REPO))
  if a.reprice: return _write(a.out, reprice(json.loads(a.out.read_text())))
  from mlperf_bert.train.cost.init import beam_settings, predict_init, programs_from_calls
  from mlperf_bert.train.hparams import load_platform
  census = _census()
  plat = {**load_platform(REPO / "platforms" / a.platform / "platform.yaml"), **dict(x.split("=", 1) for x in a.set)}
  layers = int(plat.get("INIT_BERT_LAYERS", 2))
  setup = census._setup(a.platform, layers, a.set)
  beam = beam_settings(plat)
  sides = {}
  for side in ("tinygrad",) if a.tinygrad_only else ("tinygrad", "project"):
    r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
    got = census.run_side(a.checkout, f"{side}-calls", a.platform, layers, a.set)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = round(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime, 1)
    calls = got["calls"]
    versions = (a.commit_tinygrad, "0.14.0") if side == "tinygrad" else ("0.14.0",)
    sides[side] = {"capture_cpu_s": cpu, "wall_s": round(time.monotonic() - t0, 1),
                   "programs": {st: [dataclasses.astuple(p) for p in programs_from_calls(calls[st])] for st in ("train", "eval")},
                   "init": {v: predict_init(calls["train"], calls["eval"], setup.target, beam, outside_s=cpu, tinygrad=v,
                                            samples=a.samples) for v in versions}}
  measured = measured_init_min(a.platform, a.round)
  from importlib.metadata import version
  rec = {"schema": "mlperf-bert/init-searches/1", "recorded_by": "tools/record_init_searches.py", "tinygrad_commit": a.commit,
         "tinygrad_version": version("tinygrad"), "platform": a.platform, "target": setup.target, "layers": layers,
         "settings": census._settings(setup.settings), "beam": dataclasses.asdict(beam), "date": time.strftime("%Y-%m-%d"),
         "round": a.round, "samples": str(a.samples) if a.samples else None, "measured_init_min": measured,
         "sides": sides}
  return _write(a.out, rec)


def measured_init_min(platform: str, rnd: str) -> float | None:
  """tinycorp's median INIT phase (min) of `platform` in round `rnd` (resources/published/tinycorp-runs.json)."""
  import statistics
  from mlperf_bert.audit.published_runs import read_runs
  rec = read_runs().get("platforms", {}).get(platform, {})
  v = [r["init_s"] for r in rec.get("runs", []) if r["round"] == rnd and r.get("init_s")]
  return round(statistics.median(v) / 60, 1) if v else None


def calls_of(programs: list[list]) -> list[dict]:
  """Call records (train/dress/measure.py) of a record's programs (init.Program as a tuple)."""
  return [{"k": "kernel", "name": p[1], "devices": p[2], "flops": p[3], "bytes": p[4], "global": p[5], "local": p[6],
           "tc": p[7], "ast": p[8], "ast_any_device": p[9]} for p in programs]


def reprice(rec: dict) -> dict:
  """The record's programs priced again by init.predict_init (the beam samples as they are now)."""
  from mlperf_bert.train.cost.init import BeamSettings, predict_init
  beam = BeamSettings(rec["beam"]["width"], rec["beam"]["min_progress_us"])
  for side in rec["sides"].values():
    side["init"] = {v: predict_init(calls_of(side["programs"]["train"]), calls_of(side["programs"]["eval"]), rec["target"],
                                    beam, outside_s=side["capture_cpu_s"], tinygrad=v,
                                    samples=Path(rec["samples"]) if rec.get("samples") else None) for v in side["init"]}
  return rec


def _write(out: Path, rec: dict) -> int:
  out.parent.mkdir(parents=True, exist_ok=True)
  from mlperf_bert.fileio import atomic_path  # a killed run leaves no half-written record
  with atomic_path(out) as tmp: tmp.write_text(json.dumps(rec, indent=1) + "\n")
  a = argparse.Namespace(platform=rec["platform"])
  sides = rec["sides"]
  for side, v in sides.items():
    for ver, i in v["init"].items():
      m = rec["measured_init_min"]
      print(f"{a.platform} {side} (searches keyed as tinygrad {ver}): {i['minutes']} min ({i['low_minutes']}-"
            f"{i['high_minutes']}), {i['searches']} searches {i['searches_by_kind']}, by kind {i['by_kind_min']}"
            + (f"; v{rec.get('round', '5.0')} median {m} min ({100 * (i['minutes'] / m - 1):+.1f} %)" if m and side == "tinygrad" else ""),
            file=sys.stderr)
  return 0


if __name__ == "__main__":
  sys.exit(main())
