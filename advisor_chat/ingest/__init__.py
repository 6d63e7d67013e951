"""Ingest: the only layer that knows file formats. Returns one canonical :class:`Profile`."""

from advisor_chat.ingest.profile import DataWarning, Profile, TableSource
from advisor_chat.ingest.schema import TABLE_SPECS, empty_table, validate_table

__all__ = [
    "TABLE_SPECS",
    "DataWarning",
    "Profile",
    "TableSource",
    "empty_table",
    "load_profile",
    "validate_table",
]


def load_profile(path, **kwargs):  # type: ignore[no-untyped-def]
    """Load a profiling folder into a :class:`Profile` (see :func:`advisor_chat.ingest.loader.load_profile`)."""
    from advisor_chat.ingest.loader import load_profile as _load

    return _load(path, **kwargs)
