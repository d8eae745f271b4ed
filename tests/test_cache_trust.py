"""The compile cache as a trust boundary (issue 26): it holds machine code and pickles that
jaxrna loads and runs, so nothing is loaded from a cache directory, subdirectory or entry that
anyone but its owner can write or that someone other than the current user or root owns
(:func:`jaxrna.runtime.cache_trust`, :func:`jaxrna.runtime.entry_trust`). Such a cache gives
one warning on stderr and the run compiles in its process instead, with the same output.

Planted pickles would create a marker file if ever unpickled. Tests run as root here and in
CI: root bypasses permission checks, so everything rests on the owner and mode inspection;
``os.chown`` to an unknown uid makes "another user's" files.
"""

import logging
import os
import pickle
import shutil
import stat

import pytest

from compile_count import run_counted
from jaxrna import programs, runtime

OTHER = 12345            # a uid (and gid) no one on the test machines has
AS_ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="os.chown to another user needs root")


class _Planted:
    """Unpickling this opens (creates) ``marker`` for writing: code run by ``pickle.load``."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return open, (self.marker, "w")


def plant(path, marker) -> bytes:
    """Write the planted pickle at ``path`` (mode 0644); returns its bytes."""
    data = pickle.dumps(_Planted(marker))
    with open(path, "wb") as fh:
        fh.write(data)
    os.chmod(path, 0o644)
    return data


def warnings_of(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "warning" in line.lower()]


# --------------------------------------------------------------------------- the rule


def test_rule_modes_owners_and_links(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    entry = cache / "jit_f-0123-cache"
    entry.write_bytes(b"x")
    os.chmod(entry, 0o644)
    assert runtime.cache_trust(str(cache)) is None
    assert runtime.cache_trust(str(tmp_path / "missing" / "cache")) is None  # made private

    os.chmod(cache, 0o777)
    assert runtime.cache_trust(str(cache)) == f"{cache} is writable by others (mode 0777)"
    os.chmod(cache, 0o1777)                      # sticky does not excuse the cache itself
    assert "writable by others (mode 1777)" in runtime.cache_trust(str(cache))
    os.chmod(cache, 0o770)
    assert "writable by group" in runtime.cache_trust(str(cache))
    os.chmod(cache, 0o755)
    assert runtime.cache_trust(str(cache)) is None

    os.chmod(entry, 0o664)                       # root's group is never a private group
    assert runtime.cache_trust(str(cache)).startswith(f"{entry} is writable by group")
    os.chmod(entry, 0o646)
    assert runtime.cache_trust(str(cache)) == f"{entry} is writable by others (mode 0646)"
    os.chmod(entry, 0o600)
    (cache / "link-cache").symlink_to(entry)     # JAX would follow it
    assert runtime.cache_trust(str(cache)) == f"{cache / 'link-cache'} is a symbolic link"
    (cache / "link-cache").unlink()
    sub = cache / "executables"
    sub.mkdir()
    os.chmod(sub, 0o775)
    assert runtime.cache_trust(str(cache)).startswith(f"{sub} is writable by group")
    os.chmod(sub, 0o700)
    (cache / "other").mkdir()
    os.chmod(cache / "other", 0o755)
    (cache / "other" / "deep").write_bytes(b"")
    os.chmod(cache / "other" / "deep", 0o666)    # JAX's entries: every level is checked
    assert runtime.cache_trust(str(cache)).startswith(f"{cache / 'other' / 'deep'} is writable")
    os.chmod(cache / "other" / "deep", 0o644)
    assert runtime.cache_trust(str(cache)) is None
    # executables are checked one by one when loaded, not all at start
    (sub / "k.bin").write_bytes(b"")
    os.chmod(sub / "k.bin", 0o666)
    assert runtime.cache_trust(str(cache)) is None
    st = os.lstat(sub / "k.bin")
    assert runtime.entry_trust(str(sub / "k.bin"), st) == f"{sub / 'k.bin'} is writable by " \
                                                          "others (mode 0666)"


def test_rule_ancestors_and_symlinked_paths(tmp_path, monkeypatch):
    top = tmp_path / "top"
    cache = top / "cache"
    cache.mkdir(parents=True)
    os.chmod(cache, 0o700)
    os.chmod(top, 0o777)                         # anyone could swap the cache for their own
    assert runtime.cache_trust(str(cache)) == f"{top} is writable by others (mode 0777)"
    os.chmod(top, 0o1777)                        # sticky, as /tmp: fine above a private cache
    assert runtime.cache_trust(str(cache)) is None
    os.chmod(top, 0o755)
    # a symbolic link on the way: the directories it leads through are checked too
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "real").mkdir(parents=True)
    os.chmod(elsewhere, 0o755)
    os.chmod(elsewhere / "real", 0o700)
    (top / "link").symlink_to(elsewhere / "real")
    assert runtime.cache_trust(str(top / "link")) is None
    os.chmod(elsewhere, 0o777)
    assert runtime.cache_trust(str(top / "link")) == \
        f"{elsewhere} is writable by others (mode 0777)"
    # '..' after a link is resolved as the kernel does (from the link's target)
    os.chmod(elsewhere, 0o755)
    (elsewhere / "cache2").mkdir(mode=0o777)
    os.chmod(elsewhere / "cache2", 0o777)
    assert runtime.cache_trust(str(top / "link" / ".." / "cache2")) == \
        f"{elsewhere / 'cache2'} is writable by others (mode 0777)"
    monkeypatch.chdir(top)                       # relative paths
    assert runtime.cache_trust("cache") is None


@AS_ROOT
def test_rule_other_owners(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    entry = cache / "jit_f-0123-cache"
    entry.write_bytes(b"x")
    os.chown(entry, OTHER, OTHER)
    assert runtime.cache_trust(str(cache)) == f"{entry} is owned by uid {OTHER}, not by you or root"
    os.chown(entry, 0, 0)
    assert runtime.cache_trust(str(cache)) is None
    os.chown(cache, OTHER, 0)
    assert "is owned by uid 12345" in runtime.cache_trust(str(cache))
    os.chown(cache, 0, 0)
    os.chown(tmp_path, OTHER, 0)                 # an ancestor someone else owns
    try:
        assert runtime.cache_trust(str(cache)) == \
            f"{tmp_path} is owned by uid {OTHER}, not by you or root"
        os.chmod(tmp_path, 0o1777)               # ... even sticky
        assert runtime.cache_trust(str(cache)).startswith(f"{tmp_path} is owned by uid")
    finally:
        os.chown(tmp_path, 0, 0)
        os.chmod(tmp_path, 0o700)


def test_rule_private_group(monkeypatch):
    """Group write is owner write when the group is the owner's private group (umask 002)."""
    import grp
    import pwd

    users = {1000: pwd.struct_passwd(("ann", "x", 1000, 1000, "", "/home/ann", "/bin/sh"))}
    groups = {1000: grp.struct_group(("ann", "x", 1000, [])),
              1001: grp.struct_group(("lab", "x", 1001, ["ann"])),
              1002: grp.struct_group(("ann2", "x", 1002, ["ann", "bob"]))}
    monkeypatch.setattr(pwd, "getpwuid", lambda uid: users[uid])
    monkeypatch.setattr(grp, "getgrgid", lambda gid: groups[gid])
    monkeypatch.setattr(os, "geteuid", lambda: 1000)

    def st(mode, uid=1000, gid=1000):
        return os.stat_result((stat.S_IFREG | mode, 1, 1, 1, uid, gid, 0, 0, 0, 0))

    assert runtime.entry_trust("f", st(0o664)) is None
    assert runtime.entry_trust("f", st(0o664, gid=1001)) == \
        "f is writable by group lab (gid 1001) (mode 0664)"
    assert runtime.entry_trust("f", st(0o666)) == "f is writable by others (mode 0666)"
    groups[1000] = grp.struct_group(("ann", "x", 1000, ["bob"]))    # someone else in it
    assert runtime.entry_trust("f", st(0o664)) is not None
    assert runtime.entry_trust("f", st(0o644)) is None
    assert runtime.entry_trust("f", st(0o644, uid=1001)) == \
        "f is owned by uid 1001, not by you or root"


