"""The workflow on MLCommons' R2 layout, run for real with Snakemake against a loopback server: the demo corpus
served as two datasets (input files; the text already extracted) behind a login read from a netrc file, a connection
dropped mid-file and resumed, a dry run over a 500-part listing; deterministic download failures fail once; the
shipped real-data configs plan."""
import base64, hashlib, tarfile, time
from pathlib import Path

import pytest, yaml

from r2_server import R2Server
from workflow_helpers import DEMO, REPO, snakemake

BASE = "results/demo"
TOPICS = [f"part-{i:05d}-of-00008" for i in range(8)]


def _demo_text() -> dict[str, bytes]:
  with tarfile.open(DEMO / "results_text.tar.gz") as tf:
    return {Path(m.name).name: tf.extractfile(m).read() for m in tf if m.isfile()}


def _r2_config(path: Path, server: R2Server, text_dataset: str) -> Path:
  cfg = yaml.safe_load((REPO / "config.yaml").read_text())
  inputs = "mlcommons-r2:" + server.uri("bert-input-files")
  cfg["sources"] = {
    "bert_config.json": {"url": inputs, "md5": hashlib.md5((DEMO / "bert_config.json").read_bytes()).hexdigest()},
    "vocab.txt": {"url": inputs, "md5": None},
    "results4": {"url": server.uri(text_dataset), "md5": None},  # a plain .uri URL works too
  }
  path.write_text(yaml.safe_dump(cfg))
  return path


@pytest.fixture
def server():
  with R2Server() as s:
    s.datasets["bert-input-files"] = {"bert_config.json": (DEMO / "bert_config.json").read_bytes(),
                                      "vocab.txt": (DEMO / "vocab.txt").read_bytes(),
                                      "tf1_ckpt/model.ckpt-28252.index": b"unused"}
    s.datasets["bert-demo-text"] = {f"results/{n}": b for n, b in _demo_text().items()}
    yield s


def _jobs(out: str) -> dict[str, int]:
  """Snakemake's `Job stats` table of a (dry) run."""
  lines = out.split("Job stats:")[1].splitlines()[3:]
  stats = {}
  for l in lines:
    parts = l.split()
    if len(parts) != 2 or not parts[1].isdigit():
      break
    stats[parts[0]] = int(parts[1])
  return stats


PASSWORD = "Xq9Zk@Jw%40Pv"  # a raw '@' (was shown in part) and a '%40'
SECRETS = ("Xq9Zk", "Jw%40Pv", "Jw@Pv", base64.b64encode(f"alice:{PASSWORD}".encode()).decode())


def _secrets_in(text: str | bytes) -> list[str]:
  data = text.encode() if isinstance(text, str) else text
  return [s for s in SECRETS if s.encode() in data]


