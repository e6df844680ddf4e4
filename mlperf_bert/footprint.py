"""The run's footprint: the bytes each folder of the basedir will hold when the workflow is done, planned from the
workflow's plan, measured ratios and what is on disk, against the free space of the basedir's filesystem.

    fp = plan_footprint(PLAN, repo)   # Footprint: fp.lines() (the dry run's few lines), fp.as_dict() (--json)

Each folder: the files already there count as they are; the rest is planned. download/: a source that is a local
file by its size, MLPerf's files by the sizes its README lists (data/footprint.py). results4/: the text, listed from
the tarball (or estimated by its gzip ratio), or MLPerf's "about 13 Gbytes" over its 500 topics and eval.txt.
shards/ and eval/: the text times the measured ratios (data/footprint.py). checkpoint/: the converted weights, 4
bytes a parameter of bert_config.json. results/: each seed's run (train/footprint.py: kept states, final weights,
records); train/: empty when done, but while a seed trains it holds its resume checkpoints (the `peak`). logs/ and
report/: the demo's measured sizes a job and a figure. tinygrad's own trainer: its export (the measured instances a
byte of text times the bytes of an exported row, train/tinygrad_trainer/export.py), and no kept states or final
weights. Not planned:
submission/ and dress/ (other targets than `all`), the Snakemake metadata of the working directory.
"""
from __future__ import annotations
import dataclasses, os
from pathlib import Path
from typing import Any

from mlperf_bert.data import footprint as data_fp
from mlperf_bert.data.download import MANIFEST
from mlperf_bert.plan import TEXT_TARBALL, WorkflowPlan
from mlperf_bert.space import Filesystem, filesystem_of, human
from mlperf_bert.train.footprint import RunFootprint, plan_run, weights_bytes
from mlperf_bert.train.tinygrad_trainer.export import export_bytes

TOPICS = 500                          # MLPerf's topics (part-00000..00499-of-00500)


@dataclasses.dataclass(frozen=True)
class Folder:
  name: str   # under the basedir
  done: int   # bytes when the run is done
  now: int    # bytes there now
  how: str    # what the plan is made of


@dataclasses.dataclass(frozen=True)
class Footprint:
  basedir: str
  platform: str
  seeds: list[int]
  folders: list[Folder]
  run: RunFootprint     # one seed's run
  training: int         # what a seed still to train holds besides its done files while it trains (checkpoints)
  filesystem: Filesystem

  @property
  def done(self) -> int: return sum(f.done for f in self.folders)
  @property
  def now(self) -> int: return sum(f.now for f in self.folders)
  @property
  def to_write(self) -> int: return sum(max(0, f.done - f.now) for f in self.folders)
  @property
  def need(self) -> int:
    """The most the basedir's filesystem must still take: what is left to write and a seed's checkpoints."""
    return self.to_write + self.training
  @property
  def fits(self) -> bool: return self.need <= self.filesystem.free

  def lines(self) -> list[str]:
    """A few lines: the total, the folders, a seed's run, and what does not fit."""
    seeds = f"seed {self.seeds[0]}" if len(self.seeds) == 1 else f"{len(self.seeds)} seeds"
    left = f"still to write {human(self.to_write)}" if self.to_write else "nothing left to write"
    head = (f"footprint of {self.basedir} ({self.platform}, {seeds}): {human(self.done)} when done, "
            f"{human(self.now)} there now; {left}"
            + (f", {human(self.need)} at the most while a seed trains" if self.training else "")
            + f"; {human(self.filesystem.free)} free on {self.filesystem.describe()}")
    out = [head, "  " + ", ".join(f"{f.name} {human(f.done)}" for f in self.folders if f.done or f.now),
           f"  a seed: {self.run.describe()}"]
    if not self.fits:
      out.append(f"  not enough space: {human(self.need)} needed, {human(self.filesystem.free)} free; jobs that do "
                 "not fit stop before they write (the train job before its first step): keep fewer training states "
                 "(EVIDENCE_STATE_FREQ) or checkpoints (KEEP_CKPT_AMOUNT, CKPT), train fewer seeds or choose another "
                 "basedir")
    return out

  def as_dict(self) -> dict[str, Any]:
    return {"basedir": self.basedir, "platform": self.platform, "seeds": self.seeds, "done": self.done,
            "now": self.now, "to_write": self.to_write, "need": self.need, "fits": self.fits,
            "folders": [dataclasses.asdict(f) for f in self.folders], "seed_run": self.run.as_dict(),
            "filesystem": dataclasses.asdict(self.filesystem)}


