"""The train wing's subcommands: convert-checkpoint, train, dress."""
from __future__ import annotations
import argparse, json, os, sys

from mlperf_bert.errors import UserError
from mlperf_bert.cli.common import _log, _parse_set, _space_flag


# ---------------------------------------------------------------------------------------------------- train

def _cmd_convert(a) -> int:
  from mlperf_bert.train.init_weights import convert_tf_checkpoint
  stats = convert_tf_checkpoint(a.checkpoint, a.bert_config, a.output, log=_log, space_check=not a.no_space_check)
  print(json.dumps(stats, indent=1))
  return 0


def _cmd_train(a) -> int:
  if a.benchmark and a.phase != "all":
    raise UserError(f"--benchmark with --phase {a.phase}: a benchmark has no INIT or RUN phase; drop one of them")
  # the platform's tinygrad settings (DEV, BEAM, DEFAULT_FLOAT, ...) go into the environment before tinygrad is
  # imported, which reads them at import; nothing above this line imports it
  from mlperf_bert.train.environment import export_tinygrad_env
  from mlperf_bert.train.phases import command_settings
  settings = command_settings(a.platform_file, _parse_set(a.set) if a.set is not None else None, a.seed, a.eval,
                              settings_file=a.settings)
  if "tinygrad" in sys.modules:  # called in a process that already imported it (main() from Python code)
    _log("note: tinygrad was imported before this command; the platform's tinygrad settings cannot be applied "
         "(run python -m mlperf_bert train)")
  else:
    for note in export_tinygrad_env(settings, os.environ): _log(note)
  from mlperf_bert.data.loader import list_shards
  from mlperf_bert.train.inputs import RunInputs
  from mlperf_bert.train.run import TrainRun
  inputs = RunInputs.of(shards=list_shards(a.shards), eval_set=a.eval, bert_config=a.bert_config, log=a.out,
                        work_log=a.work_log, ckpt_dir=a.ckpt_dir, max_seq_length=a.max_seq_length,
                        max_predictions_per_seq=a.max_predictions_per_seq, init_weights=a.init_weights,
                        space_check=not a.no_space_check)
  # which process wrote which phase (the train rule runs INIT and RUN as two processes: INIT_PROCESS separate)
  _log(f"train: phase {a.phase} in process {os.getpid()}")
  run = TrainRun(settings, inputs)
  res = run.benchmark(a.benchmark) if a.benchmark else run.run(stop_after=a.stop_after, phase=a.phase)
  if a.benchmark:
    print(json.dumps(res, indent=1))
  elif res.status == "init":
    print(f"INIT phase done (process {os.getpid()}); the RUN phase follows: --phase run with the same arguments")
  else:
    print(res.summary())
  return 0


def _add_train(sub) -> None:
  p = sub.add_parser("convert-checkpoint", help="convert MLPerf's TF BERT checkpoint to safetensors",
                     description="Convert MLPerf's TF BERT checkpoint (model.ckpt-28252) to a safetensors file of "
                                 "this project's parameter names; optimizer slots are skipped.")
  p.add_argument("--checkpoint", required=True, help="checkpoint prefix, e.g. download/model.ckpt-28252")
  p.add_argument("--bert-config", required=True, help="bert_config.json of the checkpoint")
  p.add_argument("--output", required=True, help="safetensors file to write")
  _space_flag(p)
  p.set_defaults(func=_cmd_convert)

  p = sub.add_parser("train", help="train BERT with tinygrad and write an MLPerf result log",
                     description="Train BERT with tinygrad and write an MLPerf result log. The platform file's "
                                 "tinygrad settings (DEV, BEAM, DEFAULT_FLOAT, USE_ATOMICS, ...) and those of --set "
                                 "are exported before tinygrad is imported; they win over the same variables in "
                                 "the environment (a note says so).")
  p.add_argument("--platform-file", help="platforms/<name>/platform.yaml (or --settings)")
  p.add_argument("--settings", metavar="FILE", help="resolved settings as JSON (a file, or - for standard input, as "
                 "the train rule's job hands them to its INIT and RUN processes): used as they are, never resolved "
                 "again, so --platform-file, --set and --seed are refused with it")
  p.add_argument("--set", nargs="*", metavar="KEY=VALUE", help="override platform keys (YAML values)")
  p.add_argument("--shards", required=True, nargs="+", help="training shards: *.shard files or directories of them")
  p.add_argument("--eval", required=True, help="the eval set shard")
  p.add_argument("--bert-config", required=True, help="bert_config.json")
  p.add_argument("--init-weights", help="initial weights (MLPerf's TF checkpoint, converted: safetensors); "
                 "default: seeded random init")
  p.add_argument("--max-seq-length", type=int, required=True)
  p.add_argument("--max-predictions-per-seq", type=int, required=True)
  p.add_argument("--seed", type=int, help="with --platform-file (default 0)")
  p.add_argument("--out", required=True, help="the result log to write (result_bert_<seed>.log)")
  p.add_argument("--ckpt-dir", required=True, help="where resume checkpoints go")
  p.add_argument("--benchmark", type=int, default=int(os.environ.get("BENCHMARK", 0) or 0),
                 help="run N steps and print the estimated training time (default: $BENCHMARK)")
  p.add_argument("--stop-after", type=int, help="stop (resumably) after N steps of this process")
  p.add_argument("--phase", choices=["all", "init", "run"], default="all",
                 help="all: INIT then RUN in this process; init: the INIT phase alone (a new work log ending with "
                      "init_stop); run: the RUN phase alone, appended to that work log (tinygrad's run_and_time.sh "
                      "runs them as two processes)")
  p.add_argument("--work-log", help="the MLPerf log while the run is unfinished (default: <out>.partial)")
  _space_flag(p)
  p.set_defaults(func=_cmd_train)


