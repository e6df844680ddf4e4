"""One kernel's and one copy's time (mlperf_bert/train/cost/), from what the dress records of it (train/dress/measure.py
`call_records`): FLOPs and bytes (tinygrad's estimates), launch dimensions, the accumulate dtype of its tensor-core
uops (None without), and a copy's bytes.

A kernel runs at the card's achievable peak (hardware.py, each card's sources: a BEAM'd tinygrad gemm's share of the
tensor-core peak, a BEAM'd gemv's or a stream benchmark's share of the memory bandwidth) times how much of the card its
launch fills:
  - waves: its blocks over the card's compute units, the last wave partly empty (wave quantization);
  - lanes: a unit issues on all its SIMDs only with `card.lanes` threads resident; fewer threads leave them idle.
Time = max(FLOPs / compute rate, bytes / memory rate) + nothing else (the launch gap is the simulation's).
"""
from __future__ import annotations
import math
from dataclasses import dataclass

from mlperf_bert.train.cost.hardware import BEAM_ELEMENT_BYTES, MAX_BLOCKS_PER_UNIT, Box, CardSpec


@dataclass(frozen=True)
class KernelTime:
  ms: float
  bound: str          # "compute" | "memory"
  fill: float         # share of the card the launch fills (waves x lanes)


def fill(card: CardSpec, global_size, local_size) -> float:
  """The share of the card a launch of `global_size` blocks of `local_size` threads keeps busy: the mean filling of
  its waves over the compute units times the lanes a unit has resident."""
  blocks = max(1, math.prod(int(x) for x in global_size))
  threads = max(1, math.prod(int(x) for x in local_size)) if local_size else 1
  waves = math.ceil(blocks / card.units)
  wave_fill = blocks / (waves * card.units)
  resident = min(waves, MAX_BLOCKS_PER_UNIT) * threads
  lane_fill = min(1.0, resident / card.lanes)
  return wave_fill * lane_fill


def beam_fill(card: CardSpec, global_size, local_size, nbytes: float) -> float:
  """The fill a BEAM search can reach: the better of the compiled launch's and a launch that gives each thread
  BEAM_ELEMENT_BYTES of the kernel's bytes in blocks of `card.lanes` threads (BEAM's LOCAL, GROUP/GROUPTOP and UPCAST
  actions split a reduction over threads and spread its outputs: tinygrad/codegen/opt/search.py), waves quantized."""
  threads = max(1, int(nbytes // BEAM_ELEMENT_BYTES))
  return max(fill(card, global_size, local_size),
             fill(card, (max(1, -(-threads // card.lanes)),), (min(threads, card.lanes),)))


def tc_tflops(card: CardSpec, acc: str | None) -> float:
  """The card's peak for a kernel whose tensor-core uops accumulate in `acc` (None: the vector units)."""
  if acc is None: return card.vector_tflops
  return card.tc_tflops_f16acc if acc == "half" else card.tc_tflops


def kernel_time(card: CardSpec, flops: float, nbytes: float, global_size, local_size, acc: str | None,
                beam: bool = True) -> KernelTime:
  """One kernel on `card`; `beam`: at the fill a BEAM search can reach (beam_fill), else the compiled launch's."""
  f = beam_fill(card, global_size, local_size, nbytes) if beam else fill(card, global_size, local_size)
  compute = flops / (tc_tflops(card, acc) * 1e12 * card.tc_achievable * f)
  memory = nbytes / (card.gbps * 1e9 * card.mem_achievable * f)
  return KernelTime(1e3 * max(compute, memory), "compute" if compute >= memory else "memory", f)


def copy_ms(box: Box, nbytes: float) -> float:
  """One peer-to-peer copy on the sender's copy queue: its setup and its bytes over the link."""
  return box.copy_setup_us / 1e3 + 1e3 * nbytes / (box.link_gbps * 1e9)