def _du(path: Path) -> int:
  """Bytes of the regular files under `path` (symlinks not followed)."""
  if path.is_file() and not path.is_symlink():
    return path.stat().st_size
  total = 0
  for root, _, files in os.walk(path):
    for f in files:
      p = os.path.join(root, f)
      if not os.path.islink(p):
        try: total += os.stat(p).st_size
        except OSError: pass
  return total


def _size(path: Path) -> int | None:
  try: return path.stat().st_size if path.is_file() else None
  except OSError: return None


def _local_source(url: str, repo: Path) -> Path | None:
  """A source that is a file on this machine (a path, absolute or relative to the repository)."""
  if ":" in url.split("/")[0]:
    return None
  p = Path(url) if Path(url).is_absolute() else repo / url
  return p if p.is_file() else None


def _download_bytes(plan: WorkflowPlan, base: Path, repo: Path) -> tuple[int, str]:
  sidecar = data_fp.ratios()["small"]["shard_sidecar"]
  total, guessed = 0, []
  for name, src in plan.file_sources.items():
    size = _size(base / "download" / name)
    if size is None and (local := _local_source(str(src["url"]), repo)) is not None:
      size = local.stat().st_size
    if size is None:
      size = data_fp.MLPERF_FILE_BYTES.get(name)
    if size is None and name == TEXT_TARBALL:
      size = int(data_fp.MLPERF_TEXT_BYTES / data_fp.ratios()["shards"]["text_per_gzip_byte"])
    if size is None:
      guessed.append(name); size = 0
    total += size + (_size(base / "download" / f"{name}.sha256") or sidecar)
  return total, "sizes on disk or of the sources" + (f"; unknown: {', '.join(guessed)}" if guessed else "")


def _text(plan: WorkflowPlan, base: Path, repo: Path) -> tuple[dict[str, int], str]:
  """{results4 name: bytes} (eval.txt included) and how they were found."""
  names: dict[str, int] = {}
  how = "MLPerf's results4: about 13 GB over 500 topics and eval.txt (MLCommons' README)"
  tarball = base / "download" / TEXT_TARBALL
  src = plan.file_sources.get(TEXT_TARBALL)
  if not tarball.is_file() and src is not None:
    tarball = _local_source(str(src["url"]), repo) or tarball
  if not plan.text_from_r2 and tarball.is_file():
    names, exact = data_fp.tarball_text_bytes(tarball)
    how = f"listed in {tarball.name}" if exact else f"{tarball.name} times the measured gzip ratio"
  if not names or "*" in names:
    total = names.pop("*", data_fp.MLPERF_TEXT_BYTES)
    topic = total / (TOPICS + data_fp.EVAL_TEXT_PER_TOPIC)
    names = {f"part-{i:05d}-of-{TOPICS:05d}": int(topic) for i in range(TOPICS)}
    names["eval.txt"] = int(topic * data_fp.EVAL_TEXT_PER_TOPIC)
  on_disk = {p.name: p.stat().st_size for p in (base / "results4").glob("*") if p.is_file()} \
    if (base / "results4").is_dir() else {}
  if on_disk:
    how = "the text on disk" + ("" if set(on_disk) >= set(names) else f"; the rest {how}")
    names.update(on_disk)
  return names, how


