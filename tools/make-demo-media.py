#!/usr/bin/env python3
"""Draws the media of the built-in studies: small animated GIFs and the facility map.

Run from the repository root:  python3 tools/make-demo-media.py
Needs Pillow (`pip install pillow`). The output is deterministic, so re-running it on an unchanged
script leaves the files as they are. Everything is drawn from simple shapes; no external artwork.

Offshore emergency (crates/wozkit-core/studies/offshore-emergency/media):
  {husky,quad}_{move,inspect,extinguish,assess}.gif, alarm.gif, valves.gif, map.svg
Restaurant booking (crates/wozkit-core/studies/restaurant-booking/media):
  search.gif, booked.gif
"""

import math
from pathlib import Path

from PIL import Image, ImageDraw

ROOT = Path(__file__).resolve().parent.parent
OFFSHORE = ROOT / "crates/wozkit-core/studies/offshore-emergency/media"
RESTAURANT = ROOT / "crates/wozkit-core/studies/restaurant-booking/media"

W, H = 160, 120
FRAMES = 8
FRAME_MS = 160

# One small shared palette keeps every GIF a few kilobytes.
COLORS = {
    "sky": (196, 222, 240),
    "sea": (64, 120, 168),
    "deck": (120, 124, 130),
    "steel": (70, 74, 82),
    "dark": (34, 36, 40),
    "white": (250, 250, 250),
    "yellow": (246, 196, 40),
    "orange": (240, 128, 32),
    "red": (210, 46, 40),
    "smoke": (150, 150, 150),
    "smoke2": (190, 190, 190),
    "water": (60, 150, 230),
    "green": (60, 170, 90),
    "glass": (220, 240, 255),
    "paper": (245, 240, 225),
    "wood": (150, 100, 60),
}
_PALETTE = Image.new("P", (1, 1))
_flat = [c for rgb in COLORS.values() for c in rgb]
_PALETTE.putpalette(_flat + [0] * (768 - len(_flat)))


def c(name):
    return COLORS[name]


def new_frame(sea=True):
    im = Image.new("RGB", (W, H), c("sky"))
    d = ImageDraw.Draw(im)
    if sea:
        d.rectangle([0, 96, W, H], fill=c("sea"))
        d.rectangle([0, 86, W, 96], fill=c("deck"))
    return im, d


def save_gif(frames, path, ms=FRAME_MS):
    quantised = [f.quantize(palette=_PALETTE, dither=Image.Dither.NONE) for f in frames]
    path.parent.mkdir(parents=True, exist_ok=True)
    quantised[0].save(
        path,
        save_all=True,
        append_images=quantised[1:],
        duration=ms,
        loop=0,
        optimize=True,
        disposal=1,
    )


# --- shapes -------------------------------------------------------------------------------------


def husky(d, x, y, arm=False, wheel_phase=0):
    """A four-wheeled ground robot; (x, y) is the middle of its base on the deck."""
    d.rectangle([x - 20, y - 16, x + 20, y - 6], fill=c("yellow"), outline=c("dark"))
    d.rectangle([x - 14, y - 22, x + 6, y - 16], fill=c("steel"))
    for wx in (x - 14, x + 14):
        d.ellipse([wx - 6, y - 10, wx + 6, y + 2], fill=c("dark"))
        a = wheel_phase * math.pi / 4
        d.line([wx, y - 4, wx + 5 * math.cos(a), y - 4 + 5 * math.sin(a)], fill=c("smoke2"), width=1)
    if arm:
        d.line([x + 6, y - 20, x + 16, y - 30, x + 24, y - 28], fill=c("steel"), width=3)
    else:
        d.rectangle([x + 8, y - 28, x + 11, y - 16], fill=c("steel"))
        d.ellipse([x + 5, y - 33, x + 14, y - 25], fill=c("dark"))


def quad(d, x, y, spin=0):
    """A quadcopter seen from the side; (x, y) is the middle of its body."""
    d.line([x - 22, y - 4, x + 22, y - 4], fill=c("steel"), width=3)
    d.rounded_rectangle([x - 9, y - 8, x + 9, y + 4], radius=3, fill=c("red"), outline=c("dark"))
    for rx in (x - 22, x + 22):
        d.line([rx, y - 4, rx, y - 9], fill=c("steel"), width=2)
        half = 10 if spin % 2 == 0 else 4
        d.line([rx - half, y - 10, rx + half, y - 10], fill=c("dark"), width=2)
    d.line([x - 5, y + 4, x - 8, y + 9], fill=c("dark"))
    d.line([x + 5, y + 4, x + 8, y + 9], fill=c("dark"))


