"""CLI subcommands of the text stage: download, extract, verify, verify-eval."""
from __future__ import annotations
import argparse

from mlperf_bert import download, extract, verify


def _done(action):
  """A subcommand that succeeds when `action` returns (errors are raised as UserError): exit code 0."""
  def run(args) -> int:
    action(args)
    return 0
  return run


def add_parser(sub: argparse._SubParsersAction) -> None:
  p = sub.add_parser("download", help="fetch one artifact (gdrive:<id>, URL or path) and check its md5")
  p.add_argument("--source", required=True, help="gdrive:<id>, http(s)://..., or a local path")
  p.add_argument("--output", required=True)
  p.add_argument("--md5", default=None, help="published md5 to check (optional)")
  p.set_defaults(func=_done(lambda a: download.fetch(a.source, a.output, md5=a.md5)))

  p = sub.add_parser("extract", help="safely extract results_text.tar.gz into a results4/ folder")
  p.add_argument("--tarball", required=True)
  p.add_argument("--manifest", required=True, help="bert_reference_results_text_md5.txt")
  p.add_argument("--output", required=True, help="the results4/ folder to create")
  p.set_defaults(func=_done(lambda a: extract.extract_results(a.tarball, a.manifest, a.output)))

  p = sub.add_parser("verify", help="check extracted files against the md5 manifest")
  p.add_argument("files", nargs="+")
  p.add_argument("--manifest", required=True)
  p.set_defaults(func=_done(lambda a: [verify.verify_file(f, a.manifest) for f in a.files]))

  p = sub.add_parser("verify-eval", help="check eval.txt article by article against eval.md5")
  p.add_argument("eval_txt")
  p.add_argument("--eval-md5", required=True)
  p.set_defaults(func=_done(lambda a: verify.verify_eval_articles(a.eval_txt, a.eval_md5)))
