"""The cpu demo's schedule settings leave training unchanged: how often the eval set is evaluated and how many INIT
warm-up steps run change no weight and draw no random number of the real run, so its losses are identical step by
step and the final accuracy too. The demo relies on it: which steps it evaluates at (EVAL_STEP_FREQ) and how many INIT
warm-up steps it runs (INIT_BENCHMARK_STEPS 1) are chosen for speed, and the trajectory is the one measured with any
other choice (platforms/cpu/platform.yaml)."""
import pytest
from train.test_train import data, make_run, cpu_kernels  # noqa: F401  (module fixtures)

# training runs of minutes on 2 cores: scripts/test.sh --fast leaves them out, the full run (CI) has them
pytestmark = pytest.mark.slow


def test_eval_frequency_and_init_steps_do_not_change_the_trajectory(data, tmp_path):  # noqa: F811
  often = make_run(data, tmp_path / "often", EVAL_STEP_FREQ=2, INIT_BENCHMARK_STEPS=1).run()
  rarely = make_run(data, tmp_path / "rarely", EVAL_STEP_FREQ=12, INIT_BENCHMARK_STEPS=3).run()
  assert [s for s, _ in often.accuracies] == [2, 4, 6, 8, 10, 12] and [s for s, _ in rarely.accuracies] == [12]
  assert len(often.losses) == len(rarely.losses) == 12
  assert often.losses == rarely.losses                      # bit-identical, step by step
  assert often.accuracies[-1] == rarely.accuracies[-1]
