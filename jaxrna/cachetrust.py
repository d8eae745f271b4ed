"""Whether a compile cache may be trusted: the rule jaxrna applies before loading anything
from one (issue 26), and private directory creation.

A cache holds machine code and pickled executables that jaxrna loads and runs, so, as ssh
treats its key files, it is used only when no one but its owner can change what is read.
:func:`cache_trust` judges a cache directory (its ancestors, itself and every entry),
:func:`entry_trust` one file as it is opened (:mod:`jaxrna.programs` checks each executable
so before unpickling it); :mod:`jaxrna.runtime` applies them when it turns the cache on.
Imports only the standard library (both :mod:`jaxrna.runtime` and :mod:`jaxrna.programs` use
it).

>>> import tempfile, os
>>> d = os.path.join(tempfile.mkdtemp(), "cache")
>>> makedirs_private(d); cache_trust(d) is None
True
>>> os.chmod(d, 0o777); cache_trust(d) == f"{d} is writable by others (mode 0777)"
True
"""

from __future__ import annotations

import os

#: The subdirectory of the cache holding :mod:`jaxrna.programs`' executables; its entries are
#: checked one by one as they are loaded (:func:`entry_trust`), not by :func:`cache_trust`.
EXECUTABLES = "executables"


def makedirs_private(path: str) -> None:
    """``os.makedirs(path, exist_ok=True)``, each directory it creates with mode 0700 (the
    umask may only narrow it), whatever the umask would have given."""
    path = os.path.abspath(path)
    missing = []
    while not os.path.isdir(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    for p in reversed(missing):
        try:
            os.mkdir(p, 0o700)
        except FileExistsError:
            if not os.path.isdir(p):
                raise


def cache_trust(path: str) -> str | None:
    """Whether jaxrna may load programs from the compile cache ``path``: None when it may,
    else why not (one phrase naming the offending path).

    A cache holds machine code and pickles that are loaded and run, so, as ssh treats its key
    files, it is trusted only when no one but its owner can change what is read:

    * every directory met while resolving ``path`` (``/``, each ancestor, each directory a
      symbolic link on the way leads through, the cache itself) is owned by the current user
      or root; an ancestor may be writable by others only when it is sticky (``/tmp``: no one
      can rename or remove our entries in it), otherwise it is writable by its owner alone;
    * the cache directory itself, its ``executables`` subdirectory and every entry of JAX's
      cache (the cache's files and subdirectories, ``executables`` aside: JAX reads them
      itself, so one bad entry makes the whole cache untrusted) are owned by the current user
      or root, writable by their owner alone (sticky or not), and are plain files and
      directories, not symbolic links; ``executables/*.bin`` are checked one by one when
      loaded (:func:`entry_trust`), an untrusted one being skipped;
    * "writable by its owner alone" allows group write when the group is the owner's private
      group (named as the owner, the owner's primary group, no other listed member; not for
      root-owned paths), as with a umask of 002.

    A missing cache (or a missing part of the path) is trusted: nothing can be loaded from it,
    and jaxrna creates it private (:func:`prepare_private_cache`). Checking costs one
    ``lstat`` per entry of the cache (a few microseconds each), once per process.

    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> cache_trust(d) is None
    True
    >>> os.chmod(d, 0o777)
    >>> cache_trust(d) == f"{d} is writable by others (mode 0777)"
    True
    """
    import stat

    try:
        directory, reason = _resolve_checked(path)
    except OSError as exc:
        return f"cannot check {path}: {exc.strerror or exc}"
    if reason is not None or directory is None:
        return reason
    try:
        with os.scandir(directory) as it:
            entries = list(it)
        for e in entries:
            st = _lstat(e)
            if st is None:                        # gone meanwhile (another run's rename)
                continue
            if e.name == EXECUTABLES:
                reason = _node_trust(e.path, st, want_dir=True)
            elif stat.S_ISDIR(st.st_mode):
                reason = _node_trust(e.path, st, want_dir=True) or _tree_trust(e.path)
            else:
                reason = _node_trust(e.path, st, want_dir=False)
            if reason is not None:
                return reason
    except OSError as exc:
        return f"cannot check {directory}: {exc.strerror or exc}"
    return None


def entry_trust(path: str, st: os.stat_result) -> str | None:
    """Whether a cache entry (a file whose ``os.lstat``/``os.fstat`` is ``st``) may be loaded:
    None when it may, else why not. The rule of :func:`cache_trust`: a regular file owned by
    the current user or root, writable by its owner alone."""
    return _node_trust(path, st, want_dir=False)


def _lstat(entry: os.DirEntry) -> os.stat_result | None:
    try:
        return entry.stat(follow_symlinks=False)
    except FileNotFoundError:
        return None


def _tree_trust(top: str) -> str | None:
    import stat

    with os.scandir(top) as it:
        for e in list(it):
            st = _lstat(e)
            if st is None:
                continue
            is_dir = stat.S_ISDIR(st.st_mode)
            reason = _node_trust(e.path, st, want_dir=is_dir) or (
                _tree_trust(e.path) if is_dir else None)
            if reason is not None:
                return reason
    return None


def _resolve_checked(path: str) -> tuple[str | None, str | None]:
    """Resolve ``path`` one component at a time (following symbolic links as the kernel
    does), checking every directory a lookup happens in; returns the resolved cache
    directory (None when some component does not exist yet) and the first problem found."""
    import stat

    full = path if os.path.isabs(path) else os.path.join(os.getcwd(), path)
    pending = [p for p in full.split(os.sep) if p]   # not normalised: '..' as the kernel
    current = os.sep
    st = os.lstat(current)
    reason = _ancestor_trust(current, st)
    hops = 0
    while pending and reason is None:
        name = pending.pop(0)
        if name == ".":
            continue
        if name == "..":
            current = os.path.dirname(current)    # already checked on the way down
            continue
        nxt = os.path.join(current, name)
        try:
            st = os.lstat(nxt)
        except FileNotFoundError:
            return None, None
        if stat.S_ISLNK(st.st_mode):
            hops += 1
            if hops > 40:
                return None, f"{path}: too many symbolic links"
            target = os.readlink(nxt)
            if os.path.isabs(target):
                current = os.sep
            pending[:0] = [p for p in target.split(os.sep) if p]
            continue
        current = nxt
        reason = _ancestor_trust(current, st)
    if reason is None:                            # the cache itself: no sticky exception
        reason = _node_trust(current, os.lstat(current), want_dir=True)
    return (current if reason is None else None), reason


def _ancestor_trust(path: str, st: os.stat_result) -> str | None:
    import stat

    if not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a directory"
    if st.st_mode & stat.S_ISVTX:                 # sticky: others cannot move our entries
        return _owner_trust(path, st)
    return _node_trust(path, st, want_dir=True)


def _owner_trust(path: str, st: os.stat_result) -> str | None:
    if st.st_uid not in (0, os.geteuid()):
        return f"{path} is owned by {_user_name(st.st_uid)}, not by you or root"
    return None


def _node_trust(path: str, st: os.stat_result, want_dir: bool) -> str | None:
    import stat

    if stat.S_ISLNK(st.st_mode):
        return f"{path} is a symbolic link"
    if want_dir and not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a directory"
    if not want_dir and not stat.S_ISREG(st.st_mode):
        return f"{path} is not a regular file"
    reason = _owner_trust(path, st)
    if reason is not None:
        return reason
    mode = stat.S_IMODE(st.st_mode)
    if mode & stat.S_IWOTH:
        return f"{path} is writable by others (mode {mode:04o})"
    if mode & stat.S_IWGRP and not _private_group(st.st_gid, st.st_uid):
        return f"{path} is writable by group {_group_name(st.st_gid)} (mode {mode:04o})"
    return None


def _private_group(gid: int, uid: int) -> bool:
    """Whether group ``gid`` is user ``uid``'s private group (named as the user, the user's
    primary group, no other member listed), so group write means owner write. Never root's."""
    if uid == 0:
        return False
    try:
        import grp
        import pwd

        user = pwd.getpwuid(uid)
        group = grp.getgrgid(gid)
    except (ImportError, KeyError, OverflowError):
        return False
    return (user.pw_gid == gid and group.gr_name == user.pw_name
            and set(group.gr_mem) <= {user.pw_name})


def _user_name(uid: int) -> str:
    try:
        import pwd

        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def _group_name(gid: int) -> str:
    try:
        import grp

        return f"{grp.getgrgid(gid).gr_name} (gid {gid})"
    except (ImportError, KeyError):
        return f"gid {gid}"
