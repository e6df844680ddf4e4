"""Every constant of the step-time model (mlperf_bert/train/cost/), each with its source.

A card (`CardSpec`) is its published spec: compute units, clock, the dense fp16 rates of its tensor/matrix cores and of its
vector units, memory bandwidth; `achievable` is the fraction of a peak that tinygrad's own kernels reach on it (after
BEAM): for the RTX 4090 and RX 7900 XTX from tinygrad's speed test test/external/speed_v_theoretical.py (per card the
TFLOPS of a BEAM'd half gemm and the GB/s of a BEAM'd gemv), for the MI300X from tinygrad's own MI300X gemm figure at
the BEAM its box ran and a published MI300X stream measurement. A box (`Box`) is its cards, the link between two of
them, the gap its runtime leaves between two kernels and the host's time a step. Nothing here is fitted to the step
times the model is checked against (docs/dress.md "What will it cost").
"""
from __future__ import annotations
from dataclasses import dataclass

# tinygrad's speed test, read at this commit (github:tinygrad/tinygrad test/external/speed_v_theoretical.py)
SPEED_TEST = "tinygrad test/external/speed_v_theoretical.py@18d4ecc1f3"


@dataclass(frozen=True)
class CardSpec:
  name: str
  units: int             # SMs (NVIDIA) or CUs (AMD): the waves of a launch are counted on them
  clock_ghz: float       # boost clock the peaks are stated at
  tc_tflops: float       # dense fp16 on tensor/matrix cores, fp32 accumulate
  tc_tflops_f16acc: float  # dense fp16 on tensor/matrix cores, fp16 accumulate (SUM_DTYPE HALF)
  vector_tflops: float   # fp16 on the vector units (no tensor cores)
  gbps: float            # memory bandwidth, GB/s
  tc_achievable: float   # fraction of tc_tflops a BEAM'd tinygrad gemm reaches
  mem_achievable: float  # fraction of gbps a BEAM'd tinygrad gemv reaches
  lanes: int             # threads a unit needs resident to issue on every SIMD / warp scheduler
  source: str


@dataclass(frozen=True)
class Box:
  card: CardSpec
  link_gbps: float       # one direction between two cards, as a peer-to-peer copy reaches it
  link_source: str
  launch_us: float       # per kernel in a captured graph: the gap between two kernels on one queue
  copy_setup_us: float   # per copy: the copy engine's start
  host_ms: float         # the host's time a step outside the GPU (the python step, the loss read back)
  held_out: float = 1.0  # measured / source-only predicted step of the OTHER systems (HELD_OUT below); 1: none


# --- cards ---------------------------------------------------------------------------------------------------------

# NVIDIA Ada Lovelace architecture whitepaper (v2.1, appendix A, GeForce RTX 4090): 128 SMs, boost 2520 MHz,
# "Peak FP16 Tensor TFLOPS with FP16 Accumulate" 330.3 (dense), with FP32 accumulate 165.2; peak FP16/FP32 (non-tensor)
# 82.6 TFLOPS; 1008 GB/s (21 Gbps GDDR6X, 384-bit). tinybox green runs SUM_DTYPE HALF: fp16 accumulate, 330.3.
# speed_v_theoretical.py: "theoretical is nv_tflops=165" and asserts a BEAM'd 4096/8192 half gemm over 110/115 TFLOPS
# (0.67/0.70 of 165.2: the fp32-accumulate gemm the test runs) and gemv over 820/840 GB/s (0.81/0.83 of 1008).
# lanes: an SM has 4 partitions of 32 lanes (the same whitepaper)
RTX_4090 = CardSpec("RTX 4090", units=128, clock_ghz=2.52, tc_tflops=165.2, tc_tflops_f16acc=330.3, vector_tflops=82.6,
                gbps=1008.0, tc_achievable=115 / 165.2, mem_achievable=840 / 1008, lanes=128,
                source="NVIDIA Ada whitepaper v2.1 appendix A; " + SPEED_TEST)