def test_prepare_private_cache(tmp_path, monkeypatch):
    old = os.umask(0)                            # whatever the umask: 0700 directories
    try:
        path = runtime.prepare_private_cache(str(tmp_path / "a" / "b" / "cache"))
    finally:
        os.umask(old)
    for d in (tmp_path / "a", tmp_path / "a" / "b", tmp_path / "a" / "b" / "cache",
              tmp_path / "a" / "b" / "cache" / "executables"):
        assert stat.S_IMODE(os.stat(d).st_mode) == 0o700, d
    assert path == str(tmp_path / "a" / "b" / "cache")
    monkeypatch.setenv("JAXRNA_CACHE_DIR", path)
    assert runtime.prepare_private_cache() == path
    os.chmod(path, 0o777)                        # an existing unsafe cache: an error, unchanged
    from jaxrna.io.errors import JaxrnaError

    with pytest.raises(JaxrnaError, match="is writable by others"):
        runtime.prepare_private_cache(path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o777
    monkeypatch.setenv("JAXRNA_CACHE_DIR", "off")
    with pytest.raises(JaxrnaError, match="off"):
        runtime.prepare_private_cache()


# --------------------------------------------------------------------------- in this process


def test_enable_refuses_an_untrusted_cache_with_one_warning(tmp_path, monkeypatch):
    import jax

    cache = tmp_path / "shared"
    cache.mkdir()
    os.chmod(cache, 0o777)
    monkeypatch.setenv("JAXRNA_CACHE_DIR", str(cache))
    monkeypatch.setattr(programs, "_disk", str(tmp_path / "before" / "executables"))
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    log = logging.getLogger("jaxrna")
    log.addHandler(handler)
    before = jax.config.jax_compilation_cache_dir
    try:
        assert runtime.enable_compilation_cache() is None
        assert runtime.enable_compilation_cache() is None          # warned once only
    finally:
        log.removeHandler(handler)
    assert programs.disk_dir() is None
    assert jax.config.jax_compilation_cache_dir == before
    assert [r.levelno for r in records] == [logging.WARNING]
    message = records[0].getMessage()
    assert message.startswith(f"warning: compile cache {cache} is not trusted ({cache} is "
                              "writable by others (mode 0777))") and "\n" not in message


def test_load_skips_untrusted_executables(tmp_path, monkeypatch):
    import jax

    device = jax.devices("cpu")[0]
    marker = tmp_path / "marker"
    path = tmp_path / "k.bin"
    plant(path, marker)
    from jaxrna import executable_files

    monkeypatch.setattr(executable_files, "_warned_untrusted", False)
    os.chmod(path, 0o664)
    assert executable_files.load(str(path), device) is None and not marker.exists()
    os.chmod(path, 0o666)
    assert executable_files.load(str(path), device) is None and not marker.exists()
    os.chmod(path, 0o644)
    link = tmp_path / "l.bin"
    link.symlink_to(path)
    assert executable_files.load(str(link), device) is None and not marker.exists()
    if os.geteuid() == 0:
        os.chown(path, OTHER, OTHER)
        assert executable_files.load(str(path), device) is None and not marker.exists()
        os.chown(path, 0, 0)
    # the control: the user's own private file is trusted, and this one does run its code
    # (the tests above can fail), then is ignored as no executable
    assert executable_files.load(str(path), device) is None and marker.exists()


def test_written_entries_are_never_group_or_other_writable(tmp_path, monkeypatch):
    """jaxrna's executables and JAX's entries (the atomic writer) under a umask of 0."""
    import jax
    import numpy as np

    monkeypatch.setattr(programs, "_disk", str(tmp_path / "cache" / "executables"))
    runtime._harden_cache()
    from jax._src import compilation_cache

    old = os.umask(0)
    try:
        run = programs.program("test.cache_trust.add", jax.jit(lambda x: x + 1),
                               (np.ones(3, np.float32),), cpu_store=True)
    finally:
        os.umask(old)
    (tmp_path / "jax").mkdir(mode=0o700)
    jax_cache = compilation_cache.LRUCache(str(tmp_path / "jax"), max_size=-1)
    assert getattr(jax_cache, "jaxrna_atomic", False)
    assert run(np.ones(3, np.float32)).tolist() == [2.0, 2.0, 2.0]
    (entry,) = (tmp_path / "cache" / "executables").iterdir()
    assert stat.S_IMODE(os.stat(tmp_path / "cache" / "executables").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(entry).st_mode) == 0o644
    old = os.umask(0)
    try:
        jax_cache.put("k", b"value")
    finally:
        os.umask(old)
    (written,) = (tmp_path / "jax").iterdir()
    assert stat.S_IMODE(os.stat(written).st_mode) == 0o644
    assert runtime.cache_trust(str(tmp_path / "jax")) is None


def test_info_says_whether_the_cache_is_trusted(tmp_path, monkeypatch, capsys):
    import json

    from jaxrna.cli import main

    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    monkeypatch.setenv("JAXRNA_CACHE_DIR", str(cache))
    assert main(["info"]) == 0
    assert "cache trusted: yes" in capsys.readouterr().out.splitlines()
    os.chmod(cache, 0o777)
    assert main(["info"]) == 0
    assert f"cache trusted: no ({cache} is writable by others (mode 0777))" in \
        capsys.readouterr().out.splitlines()
    assert main(["info", "-f", "json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["cache_dir"] == str(cache) and info["cache_trusted"] is False
    assert info["cache_untrusted_reason"] == f"{cache} is writable by others (mode 0777)"
    monkeypatch.setenv("JAXRNA_CACHE_DIR", "off")
    assert main(["info", "-f", "json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["cache_trusted"] is None and info["cache_untrusted_reason"] is None


# --------------------------------------------------------------------------- whole CLI runs

FOLD = ["fold", "--model", "turner", "--backend", "cpu"]


@pytest.fixture(scope="module")
def turner(tmp_path_factory):
    """A safe cache filled by one ``fold --model turner`` run: its directory, input, output."""
    base = tmp_path_factory.mktemp("trust")
    fasta = base / "in.fa"
    fasta.write_text(">a\nGGGAAAUCCCAGCUAGCUAGC\n>b\nGGAUUUCCCAAAGGG\n")
    cache = base / "cache"
    first = run_counted([*FOLD, str(fasta)], str(cache))
    assert first.returncode == 0, first.stderr
    assert not warnings_of(first.stderr), first.stderr
    assert stat.S_IMODE(os.stat(cache).st_mode) == 0o700             # created private
    bins = sorted((cache / "executables").glob("*.bin"))
    assert bins and not sorted(cache.glob("*-cache"))    # the store's programs: no JAX entry
    _jax_entry(cache)
    entries = sorted(cache.glob("*-cache"))
    assert entries                               # jaxrna's executables and a JAX entry
    shutil.copytree(cache, base / "pristine")
    return cache, fasta, first.stdout


_JAX_ENTRY = """
import sys
import jax
import jax.numpy as jnp
jax.config.update("jax_compilation_cache_dir", sys.argv[1])
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
print(int(jax.jit(lambda x: x * 2 + 1)(jnp.int32(20))))
"""


def _jax_entry(cache) -> None:
    """A genuine entry of JAX's own cache in ``cache`` (jaxrna's runs leave none for the
    programs its store keeps: ``executable_files.no_jax_cache_entry``), as another JAX program of
    the user's would leave it."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _JAX_ENTRY, str(cache)], capture_output=True,
                          text=True, timeout=300, env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert done.returncode == 0 and done.stdout.strip() == "41", done.stderr[-2000:]


def _restored(turner):
    """The safe cache as the first run left it, at its own path (JAX's keys name the cache
    directory: a copy elsewhere would be a cache of misses)."""
    cache = turner[0]
    shutil.rmtree(cache)
    shutil.copytree(cache.parent / "pristine", cache)
    return cache


def _copy(turner, tmp_path, marker):
    """The safe cache with every executable replaced by a planted pickle."""
    cache = _restored(turner)
    bins = sorted((cache / "executables").glob("*.bin"))
    for b in bins:
        plant(b, marker)
    return cache, bins


@pytest.mark.slow
def test_a_safe_cache_is_used(turner):
    cache = _restored(turner)
    r = run_counted([*FOLD, str(turner[1])], str(cache))
    assert r.returncode == 0 and r.stdout == turner[2], r.stderr
    assert not warnings_of(r.stderr), r.stderr
    assert r.compiled == 0 and r.counts.get("executables_loaded", 0) >= 1, r.counts


@pytest.mark.slow
def test_a_cache_others_can_write_loads_nothing(turner, tmp_path):
    marker = tmp_path / "marker"
    cache, bins = _copy(turner, tmp_path, marker)
    os.chmod(cache, 0o777)
    listing = sorted(os.listdir(cache)) + sorted(os.listdir(cache / "executables"))
    r = run_counted([*FOLD, str(turner[1])], str(cache))
    assert r.returncode == 0 and r.stdout == turner[2], r.stderr
    assert not marker.exists()
    (warning,) = warnings_of(r.stderr)
    assert warning.startswith(f"jaxrna: warning: compile cache {cache} is not trusted ({cache} "
                              "is writable by others (mode 0777))"), r.stderr
    assert r.counts.get("cache_hits", 0) == 0 and r.counts.get("executables_loaded", 0) == 0
    assert r.compiled > 0
    # nothing stored there either
    assert sorted(os.listdir(cache)) + sorted(os.listdir(cache / "executables")) == listing
    planted = pickle.dumps(_Planted(marker))
    for b in bins:
        with open(b, "rb") as fh:
            assert fh.read() == planted


@pytest.mark.slow
@pytest.mark.parametrize("how", ["group-writable", "other owner"])
def test_an_untrusted_executable_is_not_unpickled(turner, tmp_path, how):
    if how == "other owner" and os.geteuid() != 0:
        pytest.skip("os.chown to another user needs root")
    marker = tmp_path / "marker"
    cache, bins = _copy(turner, tmp_path, marker)
    for b in bins:
        if how == "group-writable":
            os.chmod(b, 0o664)
        else:
            os.chown(b, OTHER, OTHER)
    r = run_counted([*FOLD, str(turner[1])], str(cache))
    assert r.returncode == 0 and r.stdout == turner[2], r.stderr
    assert not marker.exists()
    (warning,) = warnings_of(r.stderr)
    assert warning.startswith(f"jaxrna: warning: not loading the cached executable "
                              f"{cache / 'executables'}/"), r.stderr
    assert r.counts.get("executables_loaded", 0) == 0
    assert r.compiled > 0                        # the cache itself is trusted: no warning
    for b in bins:                               # compiled afresh, stored over the planted one
        st = os.lstat(b)
        assert runtime.entry_trust(str(b), st) is None and st.st_size > 1000


@pytest.mark.slow
@AS_ROOT
def test_an_untrusted_jax_entry_distrusts_the_cache(turner, tmp_path):
    marker = tmp_path / "marker"
    cache, bins = _copy(turner, tmp_path, marker)
    entry = sorted(cache.glob("*-cache"))[0]     # a genuine entry, now another user's
    os.chown(entry, OTHER, OTHER)
    r = run_counted([*FOLD, str(turner[1])], str(cache))
    assert r.returncode == 0 and r.stdout == turner[2], r.stderr
    assert not marker.exists()
    (warning,) = warnings_of(r.stderr)
    assert warning.startswith(f"jaxrna: warning: compile cache {cache} is not trusted ({entry} "
                              f"is owned by uid {OTHER}, not by you or root)"), r.stderr
    assert r.counts.get("cache_hits", 0) == 0 and r.counts.get("executables_loaded", 0) == 0


@pytest.mark.slow
def test_interact_with_a_cache_others_can_write(tmp_path):
    """Another subcommand: its JAX entries are not loaded from a world-writable cache."""
    (tmp_path / "a.fa").write_text(">a\nGGGAAAUCCC\n")
    (tmp_path / "b.fa").write_text(">b\nGGAUUUCCC\n")
    args = ["interact", str(tmp_path / "a.fa"), str(tmp_path / "b.fa"), "--backend", "cpu"]
    cache = tmp_path / "cache"
    first = run_counted(args, str(cache))
    assert first.returncode == 0 and not warnings_of(first.stderr), first.stderr
    listing = sorted(os.listdir(cache))
    assert listing
    os.chmod(cache, 0o777)
    r = run_counted(args, str(cache))
    assert r.returncode == 0 and r.stdout == first.stdout, r.stderr
    (warning,) = warnings_of(r.stderr)
    assert warning.startswith(f"jaxrna: warning: compile cache {cache} is not trusted"), r.stderr
    assert r.counts.get("cache_hits", 0) == r.counts.get("executables_loaded", 0) == 0
    assert r.compiled > 0, r.counts
    assert sorted(os.listdir(cache)) == listing
    os.chmod(cache, 0o700)                       # the control: made safe, it is loaded from
    again = run_counted(args, str(cache))
    assert again.stdout == first.stdout, again.stderr
    assert again.counts.get("cache_hits", 0) + again.counts.get("executables_loaded", 0) > 0
    assert again.compiled == 0 and not warnings_of(again.stderr), (again.counts, again.stderr)


@pytest.mark.parametrize("how", ["file", "directory"])
def test_a_planted_host_library_is_never_loaded(tmp_path, monkeypatch, how):
    """The host engines' C libraries (:mod:`jaxrna.native`) are machine code loaded from the
    cache's ``host`` folder: one others can write (the file, or the folder) is not loaded (its
    constructor would create the marker); the library is built for this process instead and
    gives the right tables."""
    import subprocess

    from jaxrna import native
    from jaxrna.alphabet import encode
    from jaxrna.fold import host
    from jaxrna.weights import parse_weights

    cache = tmp_path / "cache"
    (cache / "host").mkdir(parents=True)
    os.chmod(cache, 0o700)
    os.chmod(cache / "host", 0o700)
    marker = tmp_path / "ran"
    src = tmp_path / "evil.c"
    src.write_text(f'#include <stdio.h>\n__attribute__((constructor)) static void evil(void) '
                   f'{{ FILE *f = fopen("{marker}", "w"); if (f) fclose(f); }}\n'
                   f'void jaxrna_nussinov(void) {{}}\n')
    planted = cache / "host" / native.file_name(host.LIBRARY_NAME, host.SOURCE, host.FLAGS)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(planted), str(src)], check=True)
    if how == "file":
        os.chmod(planted, 0o666)
    else:
        os.chmod(cache / "host", 0o777)
    monkeypatch.setenv("JAXRNA_CACHE_DIR", str(cache))
    monkeypatch.setattr(native, "_LIBS", {})
    lib = host.library()
    assert not marker.exists(), "the planted library was loaded"
    assert lib is not None
    rows = host.fill_c(encode("GGGAAAUCC"), parse_weights("unit").matrix(), 3, lib)
    assert int(rows[9, 0]) == 3
    # the same planted file, made private, is the cache's own: then it is loaded
    os.chmod(cache / "host", 0o700)
    os.chmod(planted, 0o600)
    monkeypatch.setattr(native, "_LIBS", {})
    host.library()
    assert marker.exists()
