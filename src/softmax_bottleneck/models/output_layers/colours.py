"""How far apart two plot colours look: CIEDE2000 colour difference ΔE₀₀ in CIELAB (CIE 15:2004; Sharma, Wu &
Dalal 2005, "The CIEDE2000 colour-difference formula: implementation notes").

A colour is converted sRGB → linear RGB (the sRGB transfer curve, IEC 61966-2-1) → CIE XYZ (D65) → CIELAB
(reference white D65), then ΔE₀₀ combines the lightness, chroma and hue differences with their weights. ΔE₀₀ ≈ 1 is
a just-noticeable difference side by side; lines and markers in a figure need far more. The registry refuses a
layer whose colour is within :data:`MIN_DELTA_E` of another variant's.

Colours are hex strings (``#rrggbb``, ``#rgb``) or, through matplotlib (imported only then), any colour name it
knows (``tab:blue``, ``red``).
"""

from __future__ import annotations

import math
import re

#: the smallest ΔE₀₀ between two variants' colours (the study's own colours are 16 or more apart)
MIN_DELTA_E = 10.0
_HEX = re.compile(r"^#([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$")
#: sRGB (linear) → XYZ, D65 (IEC 61966-2-1)
_RGB_TO_XYZ = ((0.4124564, 0.3575761, 0.1804375), (0.2126729, 0.7151522, 0.0721750), (0.0193339, 0.1191920, 0.9503041))
_WHITE_D65 = (0.95047, 1.0, 1.08883)


def to_rgb(colour: str) -> tuple[float, float, float]:
    """``colour`` as sRGB in [0, 1]; ValueError naming it when it is no colour."""
    text = str(colour).strip()
    match = _HEX.match(text)
    if match:
        digits = match.group(1)
        if len(digits) == 3:
            digits = "".join(c * 2 for c in digits)
        return tuple(int(digits[i : i + 2], 16) / 255 for i in (0, 2, 4))
    import matplotlib.colors

    try:
        return tuple(float(c) for c in matplotlib.colors.to_rgb(text))
    except ValueError:
        raise ValueError(f"{colour!r} is not a colour (use #rrggbb)") from None


def to_hex(colour: str) -> str:
    """``colour`` as ``#rrggbb`` (lower case)."""
    return "#" + "".join(f"{round(c * 255):02x}" for c in to_rgb(colour))


def to_lab(colour: str) -> tuple[float, float, float]:
    """CIELAB (L*, a*, b*) of an sRGB colour, reference white D65."""
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in to_rgb(colour)]
    xyz = [sum(m * c for m, c in zip(row, linear, strict=True)) for row in _RGB_TO_XYZ]

    def f(t: float) -> float:
        return t ** (1 / 3) if t > (6 / 29) ** 3 else t / (3 * (6 / 29) ** 2) + 4 / 29

    fx, fy, fz = (f(v / w) for v, w in zip(xyz, _WHITE_D65, strict=True))
    return 116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)


def ciede2000(lab1: tuple[float, float, float], lab2: tuple[float, float, float]) -> float:
    """ΔE₀₀ between two CIELAB colours (k_L = k_C = k_H = 1), as Sharma et al. (2005) implement it."""
    (l1, a1, b1), (l2, a2, b2) = lab1, lab2
    c_bar = (math.hypot(a1, b1) + math.hypot(a2, b2)) / 2
    g = 0.5 * (1 - math.sqrt(c_bar**7 / (c_bar**7 + 25**7)))
    a1p, a2p = (1 + g) * a1, (1 + g) * a2
    c1p, c2p = math.hypot(a1p, b1), math.hypot(a2p, b2)
    h1p = math.degrees(math.atan2(b1, a1p)) % 360 if c1p else 0.0
    h2p = math.degrees(math.atan2(b2, a2p)) % 360 if c2p else 0.0
    dl, dc = l2 - l1, c2p - c1p
    if c1p * c2p == 0:
        dh = 0.0
    elif abs(h2p - h1p) <= 180:
        dh = h2p - h1p
    else:
        dh = h2p - h1p - 360 if h2p > h1p else h2p - h1p + 360
    dhh = 2 * math.sqrt(c1p * c2p) * math.sin(math.radians(dh / 2))
    l_bar, cp_bar = (l1 + l2) / 2, (c1p + c2p) / 2
    if c1p * c2p == 0:
        h_bar = h1p + h2p
    elif abs(h1p - h2p) <= 180:
        h_bar = (h1p + h2p) / 2
    else:
        h_bar = (h1p + h2p + 360) / 2 if h1p + h2p < 360 else (h1p + h2p - 360) / 2
    t = (1 - 0.17 * math.cos(math.radians(h_bar - 30)) + 0.24 * math.cos(math.radians(2 * h_bar))
         + 0.32 * math.cos(math.radians(3 * h_bar + 6)) - 0.20 * math.cos(math.radians(4 * h_bar - 63)))  # fmt: skip
    d_theta = 30 * math.exp(-(((h_bar - 275) / 25) ** 2))
    r_c = 2 * math.sqrt(cp_bar**7 / (cp_bar**7 + 25**7))
    s_l = 1 + 0.015 * (l_bar - 50) ** 2 / math.sqrt(20 + (l_bar - 50) ** 2)
    s_c, s_h = 1 + 0.045 * cp_bar, 1 + 0.015 * cp_bar * t
    r_t = -math.sin(math.radians(2 * d_theta)) * r_c
    return math.sqrt((dl / s_l) ** 2 + (dc / s_c) ** 2 + (dhh / s_h) ** 2 + r_t * (dc / s_c) * (dhh / s_h))


def delta_e(colour1: str, colour2: str) -> float:
    """ΔE₀₀ between two sRGB colours (see the module docstring)."""
    return ciede2000(to_lab(colour1), to_lab(colour2))
