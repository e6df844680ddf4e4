"""trainer: tinygrad in the DAG (rules/tinygrad.smk): the four rules replace rule train, the demo's eval is widened
to what train_bert asserts, and settings it cannot run stop the workflow in one line; of its jobs only the checkout
runs here (on a small git checkout). The real run (snakemake all --config trainer=tinygrad tinygrad_source=PATH)
takes minutes of tinygrad's compiles and is described, with its numbers, in docs/tinygrad-trainer.md."""
import json, re, shutil, subprocess

import yaml

from workflow_helpers import snakemake


def _jobs(out: str) -> dict[str, int]:
  table = out.split("Job stats:", 1)[1].split("Reasons:", 1)[0]
  return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)}


def test_trainer_tinygrad_dry_run(tmp_path):
  (tmp_path / "tg" / "examples" / "mlperf").mkdir(parents=True)    # a checkout is there at planning (verified by the job)
  (tmp_path / "tg" / "examples" / "mlperf" / "model_train.py").write_text("")
  r = snakemake(tmp_path, "-n", "--config", f"basedir={tmp_path / 'base'}", "trainer=tinygrad",
                f"tinygrad_source={tmp_path / 'tg'}", "seeds=[0,1]")
  jobs = _jobs(r.stdout)
  assert jobs["tinygrad_checkout"] == 1 and jobs["tinygrad_export"] == 1 and jobs["tinygrad_init_weights"] == 2
  assert jobs["train_tinygrad"] == 2 and jobs["provenance"] == 2 and "train" not in jobs
  assert "evaluating with EVAL_BS 100, EVAL_SAMPLES 10000" in r.stderr
  # the local path appears in no job (only in the echoed command line): a moved checkout reruns nothing
  assert not [l for l in r.stdout.splitlines() if str(tmp_path / "tg") in l and "Command:" not in l]
  r = snakemake(tmp_path, "-n", "--config", f"basedir={tmp_path / 'base'}")
  assert "tinygrad_checkout" not in _jobs(r.stdout) and _jobs(r.stdout)["train"] == 1


def test_settings_train_bert_cannot_run_are_refused(tmp_path):
  r = snakemake(tmp_path, "-n", "--config", f"basedir={tmp_path / 'base'}", "trainer=tinygrad",
                "train={BERT_HIDDEN_SIZE: 256, BERT_NUM_HEADS: 4}", check=False)
  assert r.returncode != 0 and "only BERT_SIZE large" in r.stdout + r.stderr
  r = snakemake(tmp_path, "-n", "--config", f"basedir={tmp_path / 'base'}", "trainer=tinygrad",
                "train={EVAL_BS: 64}", check=False)
  assert r.returncode != 0 and "asserts at least 10000 eval samples" in r.stdout + r.stderr
  r = snakemake(tmp_path, "-n", "--config", f"basedir={tmp_path / 'base'}", "trainer=pytorch", check=False)
  assert r.returncode != 0 and "trainer" in r.stdout + r.stderr


def test_missing_local_checkout_is_refused_at_planning(tmp_path):
  r = snakemake(tmp_path, "-n", "--config", f"basedir={tmp_path / 'base'}", "trainer=tinygrad",
                f"tinygrad_source={tmp_path / 'nowhere'}", check=False)
  lines = [l for l in (r.stdout + r.stderr).splitlines() if "nowhere" in l and "Command" not in l]
  assert r.returncode != 0 and len(lines) == 1, r.stdout + r.stderr
  assert f"tinygrad_source {str(tmp_path / 'nowhere')!r}: {tmp_path / 'nowhere'} does not exist; give a tinygrad " \
         "checkout" in lines[0]
  assert "tinygrad_checkout" not in r.stdout


def test_checkout_job_reads_its_source_from_the_plan_and_a_moved_one_reruns_nothing(tmp_path):
  """rule tinygrad_checkout run for real on a small git checkout ({path, commit}): the job gets where the checkout is
  from its rule's params (the plan's source, a param Snakemake does not compare), not from Snakemake's config; the
  same checkout moved elsewhere plans nothing."""
  src = tmp_path / "tg"
  (src / "examples" / "mlperf").mkdir(parents=True)
  (src / "examples" / "mlperf" / "model_train.py").write_text("print('train')\n")
  git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
  for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "c"]):
    subprocess.run(git + args, cwd=src, check=True, capture_output=True)
  commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=src, capture_output=True, text=True).stdout.strip()

  def config(where):
    path = tmp_path / "tg.yaml"
    path.write_text(yaml.safe_dump({"basedir": str(tmp_path / "base"), "trainer": "tinygrad",
                                    "tinygrad_source": {"path": str(where), "commit": commit}}))
    return path

  target = str(tmp_path / "base" / "tinygrad" / "checkout.json")
  snakemake(tmp_path, "--cores", "1", target, configfile=config(src))
  rec = json.loads((tmp_path / "base" / "tinygrad" / "checkout.json").read_text())
  assert rec["commit"] == commit and rec["source"] == "local checkout", rec
  assert (tmp_path / "base" / "tinygrad" / "checkout" / "examples" / "mlperf" / "model_train.py").is_file()
  shutil.move(src, tmp_path / "moved")
  r = snakemake(tmp_path, "-n", "--cores", "1", target, configfile=config(tmp_path / "moved"))
  assert "Nothing to be done" in r.stdout + r.stderr, r.stdout + r.stderr
