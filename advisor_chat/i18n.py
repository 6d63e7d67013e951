"""One message catalogue for user-facing text: gettext ``.po`` files read with Babel.

Each language has ``advisor_chat/locale/<lang>/LC_MESSAGES/advisor_chat.po`` whose message ids are
stable keys (``report.title``) and whose strings carry named ``str.format`` placeholders
(``{root}``); :func:`t` returns the text of a key in a language, filled in. The files are read once
per process (Babel's ``read_po``, no compile step). ``tests/test_i18n.py`` checks that every key
exists in every language with the same placeholders, and that a Chinese report has no English
prose.

Migrated so far: the report page (``reporting.render_html``), the web page's labels (``ui.render``,
``ui.app``), the plots (``ui.plots``), the question check (``agent.validate``), and the answers'
fixed sentences in ``agent.project`` / ``agent.planner`` (keys ``project.*``, ``planner.*``, read with
:func:`say` where the code carries the language as a ``zh`` flag). Still written as English and
Chinese side by side: the answer sentences whose wording differs by more than words between the
languages (English plural agreement, clauses built in another order), and the diagnosis rules'
``text`` / ``text_zh`` pairs.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Literal

Lang = Literal["en", "zh"]
LANGS: tuple[Lang, ...] = ("en", "zh")
LOCALE_DIR = Path(__file__).with_name("locale")


@functools.cache
def messages(lang: str) -> dict[str, str]:
    """``{key: text}`` of one language's catalogue.

    Parsed with Babel; the result is kept as JSON under ``$ADVISOR_HOME/cache/i18n/`` named by the
    ``.po`` file's content hash, so a command that answers a question does not import Babel again
    (the catalogue is read on every question).

    Raises:
        FileNotFoundError: No catalogue for ``lang`` (a broken installation).
    """
    import hashlib
    import json

    path = LOCALE_DIR / lang / "LC_MESSAGES" / "advisor_chat.po"
    raw = path.read_bytes()
    cached = _cache_dir() / f"{lang}-{hashlib.sha256(raw).hexdigest()[:20]}.json"
    try:
        data = json.loads(cached.read_text(encoding="utf-8"))
        if isinstance(data, dict):
            return {str(k): str(v) for k, v in data.items()}
    except (OSError, ValueError):
        pass
    import io

    from babel.messages.pofile import read_po

    out = {str(m.id): str(m.string) for m in read_po(io.BytesIO(raw)) if m.id}
    _write_atomic(cached, json.dumps(out, ensure_ascii=False))
    return out


def _cache_dir() -> Path:
    from advisor_chat.paths import default_home

    return default_home() / "cache" / "i18n"


def _write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename; failures only cost reuse."""
    import contextlib
    import os
    import tempfile

    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.replace(tmp, path)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def t(key: str, lang: str = "en", /, **values: object) -> str:
    """The text of ``key`` in ``lang`` (``zh`` or ``en``; anything else reads ``en``), filled in.

    Raises:
        KeyError: ``key`` is not in the catalogue (a message added to the code but not to the
            ``.po`` files; the catalogue test catches it first).
    """
    text = messages("zh" if lang == "zh" else "en")[key]
    return text.format(**values) if values else text


def say(key: str, zh: bool, /, **values: object) -> str:
    """:func:`t` for code that carries the answer's language as a flag (``zh``: Chinese)."""
    return t(key, "zh" if zh else "en", **values)


_CJK = "\u3000-\u303f\u4e00-\u9fff\uff00-\uffef"  # CJK punctuation, ideographs, full-width forms
_GAP_BETWEEN_CJK = re.compile(f"(?<=[{_CJK}])[ \\t]+(?=[{_CJK}])")
_WORD_BEFORE_HAN = re.compile("([A-Za-z][A-Za-z0-9_]*)(?=[\u4e00-\u9fff])")


def tidy_zh(text: str) -> str:
    """Normalise the spacing of a Chinese text assembled from pieces.

    No space between two Chinese characters (``"注意力 算子"`` → ``"注意力算子"``), one after a Latin
    word that runs into a Chinese one (``"V2占"`` → ``"V2 占"``); numbers and line breaks are left
    as they are.
    """
    return _WORD_BEFORE_HAN.sub(r"\1 ", _GAP_BETWEEN_CJK.sub("", text))
