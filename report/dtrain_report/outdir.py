"""Where dtrain-report writes: the --out directory is used only when no other user can add or replace its
entries (as dtrain itself and the study runners decide it: runtime/util/directory.h), unless
--allow-shared-dirs says those who can are trusted; and every file is written through a temporary of a
random name created exclusively beside it, then renamed over its name, so that a link or a file planted
under a report's file name is replaced, never written through."""

import grp
import os
import pwd
import stat
import tempfile
from pathlib import Path


class OutDirError(Exception):
    """The --out directory cannot be used: the sentence says why and what to do."""


def shared_by(path):
    """'' when only this user (and root) can add or replace entries of directory `path`, else why not."""
    st = os.stat(path)
    me = os.geteuid()
    if st.st_uid != me:
        return f"is owned by uid {st.st_uid}, not by this user (uid {me})"
    if st.st_mode & stat.S_ISVTX:
        return ""
    mode = f"{stat.S_IMODE(st.st_mode):04o}"
    if st.st_mode & stat.S_IWOTH:
        return f"can be written by every user (mode {mode}) and has no sticky bit"
    if st.st_mode & stat.S_IWGRP:
        try:
            group = grp.getgrgid(st.st_gid)
            user = pwd.getpwuid(me)
            private = group.gr_name == user.pw_name and user.pw_gid == st.st_gid and \
                all(m == user.pw_name for m in group.gr_mem)
        except KeyError:
            group, private = None, False
        if not private:
            name = f" ({group.gr_name})" if group else ""
            return f"can be written by group {st.st_gid}{name} (mode {mode}) and has no sticky bit"
    return ""


def prepare(out, allow_shared):
    """Makes `out` (a Path) where missing; raises OutDirError where it cannot be used."""
    if out.is_symlink() and not out.is_dir() or out.exists() and not out.is_dir():
        raise OutDirError(f"--out '{out}' exists but is not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OutDirError(f"cannot create --out '{out}': {e.strerror}") from e
    if not os.access(out, os.W_OK | os.X_OK):
        raise OutDirError(f"--out '{out}' is not writable by this user (uid {os.geteuid()})")
    who = shared_by(out)
    if who and not allow_shared:
        raise OutDirError(f"--out '{out}' {who}: another user could plant links there that the report would write "
                          "through. Use a directory of your own (or chmod go-w it), or pass --allow-shared-dirs to "
                          "use it all the same, trusting everyone who can write it")


def subdir(parent, name):
    """parent/name, made where missing; one that is a link or not a directory is refused (OutDirError)."""
    path = parent / name
    if path.is_symlink() or path.exists() and not path.is_dir():
        raise OutDirError(f"'{path}' is in the way: a link or a file that the report did not make; remove it")
    path.mkdir(mode=0o755, exist_ok=True)
    return path


def write(path, fill, binary=False):
    """Calls fill(f) with a file object open for writing and makes what it wrote `path`: through a
    temporary created exclusively beside it (mode 0644), renamed over `path` (os.replace), which replaces
    a link under that name instead of following it."""
    path = Path(path)
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o644)
        with os.fdopen(fd, "wb" if binary else "w", **({} if binary else {"newline": ""})) as f:
            fill(f)
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