# AMD Radeon RX 7900 XTX spec sheet (amd.com product page) and the RDNA 3 ISA guide: 96 CUs, boost 2500 MHz, peak
# half precision 122.8 TFLOPS (WMMA; the same rate with fp16 or fp32 accumulate), 61.4 TFLOPS fp32 (dual issue), packed
# fp16 on the vector units 122.8 / 2 without dual issue = 61.4; 960 GB/s (20 Gbps GDDR6, 384-bit).
# speed_v_theoretical.py: "theoretical is ... amd_tflops=123", asserts a BEAM'd half gemm over 65/60 TFLOPS (0.53/0.49 of
# 122.8) and gemv over 750 GB/s (0.78 of 960).
# lanes: a CU has 2 SIMD32 (AMD RDNA 3 instruction set architecture guide, "wave32")
RX_7900_XTX = CardSpec("RX 7900 XTX", units=96, clock_ghz=2.5, tc_tflops=122.8, tc_tflops_f16acc=122.8, vector_tflops=61.4,
                   gbps=960.0, tc_achievable=65 / 122.8, mem_achievable=750 / 960, lanes=64,
                   source="AMD RX 7900 XTX spec sheet; " + SPEED_TEST)

# AMD Instinct MI300X data sheet: 304 CUs, peak engine clock 2100 MHz, peak FP16 matrix 1307.4 TFLOPS (dense), FP16
# vector 163.4 TFLOPS, 5.3 TB/s HBM3. lanes: a CU has 4 SIMD16 running wave64 (AMD CDNA 3 instruction set architecture
# guide). The matrix rate is the same with fp32 accumulate (the data sheet states one FP16 matrix figure; CDNA 3's fp16
# MFMA, v_mfma_f32_16x16x16_f16, accumulates in fp32 only), which the v5.0 MI300X script ran (no SUM_DTYPE HALF).
# tc_achievable: tinygrad PR #9417 "MI300 mfma support" (merged 5c56cac0a0, 2025-03-18; the 16x16x16 fp32-accumulate
# MFMA tinygrad v5.0 shipped): a half gemm on the MI300X "190TFLOPS with hand-coded opts", "325TFLOPS with BEAM=3";
# the box ran BEAM 3 (v5.0 run_and_time.sh) and the model prices BEAM'd kernels (kernel.py), so 325 / 1307.4 = 0.249.
# mem_achievable: BabelStream on an MI300X (Azure/AI-benchmarking-guide Azure_Results/ND_MI300X_v5_results.md, "HBM
# Bandwidth", read in github:samuel-bohman/AI-benchmarking-guide@3de0c294fd): Triad 4.09 TB/s of 5.3 = 0.772 (no
# tinygrad gemv figure for the MI300X is published)
MI300X_BEAM3_GEMM_TFLOPS = 325.0   # PR #9417, BEAM=3
MI300X_TRIAD_GBPS = 4090.0         # BabelStream Triad, ND MI300X v5
# the card: the data sheet's peaks, the shares of the two figures above
MI300X = CardSpec("MI300X", units=304, clock_ghz=2.1, tc_tflops=1307.4, tc_tflops_f16acc=1307.4, vector_tflops=163.4,
              gbps=5300.0, tc_achievable=MI300X_BEAM3_GEMM_TFLOPS / 1307.4, mem_achievable=MI300X_TRIAD_GBPS / 5300.0,
              lanes=256, source="AMD Instinct MI300X data sheet; fractions: tinygrad PR #9417 (325 TFLOPS, BEAM=3), "
                                 "BabelStream Triad on ND MI300X v5 (4.09 TB/s)")

# NVIDIA H200 SXM data sheet: 132 SMs, 1980 MHz boost, 989.4 TFLOPS dense fp16 tensor, 4.8 TB/s HBM3e; the fractions
# are the RTX 4090's (tinygrad publishes none for it): the device check measures them (bench/device_check.py).
# (H100/H200 SXM: 133.8 TFLOPS fp16 non-tensor; an SM 4 partitions of 32 lanes, Hopper whitepaper)
H200 = CardSpec("H200 SXM", units=132, clock_ghz=1.98, tc_tflops=989.4, tc_tflops_f16acc=989.4, vector_tflops=133.8,
            gbps=4800.0, tc_achievable=115 / 165.2, mem_achievable=840 / 1008, lanes=128,
            source="NVIDIA H200 data sheet; fractions: the RTX 4090's in " + SPEED_TEST)

