"""One message catalogue for user-facing text: gettext ``.po`` files read with Babel.

Each language has ``advisor_chat/locale/<lang>/LC_MESSAGES/advisor_chat.po`` whose message ids are
stable keys (``report.title``) and whose strings carry named ``str.format`` placeholders
(``{root}``); :func:`t` returns the text of a key in a language, filled in. The files are read once
per process (Babel's ``read_po``, no compile step). ``tests/test_i18n.py`` checks that every key
exists in every language with the same placeholders, and that a Chinese report has no English
prose.

Migrated so far: the report page (``reporting.render_html``), the web page's labels (``ui.render``,
``ui.app``), the plots (``ui.plots``) and the question check (``agent.validate``). The answers' sentences
(``agent.project``, ``agent.planner``, the diagnosis rules) still write English and Chinese side by
side and are to move here.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Literal

Lang = Literal["en", "zh"]
LANGS: tuple[Lang, ...] = ("en", "zh")
LOCALE_DIR = Path(__file__).with_name("locale")


@functools.cache
def messages(lang: str) -> dict[str, str]:
    """``{key: text}`` of one language's catalogue.

    Raises:
        FileNotFoundError: No catalogue for ``lang`` (a broken installation).
    """
    from babel.messages.pofile import read_po

    path = LOCALE_DIR / lang / "LC_MESSAGES" / "advisor_chat.po"
    with path.open("rb") as fh:
        catalog = read_po(fh)
    return {str(m.id): str(m.string) for m in catalog if m.id}


def t(key: str, lang: str = "en", /, **values: object) -> str:
    """The text of ``key`` in ``lang`` (``zh`` or ``en``; anything else reads ``en``), filled in.

    Raises:
        KeyError: ``key`` is not in the catalogue (a message added to the code but not to the
            ``.po`` files; the catalogue test catches it first).
    """
    text = messages("zh" if lang == "zh" else "en")[key]
    return text.format(**values) if values else text