@pytest.mark.slow
def test_workflow_downloads_extracted_text_from_r2_and_resumes(server, tmp_path, tmp_path_factory):
  """...behind a login (HTTP basic auth) that requests reads from the file NETRC names; no file the run wrote (the
  basedir, .snakemake/ with its metadata and log) nor any output holds the password, and a config that gives it in a
  URL is refused, naming the file and the keys, before anything is recorded."""
  cfg = _r2_config(tmp_path / "r2.yaml", server, "bert-demo-text")
  server.auth = ("alice", PASSWORD)
  netrc = tmp_path_factory.mktemp("login") / "netrc"
  netrc.write_text(f"machine 127.0.0.1 login alice password {PASSWORD}\n")
  login = {"NETRC": str(netrc)}
  outputs = []

  def run(*args, **kw):
    r = snakemake(tmp_path, *args, configfile=kw.pop("configfile", cfg), env=login, **kw)
    outputs.append(r.stdout + r.stderr)
    return r

  server.faults["results/part-00003-of-00008"] = "drop"  # the first GET of this topic breaks off mid-file
  targets = [f"{BASE}/verified/{t}.ok" for t in TOPICS] + [f"{BASE}/verified/eval.txt.ok",
                                                            f"{BASE}/download/bert_config.json", f"{BASE}/download/vocab.txt"]
  run("--cores", "2", *targets)
  assert all(h.get("Authorization") for _, h in server.requests)  # the login went with every request
  base = tmp_path / BASE
  text = _demo_text()
  for name in TOPICS + ["eval.txt"]:
    assert (base / "results4" / name).read_bytes() == text[name]
  assert not (base / "results4.files").exists() and not (base / "logs" / "extract").exists()  # no extract step
  assert not (base / "download" / "results_text.tar.gz").exists()
  assert sorted(p.name for p in (base / "verified").iterdir()) == sorted([f"{t}.ok" for t in TOPICS] + ["eval.txt.ok"])
  # the manifest the verify rules read comes from the dataset's md5 list
  manifest = (base / "download" / "bert_reference_results_text_md5.txt").read_text().splitlines()
  assert f"{hashlib.md5(text['part-00003-of-00008']).hexdigest()}  ./part-00003-of-00008" in manifest
  # the dropped topic resumed with a Range request inside its job and says so in its log, with a tqdm bar
  ranges = [h.get("Range") for h in server.gets("results/part-00003-of-00008")]
  assert len(ranges) == 2 and ranges[0] is None and ranges[1].startswith("bytes="), ranges
  log = (base / "logs" / "download" / "results4_part-00003-of-00008.log").read_text()
  assert "network error" in log and "resuming at byte" in log and "100%" in log and "B/s" in log, log
  assert (base / "download" / "bert_config.json.sha256").is_file()
  assert not list((base / "results4").glob(".*")) and not list((base / "download").glob(".*part"))
  r = run("-n", "--cores", "2", *targets)
  assert "Nothing to be done" in r.stdout + r.stderr

  def relist():
    for f in (base / "download" / "r2").glob("bert-demo-text.*"):
      f.unlink()
    run("--cores", "1", f"{BASE}/download/r2/bert-demo-text.md5")

  relist()  # the same list fetched again: nothing is downloaded again
  r = run("-n", "--cores", "2", *targets)
  assert "Nothing to be done" in r.stdout + r.stderr, r.stdout + r.stderr
  server.datasets["bert-demo-text"]["results/part-00005-of-00008"] = text["part-00005-of-00008"] + b"\nA new line.\n"
  relist()  # one file changed on the server: only its download reruns
  r = run("-n", "--cores", "2", *targets)
  jobs = _jobs(r.stdout + r.stderr)
  assert jobs.get("r2_text") == 1 and "results/demo/results4/part-00005-of-00008" in r.stdout + r.stderr, jobs
  # the login in the sources' URLs instead (as written and %-escaped): refused before a param or record has it (the
  # dry run's "Params have changed" reason printed it, and .snakemake/metadata and the provenance record kept it)
  host = server.url.removeprefix("http://")
  creds = yaml.safe_load(cfg.read_text())
  creds["sources"]["vocab.txt"]["url"] = f"mlcommons-r2:http://alice:{PASSWORD}@{host}/metadata/bert-input-files.uri"
  creds["sources"]["results4"]["url"] = f"http://alice:{PASSWORD.replace('%', '%25').replace('@', '%40')}@{host}/metadata/bert-demo-text.uri"
  (tmp_path / "creds.yaml").write_text(yaml.safe_dump(creds))
  r = run("-n", "--cores", "2", *targets, configfile=tmp_path / "creds.yaml", check=False)
  said = r.stdout + r.stderr
  assert r.returncode != 0 and f"{tmp_path / 'creds.yaml'}: sources.results4.url, sources.vocab.txt.url give a URL " \
    "with a user name or password" in said and "~/.netrc" in said and "Traceback" not in said, said[-3000:]
  (tmp_path / "creds.yaml").unlink()
  written = [p for p in tmp_path.rglob("*") if p.is_file()]
  assert any(".snakemake/metadata" in str(p) for p in written) and any(".snakemake/log" in str(p) for p in written)
  assert not [(str(p), _secrets_in(p.read_bytes())) for p in written if _secrets_in(p.read_bytes())]
  assert not [_secrets_in(o) for o in outputs if _secrets_in(o)]


def test_dry_run_over_a_500_part_listing(server, tmp_path):
  parts = {f"results/part-{i:05d}-of-00500": b"x\n" for i in range(500)}
  server.datasets["bert-big-text"] = {**parts, "results/eval.txt": b"y\n", "results/eval.md5": b"z\n"}
  cfg = _r2_config(tmp_path / "r2.yaml", server, "bert-big-text")
  snakemake(tmp_path, "--cores", "1", f"{BASE}/download/r2/bert-big-text.md5", configfile=cfg)  # the listing only
  t0 = time.perf_counter()
  r = snakemake(tmp_path, "-n", "--cores", "2", f"{BASE}/shards/SHA256SUMS", f"{BASE}/eval/eval.shard",
                configfile=cfg)
  seconds = time.perf_counter() - t0
  jobs = _jobs(r.stdout + r.stderr)
  assert jobs["r2_text"] == 501 and jobs["verify_topic"] == 500 and jobs["shard"] == 500, jobs
  # vocab.txt (bert_config.json is for training) and the input files' listing
  assert jobs["r2_manifest"] == 1 and jobs["download"] == 1 and jobs["r2_listing"] == 1 and "extract" not in jobs, jobs
  assert not [p for p, _ in server.requests if p.startswith("/data/")]  # a dry run downloads nothing
  print(f"dry run over the 500-part listing: {seconds:.1f} s, jobs {jobs}")
  assert seconds < 120, seconds  # wall time; measured 16-36 s on the shared 2-core machine


