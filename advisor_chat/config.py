"""One typed settings object with documented precedence.

Precedence: explicit argument (CLI flag) > ``ADVISOR_*`` environment variable > config file
(``$ADVISOR_HOME/config.toml``) > default.

``ADVISOR_HOME`` moves all user data (parse caches, the case index, uploads) so tests can point it
at a temporary folder. Nothing is ever written inside a user's profiling folder.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from advisor_chat.errors import ConfigError
from advisor_chat.paths import default_home

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

ENV_PREFIX = "ADVISOR_"


class Settings(BaseModel):
    """All settings of advisor-chat.

    Attributes:
        home: User data folder (caches, case index, uploads). Env ``ADVISOR_HOME``.
        model: Backend, ``offline`` (default, no model), ``openai:<name>``, ``<name>`` with
            ``base_url``, ``gguf:<path>`` or ``smollm2``. Env ``ADVISOR_MODEL``.
        base_url: OpenAI-compatible endpoint, e.g. ``http://127.0.0.1:8000/v1``. Env ``ADVISOR_BASE_URL``.
        api_key_env: Name of the environment variable holding the API key (never the key itself).
        cache: Whether parsed tables are cached as Parquet under ``home``. Env ``ADVISOR_CACHE``.
        cache_max_mb: Size budget of the parse cache, MB: when a new profile is cached, the
            least recently used ones beyond it are deleted. Env ``ADVISOR_CACHE_MAX_MB``.
        workers: Parallel workers for per-rank ingest (0 = number of CPUs). Env ``ADVISOR_WORKERS``.
        max_tool_tokens: Token cap of one tool result shown to a model.
        guarded: Guarded mode for weak models (planner fixes the facts; the model writes prose).
        timeout_s: Request timeout for LLM endpoints, seconds.
        upload_max_mb: Largest zip the web UI accepts, MB (compressed size). Env ``ADVISOR_UPLOAD_MAX_MB``.
        upload_max_uncompressed_mb: Cap on the total uncompressed size of an uploaded zip, MB.
        upload_max_ratio: Cap on the uncompressed/compressed size ratio of an uploaded zip (and of
            each member larger than 1 MB); zip bombs exceed it by orders of magnitude.
        upload_max_files: Cap on the number of members of an uploaded zip.
    """

    home: Path = Field(default_factory=default_home)
    model: str = "offline"
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    cache: bool = True
    cache_max_mb: float = Field(default=4096.0, gt=0)
    workers: int = 0
    max_tool_tokens: int = 1200
    guarded: bool | None = None
    timeout_s: float = 120.0
    upload_max_mb: float = 2048.0
    upload_max_uncompressed_mb: float = 20480.0
    upload_max_ratio: float = 200.0
    upload_max_files: int = 200_000

    @property
    def cache_dir(self) -> Path:
        """Folder of the Parquet parse cache."""
        return self.home / "cache"

    @property
    def index_dir(self) -> Path:
        """Folder of the persisted Chroma case index."""
        return self.home / "index"

    @property
    def uploads_dir(self) -> Path:
        """Folder where uploaded zips are extracted (one private subfolder per upload)."""
        return self.home / "uploads"


def _from_env() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in Settings.model_fields:
        raw = os.environ.get(ENV_PREFIX + name.upper())
        if raw is not None and raw != "":
            out[name] = raw
    return out


def _from_file(home: Path) -> dict[str, Any]:
    path = home / "config.toml"
    if not path.is_file():
        return {}
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from exc
    return {k: v for k, v in data.items() if k in Settings.model_fields}


def load_settings(**overrides: Any) -> Settings:
    """Build :class:`Settings` from flags (``overrides``), env, config file and defaults.

    Args:
        **overrides: Values given explicitly (e.g. CLI flags); ``None`` values are ignored.

    Returns:
        The merged, validated settings.

    Raises:
        ConfigError: A value has the wrong type or the config file is unreadable.
    """
    flags = {k: v for k, v in overrides.items() if v is not None}
    env = _from_env()
    home = Path(flags.get("home") or env.get("home") or default_home()).expanduser()
    merged: dict[str, Any] = {**_from_file(home), **env, **flags}
    try:
        return Settings(**merged)
    except ValidationError as exc:
        raise ConfigError(f"invalid setting: {exc}") from exc
