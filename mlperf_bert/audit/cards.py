"""Which of the cost model's platforms a received system's cards are: by what the cards are, not how they are spelled.

    match_cards(desc)   # Cards(name, count, key, platform, near, tinygrad)

A system description (systems/<system>.json) names its cards in `accelerator_model_name` and their number in
`accelerators_per_node`. Both are free text: "NVIDIA GeForce RTX 4090", "RTX4090", "GeForce RTX 4090 24GB" and
"nvidia geforce rtx 4090" name one card, and 6, "6" and "6.0" one count. card_key reduces a name to what it says of
the card: case, spaces, hyphens and underscores, the vendors' and product lines' words (VENDOR_WORDS) and a memory
size ("24GB", "192 GB HBM3") are dropped, so the key of each of those is "rtx4090". A system is a platform of
CARD_PLATFORMS when its key and count are those of the platform's platforms/<name>/system.json; a key that differs
from a known one by little (one inside the other, or NEAR_RATIO of their characters alike: "rtx4090d", "rx7900xt") is
`near` it: another card, which the model does not know, named as such by the audit.
"""
from __future__ import annotations
import dataclasses, difflib, json, re
from pathlib import Path

from mlperf_bert.constants import REPO, system_path

CARD_PLATFORMS = ("tinybox_green", "tinybox_red", "tinybox_8xMI300X")   # the platforms whose cards the cost model predicts
# the words of a card's name that name its maker or product line, not the card (the names of NVIDIA's, AMD's and
# Intel's cards as MLCommons' published system descriptions spell them, training_results_v0.7 ... v5.0)
VENDOR_WORDS = ("nvidia", "geforce", "amd", "radeon", "instinct", "intel", "habana", "gaudi accelerator", "tesla",
                "graphics", "gpu", "accelerator", "(r)", "(tm)", "®", "™")
MEMORY = re.compile(r"\b\d+(\.\d+)?\s*(gb|gib|g)\b(\s*(hbm\w*|gddr\w*))?")   # "24GB", "192 GB HBM3", "80g"
NEAR_RATIO = 0.8   # difflib's ratio from which two card keys are near (rtx4090 / rtx4080: 0.86; rtx4090 / mi300x: 0.31)


def card_key(name: str) -> str:
  """'NVIDIA GeForce RTX 4090 24GB' -> 'rtx4090' (see the module doc)."""
  t = MEMORY.sub(" ", name.lower())
  for w in VENDOR_WORDS: t = t.replace(w, " ")
  return re.sub(r"[^a-z0-9]", "", t)


def card_count(value: object) -> int | None:
  """6, '6', ' 6 ', 6.0, '6.0' -> 6; anything else (a bool, a fraction, text) -> None."""
  if isinstance(value, bool): return None
  try: f = float(str(value).strip())
  except ValueError: return None
  return int(f) if f.is_integer() and f >= 0 else None


@dataclasses.dataclass(frozen=True)
class Cards:
  """What a system description says of its cards, and what the model makes of it."""
  name: str                 # accelerator_model_name, stripped
  count: int | None         # accelerators_per_node as a number
  key: str                  # card_key(name)
  platform: str | None      # the CARD_PLATFORMS platform of the same cards and count
  near: str | None          # else: the known card (and its platform) the name is near, in words
  tinygrad: bool            # the description's framework names tinygrad

  def describe(self) -> str:
    return f"{self.count if self.count is not None else '?'} x {self.name}"


def _known(repo: Path) -> list[tuple[str, str, int | None, str]]:
  """(platform, key, count, name) of each CARD_PLATFORMS platform's system.json."""
  out = []
  for p in CARD_PLATFORMS:
    try: ref = json.loads(system_path(repo, p).read_text())
    except (OSError, ValueError): continue
    name = ref.get("accelerator_model_name") if isinstance(ref, dict) else None
    if isinstance(name, str):
      out.append((p, card_key(name), card_count(ref.get("accelerators_per_node")), name.strip()))
  return out


def _near(a: str, b: str) -> bool:
  return bool(a) and bool(b) and (a in b or b in a or difflib.SequenceMatcher(None, a, b).ratio() >= NEAR_RATIO)


def match_cards(desc: object, repo: Path = REPO) -> Cards | None:
  """The cards of a system description (None when it names none: no accelerator_model_name text)."""
  if not isinstance(desc, dict) or not isinstance(desc.get("accelerator_model_name"), str): return None
  name = desc["accelerator_model_name"].strip()
  count, key = card_count(desc.get("accelerators_per_node")), card_key(name)
  tinygrad = "tinygrad" in str(desc.get("framework", "")).lower()
  known = _known(repo)
  for p, k, c, _ in known:
    if key == k and count == c: return Cards(name, count, key, p, None, tinygrad)
  near = [f"{ref} in {c} ({p})" for p, k, c, ref in known if key == k or _near(key, k)]
  return Cards(name, count, key, None, "; ".join(dict.fromkeys(near)) or None, tinygrad)
