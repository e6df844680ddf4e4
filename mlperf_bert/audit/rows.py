"""The audit's record: its rows (PASS, FAIL, WARN, DROP, SKIP), each run's verdict, the scores, and the table
`python -m mlperf_bert audit` prints of them. The checks that fill it are in checks.py."""
from __future__ import annotations
from dataclasses import asdict, dataclass, field


# ----------------------------------------------------------------------------------------------------------------
# the audit's rows
# ----------------------------------------------------------------------------------------------------------------
STATUSES = ("PASS", "FAIL", "WARN", "DROP", "SKIP")


@dataclass
class Row:
  status: str
  check: str
  subject: str
  reason: str = ""


@dataclass
class Rejection(Row):
  """A row that rejects its run: a DROP when olympic scoring can drop the run, a FAIL when it cannot."""


@dataclass
class RunVerdict:
  system: str
  file: str
  seed: int | None
  minutes: float | None
  accuracy: float | None
  verdict: str


@dataclass
class Audit:
  path: str
  kind: str
  ruleset: str
  strict: bool = False
  rows: list[Row] = field(default_factory=list)
  runs: list[RunVerdict] = field(default_factory=list)
  scores: dict[str, dict] = field(default_factory=dict)

  def add(self, status: str, check: str, subject: str, reason: str = "") -> Row:
    return self.extend([Row(status, check, subject, reason)])[0]

  def extend(self, rows: list[Row]) -> list[Row]:
    """Append a check's rows (a WARN is a FAIL under --strict); returns them."""
    for row in rows:
      assert row.status in STATUSES, row.status
      if row.status == "WARN" and self.strict: row.status = "FAIL"
      self.rows.append(row)
    return rows

  @property
  def failed(self) -> bool:
    return any(r.status == "FAIL" for r in self.rows)

  def counts(self) -> dict[str, int]:
    return {s: sum(r.status == s for r in self.rows) for s in STATUSES}

  def to_dict(self) -> dict:
    return {"path": self.path, "kind": self.kind, "ruleset": self.ruleset, "verdict": "FAIL" if self.failed else "PASS",
            "counts": self.counts(), "rows": [asdict(r) for r in self.rows], "runs": [asdict(r) for r in self.runs],
            "scores": self.scores}


def shorten(items: list[str], n: int = 3) -> str:
  s = "; ".join(items[:n])
  return s + (f"; ... ({len(items) - n} more)" if len(items) > n else "")


# ----------------------------------------------------------------------------------------------------------------
# output
# ----------------------------------------------------------------------------------------------------------------
def format_table(audit: Audit) -> str:
  kinds = {"org": "submission org directory", "orgs": "directory of submission orgs", "basedir": "workflow basedir"}
  out = [f"MLPerf BERT audit of {audit.path} ({kinds.get(audit.kind, audit.kind)}; ruleset training {audit.ruleset})", ""]
  w_check = max([len("CHECK")] + [len(r.check) for r in audit.rows])
  w_subj = max([len("SUBJECT")] + [len(r.subject) for r in audit.rows])
  out.append(f"{'STATUS':<6}  {'CHECK':<{w_check}}  {'SUBJECT':<{w_subj}}  REASON")
  for r in audit.rows:
    out.append(f"{r.status:<6}  {r.check:<{w_check}}  {r.subject:<{w_subj}}  {r.reason}")
  if audit.runs:
    out += ["", "Runs:"]
    w_file = max(len(v.file) for v in audit.runs)
    out.append(f"  {'LOG':<{w_file}}  {'SEED':>6}  {'MINUTES':>8}  {'ACCURACY':>8}  VERDICT")
    for v in audit.runs:
      mins = f"{v.minutes:8.2f}" if v.minutes is not None else f"{'-':>8}"
      acc = f"{v.accuracy:8.4f}" if v.accuracy is not None else f"{'-':>8}"
      out.append(f"  {v.file:<{w_file}}  {v.seed if v.seed is not None else '-':>6}  {mins}  {acc}  {v.verdict}")
  if audit.scores:
    out += ["", "Scores (olympic mean, minutes):"]
    for k, s in audit.scores.items():
      mine = f"{s['score']:.2f}" if s.get("score") is not None else "none"
      theirs = s.get("result_summarizer")
      out.append(f"  {k}: {mine}" + (f"   (result_summarizer: {theirs:.2f})" if theirs is not None else ""))
  c = audit.counts()
  out += ["", "Summary: " + ", ".join(f"{c[s]} {s}" for s in STATUSES) + f" -> {'FAIL' if audit.failed else 'PASS'}"]
  return "\n".join(out)


