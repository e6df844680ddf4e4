"""The compiler of a dress's target: NVIDIA's nvrtc for CUDA targets, LLVM 19 for AMDLLVM ones, none for NULL:plain.

    renderer, arch = parse_target("CUDA:sm_89", where)
    compiler = find_compiler(renderer, "CUDA:sm_89", os.environ)   # its library, and the variable that names it

CUDA targets need NVIDIA's nvrtc even to render (PyPI nvidia-cuda-nvrtc-cu12, the `dress` extra; its library is found
from the package and named by NVRTC_PATH). AMDLLVM targets compile with LLVM 19 (Debian libllvm19, named by
LLVM_PATH): that is not the HIP/comgr code generator a real DEV=AMD uses first. Nothing here imports tinygrad.
"""
from __future__ import annotations
import dataclasses, glob, importlib.util, re
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Callable, Mapping

from mlperf_bert.errors import UserError

NVRTC_WHEEL, NVRTC_LIB = "nvidia-cuda-nvrtc-cu12", "libnvrtc.so.12"
LLVM_CANDIDATES = ("/usr/lib/llvm-19/lib/libLLVM.so.1", "/usr/lib/llvm-19/lib/libLLVM-19.so",
                   "/usr/lib/*-linux-gnu/libLLVM.so.19.1", "/usr/lib/*-linux-gnu/libLLVM-19.so")
# renderer of a DRESS_TARGET -> (compiler, the pattern its arch must match, an example)
RENDERERS = {"CUDA": ("nvrtc", r"sm_\d{2,3}a?", "CUDA:sm_89"), "AMDLLVM": ("llvm19", r"gfx[0-9a-f]{3,4}", "AMDLLVM:gfx1100"),
             "NULL": ("none", r"plain", "NULL:plain")}   # tinygrad's own NULL renderer ("NULL" alone is YAML's null)


@dataclasses.dataclass(frozen=True)
class Compiler:
  name: str            # nvrtc | llvm19 | none
  library: str | None  # the shared library tinygrad loads
  env: dict[str, str]  # NVRTC_PATH / LLVM_PATH
  describe: str        # one line for the report


def parse_target(text: Any, where: str) -> tuple[str, str]:
  """(renderer, arch) of a DRESS_TARGET such as CUDA:sm_89, AMDLLVM:gfx942 or NULL; a one-line error otherwise."""
  ren, _, arch = str(text).partition(":")
  ren = ren.upper()
  known = ", ".join(f"{r} ({ex})" for r, (_, _, ex) in RENDERERS.items())
  if ren not in RENDERERS or not re.fullmatch(RENDERERS[ren][1], arch):
    raise UserError(f"{where}: DRESS_TARGET={text!r} is not a target the dress can compile for; use one of {known}")
  return ren, arch


def wheel_nvrtc() -> str | None:
  """libnvrtc.so.12 of the nvidia-cuda-nvrtc-cu12 wheel, or None."""
  spec = importlib.util.find_spec("nvidia")
  for root in (spec.submodule_search_locations or []) if spec else []:
    for name in (NVRTC_LIB, "libnvrtc.so"):
      if (lib := Path(root) / "cuda_nvrtc" / "lib" / name).is_file(): return str(lib)
  return None


def debian_llvm19() -> str | None:
  """libLLVM of Debian's libllvm19 (the first of LLVM_CANDIDATES present), or None."""
  for pattern in LLVM_CANDIDATES:
    if hits := sorted(glob.glob(pattern)): return hits[0]
  return None


def _nvrtc_line(lib: str, target: str) -> str:
  try: ver = f"{NVRTC_WHEEL} {version(NVRTC_WHEEL)}"
  except PackageNotFoundError: ver = "NVRTC_PATH"
  return f"NVIDIA nvrtc ({ver}, {Path(lib).name}) for {target}"


@dataclasses.dataclass(frozen=True)
class CompilerSource:
  """Where a renderer's compiler library comes from: the variable that names it, else `locate`, else what to install."""
  name: str                              # nvrtc | llvm19 (RENDERERS' names)
  env_var: str                           # NVRTC_PATH | LLVM_PATH: overrides `locate`; tinygrad reads it
  locate: Callable[[], str | None]       # the library when env_var names none
  library: str                           # what env_var must name
  needs: str                             # what is missing, for the error: "the CUDA renderer needs NVIDIA's nvrtc"
  install: str                           # how to get it, for the error
  describe: Callable[[str, str], str]    # (library, target) -> the report's line


COMPILER_SOURCES = {s.name: s for s in (
  CompilerSource("nvrtc", "NVRTC_PATH", wheel_nvrtc, NVRTC_LIB, "the CUDA renderer needs NVIDIA's nvrtc",
                 f"install it with `bash scripts/setup.sh dress` (pip {NVRTC_WHEEL}) or set NVRTC_PATH to {NVRTC_LIB}",
                 _nvrtc_line),
  CompilerSource("llvm19", "LLVM_PATH", debian_llvm19, "LLVM 19's libLLVM", "the AMDLLVM renderer needs LLVM 19",
                 "install Debian's libllvm19 (`bash scripts/setup.sh dress` or apt-get install libllvm19) or set LLVM_PATH",
                 lambda lib, target: f"LLVM 19 ({Path(lib).name}) for {target}: not the HIP/comgr code generator a "
                                     f"real DEV=AMD uses first"))}


def find_library(source: CompilerSource, override: str | None, target: str) -> str:
  """The library of `source`: `override` (its env_var's value) when set, else the one `locate` finds; a one-line error
  when the override is not a file or nothing is found."""
  if override and not Path(override).is_file():
    raise UserError(f"DRESS_TARGET {target}: {source.env_var}={override} is not a file; unset it or point it at "
                    f"{source.library}")
  if lib := override or source.locate(): return lib
  raise UserError(f"DRESS_TARGET {target}: {source.needs} and none was found; {source.install}")


def find_compiler(renderer: str, target: str, environ: Mapping[str, str]) -> Compiler:
  """The compiler of a target's renderer, or a one-line error that says what to install."""
  if (source := COMPILER_SOURCES.get(RENDERERS[renderer][0])) is None:
    return Compiler("none", None, {}, "tinygrad's NULL renderer: no compiler (kernels are rendered, never compiled)")
  lib = find_library(source, environ.get(source.env_var), target)
  return Compiler(source.name, lib, {source.env_var: lib}, source.describe(lib, target))
