"""Helpers for tests that run the real workflow with Snakemake in a scratch working directory."""
from __future__ import annotations
import hashlib, io, os, subprocess, sys, tarfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "resources" / "demo"


def snakemake(workdir: Path, *args: str, check: bool = True, configfile: Path | None = None,
              timeout: int = 1200, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
  """Run `snakemake -s REPO/Snakefile -d workdir ARGS` with the project's Python (`env` added to the environment);
  returns the process."""
  cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "-d", str(workdir)]
  if configfile is not None:
    cmd += ["--configfile", str(configfile)]
  cmd += list(args)
  env = dict(os.environ, PYTHONUNBUFFERED="1", **(env or {}))
  r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
  if check and r.returncode != 0:
    raise AssertionError(f"snakemake failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout[-4000:]}\n{r.stderr[-8000:]}")
  return r


def tree_state(root: Path, skip=("logs", ".snakemake")) -> dict[str, tuple[str, int]]:
  """{relative path: (sha256, mtime_ns)} of every file under root, except the skipped top folders."""
  out = {}
  for p in sorted(root.rglob("*")):
    rel = p.relative_to(root)
    if p.is_file() and rel.parts[0] not in skip:
      out[str(rel)] = (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
  return out


def make_corpus(tmp: Path, topics: dict[str, bytes], eval_txt: bytes | None = None,
                manifest_override: dict[str, str] | None = None) -> dict[str, Path]:
  """A results_text.tar.gz + md5 manifest + eval.md5 built from the given texts (md5s true unless overridden)."""
  tmp.mkdir(parents=True, exist_ok=True)
  if eval_txt is None:
    with tarfile.open(DEMO / "results_text.tar.gz") as tf:
      eval_txt = tf.extractfile("results4/eval.txt").read()
  files = dict(topics, **{"eval.txt": eval_txt})
  tarball = tmp / "results_text.tar.gz"
  with tarfile.open(tarball, "w:gz") as tf:
    for name, data in files.items():
      info = tarfile.TarInfo(f"results4/{name}")
      info.size = len(data)
      tf.addfile(info, io.BytesIO(data))
  md5s = {n: hashlib.md5(d).hexdigest() for n, d in files.items()}
  md5s.update(manifest_override or {})
  manifest = tmp / "manifest.txt"
  manifest.write_text("".join(f"{m}  ./{n}\n" for n, m in md5s.items()))
  arts = [a for a in eval_txt.decode("utf-8").split("\n\n") if a.strip()]
  eval_md5 = tmp / "eval.md5"
  eval_md5.write_text("".join(hashlib.md5(a.rstrip().encode()).hexdigest() + "\n" for a in arts))
  return {"tarball": tarball, "manifest": manifest, "eval_md5": eval_md5}


def demo_topic(i: int) -> bytes:
  with tarfile.open(DEMO / "results_text.tar.gz") as tf:
    return tf.extractfile(f"results4/part-{i:05d}-of-00008").read()


def write_config(path: Path, basedir: Path, corpus: dict[str, Path] | None = None, vocab: Path | None = None,
                 **overrides) -> Path:
  """A config file: the demo config with this corpus/vocab and overrides (top-level or preprocessing keys)."""
  cfg = yaml.safe_load((REPO / "config.yaml").read_text())
  cfg["basedir"] = str(basedir)
  if corpus:
    cfg["sources"]["results_text.tar.gz"] = {"url": str(corpus["tarball"]), "md5": None}
    cfg["sources"]["bert_reference_results_text_md5.txt"] = {"url": str(corpus["manifest"]), "md5": None}
    cfg["eval_md5"] = str(corpus["eval_md5"])
  if vocab:
    cfg["sources"]["vocab.txt"] = {"url": str(vocab), "md5": None}
  for k, v in overrides.items():
    if k in cfg.get("preprocessing", {}):
      cfg["preprocessing"][k] = v
    else:
      cfg[k] = v
  path.write_text(yaml.safe_dump(cfg))
  return path