# blocks a unit holds at once, at most (NVIDIA Ada tuning guide: 24 resident blocks an SM; RDNA 3 / CDNA 3: 16
# wavefronts a SIMD, taken as 16 blocks a unit): bounds how many blocks of one launch fill a unit's lanes
MAX_BLOCKS_PER_UNIT = 16

# the least a BEAM'd thread is given: an UPCAST of 4 half elements, 8 bytes (tinygrad/codegen/opt/search.py's actions
# upcast by 2-8; 4 is the middle); bounds how far BEAM can spread a kernel over the card (kernel.py beam_fill)
BEAM_ELEMENT_BYTES = 8

# --- links, launch, host ---------------------------------------------------------------------------------------------

# tinygrad's fork of NVIDIA's open-gpu-kernel-modules (github:tinygrad/open-gpu-kernel-modules README, the P2P patch
# for the 4090): p2pBandwidthLatencyTest measures ~24.4 GB/s unidirectional between two 4090s on a tinybox (PCIe 4.0 x16)
GREEN_P2P_GBPS = 24.4
# PCI-SIG PCIe 4.0 x16: 16 GT/s x 16 lanes x 128b/130b = 31.5 GB/s a direction
PCIE4_X16_GBPS = 31.5
# the tinybox red's P2P bandwidth is not published: its cards sit on the same PCIe 4.0 x16 slots as the green's, so
# the green's measured share of the link (24.4 / 31.5) is applied to it (an estimate from the green box's README)
RED_P2P_GBPS = PCIE4_X16_GBPS * GREEN_P2P_GBPS / PCIE4_X16_GBPS
# AMD Instinct MI300X data sheet / platform brief: 7 Infinity Fabric links a GPU, 128 GB/s bidirectional each (64 GB/s a
# direction), fully connected 8-GPU board (OAM/UBB); the ring uses one link between neighbours. The green's achieved share
# of a link (24.4 / 31.5) is applied (an estimate: no P2P figure for tinygrad on the MI300X is published)
MI300X_XGMI_GBPS = 64.0 * GREEN_P2P_GBPS / PCIE4_X16_GBPS
# H200 SXM data sheet: NVLink 900 GB/s bidirectional a GPU; one card (dev_1gpu) never copies between cards
H200_NVLINK_GBPS = 450.0

# NVIDIA technical blog "Getting Started with CUDA Graphs" (developer.nvidia.com/blog/cuda-graphs/, 2019): a graph's
# kernels launched back to back cost ~3.4 us each for a ~2.9 us kernel, ~0.5 us of gap a kernel; tinygrad's HCQ graph
# writes its own command queue (tinygrad/runtime/graph/hcq.py) and is taken to be no slower
LAUNCH_US = 0.5
# The 8xMI300X box's runtime at v5.0 (tinygrad/runtime/ops_amd.py on branch mlperf_training_v5.0, AMDComputeQueue.exec,
# which tinygrad's HCQ graph calls for every kernel): on a part with 8 XCCs each dispatch is an ACQUIRE_MEM, the
# DISPATCH_DIRECT, a CS_PARTIAL_FLUSH (the kernel runs out), a RELEASE_MEM with the L2 written back and invalidated, an
# ACQUIRE_MEM and a cross-XCC barrier (two ATOMIC_MEM adds and two WAIT_REG_MEM polls on uncached memory, all 8 XCCs
# meeting). tinygrad PR #9783 "amd: faster xcc sync" (1798ce7e52, 2025-04-09, in v5.0) times that sequence around one
# two-element kernel on an MI300X (test/test_hcq.py test_speed_exec_time, GPU timestamps before and after the exec):
# "exec kernel time" 21.72, 21.00, 19.44 us (51.08, 51.40, 50.60 before it). Their mean is the gap a kernel costs on
# that box; it holds the tiny kernel's own run (an upper figure by that much). No source splits it by command.
MI300X_DISPATCH_US = (21.72 + 21.00 + 19.44) / 3
# a copy-engine (SDMA / DMA) transfer's start: the same blog's graph gap, taken for a copy node too
COPY_SETUP_US = 0.5
# tinygrad commit ff05bff221 ("put bert data shard inside jit", examples/mlperf/model_train.py BERT): "python time 45ms
# -> 9ms" a step on tinybox green; the loss is read back each step, so the host's time does not overlap the GPU's
HOST_MS = 9.0