def tower(d, x, damaged=False):
    """A processing tower standing on the deck at horizontal position x."""
    d.rectangle([x - 14, 30, x + 14, 86], fill=c("steel"), outline=c("dark"))
    for yy in range(36, 84, 10):
        d.line([x - 14, yy, x + 14, yy + 8], fill=c("deck"))
        d.line([x + 14, yy, x - 14, yy + 8], fill=c("deck"))
    d.rectangle([x - 4, 18, x + 4, 30], fill=c("deck"), outline=c("dark"))
    if damaged:
        d.polygon([(x - 14, 40), (x - 4, 48), (x - 14, 56)], fill=c("dark"))
        d.line([x + 2, 60, x + 10, 70, x + 6, 78], fill=c("dark"), width=2)


def flame(d, x, base_y, size):
    """A flame of height `size` pixels standing on base_y."""
    if size <= 0:
        return
    w = size * 0.55
    d.polygon(
        [(x - w, base_y), (x - w * 0.6, base_y - size * 0.6), (x, base_y - size),
         (x + w * 0.6, base_y - size * 0.55), (x + w, base_y)],
        fill=c("orange"),
    )
    s = size * 0.55
    d.polygon([(x - w * 0.5, base_y), (x, base_y - s), (x + w * 0.5, base_y)], fill=c("yellow"))


def smoke(d, x, y, t, amount=3):
    for i in range(amount):
        k = (t + i * 3) % FRAMES
        r = 4 + k
        cy = y - k * 3 - i * 4
        cx = x + (k - 4) + i * 3
        d.ellipse([cx - r, cy - r, cx + r, cy + r], fill=c("smoke") if i % 2 else c("smoke2"))


def magnifier(d, x, y, r=12):
    d.ellipse([x - r, y - r, x + r, y + r], fill=c("glass"), outline=c("dark"), width=3)
    d.line([x + r * 0.7, y + r * 0.7, x + r * 1.6, y + r * 1.6], fill=c("dark"), width=5)


def check(d, x, y, s=8, colour="green"):
    d.line([x - s, y, x - s / 3, y + s * 0.7, x + s, y - s * 0.8], fill=c(colour), width=3)


def spray(d, x0, y0, x1, y1, t, colour="water"):
    """Droplets along a parabola from (x0, y0) to (x1, y1), shifted by the frame."""
    for i in range(7):
        f = ((i + t / 2) % 7) / 7
        x = x0 + (x1 - x0) * f
        y = y0 + (y1 - y0) * f - 18 * math.sin(math.pi * f)
        d.ellipse([x - 2, y - 2, x + 2, y + 2], fill=c(colour))


# --- offshore GIFs ------------------------------------------------------------------------------


def move(kind):
    frames = []
    for t in range(FRAMES):
        im, d = new_frame()
        tower(d, 138)
        # A flag marks the destination.
        d.line([112, 86, 112, 62], fill=c("dark"), width=2)
        d.polygon([(112, 62), (124, 66), (112, 70)], fill=c("red"))
        x = 18 + t * 11
        if kind == "husky":
            husky(d, x, 88, wheel_phase=t)
        else:
            quad(d, x, 54 - 6 * math.sin(t / FRAMES * math.pi), spin=t)
        frames.append(im)
    return frames


def inspect(kind):
    frames = []
    for t in range(FRAMES):
        im, d = new_frame()
        tower(d, 110)
        flame(d, 104, 62, 14 + (t % 2) * 3)
        smoke(d, 104, 44, t)
        if kind == "husky":
            husky(d, 40, 88)
            cam = (50, 58)
        else:
            quad(d, 52, 30 + (t % 2), spin=t)
            cam = (52, 38)
        # Camera field of view sweeping the tower.
        a = -0.3 + 0.6 * abs(math.sin(t / FRAMES * math.pi))
        tx, ty = 100, 60 + 20 * a
        d.line([cam, (tx, ty - 10)], fill=c("yellow"))
        d.line([cam, (tx, ty + 10)], fill=c("yellow"))
        magnifier(d, 138 + (t % 4), 18, r=8)
        frames.append(im)
    return frames


