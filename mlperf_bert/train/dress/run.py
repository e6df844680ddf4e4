"""The whole dress of a platform file: set up (setup.py), the environment exported, each depth measured (measure.py),
the answer summarized (report.py) and written.

    result = dress_files(platform_file, bert_config, layers=None, overrides={"BS": 72}, json_out="green72.json")
    result = run_dress(setup, bert_config)      # in a process that exported the setup's environment

Only run_dress imports tinygrad (through measure.py), after dress_files exported the setup's tinygrad settings.
"""
from __future__ import annotations
import dataclasses, json, os, sys
from typing import Any, MutableMapping

from mlperf_bert.errors import UserError
from mlperf_bert.train.dress.bounds import check_dress_bounds
from mlperf_bert.train.dress.setup import DEFAULT_PAIR, PRED, SEQ, DressSetup, config_depth, set_up_dress
from mlperf_bert.train.environment import export_tinygrad_env


def export_environment(setup: DressSetup, environ: MutableMapping[str, str]) -> list[str]:
  """Export the dress's tinygrad environment into `environ` (before tinygrad is imported): the setup's settings
  (DEV=NULL:<target>, BEAM 0), PARALLEL as the RUN phase sets it, the compiler's library; one note per value replaced."""
  return export_tinygrad_env(setup.settings, environ, setter="the dress", parallel=True, libraries=setup.compiler.env)


def dress_files(platform_file: str | os.PathLike, bert_config: str | os.PathLike, *, layers: int | None = None,
                pair: tuple[int, int] = DEFAULT_PAIR, overrides: dict[str, Any] | None = None, on_cpu: bool = False,
                json_out: str | os.PathLike | None = None, table_out: str | os.PathLike | None = None,
                log=print, timeline: bool = False, picture_out: str | os.PathLike | None = None) -> dict[str, Any]:
  """The whole dress of a platform file: checked, the environment exported (tinygrad must not be imported yet),
  measured, and the answer written (JSON, table, and with `picture_out` the step's queues as an SVG), each file
  atomically. Returns the answer with its table (and with `timeline`, each step's memory plan on the device that
  holds most, at the deepest depth measured). Where the answer predicts a step (answer["cost"]["step"]), the time to
  train and the INIT phase are added (train/cost/answer.py)."""
  setup = set_up_dress(platform_file, config_depth(bert_config), layers=layers, pair=pair, overrides=overrides,
                    on_cpu=on_cpu)
  # a setting that cannot fit by far, or cannot be launched, is refused here in seconds (bounds.py), not after minutes
  check_bounds(setup, bert_config)
  if "tinygrad" in sys.modules:
    raise UserError("the dress must export its tinygrad settings before tinygrad is imported, but this process "
                    "imported it already; run python -m mlperf_bert dress")
  for note in export_environment(setup, os.environ): log(note)
  from mlperf_bert.fileio import atomic_path
  from mlperf_bert.train.dress.report import format_table, format_timelines
  from mlperf_bert.train.footprint import dress_footprint  # the disk a run takes (its own module)
  from mlperf_bert.train.cost.answer import cost_lines
  result = run_dress(setup, bert_config, log=log)
  add_costs(result, setup, platform_file, overrides)
  result["footprint"] = dress_footprint(setup.settings.replace(BERT_LAYERS=setup.full_depth), bert_config)
  result["table"] = "\n".join([format_table(result), *cost_lines(result), *result["footprint"]["lines"]]) + \
    ("\n" + format_timelines(result) if timeline else "")
  for out, text in ((json_out, json.dumps(result, indent=1) + "\n"), (table_out, result["table"] + "\n")):
    if out is None: continue
    with atomic_path(out) as tmp: tmp.write_text(text)
  if picture_out is not None:
    from mlperf_bert.train.cost.picture import write_picture
    write_picture(picture_out, result)
  return result


def check_bounds(setup: DressSetup, bert_config: str | os.PathLike) -> None:
  """A setting that cannot fit by far, or cannot be launched, refused in one line and in seconds (bounds.py), before
  any capture."""
  check_dress_bounds(setup.settings, bert_config, setup.target, where=f"{setup.platform} on {setup.target}",
                     layers=setup.full_depth if len(setup.depths) > 1 else setup.depths[0])


def add_costs(result: dict[str, Any], setup: DressSetup, platform_file: str | os.PathLike,
              overrides: dict[str, Any] | None) -> None:
  """The time to train and the INIT phase (priced from the BEAM searches of the platform's settings) added to a
  dressed answer that predicts a step (train/cost/answer.py)."""
  from mlperf_bert.train.cost.answer import add_time_to_train
  from mlperf_bert.train.cost.init import beam_settings
  from mlperf_bert.train.hparams import load_platform
  # the dress compiles with BEAM 0 (setup.settings): the INIT phase is priced at the platform's own BEAM settings
  plat = {**load_platform(platform_file), **(overrides or {})}
  add_time_to_train(result, eval_step_freq=setup.settings.eval.step_freq, beam=beam_settings(plat),
                    init_layers=setup.settings.init.bert_layers, division=setup.settings.submission.division)


def run_dress(setup: DressSetup, bert_config, log=print, second_batch: bool = True) -> dict[str, Any]:
  """The dress of a setup (set_up_dress): each depth measured, the answer summarized (report.summarize), its step
  predicted (cost/predict.py: answer["cost"]);
  when it does not fit (and `second_batch`), a second batch size (half, a multiple of GPUS) measured the same way for
  the largest BS that fits (memory is close to linear in BS)."""
  from mlperf_bert.train.dress.measure import measure     # imports tinygrad: after the export
  from mlperf_bert.train.dress.report import summarize
  from mlperf_bert.train.cost.predict import predict_cost
  from mlperf_bert.train.trainer import model_config

  def dress(p):
    points = []
    for d in p.depths:
      s = p.settings.replace(BERT_LAYERS=d)
      points.append(measure(s, model_config(bert_config, s.model), SEQ, PRED, log))
    return summarize(p, model_config(bert_config, p.settings.model), points, SEQ, PRED)

  result = dress(setup)
  s = setup.settings
  if result["fits"] is False and second_batch:
    bs2 = max(s.gpus, s.batch_size // 2 // s.gpus * s.gpus)
    if bs2 == s.batch_size:
      result["largest_batch_size"] = 0
    else:
      keys = {"BS": bs2, **({"EVAL_BS": bs2} if s.eval.batch_size == s.batch_size else {})}
      log(f"dress: does not fit; measuring BS {bs2} for the largest BS that fits")
      second = dress(dataclasses.replace(setup, settings=s.replace(**keys)))
      result = summarize(setup, model_config(bert_config, s.model), result["measurements"], SEQ, PRED,
                         bs_points=[result, second])
      result["second_batch_size"] = {k: second[k] for k in ("batch_size", "eval_batch_size", "memory")}
  result["cost"] = predict_cost(result)
  return result