# the two tinyboxes' factor (their geometric mean): the H200's, and what the MI300X's was before its shares had their
# own sources (docs/benchmarks.md shows the MI300X with it; the model does not apply it there)
GREEN_HELD_OUT = 547.0 / 646.0    # the red box's v5.0 step, measured / predicted from sources (below)
RED_HELD_OUT = 380.6 / 435.8      # the green box's
TINYBOX_HELD_OUT = (GREEN_HELD_OUT * RED_HELD_OUT) ** 0.5   # their geometric mean
# The one constant estimated from tinycorp's published runs (no public source gives it): how far a whole BERT step's
# kernels fall short of the SPEED TEST's achievable rates, as measured / predicted of the model from sources alone
# (docs/benchmarks.md shows both). Each system's is estimated LEAVING IT OUT: the green box's from the red box's v5.0
# step (547.0 ms measured / 646.0 predicted from sources), the red box's from the green box's (380.6 / 435.8), the
# H200's from both (their geometric mean: it borrows the 4090's speed-test shares). The MI300X has none (1.0): its
# shares are not the speed test's (PR #9417's gemm, BabelStream), so the speed test's shortfall says nothing of them;
# docs/benchmarks.md shows what the two tinyboxes' factor would make of it. resources/published/tinycorp-v5.0-bert.json
# holds the measured steps; tools/record_step_predictions.py prints the source-only predictions they are divided by.
HELD_OUT = {"CUDA:sm_89": GREEN_HELD_OUT, "AMDLLVM:gfx1100": RED_HELD_OUT, "AMDLLVM:gfx942": 1.0,
            "CUDA:sm_90": TINYBOX_HELD_OUT}

# each DRESS_TARGET's box: its card, the link between two cards (sources above), its runtime's launch gap, host time
BOXES = {
  "CUDA:sm_89": Box(RTX_4090, GREEN_P2P_GBPS, "tinygrad open-gpu-kernel-modules README (P2P, 4090)", LAUNCH_US,
                    COPY_SETUP_US, HOST_MS, HELD_OUT["CUDA:sm_89"]),
  "AMDLLVM:gfx1100": Box(RX_7900_XTX, RED_P2P_GBPS, "PCIe 4.0 x16 x the green box's measured P2P share", LAUNCH_US,
                         COPY_SETUP_US, HOST_MS, HELD_OUT["AMDLLVM:gfx1100"]),
  "AMDLLVM:gfx942": Box(MI300X, MI300X_XGMI_GBPS, "MI300X data sheet: xGMI 64 GB/s a direction x the green's P2P share",
                        MI300X_DISPATCH_US, COPY_SETUP_US, HOST_MS, HELD_OUT["AMDLLVM:gfx942"]),
  "CUDA:sm_90": Box(H200, H200_NVLINK_GBPS, "H200 data sheet: NVLink", LAUNCH_US, COPY_SETUP_US, HOST_MS,
                    HELD_OUT["CUDA:sm_90"]),
}

# The band of a prediction: the red box's three machines of v5.0 ran the same software 536-561 ms (~3 % apart,
# resources/published/tinycorp-v5.0-bert.json), and a model of achievable fractions from one speed test per card is
# no closer than the spread of that test's own targets (gemm 110 vs 115 TFLOPS on the 4090, 60 vs 65 on the 7900 XTX:
# ~8 %): the band is -15 % / +20 % of the prediction, the goal widened upward for what a model of achievable
# peaks leaves out (BEAM's worse kernels, the unmodelled cache misses)
BAND_LOW, BAND_HIGH = 0.85, 1.20
# the band in one sentence, as resources/predicted/steps.json and the audit state it
BAND_WHY = ("the model's achievable fractions come from one BEAM'd gemm and gemv a card (tinygrad "
            "test/external/speed_v_theoretical.py), whose own targets are ~8 % apart, and one system's machines ~3 % "
            "(v5.0 red); the band is -15 %/+20 % of the prediction")