def extinguish(kind):
    frames = []
    for t in range(FRAMES):
        im, d = new_frame()
        tower(d, 118)
        size = max(0, 26 - t * 4)
        flame(d, 112, 70, size)
        if size:
            smoke(d, 112, 48, t, amount=2)
        else:
            check(d, 70, 24, s=10)
        if kind == "husky":
            husky(d, 42, 88, arm=True)
            spray(d, 66, 60, 106, 64, t)
        else:
            quad(d, 104, 14, spin=t)
            for i in range(4):
                yy = 26 + ((t * 5 + i * 9) % 36)
                d.ellipse([104 + (i % 2) * 6, yy, 108 + (i % 2) * 6, yy + 4], fill=c("water"))
        frames.append(im)
    return frames


def assess(kind):
    frames = []
    for t in range(FRAMES):
        im, d = new_frame()
        tower(d, 104, damaged=True)
        # A scan line walks down the damaged tower.
        sy = 24 + t * 8
        d.line([86, sy, 122, sy], fill=c("green"), width=2)
        if kind == "husky":
            husky(d, 40, 88)
        else:
            quad(d, 44, 34 + (t % 2), spin=t)
        # Clipboard with a growing list of ticks.
        d.rectangle([132, 40, 154, 70], fill=c("paper"), outline=c("dark"))
        for i in range(min(3, t // 2)):
            check(d, 143, 48 + i * 8, s=4)
        frames.append(im)
    return frames


def alarm():
    frames = []
    for t in range(FRAMES):
        im, d = new_frame()
        tower(d, 96)
        flame(d, 90, 64, 12 + (t % 3) * 3)
        smoke(d, 90, 44, t, amount=4)
        on = t % 2 == 0
        d.pieslice([14, 20, 50, 56], 180, 360, fill=c("red") if on else c("steel"), outline=c("dark"))
        d.rectangle([12, 38, 52, 44], fill=c("dark"))
        if on:
            for a in (200, 240, 270, 300, 340):
                r = math.radians(a)
                d.line([32 + 22 * math.cos(r), 38 + 22 * math.sin(r),
                        32 + 30 * math.cos(r), 38 + 30 * math.sin(r)], fill=c("red"), width=2)
        frames.append(im)
    return frames


def valves():
    frames = []
    for t in range(FRAMES):
        im, d = new_frame()
        d.rectangle([0, 52, W, 62], fill=c("steel"), outline=c("dark"))
        d.rectangle([92, 46, 108, 68], fill=c("deck"), outline=c("dark"))
        # The hand wheel turns a quarter per two frames, and the gas flow stops.
        a = math.radians(t * 22)
        cx, cy, r = 100, 32, 12
        d.line([100, 46, cx, cy], fill=c("dark"), width=3)
        d.ellipse([cx - r, cy - r, cx + r, cy + r], outline=c("red"), width=3)
        for k in range(2):
            b = a + k * math.pi / 2
            d.line([cx - r * math.cos(b), cy - r * math.sin(b), cx + r * math.cos(b), cy + r * math.sin(b)],
                   fill=c("red"), width=2)
        if t < FRAMES - 2:
            for i in range(3):
                x = 112 + ((t * 6 + i * 14) % 44)
                d.line([x, 57, x + 6, 57], fill=c("yellow"), width=2)
        else:
            check(d, 136, 30, s=8)
        husky(d, 52, 88, arm=True)
        frames.append(im)
    return frames


# --- facility map -------------------------------------------------------------------------------

# Must match world.locations (x, y in percent) in offshore-emergency/study.yaml.
LOCATIONS = [
    ("base", "Robot base", 14, 78),
    ("pu_nt", "North tower", 50, 16),
    ("pu_et", "East tower", 84, 46),
    ("pu_wt", "West tower", 18, 40),
    ("pu_st", "South tower", 56, 74),
]
MAP_W, MAP_H = 400, 300


def facility_map():
    pos = {lid: (px * MAP_W / 100, py * MAP_H / 100) for lid, _, px, py in LOCATIONS}
    # Walkways: a ring around the platform through every location.
    ring = ["base", "pu_wt", "pu_nt", "pu_et", "pu_st"]
    path = " ".join(f"{'M' if i == 0 else 'L'}{pos[l][0]:g} {pos[l][1]:g}" for i, l in enumerate(ring)) + " Z"
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {MAP_W} {MAP_H}" '
        'role="img" aria-labelledby="t">',
        '<title id="t">Offshore processing facility map</title>',
        f'<rect width="{MAP_W}" height="{MAP_H}" fill="#4078a8"/>',
        '<rect x="20" y="20" width="360" height="260" rx="10" fill="#9a9ea6" stroke="#222428" stroke-width="3"/>',
        f'<path d="{path}" stroke="#6e7280" stroke-width="6" fill="none"/>',
    ]
    for lid, name, _, _ in LOCATIONS:
        x, y = pos[lid]
        if lid == "base":
            out.append(f'<rect x="{x - 22:g}" y="{y - 14:g}" width="44" height="28" fill="#3caa5a" stroke="#222428" stroke-width="2"/>')
            out.append(f'<text x="{x:g}" y="{y + 5:g}" font-family="sans-serif" font-size="13" text-anchor="middle" fill="#fff">H</text>')
            label_y = y + 30
        else:
            out.append(f'<rect x="{x - 16:g}" y="{y - 16:g}" width="32" height="32" fill="#464a52" stroke="#222428" stroke-width="2"/>')
            out.append(f'<path d="M{x - 16:g} {y - 16:g} L{x + 16:g} {y + 16:g} M{x + 16:g} {y - 16:g} L{x - 16:g} {y + 16:g}" stroke="#787c82" stroke-width="2"/>')
            label_y = y + 42 if lid == "pu_et" else y + 32
        # The alarm is not drawn here: the room draws it over the map from the study's
        # `world.alarm`, so it can show it cleared.
        out.append(f'<text x="{x:g}" y="{label_y:g}" font-family="sans-serif" font-size="13" text-anchor="middle" fill="#222428">{name}</text>')
    # Wind arrow: from the south east.
    out.append('<g transform="translate(340 244)"><circle r="20" fill="#fafafa" stroke="#222428"/>'
               '<path d="M11 11 L-7 -7" stroke="#222428" stroke-width="3"/><path d="M-11 -11 L-1 -9 L-9 -1 Z" fill="#222428"/>'
               '<text y="32" font-family="sans-serif" font-size="11" text-anchor="middle" fill="#222428">wind SE</text></g>')
    out.append('<text x="200" y="14" font-family="sans-serif" font-size="12" text-anchor="middle" fill="#fff">N</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


# --- restaurant GIFs ----------------------------------------------------------------------------


def search():
    frames = []
    rows = 5
    for t in range(FRAMES):
        im, d = new_frame(sea=False)
        d.rectangle([20, 14, 110, 106], fill=c("paper"), outline=c("dark"))
        for i in range(rows):
            y = 24 + i * 17
            hit = i == 3 and t >= FRAMES - 3
            d.rectangle([28, y, 102, y + 10], fill=c("green") if hit else c("smoke2"))
        my = 24 + (t % rows) * 17 if t < FRAMES - 3 else 24 + 3 * 17
        magnifier(d, 120, my + 4, r=12)
        frames.append(im)
    return frames


def booked():
    frames = []
    for t in range(FRAMES):
        im, d = new_frame(sea=False)
        d.rectangle([40, 26, 120, 100], fill=c("white"), outline=c("dark"), width=2)
        d.rectangle([40, 26, 120, 42], fill=c("red"))
        for ring in (58, 102):
            d.rectangle([ring - 2, 20, ring + 2, 32], fill=c("dark"))
        for i in range(3):
            for j in range(4):
                x, y = 48 + j * 18, 50 + i * 16
                d.rectangle([x, y, x + 10, y + 9], fill=c("smoke2"))
        if t >= 3:
            s = min(14, 4 + (t - 3) * 3)
            check(d, 84, 70, s=s)
        frames.append(im)
    return frames


def main():
    for kind in ("husky", "quad"):
        save_gif(move(kind), OFFSHORE / f"{kind}_move.gif")
        save_gif(inspect(kind), OFFSHORE / f"{kind}_inspect.gif")
        save_gif(extinguish(kind), OFFSHORE / f"{kind}_extinguish.gif")
        save_gif(assess(kind), OFFSHORE / f"{kind}_assess.gif")
    save_gif(alarm(), OFFSHORE / "alarm.gif", ms=250)
    save_gif(valves(), OFFSHORE / "valves.gif")
    (OFFSHORE / "map.svg").write_text(facility_map())
    save_gif(search(), RESTAURANT / "search.gif", ms=220)
    save_gif(booked(), RESTAURANT / "booked.gif", ms=220)
    total = sum(p.stat().st_size for d in (OFFSHORE, RESTAURANT) for p in d.iterdir())
    print(f"wrote media: {total / 1024:.1f} KB in total")


if __name__ == "__main__":
    main()
