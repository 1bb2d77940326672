"""The scope language's `path` rule and its `prefix` text, read from docs/SPEC.md §14.4 ("Path
constraints"), for this adapter's standing-grant checks.

A path argument is read as an absolute POSIX path and compared name by name; whatever two
readers of one path could read two ways is refused rather than guessed:

- repeated `/`, a trailing `/` and `.` names are dropped (POSIX reads them so);
- a `..` name anywhere, a `\\`, a `%`, a control character (NUL included), a relative path, a
  leading `//` and more than 4096 bytes are refused.

A rule's directory (`under`) must already be in that normal form, and a `prefix` rule's text
must not hold `/` or `\\`: either makes the grant unreadable.
"""

MAX_PATH_BYTES = 4096


class PathRefused(ValueError):
    """A text that is not read as a path; the message says what is refused."""


def path_names(text):
    """The names of `text` read as an absolute path, root first; raise PathRefused."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
        raise PathRefused("longer than 4096 bytes")
    # Python's str.isprintable is broader; the SPEC's control characters are Unicode Cc.
    if any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in text):
        raise PathRefused("a control character")
    if "\\" in text:
        raise PathRefused("a backslash")
    if "%" in text:
        raise PathRefused("a percent sign")
    if not text.startswith("/"):
        raise PathRefused("not absolute")
    if text.startswith("//"):
        raise PathRefused("a leading //")
    names = []
    for name in text[1:].split("/"):
        if name in ("", "."):
            continue
        if name == "..":
            raise PathRefused("a .. name")
        names.append(name)
    return names


def normal_form(names):
    return "/" + "/".join(names)


def path_under(text):
    """The names of a `path` rule's directory; raise PathRefused unless written normally."""
    names = path_names(text)
    if normal_form(names) != text:
        raise PathRefused(f"not in normal form (write {normal_form(names)!r})")
    return names


def path_covers(under, value):
    """Whether the argument `value` is the directory `under` or inside it (whole names)."""
    if not isinstance(value, str):
        return False
    try:
        names = path_names(value)
    except PathRefused:
        return False
    dir_names = path_under(under)
    return names[: len(dir_names)] == dir_names


def prefix_text_readable(prefix):
    """Whether a `prefix` rule's text is one a grant may hold: not empty, no `/` or `\\`."""
    return isinstance(prefix, str) and prefix != "" and "/" not in prefix and "\\" not in prefix
