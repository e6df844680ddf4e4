"""The dress: a platform's train and eval steps at full size, compiled for its GPU, on no GPU.

    result = dress_files(find_platform_file("tinybox_green"), DEFAULT_BERT_CONFIG, overrides={"BS": 72})  # whole dress
    setup = set_up_dress(platform_file, bert_layers=24, layers=None, overrides={"BS": 72})  # checks only

One module a job: compilers.py finds the target's compiler, setup.py checks every input and resolves the settings
(DressSetup), bounds.py refuses a setting that cannot fit by far or cannot be launched (before the capture), run.py
exports the environment and runs the dress, measure.py measures the steps (it imports tinygrad),
report.py summarizes and formats the answer, timeline.py follows a step's memory on one device.

tinygrad 0.14's NULL device with a target (DEV=NULL:CUDA:sm_89, tinygrad/helpers.py `Target`, runtime/ops_null.py)
schedules, optimizes, renders and compiles every kernel with the target's own compiler, and allocates and runs
nothing: what a GPU run would launch and hold is known before the first GPU hour. The platform key DRESS_TARGET
names the target (tinybox_green `CUDA:sm_89`); the dress runs the platform's ModelTrainer train step and eval step
(BS, EVAL_BS, GPUS, DEFAULT_FLOAT, SUM_DTYPE, LOSS_SCALER, FREE_INTERMEDIATE, PARALLEL as set) on GPUS NULL devices
with BEAM 0 (a kernel "runs" in a fixed 1 ms there, so a search means nothing), at the MLPerf BERT-large config,
sequence 512, 76 predictions, random weights and dummy batches.

Compilers: CUDA targets need NVIDIA's nvrtc even to render (PyPI nvidia-cuda-nvrtc-cu12, the `dress` extra; its
library is found from the package and named by NVRTC_PATH). AMDLLVM targets compile with LLVM 19 (Debian libllvm19,
named by LLVM_PATH): that is not the HIP/comgr code generator a real DEV=AMD uses first. `NULL:plain` is tinygrad's
own NULL renderer (no compiler: counts and memory only). Importing this package does not import tinygrad.
"""
from mlperf_bert.train.dress.compilers import (COMPILER_SOURCES, Compiler, debian_llvm19, find_compiler,  # noqa: F401
                                               parse_target, wheel_nvrtc)
from mlperf_bert.train.dress.setup import (DEFAULT_BERT_CONFIG, DressSetup, config_depth, parse_layers,  # noqa: F401
                                          find_platform_file, parse_pair, set_up_dress)
from mlperf_bert.train.dress.bounds import check_dress_bounds, dress_refusal  # noqa: F401
from mlperf_bert.train.dress.run import dress_files, export_environment, run_dress  # noqa: F401
