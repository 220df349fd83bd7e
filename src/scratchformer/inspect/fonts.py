"""Chinese text in the pictures: a Simplified-Chinese font registered with matplotlib once, on first use.

matplotlib's default DejaVu Sans has no CJK glyphs, so a Chinese tick label comes out as empty boxes (and a
"Glyph ... missing from font(s) DejaVu Sans" warning at draw time). The font comes from the PyPI package
`pylopdf-fonts-zh-cn` (Noto Sans SC, SIL Open Font License; a dependency of this project). `mplfonts` (Noto Sans
CJK SC) or a system font with Chinese glyphs serves too where that package is missing.

matplotlib (>= 3.6) falls back glyph by glyph along the *list* of families in `font.family`: the plots draw with
["sans-serif", <the Chinese font>], so Latin text keeps DejaVu Sans and each CJK character comes from the
Chinese font. Nothing is downloaded, nothing is written to matplotlib's own folders.

The HTML report embeds the same font, subset to the characters the page uses (`font_face_css`), so that its
Chinese renders on a machine with no CJK font at all.
"""

from __future__ import annotations

import base64
import functools
import importlib.util
import io
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from scratchformer.errors import N_, ScratchformerWarning

PACKAGE = "pylopdf-fonts-zh-cn"  # what to `pip install` when no Chinese font is found

# Families with Simplified-Chinese glyphs that a system may already have (fonts-noto-cjk, fonts-wqy-*, ...)
_SYSTEM_FAMILIES = ("Noto Sans SC", "Noto Sans CJK SC", "Source Han Sans SC", "Source Han Sans CN",
                    "WenQuanYi Micro Hei", "WenQuanYi Zen Hei", "Noto Sans CJK JP", "Droid Sans Fallback")


class MissingFontWarning(ScratchformerWarning):
    """No font with Chinese glyphs was found: Chinese labels will be drawn as empty boxes."""


def _packaged_font_files() -> list[Path]:
    """Font files that Python packages ship, best first; looked up without importing anything heavy."""
    files = []
    spec = importlib.util.find_spec("pylopdf_fonts_zh_cn")
    if spec is not None and spec.origin:
        files.append(Path(spec.origin).parent / "NotoSansSC-Regular.otf")
    spec = importlib.util.find_spec("mplfonts")  # its __init__ imports extra packages: only its folder is read
    if spec is not None and spec.origin:
        files.append(Path(spec.origin).parent / "fonts" / "NotoSansCJKsc-Regular.otf")
    return [f for f in files if f.is_file()]


@functools.cache
def chinese_font() -> str | None:
    """The family name of a registered font with Simplified-Chinese glyphs; None (after ONE warning) if none."""
    from matplotlib import font_manager

    for path in _packaged_font_files():
        try:
            font_manager.fontManager.addfont(str(path))
            return font_manager.FontProperties(fname=str(path)).get_name()
        except (OSError, RuntimeError, ValueError):  # an unreadable file: try the next one
            continue
    known = {f.name for f in font_manager.fontManager.ttflist}
    for family in _SYSTEM_FAMILIES:
        if family in known:
            return family
    warnings.warn(MissingFontWarning(N_("no font with Chinese glyphs found, Chinese labels will show as boxes: pip "
                                        "install {package}"), package=PACKAGE), stacklevel=3)
    return None


def font_rc() -> dict[str, object]:
    """rcParams for text with Chinese in it: the default sans-serif first, then the Chinese font as fallback."""
    import matplotlib

    name = chinese_font()
    if name is None:
        return {}
    sans = [f for f in matplotlib.rcParams["font.sans-serif"] if f != name]
    return {"font.family": ["sans-serif", name], "font.sans-serif": [*sans, name]}


@contextmanager
def chinese_text() -> Iterator[None]:
    """Draw (and save) figures inside this block: Chinese glyphs come from the Chinese font.

    Without one, the MissingFontWarning said so once and the per-glyph "missing" warnings are silenced."""
    import matplotlib.pyplot as plt

    rc = font_rc()
    with plt.rc_context(rc), warnings.catch_warnings():
        if not rc:
            warnings.filterwarnings("ignore", message="Glyph .* missing from font")
        yield


EMBEDDED_FAMILY = "scratchformer-zh"  # the name the report's @font-face gives the embedded subset


def font_file() -> Path | None:
    """The packaged Chinese font file (Noto Sans SC), or None where no package ships one."""
    files = _packaged_font_files()
    return files[0] if files else None


def subset_font(text: str, path: Path | None = None) -> bytes:
    """The Chinese font cut down to the characters of `text` above ASCII (Latin comes from the browser's own
    sans-serif), as WOFF bytes: a page's few hundred glyphs instead of the whole font's tens of thousands."""
    from fontTools import subset  # late: only the report needs it (fontTools comes with matplotlib)
    from fontTools.ttLib import TTFont

    path = path or font_file()
    if path is None:
        raise FileNotFoundError(f"no Chinese font to embed: pip install {PACKAGE}")
    options = subset.Options()
    options.flavor = "woff"  # zlib-compressed; woff2 would need brotli
    options.name_IDs, options.notdef_outline = ["*"], True
    font = TTFont(str(path), lazy=True)
    subsetter = subset.Subsetter(options)
    subsetter.populate(unicodes={ord(c) for c in text if ord(c) > 0x7F} or {0x4E2D})
    subsetter.subset(font)
    buffer = io.BytesIO()
    font.flavor = "woff"
    font.save(buffer)
    return buffer.getvalue()


def font_face_css(text: str, family: str = EMBEDDED_FAMILY) -> str:
    """An @font-face rule whose src is a data: URI of `subset_font(text)`; "" (after the MissingFontWarning)
    where no font is packaged, so that the page still renders (Chinese then needs a system font)."""
    if font_file() is None:
        warnings.warn(MissingFontWarning(N_("no Chinese font to embed in the page, Chinese may show as boxes: pip "
                                            "install {package}"), package=PACKAGE), stacklevel=2)
        return ""
    data = base64.b64encode(subset_font(text)).decode("ascii")
    return (f'@font-face {{ font-family: "{family}"; font-display: block; '
            f'src: url(data:font/woff;base64,{data}) format("woff"); }}\n')
