"""One step's timeline as a picture (mlperf_bert/train/cost/): each device's two queues (compute, copy), and the host's
when it has events, over one step, as a self-contained SVG (no script, no font, no link outside it).

    svg = draw_events([Event("0", "compute", 0.0, 1.5, "matmul", "r_64_32"), ...], title="tinybox_green, BS 96")
    write_picture("step.svg", answer)      # the dress's answer["cost"]["events"], or a note that it has none

Each event is a bar from its start to its end on its device's queue, coloured by its kind (events.KINDS); events of
one kind closer than a pixel on one queue are drawn as one bar, and so are runs of events each narrower than a pixel
(coloured by the kind that ran longest in them; the tooltip counts them), so a step of thousands of kernels a device
stays a small file (at most about a bar a pixel a queue).
"""
from __future__ import annotations
import os
from html import escape
from typing import Any, Iterable

from mlperf_bert.train.cost.events import KINDS, Event

COLOURS = {"matmul": "#1f77b4", "other": "#9ecae1", "copy": "#ff7f0e", "allreduce": "#d62728", "launch": "#7f7f7f",
           "host": "#2ca02c"}
QUEUES = ("compute", "copy", "host")
WIDTH, LEFT, LANE, GAP, TOP = 1100, 110, 14, 4, 34


def _lanes(events: list[Event]) -> list[tuple[str, str]]:
  """(device, queue) of every lane, devices in numeric order, the host last; a device's compute and copy queues
  always (an idle copy queue is an answer too)."""
  devs = sorted({e.device for e in events if e.device != "host"}, key=lambda d: (not d.isdigit(), int(d) if d.isdigit() else 0, d))
  lanes = [(d, q) for d in devs for q in ("compute", "copy")]
  lanes += sorted({(e.device, e.queue) for e in events if (e.device, e.queue) not in lanes},
                  key=lambda x: (x[0] != "host", x[0], QUEUES.index(x[1]) if x[1] in QUEUES else 9))
  return lanes


def _bars(events: Iterable[Event], scale: float) -> list[tuple[float, float, str, str, int]]:
  """(start, end, kind, name, count) of one lane: neighbours closer than a pixel merged when they are of one kind, or
  when both are narrower than a pixel (then the bar takes the kind that ran longest in it)."""
  out: list[list] = []
  for e in sorted(events, key=lambda e: (e.start_ms, e.end_ms)):
    b = out[-1] if out else None
    thin = b is not None and (b[1] - b[0]) * scale < 1.0 and (e.end_ms - e.start_ms) * scale < 1.0
    if b is not None and (e.start_ms - b[1]) * scale < 1.0 and (b[2] == e.kind or thin):
      b[1] = max(b[1], e.end_ms)
      b[4] += 1
      b[5][e.kind] = b[5].get(e.kind, 0.0) + e.end_ms - e.start_ms
      b[2] = max(b[5], key=b[5].get)
    else:
      out.append([e.start_ms, e.end_ms, e.kind, e.name, 1, {e.kind: e.end_ms - e.start_ms}])
  return [(s, e, k, n, c) for s, e, k, n, c, _ in out]


def _ticks(end: float) -> list[float]:
  """Round tick values from 0 to `end` ms, 4 to 10 of them."""
  step = 10 ** len(str(int(max(end, 1e-9) / 4))) / 10 if end >= 4 else 0.5
  while end / step > 10: step *= 2
  return [i * step for i in range(int(end / step) + 1)]


def draw_events(events: list[Event], title: str = "") -> str:
  """The SVG of one step's events: a lane a (device, queue), a bar an event (or a pixel's run of one kind)."""
  for e in events:
    if e.kind not in KINDS: raise ValueError(f"event {e.name!r}: kind {e.kind!r} is not one of {', '.join(KINDS)}")
  if not events: return note_svg("no events to draw")
  t0 = min(e.start_ms for e in events)
  end = max(e.end_ms for e in events) - t0
  scale = (WIDTH - LEFT - 20) / max(end, 1e-9)
  lanes = _lanes(events)
  height = TOP + len(lanes) * (LANE + GAP) + 50
  x = lambda ms: LEFT + (ms - t0) * scale
  out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" '
         f'font-family="sans-serif" font-size="11">',
         f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
         f'<text x="{LEFT}" y="16" font-size="13">{escape(title or "one step")}: {end:.1f} ms</text>']
  for i, (dev, q) in enumerate(lanes):
    y = TOP + i * (LANE + GAP)
    label = "host" if dev == "host" else f"device {dev} {q}"
    out.append(f'<text x="4" y="{y + LANE - 3}">{escape(label)}</text>')
    out.append(f'<rect x="{LEFT}" y="{y}" width="{WIDTH - LEFT - 20}" height="{LANE}" fill="#f4f4f4"/>')
    for s, e, kind, name, n in _bars([ev for ev in events if (ev.device, ev.queue) == (dev, q)], scale):
      tip = (f"{name} and {n - 1} more, mostly {kind}" if n > 1 else f"{name} ({kind})") + f": {s - t0:.3f}-{e - t0:.3f} ms"
      out.append(f'<rect class="{kind}" x="{x(s):.2f}" y="{y}" width="{max((e - s) * scale, 0.5):.2f}" height="{LANE}" '
                 f'fill="{COLOURS[kind]}"><title>{escape(tip)}</title></rect>')
  axis = TOP + len(lanes) * (LANE + GAP) + 4
  out.append(f'<line x1="{LEFT}" y1="{axis}" x2="{WIDTH - 20}" y2="{axis}" stroke="black"/>')
  for t in _ticks(end):
    out.append(f'<line x1="{x(t0 + t):.2f}" y1="{axis}" x2="{x(t0 + t):.2f}" y2="{axis + 4}" stroke="black"/>'
               f'<text x="{x(t0 + t):.2f}" y="{axis + 15}" text-anchor="middle">{t:g} ms</text>')
  lx = LEFT
  for kind in KINDS:
    out.append(f'<rect x="{lx}" y="{axis + 24}" width="10" height="10" fill="{COLOURS[kind]}"/>'
               f'<text x="{lx + 14}" y="{axis + 33}">{kind}</text>')
    lx += 90
  out.append("</svg>")
  return "\n".join(out) + "\n"


def note_svg(text: str) -> str:
  """A small SVG that says `text` (where there is nothing to draw)."""
  return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="40" viewBox="0 0 {WIDTH} 40" '
          f'font-family="sans-serif" font-size="12"><rect width="{WIDTH}" height="40" fill="white"/>'
          f'<text x="10" y="24">{escape(text)}</text></svg>\n')


def answer_svg(answer: dict[str, Any]) -> str:
  """The picture of the dress's answer: its step's events (answer["cost"]["events"], dicts of Event's fields), or a
  note that the answer has none."""
  events = (answer.get("cost") or {}).get("events")
  if not events:
    return note_svg(f"the dress of {answer.get('platform', '?')} holds no step timeline (answer['cost']['events']): "
                    "the step-time model did not run")
  layers = answer["cost"].get("events_layers")
  title = (f"{answer.get('platform', '')}: {answer.get('devices', '?')} x {answer.get('target', '?')}, "
           f"BS {answer.get('batch_size', '?')}, one train step" + (f" at {layers} layers" if layers else ""))
  return draw_events([Event(**e) for e in events], title=title)


def write_picture(out: str | os.PathLike, answer: dict[str, Any]) -> None:
  """answer_svg into `out`, atomically."""
  from mlperf_bert.fileio import atomic_path
  with atomic_path(out) as tmp: tmp.write_text(answer_svg(answer))
