"""``jaxrna info``: versions, the devices JAX sees, the backend ``--backend auto`` picks, and the
compile cache; and the one-line device report of ``-v/--verbose`` runs.

Nothing is computed: it answers "is my GPU used?" before a long run. With ``-f json`` the same
as one JSON object (keys ``jaxrna``, ``python``, ``jax``, ``jaxlib``, ``plugins``, ``devices``,
``gpu_error``, ``auto_backend``, ``cache_dir``, ``cache_trusted``, ``cache_untrusted_reason``).

Whether the cache is trusted (:func:`jaxrna.runtime.cache_trust`): a cache that someone else
could write is not used (runs compile in the process and say so once on stderr); ``cache
trusted: no (WHY)`` says what to fix.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys

from jaxrna._version import __version__

EXAMPLES = """examples:
  jaxrna info
  jaxrna info -f json

On a machine with an NVIDIA GPU, 'pip install "jaxrna[cuda13]"' (or jaxrna[cuda12] for
drivers older than 580) installs JAX's CUDA build; 'jaxrna info' then lists the GPU and
'auto backend: gpu'. The compute subcommands take -v/--verbose to print the device a run uses.
"""


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "info", help="versions, devices and the backend --backend auto picks",
        description="Print jaxrna's, JAX's and jaxlib's versions, the devices JAX sees, the "
                    "backend '--backend auto' picks, the compile cache directory and whether "
                    "it is trusted (owned by you or root, writable by no one else).",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-f", "--format", choices=["text", "json"], default="text",
                   help="output format (default: text)")
    p.set_defaults(func=run)


def _version(dist: str) -> str | None:
    import importlib.metadata       # here: importing it costs every subcommand ~15 ms

    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _plugins() -> dict:
    """Installed JAX accelerator plugins (``jax-cuda13-plugin`` ...) and their versions."""
    import importlib.metadata

    found = {}
    for dist in importlib.metadata.distributions():
        name = (dist.metadata.get("Name") or "").lower()
        if name.startswith(("jax-cuda", "jax-rocm", "libtpu", "jax-tpu")):
            found[name] = dist.version
    return dict(sorted(found.items()))


def device_record(device) -> dict:
    """One device as a plain dict: id, platform, kind, name and (GPUs) memory in bytes."""
    rec = {"id": int(device.id), "platform": device.platform, "kind": str(device.device_kind),
           "name": str(device)}
    from jaxrna.runtime import device_memory_bytes

    memory = device_memory_bytes(device)
    if memory:
        rec["memory_bytes"] = memory
    return rec


def collect() -> dict:
    """Everything ``jaxrna info`` prints."""
    from jaxrna.runtime import cache_dir, cache_trust, has_gpu

    path = cache_dir()
    reason = cache_trust(path) if path is not None else None
    info = {"jaxrna": __version__, "python": platform.python_version(),
            "executable": sys.executable, "jax": _version("jax"), "jaxlib": _version("jaxlib"),
            "plugins": _plugins(), "devices": [], "gpu_error": None, "auto_backend": None,
            "cache_dir": path, "cache_trusted": None if path is None else reason is None,
            "cache_untrusted_reason": reason}
    import jax

    names = set()
    for backend in (None, "gpu", "cpu"):   # the default backend's devices first
        try:
            devices = jax.devices() if backend is None else jax.devices(backend)
        except RuntimeError as exc:
            if backend == "gpu":
                # "Unknown backend gpu" without a CUDA build; the plugin's message when it failed
                info["gpu_error"] = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            elif backend is None:  # no usable backend at all
                info["gpu_error"] = str(exc)
                return info
            continue
        for d in devices:
            if str(d) not in names:
                names.add(str(d))
                info["devices"].append(device_record(d))
    info["auto_backend"] = "gpu" if has_gpu() else "cpu"
    return info


def _human(n: int) -> str:
    from jaxrna.runtime import human_bytes

    return human_bytes(n)


def format_text(info: dict) -> str:
    lines = [f"jaxrna {info['jaxrna']}",
             f"python {info['python']} ({info['executable']})",
             f"jax {info['jax'] or 'not installed'}",
             f"jaxlib {info['jaxlib'] or 'not installed'}"]
    plugins = ", ".join(f"{k} {v}" for k, v in info["plugins"].items())
    lines.append("plugins: " + (plugins or 'none (CPU only; GPUs: pip install "jaxrna[cuda13]")'))
    lines.append(f"devices: {len(info['devices'])}")
    for d in info["devices"]:
        memory = f", {_human(d['memory_bytes'])}" if "memory_bytes" in d else ""
        lines.append(f"  {d['name']}: {d['kind']}{memory}")
    if info["gpu_error"] and info["plugins"]:  # a GPU build of JAX that found no usable GPU
        lines.append(f"gpu: unavailable ({info['gpu_error']})")
    lines.append(f"auto backend: {info['auto_backend'] or 'none'}")
    lines.append(f"compile cache: {info['cache_dir'] or 'off (JAXRNA_CACHE_DIR=off)'}")
    if info.get("cache_trusted") is not None:
        lines.append("cache trusted: " + ("yes" if info["cache_trusted"] else
                                          f"no ({info['cache_untrusted_reason']})"))
    return "\n".join(lines) + "\n"


def run(args) -> int:
    info = collect()
    if args.format == "json":
        sys.stdout.write(json.dumps(info, indent=2) + "\n")
    else:
        sys.stdout.write(format_text(info))
    return 0


# --------------------------------------------------------------------------- -v/--verbose


