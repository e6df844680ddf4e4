"""Figures and tables for Snakemake's report (`snakemake --report report.html`).

* `plot_run`: one seed's training curves against samples seen: loss, learning rate and step time from the
  trainer's per-step lines (tinygrad's format: `STEP  T ms run, ..., L loss, LR LR, ...`), eval accuracy from the
  MLPerf log's `eval_accuracy` events (whose `epoch_num` is the samples seen).
* `plot_shards`: per topic, instances, stream tokens, masked predictions and bytes of each shard.
* `audit_html`: the audit's rows as an HTML table; `audit_report`: the basedir audit (no dry run) as that page.
"""
from __future__ import annotations
import html, math, os, re
from pathlib import Path

from mlperf_bert.audit.rows import format_audit_table
from mlperf_bert.audit.logs import BERT_TARGET_ACCURACY, read_log
from mlperf_bert.audit.tree import audit_basedir
from mlperf_bert.constants import RULESET

# tinygrad train_bert's per-step line (also what mlperf_bert.train.run prints)
STEP_RE = re.compile(r"^\s*(\d+)\s+([\d.]+) ms run,.*?,\s*(\S+) loss,\s*(\S+) LR\b")


def step_records(lines) -> list[dict]:
  """[{step, ms, loss, lr}] from the trainer's per-step lines (other lines are ignored)."""
  out = []
  for line in lines:
    m = STEP_RE.match(line)
    if not m: continue
    try:
      out.append({"step": int(m.group(1)), "ms": float(m.group(2)), "loss": float(m.group(3)), "lr": float(m.group(4))})
    except ValueError:
      continue
  return out


def _mpl():
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  return plt


def plot_run(out_png: str | os.PathLike, log_path: str | os.PathLike, step_log: str | os.PathLike | None = None,
             target: float = BERT_TARGET_ACCURACY, note: str = "") -> dict:
  """Four panels for one seed; `target` is the run's accuracy target (MLPerf's 0.72 unless the platform sets
  another, as the cpu demo does); `note` heads the title (a rehearsal says so); returns the numbers plotted
  (counts, final accuracy)."""
  log = read_log(log_path)
  gbs = log.global_batch_size or 1
  lines = [t for _, t in log.other_lines]
  if step_log and Path(step_log).is_file():  # absent when the job log was removed: the MLPerf log alone
    lines += Path(step_log).read_text(encoding="utf-8", errors="replace").splitlines()
  steps = step_records(lines)
  seen = {}
  for r in steps: seen[r["step"]] = r  # a resumed run repeats steps: keep the last
  steps = [seen[k] for k in sorted(seen)]
  evals = [(e.metadata.get("epoch_num"), e.value) for e in log.eval_accuracies
           if isinstance(e.metadata.get("epoch_num"), (int, float)) and isinstance(e.value, (int, float))]
  plt = _mpl()
  fig, axes = plt.subplots(2, 2, figsize=(10, 7))
  x = [(r["step"] + 1) * gbs for r in steps]
  panels = [(axes[0][0], "loss", "training loss"), (axes[0][1], "lr", "learning rate"),
            (axes[1][1], "ms", "step time (ms)")]
  for ax, key, title in panels:
    ax.set_title(title); ax.set_xlabel("samples seen")
    ys = [r[key] for r in steps]
    if steps and any(math.isfinite(y) for y in ys):
      ax.plot(x, ys, lw=0.8)
    else:
      ax.text(0.5, 0.5, "no per-step lines", ha="center", va="center", transform=ax.transAxes)
  ax = axes[1][0]
  ax.set_title("eval masked-LM accuracy"); ax.set_xlabel("samples seen")
  if evals:
    ax.plot([e[0] for e in evals], [e[1] for e in evals], "o-", ms=3)
    ax.axhline(target, color="gray", ls="--", lw=0.8, label=f"target {target}")
    ax.legend(loc="best")
  else:
    ax.text(0.5, 0.5, "no eval_accuracy events", ha="center", va="center", transform=ax.transAxes)
  mins = log.run_minutes
  fig.suptitle((f"{note}: " if note else "") + f"{log.platform or ''} seed {log.seed}: status {log.status or 'none'}"
               + (f", {mins:.2f} min" if mins is not None else ""))
  fig.tight_layout()
  Path(out_png).parent.mkdir(parents=True, exist_ok=True)
  fig.savefig(out_png, dpi=100)
  plt.close(fig)
  return {"steps": len(steps), "evals": len(evals), "final_accuracy": log.final_eval_accuracy, "status": log.status}


