"""Files that samebits' Python side writes, by the rule the command-line program follows for its
output files (README, "Output files"):

- a new name or a regular file is written to FILE.partial and renamed over FILE once complete,
  keeping the old file's permissions; a run that fails leaves FILE as it was;
- a symbolic link is followed: the file it names is replaced and the link stays a link;
- an empty name, a directory, something other than a regular file, and a file in a directory
  that does not exist are refused before any work starts. Missing directories are never created.

A folder of files (the finder's traces) is a folder that exists or whose parent does, and none of
the files the run would write (nor their .partial files) may be there already.
"""
import os
import stat

from ._errors import InvalidArgument


def _as_str(path, what):
    try:
        p = os.fspath(path)
    except TypeError:
        raise TypeError(f"{what}: a path is a str or os.PathLike, not {type(path).__name__}") \
            from None
    return os.fsdecode(p)


def output_target(path, what):
    """The file to write for `path` (links followed); InvalidArgument where the rule refuses it.
    `what` names the caller in the message."""
    p = _as_str(path, what)
    if not p:
        raise InvalidArgument(f"{what}: the file name is empty")
    if os.path.isdir(p):
        raise InvalidArgument(f"{what}: '{p}' is a directory: give a file name")
    target = os.path.realpath(p) if os.path.islink(p) else p
    if os.path.exists(target) and not os.path.isfile(target):
        raise InvalidArgument(f"{what}: '{p}' is not a regular file")
    folder = os.path.dirname(os.path.abspath(target))
    if not os.path.isdir(folder):
        raise InvalidArgument(f"{what}: '{p}' cannot be written: the directory '{folder}' does "
                              f"not exist (create it first, e.g. mkdir -p {folder})")
    return target


def commit(target):
    """Renames target.partial over target, with target's permissions where it exists."""
    partial = target + ".partial"
    try:
        os.chmod(partial, stat.S_IMODE(os.stat(target).st_mode))
    except FileNotFoundError:
        pass
    os.replace(partial, target)


def output_folder(folder, names, what):
    """Makes sure `folder` can take the files `names`, each written through its .partial file,
    without replacing any: creates the folder itself (not its parents) when missing;
    InvalidArgument otherwise."""
    f = _as_str(folder, what)
    if not f:
        raise InvalidArgument(f"{what}: the folder name is empty")
    if os.path.exists(f) and not os.path.isdir(f):
        raise InvalidArgument(f"{what}: '{f}' is not a folder")
    if not os.path.isdir(f):
        parent = os.path.dirname(os.path.abspath(f))
        if not os.path.isdir(parent):
            raise InvalidArgument(f"{what}: cannot make the folder '{f}': the directory "
                                  f"'{parent}' does not exist (create it first)")
        os.mkdir(f)
        return f
    there = [n for name in names for n in (name, name + ".partial")
             if os.path.lexists(os.path.join(f, n))]
    if there:
        raise InvalidArgument(f"{what}: '{f}' already holds {', '.join(there)}: give another "
                              "folder or move them (they would be replaced)")
    return f