def _cmd_dress(a) -> int:
  # the dress's tinygrad settings (DEV=NULL:<target>, BEAM 0, PARALLEL, the compiler's library) go into the
  # environment before tinygrad is imported: every input is checked first, and nothing is written on a bad one
  from mlperf_bert.train import dress
  if a.sweep is not None: return _cmd_sweep(a)
  result = dress.dress_files(dress.find_platform_file(a.platform), a.bert_config or dress.DEFAULT_BERT_CONFIG,
                             layers=dress.parse_layers(a.layers), pair=dress.parse_pair(a.pair),
                             overrides=_parse_set(a.set), on_cpu=a.cpu, json_out=a.json, log=_log,
                             timeline=a.timeline, picture_out=a.picture)
  print(result["table"])
  if result["fits"] is False:
    _log(f"error: {result['platform']} at BS {result['batch_size']} does not fit in {result['card']['name']}'s memory "
         f"(peak {max(result['memory']['peak'].values()) / 1e9:.2f} GB a device, usable "
         f"{result['card']['usable'] / 1e9:.2f} GB); the largest BS that fits is {result.get('largest_batch_size')}: "
         f"--set BS=<that>")
    return 1
  return 0


def _cmd_sweep(a) -> int:
  """dress --sweep: the batch planner (train/dress/sweep.py); 1 when no setting of the grid fits."""
  from mlperf_bert.train import dress
  from mlperf_bert.train.dress.sweep import parse_sweep, sweep_files
  if a.timeline: raise UserError("--timeline with --sweep: the planner prints one row a setting; dress one setting "
                                 "with --set and --timeline to see where its memory goes")
  ans = sweep_files(dress.find_platform_file(a.platform), a.bert_config or dress.DEFAULT_BERT_CONFIG,
                    parse_sweep(a.sweep), overrides=_parse_set(a.set), layers=dress.parse_layers(a.layers),
                    pair=dress.parse_pair(a.pair), on_cpu=a.cpu, json_out=a.json, picture_out=a.picture, log=_log)
  print(ans["table"])
  if not any(r["fits"] for r in ans["rows"]) and any(r["fits"] is False for r in ans["rows"]):
    _log(f"error: no setting of the sweep fits {ans['card']}'s memory; sweep smaller batches (--sweep BS=...)")
    return 1
  return 0


def _add_dress(sub) -> None:
  from mlperf_bert.train.dress import __doc__ as doc
  p = sub.add_parser("dress", help="the platform's train and eval steps at full size, compiled for its GPU on no "
                     "GPU: memory a device, kernels, FLOPs, the roofline floor", description=doc,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--platform", required=True, help="a platform name (platforms/NAME/platform.yaml) or a platform file")
  p.add_argument("--layers", help="N: measure an N-layer model; full: the config's depth; default: 2 and 4 layers, "
                 "extrapolated linearly to the config's depth")
  p.add_argument("--pair", default="2,4", help="the two depths of the default extrapolation (default: 2,4)")
  p.add_argument("--set", nargs="*", metavar="KEY=VALUE", help="override platform keys (YAML values), e.g. BS=72")
  p.add_argument("--bert-config", help="bert_config.json (default: MLPerf's, resources/demo/bert_config.json)")
  p.add_argument("--json", metavar="OUT", help="also write the figures as JSON")
  p.add_argument("--picture", metavar="FILE.svg", help="also draw each device's compute and copy queues over one "
                 "predicted train step as an SVG (a note when the answer holds no step timeline)")
  p.add_argument("--sweep", nargs="+", metavar="KEY=V1,V2", help="the batch planner: dress every setting of the grid "
                 "of these platform keys (e.g. BS=72,78,84,90,96 FREE_INTERMEDIATE=0,1; EVAL_BS follows BS where the "
                 "platform ties them) and print one table, the recommended setting and why each other loses; "
                 "--json and --picture then hold the sweep (docs/dress.md, \"Plan the batch\")")
  p.add_argument("--cpu", action="store_true", help="run the same steps on this machine's CPU instead (they execute: "
                 "small models only; what the NULL device's counts are checked against)")
  p.add_argument("--timeline", action="store_true", help="also print where each step's memory goes on the device that "
                 "holds most: each arena, the live bytes through the step, the buffers alive at its peak")
  p.set_defaults(func=_cmd_dress)