def shard_stats(paths) -> list[dict]:
  from mlperf_bert.data.shards import Shard
  out = []
  for p in paths:
    sh = Shard(p)
    out.append({"topic": Path(p).name.removesuffix(".shard"), "instances": sh.n, "stream_tokens": sh.n_stream,
                "predictions": sh.n_pred, "bytes": Path(p).stat().st_size})
    sh.close()
  return out


def plot_shards(out_png: str | os.PathLike, paths) -> list[dict]:
  stats = shard_stats(paths)
  plt = _mpl()
  keys = [("instances", "instances"), ("stream_tokens", "tokens"), ("predictions", "masked predictions"),
          ("bytes", "shard bytes")]
  fig, axes = plt.subplots(len(keys), 1, figsize=(max(6, 0.25 * len(stats) + 3), 9), sharex=True)
  xs = range(len(stats))
  for ax, (k, title) in zip(axes, keys):
    ax.bar(xs, [s[k] for s in stats]); ax.set_ylabel(title)
  axes[-1].set_xticks(list(xs))
  axes[-1].set_xticklabels([s["topic"].split("-of-")[0].removeprefix("part-") for s in stats], rotation=90, fontsize=7)
  axes[-1].set_xlabel("topic (part number)")
  fig.suptitle(f"{len(stats)} shards, {sum(s['instances'] for s in stats):,} instances")
  fig.tight_layout()
  Path(out_png).parent.mkdir(parents=True, exist_ok=True)
  fig.savefig(out_png, dpi=100)
  plt.close(fig)
  return stats


def audit_html(out_html: str | os.PathLike, audit) -> None:
  """The audit's rows, runs and scores as a standalone HTML page."""
  colors = {"PASS": "#d4edda", "FAIL": "#f8d7da", "WARN": "#fff3cd", "DROP": "#e2e3e5", "SKIP": "#f0f0f0"}
  e = html.escape
  rows = "\n".join(f'<tr style="background:{colors.get(r.status, "#fff")}"><td>{e(r.status)}</td><td>{e(r.check)}</td>'
                   f"<td>{e(r.subject)}</td><td>{e(r.reason)}</td></tr>" for r in audit.rows)
  runs = "\n".join(f"<tr><td>{e(v.file)}</td><td>{v.seed}</td><td>{'' if v.minutes is None else f'{v.minutes:.2f}'}</td>"
                   f"<td>{'' if v.accuracy is None else f'{v.accuracy:.4f}'}</td><td>{e(v.verdict)}</td></tr>"
                   for v in audit.runs)
  c = audit.counts()
  text = (f"<html><head><meta charset='utf-8'><title>audit</title></head><body>"
          f"<h2>Audit of {e(audit.path)}: {'FAIL' if audit.failed else 'PASS'}</h2>"
          f"<p>ruleset training {e(audit.ruleset)}; " + ", ".join(f"{c[s]} {s}" for s in c) + "</p>"
          "<table border='1' cellspacing='0' cellpadding='3'><tr><th>status</th><th>check</th><th>subject</th>"
          f"<th>reason</th></tr>{rows}</table>"
          + (f"<h3>Runs</h3><table border='1' cellspacing='0' cellpadding='3'><tr><th>log</th><th>seed</th>"
             f"<th>minutes</th><th>accuracy</th><th>verdict</th></tr>{runs}</table>" if runs else "")
          + "</body></html>\n")
  Path(out_html).parent.mkdir(parents=True, exist_ok=True)
  Path(out_html).write_text(text)


def audit_report(out_html: str | os.PathLike, basedir: str | os.PathLike, *, ruleset: str = RULESET,
                 workflow_dir: str | os.PathLike | None = None, resolved_config: dict | None = None) -> str:
  """The basedir audit for Snakemake's report, without its dry run (Snakemake itself is running) and without the
  re-execution (minutes of work inside every workflow run; `python -m mlperf_bert audit` does it): writes the HTML
  page and returns the table as text."""
  audit = audit_basedir(basedir, ruleset=ruleset, workflow_dir=workflow_dir, dry_run=False,
                        resolved_config=resolved_config, reexecute=False)
  audit_html(out_html, audit)
  return format_audit_table(audit)
