"""A seeded, deterministic corpus of client frames for the differential test of the interposer's
admission against the real readers (test_differential_readers.py).

Every case but the allowed controls carries a `tools/call` of the held tool `write_file` that
some reader might execute; each case's arguments carry a marker `"case": "cNNNNN"`, so a reader's
execution record and the bytes the upstream received name the case they came from. A case is
bytes ending in "\\n" (one line, or several for the framing cases); `isolated` cases (bytes that are
not UTF-8, which end the interposer's session, and one value split over lines, which can leave a
streaming decoder mid-value) each get a fresh interposer and upstream.

Shapes (issue 25 section 1 and around it): deep nesting in an unrelated member, lone surrogate
escapes, out-of-range and odd numbers, separators (CR, U+2028/2029, NEL, NUL, BOM, tab, VT, FF,
FS/GS/RS, space) in every position and between two frames, case-folded and duplicate member
names (including Go's Unicode folding: "paramſ" matches `params`), batches, notifications,
jsonrpc variants, escaped method and tool names, one value split across lines (a streaming
decoder joins them), overlong and other invalid UTF-8; then seeded random combinations of these.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

HELD = "write_file"
ALLOWED = "read_file"

# Separators and whitespace a reader might split on, skip, or choke on.
SEPARATORS = {
    "CR": "\r",
    "CRLF": "\r\n",
    "LS": "\u2028",
    "PS": "\u2029",
    "NEL": "\u0085",
    "NUL": "\x00",
    "BOM": "\ufeff",
    "TAB": "\t",
    "VT": "\x0b",
    "FF": "\x0c",
    "FS": "\x1c",
    "GS": "\x1d",
    "RS": "\x1e",
    "SP": " ",
    "NBSP": "\u00a0",
}

# Out-of-range, signed-zero, huge-integer and otherwise odd number literals.
NUMBERS = [
    "1e400",
    "-1e400",
    "1E+400",
    "1e-400",
    "-0",
    "-0.0",
    "1E+2",
    "0.1e1",
    "1e308",
    "2e308",
    "18446744073709551616",
    "18446744073709551615",
    "-9223372036854775809",
    "123456789012345678901234567890",
    "1.5",
    "4.9e-324",
]

SURROGATES = [
    "\\ud800",
    "\\udc00",
    "\\udbff",
    "\\uDFFF",
    "x\\ud800",
    "\\ud800\\u0041",
    "\\udc00\\ud800",
    "\\ud83d",
]

# Member-name variants each reader may take for the real one: case-insensitive (Go's
# encoding/json folds ASCII case and Unicode simple folds: U+017F long s for "s", U+212A Kelvin
# sign for "k").
FOLDED = {
    "method": ["Method", "METHOD", "mEthod"],
    "params": ["Params", "PARAMS", "paramſ", "Paramſ"],
    "name": ["Name", "NAME", "nAme"],
    "arguments": ["Arguments", "ARGUMENTS", "argumentſ"],
    "id": ["Id", "ID"],
}


@dataclass(frozen=True)
class Case:
    key: str  # "c00042": the marker in the case's arguments
    family: str  # the shape, for the summary
    data: bytes  # what the client writes: one or more lines, "\n"-terminated
    held: bool  # whether its payload is a held call (all but the allowed controls)
    isolated: bool = False  # run in a fresh interposer and upstream


def args_text(key: str, extra: str = "") -> str:
    return '{"case":"' + key + '","path":"/tmp/diff"' + (("," + extra) if extra else "") + "}"


def call_text(
    key: str,
    ident: str | None,
    tool: str = HELD,
    *,
    method: str = "tools/call",
    params_extra: str = "",
    top_extra: str = "",
    args_extra: str = "",
    jsonrpc: str = '"2.0"',
    name_text: str | None = None,
) -> str:
    """A tools/call frame as text, with raw JSON slots for odd members; no id (a notification)
    when `ident` is None."""
    name = name_text if name_text is not None else json.dumps(tool)
    params = '{"name":' + name + ',"arguments":' + args_text(key, args_extra)
    params += ("," + params_extra if params_extra else "") + "}"
    # A method given as "RAW:<json>" is written as is (escapes, odd strings).
    method_text = method[4:] if method.startswith("RAW:") else json.dumps(method)
    head = '{"jsonrpc":' + jsonrpc + ("," + '"id":' + ident if ident is not None else "")
    head += ',"method":' + method_text
    return head + ',"params":' + params + ("," + top_extra if top_extra else "") + "}"


def benign(ident: str, kind: int, key: str) -> str:
    return [
        '{"jsonrpc":"2.0","id":' + ident + ',"method":"ping"}',
        call_text(key + "a", ident, ALLOWED),
        '{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}',
        "{}",
        "null",
    ][kind % 5]


def nested(depth: int, container: str) -> str:
    if container == "array":
        return "[" * depth + "1" + "]" * depth
    return '{"a":' * depth + "1" + "}" * depth


class Builder:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.cases: list[Case] = []

    def next_key(self) -> tuple[str, str]:
        n = len(self.cases)
        return f"c{n:05d}", str(100_000 + n * 10)

    def add(
        self,
        family: str,
        text: str | bytes,
        *,
        held: bool = True,
        isolated: bool = False,
        key: str | None = None,
    ) -> None:
        data = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
        if not data.endswith(b"\n"):
            data += b"\n"
        self.cases.append(Case(key or self.next_key()[0], family, data, held, isolated))

    # --- the families --------------------------------------------------------------------------

    def controls(self, n: int) -> None:
        for i in range(n):
            key, ident = self.next_key()
            if i % 2:
                self.add("control-held", call_text(key, ident))
            else:
                self.add("control-allowed", call_text(key, ident, ALLOWED), held=False)

    def deep(self) -> None:
        for depth in (10, 100, 126, 127, 128, 129, 200, 500, 2000):
            for container in ("array", "object"):
                for where in ("top", "meta", "arguments", "id-sibling"):
                    key, ident = self.next_key()
                    value = nested(depth, container)
                    if where == "top":
                        text = call_text(key, ident, top_extra='"x":' + value)
                    elif where == "meta":
                        text = call_text(key, ident, params_extra='"_meta":{"x":' + value + "}")
                    elif where == "arguments":
                        text = call_text(key, ident, args_extra='"deep":' + value)
                    else:
                        text = '{"x":' + value + "," + call_text(key, ident)[1:]
                    self.add(f"deep-{container}", text)

    def surrogates(self) -> None:
        for s in SURROGATES:
            for where in (
                "arguments",
                "arguments-key",
                "meta",
                "top",
                "id",
                "method-suffix",
                "name-suffix",
            ):
                key, ident = self.next_key()
                if where == "arguments":
                    text = call_text(key, ident, args_extra='"s":"' + s + '"')
                elif where == "arguments-key":
                    text = call_text(key, ident, args_extra='"' + s + '":1')
                elif where == "meta":
                    text = call_text(key, ident, params_extra='"_meta":{"s":"' + s + '"}')
                elif where == "top":
                    text = call_text(key, ident, top_extra='"s":"' + s + '"')
                elif where == "id":
                    text = call_text(key, '"' + s + '"')
                elif where == "method-suffix":
                    text = call_text(key, ident, method='RAW:"tools/call' + s + '"')
                else:
                    text = call_text(key, ident, name_text='"write_file' + s + '"')
                self.add("lone-surrogate", text)

    def numbers(self) -> None:
        for n in NUMBERS:
            for where in ("id", "arguments", "top", "progress-token"):
                key, ident = self.next_key()
                if where == "id":
                    text = call_text(key, n)
                elif where == "arguments":
                    text = call_text(key, ident, args_extra='"n":' + n)
                elif where == "top":
                    text = call_text(key, ident, top_extra='"n":' + n)
                else:
                    text = call_text(key, ident, params_extra='"_meta":{"progressToken":' + n + "}")
                self.add("number", text)

    def separators(self) -> None:
        for label, sep in SEPARATORS.items():
            # Between two frames: a benign one the interposer may judge, then the held call.
            for kind in range(5):
                key, ident = self.next_key()
                first = benign(str(int(ident) + 1), kind, key)
                self.add(f"sep-between-{label}", first + sep + call_text(key, ident))
                key, ident = self.next_key()
                self.add(
                    f"sep-after-held-{label}",
                    call_text(key, ident) + sep + benign(str(int(ident) + 1), kind, key),
                )
            # Around and inside one held frame.
            for position in (
                "before",
                "after",
                "after-brace",
                "after-colon",
                "after-comma",
                "before-close",
                "in-method",
                "in-name",
                "twice-after",
            ):
                key, ident = self.next_key()
                text = call_text(key, ident)
                if position == "before":
                    text = sep + text
                elif position == "after":
                    text = text + sep
                elif position == "twice-after":
                    text = text + sep + sep
                elif position == "after-brace":
                    text = "{" + sep + text[1:]
                elif position == "after-colon":
                    text = text.replace('"method":', '"method":' + sep, 1)
                elif position == "after-comma":
                    text = text.replace(',"params"', "," + sep + '"params"', 1)
                elif position == "before-close":
                    text = text[:-1] + sep + "}"
                elif position == "in-method":
                    text = text.replace('"tools/call"', '"tools/call' + sep + '"', 1)
                else:
                    text = text.replace('"write_file"', '"write_file' + sep + '"', 1)
                self.add(f"sep-{position}-{label}", text)

    def folded_keys(self) -> None:
        for member, variants in FOLDED.items():
            for variant in variants:
                for order in ("variant-last", "variant-first"):
                    key, ident = self.next_key()
                    text = self.folded(member, variant, order, key, ident)
                    self.add(f"folded-{member}", text)

    def folded(self, member: str, variant: str, order: str, key: str, ident: str) -> str:
        """The real member with a benign value, its variant with the held one (or the reverse
        order): a reader that folds case takes whichever comes last."""
        v = json.dumps(variant, ensure_ascii=False)

        def pair(real: str, alias: str) -> str:
            return real + "," + alias if order == "variant-last" else alias + "," + real

        if member == "method":
            held_params = '"params":{"name":"write_file","arguments":' + args_text(key) + "}"
            return (
                "{"
                + pair('"method":"ping"', v + ':"tools/call"')
                + ',"jsonrpc":"2.0","id":'
                + ident
                + ","
                + held_params
                + "}"
            )
        if member == "params":
            return (
                '{"jsonrpc":"2.0","id":'
                + ident
                + ',"method":"tools/call",'
                + pair(
                    '"params":{"name":"read_file","arguments":' + args_text(key + "a") + "}",
                    v + ':{"name":"write_file","arguments":' + args_text(key) + "}",
                )
                + "}"
            )
        if member == "name":
            return (
                '{"jsonrpc":"2.0","id":'
                + ident
                + ',"method":"tools/call","params":{'
                + pair('"name":"read_file"', v + ':"write_file"')
                + ',"arguments":'
                + args_text(key)
                + "}}"
            )
        if member == "arguments":
            # The allowed tool's arguments folded onto the held tool's: a reader that takes the
            # variant runs write_file with arguments the interposer never judged.
            return (
                '{"jsonrpc":"2.0","id":'
                + ident
                + ',"method":"tools/call","params":{"name":"write_file",'
                + pair('"arguments":' + args_text(key), v + ":" + args_text(key, '"swapped":true'))
                + "}}"
            )
        # id: a notification to the interposer, a request to a folding reader.
        return (
            '{"jsonrpc":"2.0",'
            + v
            + ":"
            + ident
            + ',"method":"tools/call","params":{"name":"write_file","arguments":'
            + args_text(key)
            + "}}"
        )

    def duplicates(self) -> None:
        for member in ("method", "name", "params", "id", "arguments", "jsonrpc"):
            for order in ("held-last", "held-first"):
                key, ident = self.next_key()
                self.add(f"duplicate-{member}", self.duplicate(member, order, key, ident))

    def duplicate(self, member: str, order: str, key: str, ident: str) -> str:
        def pair(benign_part: str, held_part: str) -> str:
            return (
                benign_part + "," + held_part
                if order == "held-last"
                else held_part + "," + benign_part
            )

        if member == "method":
            return (
                '{"jsonrpc":"2.0","id":'
                + ident
                + ","
                + pair('"method":"ping"', '"method":"tools/call"')
                + ',"params":{"name":"write_file","arguments":'
                + args_text(key)
                + "}}"
            )
        if member == "name":
            return (
                '{"jsonrpc":"2.0","id":'
                + ident
                + ',"method":"tools/call","params":{'
                + pair('"name":"read_file"', '"name":"write_file"')
                + ',"arguments":'
                + args_text(key)
                + "}}"
            )
        if member == "params":
            return (
                '{"jsonrpc":"2.0","id":'
                + ident
                + ',"method":"tools/call",'
                + pair(
                    '"params":{"name":"read_file","arguments":' + args_text(key + "a") + "}",
                    '"params":{"name":"write_file","arguments":' + args_text(key) + "}",
                )
                + "}"
            )
        if member == "id":
            return (
                '{"jsonrpc":"2.0",'
                + pair('"id":null', '"id":' + ident)
                + ',"method":"tools/call","params":{"name":"write_file","arguments":'
                + args_text(key)
                + "}}"
            )
        if member == "arguments":
            return (
                '{"jsonrpc":"2.0","id":'
                + ident
                + ',"method":"tools/call","params":{"name":"write_file",'
                + pair(
                    '"arguments":' + args_text(key), '"arguments":' + args_text(key, '"dup":true')
                )
                + "}}"
            )
        return call_text(
            key,
            ident,
            jsonrpc='"1.0","jsonrpc":"2.0"' if order == "held-last" else '"2.0","jsonrpc":"1.0"',
        )

    def escapes(self) -> None:
        methods = [
            '"tools\\/call"',
            '"\\u0074ools/call"',
            '"tools\\u002fcall"',
            '"\\u0074\\u006f\\u006f\\u006c\\u0073/call"',
            '"tools\\u002Fcall"',
        ]
        names = [
            '"write\\u005ffile"',
            '"\\u0077rite_file"',
            '"write_fil\\u0065"',
            '"write\\u005Ffile"',
        ]
        for m in methods:
            key, ident = self.next_key()
            self.add("escaped-method", call_text(key, ident, method="RAW:" + m))
        for n in names:
            key, ident = self.next_key()
            self.add("escaped-name", call_text(key, ident, name_text=n))
        for m in methods[:2]:
            for n in names[:2]:
                key, ident = self.next_key()
                self.add("escaped-both", call_text(key, ident, method="RAW:" + m, name_text=n))
        # Escaped member names.
        for old, new in (
            ('"method"', '"\\u006dethod"'),
            ('"params"', '"p\\u0061rams"'),
            ('"name"', '"n\\u0061me"'),
            ('"arguments"', '"\\u0061rguments"'),
        ):
            key, ident = self.next_key()
            self.add("escaped-member", call_text(key, ident).replace(old, new, 1))

    def batches(self) -> None:
        shapes = [
            lambda k, i: "[" + call_text(k, i) + "]",
            lambda k, i: "[" + benign(str(int(i) + 1), 0, k) + "," + call_text(k, i) + "]",
            lambda k, i: "[[" + call_text(k, i) + "]]",
            lambda k, i: "[" + call_text(k, i, top_extra='"x":' + nested(200, "array")) + "]",
            lambda k, i: "[" + call_text(k, i, args_extra='"s":"\\ud800"') + "]",
            lambda k, i: "[" + call_text(k, i, args_extra='"n":1e400') + "]",
            lambda k, i: "[" + call_text(k, None) + "]",
            lambda k, i: " [" + call_text(k, i) + "] ",
            lambda k, i: "[" + call_text(k, i) + "]\r[" + call_text(k, str(int(i) + 1)) + "]",
            lambda k, i: "[" + call_text(k, i).replace('"method"', '"Method"', 1) + "]",
        ]
        for shape in shapes:
            key, ident = self.next_key()
            self.add("batch", shape(key, ident))

    def notifications(self) -> None:
        extras = [
            {},
            {"top_extra": '"x":' + nested(200, "array")},
            {"args_extra": '"s":"\\ud800"'},
            {"args_extra": '"n":1e400'},
            {"top_extra": '"Id":7'},
            {"top_extra": '"ID":"7"'},
        ]
        for extra in extras:
            key, _ = self.next_key()
            self.add("notification", call_text(key, None, **extra))
        for label in ("CR", "LS", "NEL"):
            key, _ = self.next_key()
            self.add(
                "notification",
                '{"jsonrpc":"2.0","method":"ping","id":1}'
                + SEPARATORS[label]
                + call_text(key, None),
            )

    def jsonrpc_variants(self) -> None:
        for variant in ('"1.0"', "2", "2.0", "null", '"2.0 "', '"2.0\\u0000"', '"\\u0032.0"', "[]"):
            key, ident = self.next_key()
            self.add("jsonrpc-variant", call_text(key, ident, jsonrpc=variant))
            key, ident = self.next_key()
            self.add("jsonrpc-variant", call_text(key, ident).replace('"jsonrpc":"2.0",', "", 1))

    def split_lines(self) -> None:
        """One JSON value over several lines: a line reader sees fragments (none of them a call
        it could judge), a streaming decoder (Go's json.Decoder) sees one held call."""
        for cut in ('"params":', '"method":', '"arguments":', '"name":', "{"):
            for sep in ("\n", "\r\n", "\n\n", "\n \n"):
                key, ident = self.next_key()
                text = call_text(key, ident)
                at = text.index(cut) + len(cut) if cut != "{" else 1
                # The plain-newline split also runs alone: in a stream, a fragment a streaming
                # decoder cannot finish could swallow the case after it.
                self.add("split-lines", text[:at] + sep + text[at:], isolated=sep == "\n")

    def invalid_utf8(self) -> None:
        """Bytes that are not UTF-8: each ends the interposer's session (isolated)."""
        for label, raw in (
            ("overlong-slash", b"\xc0\xaf"),
            ("overlong-underscore", b"\xc1\x9f"),
            ("cesu-surrogate", b"\xed\xa0\x80"),
            ("lone-continuation", b"\x80"),
            ("ff", b"\xff"),
            ("truncated", b"\xe2\x80"),
        ):
            key, ident = self.next_key()
            text = call_text(key, ident, args_extra='"b":"XX"').encode()
            self.add(f"invalid-utf8-{label}", text.replace(b"XX", raw, 1), isolated=True)
        key, ident = self.next_key()
        text = call_text(key, ident).encode().replace(b"tools/call", b"tools\xc0\xafcall", 1)
        self.add("invalid-utf8-method", text, isolated=True)

    # --- seeded combinations -------------------------------------------------------------------

    MUTATIONS = (
        "deep",
        "surrogate",
        "number",
        "sep-inside",
        "sep-between",
        "folded",
        "duplicate",
        "escape",
        "notification",
        "batch",
        "jsonrpc",
        "whitespace",
    )

    def random_case(self) -> None:
        rng = self.rng
        key, ident = self.next_key()
        picks = rng.sample(self.MUTATIONS, rng.randint(1, 3))
        kw: dict = {}
        top, params, args = [], [], []
        for m in picks:
            if m == "deep":
                target = rng.choice((top, params, args))
                target.append(
                    '"d":'
                    + nested(
                        rng.choice((100, 128, 129, 300, 1000)), rng.choice(("array", "object"))
                    )
                )
            elif m == "surrogate":
                rng.choice((top, params, args)).append('"s":"' + rng.choice(SURROGATES) + '"')
            elif m == "number":
                rng.choice((top, params, args)).append('"n":' + rng.choice(NUMBERS))
            elif m == "escape":
                kw["method"] = "RAW:" + rng.choice(('"tools\\/call"', '"\\u0074ools/call"'))
            elif m == "notification":
                ident = None
            elif m == "jsonrpc":
                kw["jsonrpc"] = rng.choice(('"1.0"', "2", "null"))
        if top:
            kw["top_extra"] = ",".join(top)
        if params:
            kw["params_extra"] = ",".join(params)
        if args:
            kw["args_extra"] = ",".join(args)
        text = call_text(key, ident, **kw)
        if "folded" in picks:
            variant = rng.choice(FOLDED["method"] + FOLDED["params"][2:])
            real = "method" if variant.lower().startswith("m") else "params"
            if real == "method":
                text = text.replace('"method":', '"method":"ping",' + json.dumps(variant) + ":", 1)
            else:
                text = text.replace(
                    '"params":',
                    '"params":{"name":"read_file"},'
                    + json.dumps(variant, ensure_ascii=False)
                    + ":",
                    1,
                )
        if "duplicate" in picks:
            text = text.replace('"name":"write_file"', '"name":"read_file","name":"write_file"', 1)
        if "whitespace" in picks:
            ws = rng.choice(("\t", " ", "\r", "\u2028", "\x0b", "\x0c", "\ufeff", "\x00"))
            text = text.replace(",", "," + ws, rng.randint(1, 3))
        if "sep-inside" in picks:
            at = rng.randrange(1, len(text))
            text = text[:at] + rng.choice(list(SEPARATORS.values())) + text[at:]
        if "batch" in picks:
            text = "[" + text + "]"
        if "sep-between" in picks:
            sep = rng.choice(("\r", "\u2028", "\u2029", "\u0085", "\x0b", "\x0c", "\x00"))
            text = (
                benign(str(100_000 + len(self.cases) * 10 + 5), rng.randrange(5), key) + sep + text
            )
        self.add("random-" + "+".join(sorted(picks)), text)


def corpus(seed: int = 25, size: int = 3000) -> list[Case]:
    """The corpus: every fixed family once (controls spread through it), then seeded random
    combinations up to `size` cases."""
    b = Builder(seed)
    b.controls(20)
    for family in (
        b.deep,
        b.surrogates,
        b.numbers,
        b.separators,
        b.folded_keys,
        b.duplicates,
        b.escapes,
        b.batches,
        b.notifications,
        b.jsonrpc_variants,
        b.split_lines,
        b.invalid_utf8,
    ):
        family()
        b.controls(4)
    while len(b.cases) < size - 20:
        b.random_case()
    b.controls(20)
    return b.cases


if __name__ == "__main__":
    cases = corpus()
    print(len(cases), "cases,", sum(len(c.data) for c in cases), "bytes")