def plan_footprint(plan: WorkflowPlan, repo: Path, workdir: Path | None = None) -> Footprint:
  """The footprint of the workflow's plan (module docstring); `workdir`: where a relative basedir lies (default the
  current folder)."""
  base = Path(plan.basedir) if Path(plan.basedir).is_absolute() else (workdir or Path.cwd()) / plan.basedir
  small, pre = data_fp.ratios()["small"], plan.preprocessing
  seq, pred, dupe = pre["max_seq_length"], pre["max_predictions_per_seq"], pre["dupe_factor"]
  text, text_how = _text(plan, base, repo)
  topics = sorted(n for n in text if n != "eval.txt")
  bert_config = base / "download" / "bert_config.json"
  if not bert_config.is_file():
    bert_config = _local_source(str(plan.file_sources["bert_config.json"]["url"]), repo) or \
      repo / "resources" / "demo" / "bert_config.json"  # MLPerf's own, the same file
  settings = plan.settings(plan.seeds[0])
  run = plan_run(settings, bert_config)
  if plan.trainer == "tinygrad":  # tinygrad's own trainer keeps no states and writes no final weights
    run = dataclasses.replace(run, states=0, final_bytes=0, checkpoints=0)

  def folder(name: str, planned: int, how: str, kept: bool = True) -> Folder:
    now = _du(base / name)
    return Folder(name, max(planned, now) if kept else planned, now, how)

  def files(folder_name: str, names: list[str], planned) -> int:
    """Each file's size on disk, else its planned size."""
    return sum(s if (s := _size(base / folder_name / n)) is not None else planned(n) for n in names)

  sidecar = lambda n: small["shard_sidecar"]
  shards = [f"{t}.shard" for t in topics]
  folders = [folder("download", *_download_bytes(plan, base, repo)),
             folder("results4", sum(text.values()), text_how),
             folder("verified", files("verified", [f"{t}.ok" for t in [*topics, "eval.txt"]],
                                      lambda n: small["verified_stamp"]), "a stamp a topic"),
             folder("shards", files("shards", shards, lambda n: data_fp.shard_bytes(text[n[:-6]], seq, pred, dupe))
                    + files("shards", [f"{n}.sha256" for n in shards], sidecar)
                    + (_size(base / "shards" / "SHA256SUMS") or len(topics) * small["sha256sums_line"]),
                    f"the text times the measured bytes of a shard a byte of text at {seq} / {pred}"),
             folder("eval", files("eval", ["eval.shard"],
                                  lambda n: data_fp.evalset_bytes(text.get("eval.txt", 0), plan.eval_examples, seq))
                    + files("eval", ["eval.shard.sha256"], sidecar),
                    f"{plan.eval_examples} rows, measured bytes a row at {seq} / {pred}")]
  if plan.from_init_weights:
    folders.append(folder("checkpoint", weights_bytes(bert_config), "4 bytes a parameter of bert_config.json"))
  if plan.trainer == "tinygrad":
    rows = data_fp.instances(sum(text[t] for t in topics), seq, dupe) + plan.eval_examples
    folders.append(folder("tinygrad", export_bytes(rows, seq, pred), "the instances of the text, exported"))
  seed_files = run.states * run.state_bytes + run.final_bytes + run.records_bytes
  results = base / "results" / plan.run_name
  done_seeds = [s for s in plan.seeds if (results / f"result_bert_{s}.log").is_file()]
  folders.append(folder("results", (len(plan.seeds) - len(done_seeds)) * seed_files
                        + sum(_du(p) for s in done_seeds for p in results.glob(f"result_bert_{s}.*")),
                        "a seed's run, as planned below"))
  jobs = sum(v for k, v in small["job_log"].items() if k not in ("shard", "verify_topic"))
  folders.append(folder("logs", len(topics) * (small["job_log"]["shard"] + small["job_log"]["verify_topic"]) + jobs
                        + len(plan.seeds) * run.log_bytes, "the demo's job logs; the train job's a step"))
  folders.append(folder("report", len(plan.seeds) * small["run_figure"] + small["shards_figure"]
                        + small["audit_page"], "the demo's figures"))
  folders.append(folder("train", 0, "empty when done: a seed's checkpoints while it trains", kept=False))
  training = (run.checkpoints * run.state_bytes + run.records_bytes) if len(done_seeds) < len(plan.seeds) else 0
  return Footprint(plan.basedir, plan.run_name, list(plan.seeds), folders, run, training, filesystem_of(base))


def plan_snakemake_args(argv: list[str], *, repo: Path, workdir: Path) -> Footprint:
  """The footprint of `snakemake ARGV...` (`python -m mlperf_bert footprint`): its config files (--configfile, its
  profiles') over the checkout's config.yaml and its --config values, read with Snakemake's own parser, planned as
  the workflow plans them. UserError (one line) for arguments Snakemake refuses or a config the workflow refuses."""
  import contextlib, io
  from snakemake.cli import parse_args, parse_config
  from snakemake.utils import update_config
  from mlperf_bert.config import check_config_files, precheck_config_files
  from mlperf_bert.errors import UserError
  from mlperf_bert.plan import plan_workflow
  try:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
      _, args = parse_args(["-n", *argv])
  except (SystemExit, Exception):
    raise UserError(f"snakemake refuses the arguments {' '.join(argv)!r}; run `snakemake -n {' '.join(argv)}` to see "
                    "why") from None
  files = [Path(f) for f in (args.configfile or [])]
  precheck_config_files(*files)
  config = check_config_files(files, repo / "config.yaml")
  cli = parse_config(args.config) if args.config else {}
  update_config(config, cli)
  plan = plan_workflow(config, repo=repo, workdir=workdir, configfiles=files, cli_config=cli)
  return plan_footprint(plan, repo, Path(args.directory) if args.directory else workdir)
