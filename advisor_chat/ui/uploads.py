"""Safe extraction of an uploaded, zipped profiling folder.

An upload is untrusted: it may try to write outside the extraction folder (zip-slip: ``../x``,
absolute paths, drive letters, symlinks), or expand to far more than its size (zip bomb). Every
check below runs on the central directory *before* anything is written, and the byte counts are
enforced again while streaming each member out (headers can lie).

Each upload is extracted into its own private folder (``mkdtemp``, mode 0700) under
``settings.uploads_dir``; :func:`remove_upload_dir` deletes it when the session ends.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from advisor_chat.config import Settings
from advisor_chat.errors import InputError

_MB = 1_000_000
_CHUNK = 1 << 20
_RATIO_MIN_MEMBER_BYTES = 1 * _MB  # tiny files may compress absurdly well; only judge big ones
_REMEDY = "Zip the profiling folder as it is (e.g. `zip -r prof.zip prof/`) and upload that"
MAX_MEMBER_DEPTH = 32
"""Deepest accepted member path (folders); a profiling folder is at most ~6 levels deep."""
MAX_MEMBER_NAME_CHARS = 1024
"""Longest accepted member name, characters (PATH_MAX is 4096 bytes on Linux)."""


@dataclass(frozen=True)
class UploadLimits:
    """Caps applied to one uploaded zip.

    Attributes:
        max_compressed_bytes: Largest accepted zip file, bytes.
        max_uncompressed_bytes: Largest accepted total of member sizes, bytes.
        max_ratio: Largest accepted uncompressed/compressed ratio (whole archive, and each member
            larger than 1 MB).
        max_members: Largest accepted number of members (files and folders).
    """

    max_compressed_bytes: int
    max_uncompressed_bytes: int
    max_ratio: float
    max_members: int

    @classmethod
    def from_settings(cls, settings: Settings) -> UploadLimits:
        """Limits from ``settings.upload_*`` (MB are decimal, 1 MB = 1e6 bytes)."""
        return cls(
            max_compressed_bytes=int(settings.upload_max_mb * _MB),
            max_uncompressed_bytes=int(settings.upload_max_uncompressed_mb * _MB),
            max_ratio=float(settings.upload_max_ratio),
            max_members=int(settings.upload_max_files),
        )


def private_dir(parent: Path, prefix: str = "upload-") -> Path:
    """Create a fresh folder only the current user can read (mode 0700) under ``parent``."""
    parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):  # parent owned by someone else: mkdtemp is still private
        os.chmod(parent, 0o700)
    return Path(tempfile.mkdtemp(prefix=prefix, dir=parent))


def remove_upload_dir(path: Path | str | None) -> None:
    """Delete an extraction folder made by :func:`extract_zip` (missing folders are fine)."""
    if path:
        shutil.rmtree(path, ignore_errors=True)


def _shown(name: str) -> str:
    """A member name for a message: quoted, bounded (a hostile name can be kilobytes long)."""
    return repr(name if len(name) <= 120 else name[:60] + "…" + name[-40:])


def _member_parts(name: str, archive: Path) -> tuple[str, ...]:
    """Validate a member name and return its path parts; raise on anything that could escape."""
    if "\x00" in name:
        raise InputError(f"zip member {_shown(name)} has a NUL byte in its name", path=archive)
    if len(name) > MAX_MEMBER_NAME_CHARS or name.count("/") + name.count("\\") > MAX_MEMBER_DEPTH:
        raise InputError(
            f"zip member {_shown(name)} has a path deeper than {MAX_MEMBER_DEPTH} folders or "
            f"longer than {MAX_MEMBER_NAME_CHARS} characters; refusing to extract",
            path=archive,
            remedy=_REMEDY,
        )
    norm = name.replace("\\", "/")
    if norm.startswith("/") or (len(norm) > 1 and norm[1] == ":"):
        raise InputError(
            f"zip member {_shown(name)} has an absolute path; refusing to extract",
            path=archive,
            remedy=_REMEDY,
        )
    parts = tuple(p for p in PurePosixPath(norm).parts if p not in ("", "."))
    if any(p == ".." for p in parts):
        raise InputError(
            f"zip member {_shown(name)} points outside the archive folder ('..'); refusing to extract",
            path=archive,
            remedy=_REMEDY,
        )
    if any(len(p.encode("utf-8", "surrogatepass")) > 255 for p in parts):
        raise InputError(
            f"zip member {_shown(name)} has a file or folder name longer than 255 bytes, which "
            "no Linux file system can store",
            path=archive,
            remedy="Shorten the name and zip the folder again",
        )
    return parts


def _check_members(zf: zipfile.ZipFile, archive: Path, limits: UploadLimits) -> int:
    infos = zf.infolist()
    if len(infos) > limits.max_members:
        raise InputError(
            f"the zip has {len(infos)} members, more than the limit of {limits.max_members}",
            path=archive,
            remedy="Upload only the profiling folder, or raise ADVISOR_UPLOAD_MAX_FILES",
        )
    total = 0
    total_compressed = 0
    for info in infos:
        _member_parts(info.filename, archive)
        mode = (info.external_attr >> 16) & 0xFFFF
        if stat.S_ISLNK(mode):
            raise InputError(
                f"zip member {_shown(info.filename)} is a symbolic link; links are refused",
                path=archive,
                remedy="Zip the files themselves (`zip -r` without `--symlinks`)",
            )
        if stat.S_IFMT(mode) not in (0, stat.S_IFREG, stat.S_IFDIR):  # 0: type not recorded
            raise InputError(
                f"zip member {_shown(info.filename)} is not a regular file or folder",
                path=archive,
                remedy=_REMEDY,
            )
        if info.flag_bits & 0x1:
            raise InputError(
                f"zip member {_shown(info.filename)} is encrypted", path=archive, remedy=_REMEDY
            )
        if info.is_dir():
            continue
        total += info.file_size
        total_compressed += info.compress_size
        if info.file_size > _RATIO_MIN_MEMBER_BYTES and info.file_size > limits.max_ratio * max(
            info.compress_size, 1
        ):
            raise InputError(
                f"zip member {_shown(info.filename)} expands {info.file_size / max(info.compress_size, 1):.0f}x, "
                f"more than the limit of {limits.max_ratio:.0f}x (zip bomb?)",
                path=archive,
                remedy=_REMEDY,
            )
    if total > limits.max_uncompressed_bytes:
        raise InputError(
            f"the zip expands to {total / _MB:.1f} MB, more than the limit of "
            f"{limits.max_uncompressed_bytes / _MB:.1f} MB",
            path=archive,
            remedy="Point the path field at the folder on the server instead, or raise "
            "ADVISOR_UPLOAD_MAX_UNCOMPRESSED_MB",
        )
    if total > _RATIO_MIN_MEMBER_BYTES and total > limits.max_ratio * max(total_compressed, 1):
        raise InputError(
            f"the zip expands {total / max(total_compressed, 1):.0f}x, more than the limit of "
            f"{limits.max_ratio:.0f}x (zip bomb?)",
            path=archive,
            remedy=_REMEDY,
        )
    return total


def extract_zip(archive: Path | str, dest_parent: Path, limits: UploadLimits) -> Path:
    """Check and extract ``archive`` into a new private folder under ``dest_parent``.

    Args:
        archive: The uploaded ``.zip`` file (never modified).
        dest_parent: Folder under which the private extraction folder is created
            (``settings.uploads_dir``).
        limits: Size, ratio and member-count caps.

    Returns:
        The profiling root inside the new folder: the single top-level folder of the zip when
        there is exactly one, else the extraction folder itself.

    Raises:
        InputError: The file is missing, too big, not a zip, encrypted, or has a member that would
            escape the folder (absolute path, ``..``, symlink, device) or exceed a cap. Nothing
            is left on disk when this is raised.
    """
    archive = Path(archive)
    if not archive.is_file():
        raise InputError("uploaded file not found", path=archive, remedy="Upload the zip again")
    size = archive.stat().st_size
    if size > limits.max_compressed_bytes:
        raise InputError(
            f"the upload is {size / _MB:.1f} MB, more than the limit of "
            f"{limits.max_compressed_bytes / _MB:.1f} MB",
            path=archive,
            remedy="Point the path field at the folder on the server instead, or raise ADVISOR_UPLOAD_MAX_MB",
        )
    try:
        zf = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as exc:
        raise InputError(
            "the upload is not a readable zip file "
            f"({exc if isinstance(exc, zipfile.BadZipFile) else exc.strerror})",
            path=archive,
            remedy=_REMEDY,
        ) from None
    with zf:
        budget = _check_members(zf, archive, limits)
        dest = private_dir(dest_parent)
        try:
            _extract_all(zf, archive, dest, budget)
        except BaseException:
            remove_upload_dir(dest)
            raise
    entries = [p for p in dest.iterdir() if not p.name.startswith("__MACOSX")]
    if len(entries) == 1 and entries[0].is_dir():
        return entries[0]
    return dest


def _extract_all(zf: zipfile.ZipFile, archive: Path, dest: Path, budget: int) -> None:
    root = os.path.realpath(dest)
    written = 0
    for info in zf.infolist():
        parts = _member_parts(info.filename, archive)
        if not parts:
            continue
        target = os.path.realpath(os.path.join(root, *parts))
        if os.path.commonpath([root, target]) != root:
            raise InputError(
                f"zip member {_shown(info.filename)} resolves outside the extraction folder",
                path=archive,
                remedy=_REMEDY,
            )
        member_written = 0
        try:
            if info.is_dir():
                os.makedirs(target, mode=0o700, exist_ok=True)
                continue
            os.makedirs(os.path.dirname(target), mode=0o700, exist_ok=True)
            with zf.open(info) as src, open(target, "xb") as dst:
                while chunk := src.read(_CHUNK):
                    member_written += len(chunk)
                    written += len(chunk)
                    if member_written > info.file_size or written > budget:
                        raise InputError(
                            f"zip member {_shown(info.filename)} expands beyond its declared size",
                            path=archive,
                            remedy=_REMEDY,
                        )
                    dst.write(chunk)
        except FileExistsError:
            raise InputError(
                f"zip member {_shown(info.filename)} has the name of another member (a file and "
                "a folder, or two files, with one name)",
                path=archive,
                remedy=_REMEDY,
            ) from None
        except NotImplementedError:  # a compression method zipfile cannot read
            raise InputError(
                f"zip member {_shown(info.filename)} uses a compression method this reader does "
                "not support",
                path=archive,
                remedy="Zip the folder again with the standard (deflate) method, e.g. `zip -r`",
            ) from None
        except (zipfile.BadZipFile, zlib.error, OSError, EOFError) as exc:
            raise InputError(
                # strerror only: str(exc) of an OSError holds the server-side target path
                f"cannot extract zip member {_shown(info.filename)} "
                f"({getattr(exc, 'strerror', None) or type(exc).__name__})",
                path=archive,
                remedy=_REMEDY,
            ) from None
