"""Ingest: the only layer that knows file formats. Returns one canonical :class:`Profile`."""

from advisor_chat.ingest.profile import DataWarning, Profile, TableSource
from advisor_chat.ingest.schema import TABLE_SPECS, empty_table, validate_table

__all__ = [
    "TABLE_SPECS",
    "DataWarning",
    "Profile",
    "TableSource",
    "empty_table",
    "inspect_profile",
    "load_profile",
    "read_rank_dir",
    "validate_table",
]


def load_profile(path, **kwargs):  # type: ignore[no-untyped-def]
    """Load a profiling folder into a :class:`Profile` (see :func:`advisor_chat.ingest.loader.load_profile`)."""
    from advisor_chat.ingest.loader import load_profile as _load

    return _load(path, **kwargs)


def inspect_profile(profile: Profile) -> dict:  # type: ignore[type-arg]
    """Summary dict of a loaded profile (see :func:`advisor_chat.ingest.inspect.inspect_profile`)."""
    from advisor_chat.ingest.inspect import inspect_profile as _inspect

    return _inspect(profile)


def read_rank_dir(path):  # type: ignore[no-untyped-def]
    """Parse one rank folder (see :func:`advisor_chat.ingest.rankdir.read_rank_dir`)."""
    from advisor_chat.ingest.rankdir import read_rank_dir as _read

    return _read(path)
