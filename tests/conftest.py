"""Shared pytest setup: makes tests/ importable (for feature_digest) and offers common fixtures."""
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
if str(TESTS) not in sys.path:
  sys.path.insert(0, str(TESTS))

ORACLE = TESTS / "data" / "oracle"
DEMO = ROOT / "resources" / "demo"


@pytest.fixture(scope="session")
def demo_text(tmp_path_factory):
  """The demo corpus extracted once per session: a folder holding results4/part-0000{0..7}-of-00008 and eval.txt."""
  import tarfile
  out = tmp_path_factory.mktemp("demo_text")
  with tarfile.open(DEMO / "results_text.tar.gz") as tar:
    for m in tar.getmembers():
      name = Path(m.name)
      if not m.isfile() or name.is_absolute() or ".." in name.parts:
        continue
      dest = out / "results4" / name.name
      dest.parent.mkdir(parents=True, exist_ok=True)
      dest.write_bytes(tar.extractfile(m).read())
  return out / "results4"
