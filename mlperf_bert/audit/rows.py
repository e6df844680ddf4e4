"""The audit's record: its rows (PASS, FAIL, WARN, DROP, SKIP), each run's verdict, the scores, and the table
`python -m mlperf_bert audit` prints of them. The checks that fill it are in log_checks.py, tree.py and org.py."""
from __future__ import annotations
from dataclasses import asdict, dataclass, field


def printable(text: object) -> str:
  """`text` on one line that cannot fake table lines: every control, format, separator or unassigned character (a
  newline, a carriage return, an escape sequence, a right-to-left override in a received file name) is written as
  Python's repr writes it (\\n, \\x1b, \\u202e). Escaped text has none of them, so escaping twice changes nothing."""
  s = str(text)
  if s.isprintable(): return s
  return "".join(ch if ch.isprintable() or ch == " " else
                 {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(ch) or (f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else
                 f"\\u{ord(ch):04x}" if ord(ch) < 0x10000 else f"\\U{ord(ch):08x}") for ch in s)


# ----------------------------------------------------------------------------------------------------------------
# the audit's rows
# ----------------------------------------------------------------------------------------------------------------
STATUSES = ("PASS", "FAIL", "WARN", "DROP", "SKIP")
# the checks whose rows more than one module writes: chain (chain.py, text.py), re-execution (rebuild.py, reexec.py,
# segments.py); and the fix of a run whose files or numbers are not what it recorded
CHAIN = "chain"
REEXECUTION = "re-execution"
RETRAIN = "retrain: snakemake --forcerun train"


@dataclass
class Row:
  status: str
  check: str
  subject: str
  reason: str = ""

  def __post_init__(self):  # a received file's name is printed in these: never a line break or escape sequence
    self.check, self.subject, self.reason = printable(self.check), printable(self.subject), printable(self.reason)


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

  def __post_init__(self):
    self.file, self.verdict = printable(self.file), printable(self.verdict)


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
def format_audit_table(audit: Audit) -> str:
  kinds = {"org": "submission org directory", "orgs": "directory of submission orgs", "basedir": "workflow basedir"}
  out = [f"MLPerf BERT audit of {printable(audit.path)} ({kinds.get(audit.kind, audit.kind)}; ruleset training "
         f"{audit.ruleset})", ""]
  w_check = max([len("CHECK")] + [len(r.check) for r in audit.rows])
  w_subj = max([len("SUBJECT")] + [len(r.subject) for r in audit.rows])
  out.append(f"{'STATUS':<6}  {'CHECK':<{w_check}}  {'SUBJECT':<{w_subj}}  REASON")
  for r in audit.rows:
    out.append(f"{r.status:<6}  {printable(r.check):<{w_check}}  {printable(r.subject):<{w_subj}}  {printable(r.reason)}")
  if audit.runs:
    out += ["", "Runs:"]
    w_file = max(len(v.file) for v in audit.runs)
    out.append(f"  {'LOG':<{w_file}}  {'SEED':>6}  {'MINUTES':>8}  {'ACCURACY':>8}  VERDICT")
    for v in audit.runs:
      mins = f"{v.minutes:8.2f}" if v.minutes is not None else f"{'-':>8}"
      acc = f"{v.accuracy:8.4f}" if v.accuracy is not None else f"{'-':>8}"
      out.append(f"  {printable(v.file):<{w_file}}  {v.seed if v.seed is not None else '-':>6}  {mins}  {acc}  "
                 f"{printable(v.verdict)}")
  if audit.scores:
    out += ["", "Scores (olympic mean, minutes):"]
    for k, s in audit.scores.items():
      mine = f"{s['score']:.2f}" if s.get("score") is not None else "none"
      theirs = s.get("result_summarizer")
      out.append(f"  {printable(k)}: {mine}" + (f"   (result_summarizer: {theirs:.2f})" if theirs is not None else ""))
  c = audit.counts()
  out += ["", "Summary: " + ", ".join(f"{c[s]} {s}" for s in STATUSES) + f" -> {'FAIL' if audit.failed else 'PASS'}"]
  return "\n".join(out)