def test_download_bounds_reach_the_jobs_through_their_params(server, tmp_path):
  """`--config download={...}` (text, as Snakemake hands it over) reaches the download jobs as their rule's params,
  typed once by the plan: a dataset's list trickling from the server ends at the 2 s given, not the 120 s default;
  one line naming the list, nothing left at the target."""
  cfg = _r2_config(tmp_path / "r2.yaml", server, "bert-demo-text")
  server.faults["bert-demo-text.md5"] = "trickle"
  t = time.monotonic()
  r = snakemake(tmp_path, "--cores", "1", f"{BASE}/download/r2/bert-demo-text.md5", "--config",
                "download={deadline_s: 2, stall_s: 1}", configfile=cfg, check=False, timeout=300)
  out = r.stdout + r.stderr
  assert r.returncode != 0 and "did not finish within 2 s; a dataset's list is a few kB" in out, out[-3000:]
  log = (tmp_path / BASE / "logs" / "download" / "r2_bert-demo-text.log").read_text()
  assert "did not finish within 2 s" in log and "Traceback" not in log + out, log
  assert not (tmp_path / BASE / "download" / "r2" / "bert-demo-text.md5").exists()
  print(f"snakemake with a trickling list: {time.monotonic() - t:.1f} s")


def test_deterministic_download_failures_fail_once(tmp_path):
  cfg = yaml.safe_load((REPO / "config.yaml").read_text())
  cfg["sources"]["bert_config.json"]["md5"] = "0" * 32
  cfg["sources"]["vocab.txt"]["url"] = "resources/demo/no_such_vocab.txt"
  (tmp_path / "bad.yaml").write_text(yaml.safe_dump(cfg))
  r = snakemake(tmp_path, "--cores", "2", "--keep-going", f"{BASE}/download/bert_config.json",
                f"{BASE}/download/vocab.txt", configfile=tmp_path / "bad.yaml", check=False)
  assert r.returncode != 0
  out = r.stdout + r.stderr
  for name, why in (("bert_config.json", "MD5 mismatch"), ("vocab.txt", "does not exist")):
    # each job prints its error on the console once per attempt (its log keeps only the last attempt)
    assert out.count(f"error: {name}: ") == 1, out  # one attempt: not retried by Snakemake
    assert why in (tmp_path / BASE / "logs" / "download" / f"{name}.log").read_text()
    assert not (tmp_path / BASE / "download" / name).exists()


@pytest.mark.parametrize("name", ["config/mlperf.yaml", "config/mlperf-gdrive.yaml"])
def test_real_data_configs_plan_their_downloads(name, tmp_path):
  r = snakemake(tmp_path, "-n", "--cores", "2", "all", configfile=REPO / name)
  jobs = _jobs(r.stdout + r.stderr)
  if name == "config/mlperf.yaml":  # MLCommons' storage: the two listings first, then each file
    assert jobs["r2_listing"] == 2 and "extract" not in jobs, jobs
  else:  # Google Drive: seven files, then the extract rule
    assert jobs["download"] == 7 and jobs["extract"] == 1 and "r2_listing" not in jobs, jobs


def test_schema_takes_results4_or_the_tarball_and_a_path():
  from mlperf_bert.config import validate_config
  from mlperf_bert.errors import UserError
  schema = REPO / "schemas" / "config.schema.yaml"
  for name in ("config/mlperf.yaml", "config/mlperf-gdrive.yaml", "config/mlperf-mirror.yaml"):
    validate_config(yaml.safe_load((REPO / name).read_text()), schema)
  cfg = yaml.safe_load((REPO / "config/mlperf.yaml").read_text())
  del cfg["sources"]["results4"]
  with pytest.raises(UserError, match="'sources' needs bert_reference_results_text_md5.txt \\+ results_text.tar.gz or results4"):
    validate_config(cfg, schema)
  cfg = yaml.safe_load((REPO / "config/mlperf.yaml").read_text())
  cfg["sources"]["vocab.txt"]["path"] = "/etc/passwd"
  with pytest.raises(UserError, match="sources.vocab.txt.path"):
    validate_config(cfg, schema)
