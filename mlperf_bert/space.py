"""Disk space before a job writes: the filesystem a path lies on, its free bytes, and the one-line refusal of a job
whose writes would not fit.

    fs = filesystem_of(path)                 # Filesystem(mount, fstype, source, free, total)
    check_space({folder: bytes, ...}, what="the train job of seed 0", detail="3 kept states of 50.8 MB, ...",
                shrink="lower EVIDENCE_STATE_FREQ ...")

A check groups the folders by filesystem and compares what each filesystem must take with its free bytes (those an
unprivileged writer may use, statvfs f_bavail); not enough is a UserError naming the need, the free space, the
filesystem, the knobs that shrink the need and the setting that writes anyway. Nothing is written by a check.

A filesystem can also run out of inodes (files) with bytes to spare: a write then fails with the same ENOSPC "No space
left on device". `out_of_inodes(path)` tells the two apart (statvfs f_favail, f_ffree), and every writer's one line
says which: the space check, fileio.write_error (atomic writes), the job log (snakejob.job_log) and the basedir lock.
"""
from __future__ import annotations
import dataclasses, os
from pathlib import Path
from typing import Mapping

from mlperf_bert.errors import UserError

# how to write anyway, named in every refusal: the config key `space_check` (default true), or the commands' flag
OVERRIDE = "snakemake --config space_check=false, or python -m mlperf_bert ... --no-space-check, to write anyway"


@dataclasses.dataclass(frozen=True)
class Filesystem:
  mount: str     # its mount point
  fstype: str    # tmpfs, ext4, nfs4, ... ("" when /proc/self/mountinfo cannot say)
  source: str    # the device or server
  free: int      # bytes an unprivileged writer may still write
  total: int
  dev: int       # st_dev of the mount: folders with the same dev share the free bytes

  def describe(self) -> str:
    kind = " ".join([self.fstype] * bool(self.fstype) + [self.source] * bool(self.source and self.source != self.fstype))
    return f"{self.mount} ({kind})" if kind else self.mount


def human(n: float) -> str:
  """Bytes in decimal units, three significant digits: 0 B, 812 B, 4.12 MB, 186 MB, 4.03 GB, 1.2 TB."""
  n = float(n)
  for unit in ("B", "kB", "MB", "GB", "TB"):
    if abs(n) < 1000 or unit == "TB":
      return f"{n:.0f} {unit}" if unit == "B" or abs(n) >= 100 else f"{n:.3g} {unit}"
    n /= 1000
  raise AssertionError


def _existing(path: Path) -> Path:
  """`path` or its nearest existing ancestor (a folder a job will create lies on its parent's filesystem)."""
  p = Path(os.path.abspath(path))
  while not p.exists() and p != p.parent:
    p = p.parent
  return p


def _unescape(field: str) -> str:
  """mountinfo's octal escapes (\\040 for a space, ...)."""
  out, i = [], 0
  while i < len(field):
    if field[i] == "\\" and len(field) >= i + 4 and field[i + 1:i + 4].isdigit():
      out.append(chr(int(field[i + 1:i + 4], 8))); i += 4
    else:
      out.append(field[i]); i += 1
  return "".join(out)


def _mount_of(real: str) -> tuple[str, str, str]:
  """(mount point, fstype, source) of the deepest mount holding the resolved path `real`."""
  best = ("/", "", "")
  try:
    lines = Path("/proc/self/mountinfo").read_text().splitlines()
  except OSError:
    return best
  for line in lines:
    left, _, right = line.partition(" - ")
    f, r = left.split(), right.split()
    if len(f) < 5 or len(r) < 2:
      continue
    mount = _unescape(f[4])
    if (real == mount or real.startswith(mount.rstrip("/") + "/")) and len(mount) >= len(best[0]):
      best = (mount, r[0], _unescape(r[1]))
  return best


def filesystem_of(path: str | os.PathLike) -> Filesystem:
  """The filesystem `path` (or, when it does not exist yet, its nearest existing folder) lies on."""
  p = _existing(Path(path))
  st = os.statvfs(p)
  mount, fstype, source = _mount_of(os.path.realpath(p))
  return Filesystem(mount, fstype, source, st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize, os.stat(p).st_dev)


# what to do when a filesystem has no inodes left, named in each such line
INODE_FIX = ("delete files there (many small ones use up inodes, not bytes), or point the config's basedir at a "
             "filesystem with more inodes (a tmpfs: mount -o remount,nr_inodes=<more>), and rerun")


def out_of_inodes(path: str | os.PathLike) -> str:
  """'' unless the filesystem of `path` (or its nearest existing folder) has no free inodes (statvfs f_favail, or
  f_ffree for root) though it counts them; else what to say of it: "its filesystem <mount> (tmpfs) has no free
  inodes (all 64 used; 49.9 MB free): no file can be created there". A filesystem that counts no inodes (f_files 0:
  btrfs, some FUSE) or that it cannot ask is never said to be out of them."""
  try:
    p = _existing(Path(path))
    st = os.statvfs(p)
  except OSError:
    return ""
  free = st.f_ffree if os.geteuid() == 0 else st.f_favail
  if not st.f_files or free > 0:
    return ""
  mount, fstype, source = _mount_of(os.path.realpath(p))
  fs = Filesystem(mount, fstype, source, st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize, 0)
  return (f"its filesystem {fs.describe()} has no free inodes (all {st.f_files:,} used; {human(fs.free)} free): "
          "no file can be created there")


def shortfalls(needs: Mapping[str | os.PathLike, int]) -> list[tuple[Filesystem, int, list[Path]]]:
  """(filesystem, bytes needed there, its folders) of every filesystem of `needs` ({folder: bytes}) whose free bytes
  are fewer than the sum of its folders' needs."""
  by_dev: dict[int, tuple[Filesystem, int, list[Path]]] = {}
  for folder, n in needs.items():
    fs = filesystem_of(folder)
    _, total, folders = by_dev.get(fs.dev, (fs, 0, []))
    by_dev[fs.dev] = (fs, total + int(n), folders + [Path(folder)])
  return [(fs, n, folders) for fs, n, folders in by_dev.values() if n > fs.free]


def check_space(needs: Mapping[str | os.PathLike, int], *, what: str, detail: str, shrink: str) -> None:
  """UserError (one line) when a filesystem of `needs` ({folder: bytes it will write}) has fewer free bytes than its
  folders need: `what` writes it, `detail` what it is made of, `shrink` the knobs that need less; the line names
  OVERRIDE too. Writes nothing."""
  for folder in needs:  # bytes to spare but no inode: nothing can be created (the same ENOSPC as a full disk)
    if why := out_of_inodes(folder):
      raise UserError(f"no room for {what} in {folder}: {why}; {INODE_FIX}")
  short = shortfalls(needs)
  if not short:
    return
  fs, need, folders = short[0]
  top = Path(os.path.commonpath([os.path.abspath(f) for f in folders])) if len(folders) > 1 else folders[0]
  where = str(top) + (f" ({', '.join(os.path.relpath(os.path.abspath(f), os.path.abspath(top)) for f in folders)})"
                      if len(folders) > 1 else "")
  raise UserError(f"not enough disk space for {what}: it writes {human(need)} ({detail}) into {where}; its "
                  f"filesystem {fs.describe()} has {human(fs.free)} free; {shrink}, or free space there and rerun "
                  f"({OVERRIDE})")
