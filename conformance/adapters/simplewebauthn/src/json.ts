// A strict RFC 8259 reader that keeps what the checks above it must see.
//
// JSON.parse cannot be used for anything whose bytes are signed or hashed: it keeps the last of two
// duplicate keys, turns 9007199254740993 into 9007199254740992, and accepts a text whose lone
// surrogate escapes it then carries on silently. This reader returns a tree of nodes that remembers
// every member (duplicates included), every number's lexeme and every value's span in the text, and
// refuses only what RFC 8259 itself refuses. Whether a duplicate, a float or a code point is
// admissible is decided by the caller (canon.ts for action fields, case.ts for the CASE).

export type Node =
  | { t: "null"; start: number; end: number }
  | { t: "bool"; v: boolean; start: number; end: number }
  | { t: "num"; lex: string; start: number; end: number }
  | { t: "str"; v: string; start: number; end: number }
  | { t: "arr"; items: Node[]; start: number; end: number }
  | { t: "obj"; members: [string, Node][]; start: number; end: number };

/** A text that is not JSON; `rule` names the canon.md rule (Syntax, InvalidEscape, ...). */
export class JsonError extends Error {
  constructor(
    readonly rule: string,
    detail: string,
  ) {
    super(`${rule}: ${detail}`);
  }
}

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** Bytes to text; overlong forms, encoded surrogates and truncated sequences are refused. A BOM is
 * kept (ignoreBOM), so the grammar refuses it instead of the decoder hiding it. */
export function decodeUtf8(bytes: Uint8Array): string {
  try {
    return utf8.decode(bytes);
  } catch {
    throw new JsonError("InvalidUtf8", "not UTF-8");
  }
}

/** Parse one JSON text. `maxDepth` bounds the containers (and the recursion). With
 * `loneSurrogates` a lone \u surrogate escape is kept in the string instead of refused: the CASE is
 * read that way, so that a lone surrogate inside the action's fields reaches admission (and is
 * `action_inadmissible`) instead of making the whole CASE unreadable. */
export function parse(text: string, maxDepth: number, loneSurrogates = false): Node {
  const p = new Parser(text, maxDepth, loneSurrogates);
  p.ws();
  const v = p.value(0);
  p.ws();
  if (p.i !== text.length) throw new JsonError("TrailingData", `at ${p.i}`);
  return v;
}

class Parser {
  i = 0;
  constructor(
    readonly s: string,
    readonly maxDepth: number,
    readonly loneSurrogates: boolean,
  ) {}

  ws(): void {
    for (;;) {
      const c = this.s.charCodeAt(this.i);
      if (c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d) this.i++;
      else return;
    }
  }

  value(depth: number): Node {
    const c = this.s[this.i];
    const start = this.i;
    switch (c) {
      case "{":
        return this.object(depth + 1);
      case "[":
        return this.array(depth + 1);
      case '"':
        return { t: "str", v: this.string(), start, end: this.i };
      case "t":
        this.word("true");
        return { t: "bool", v: true, start, end: this.i };
      case "f":
        this.word("false");
        return { t: "bool", v: false, start, end: this.i };
      case "n":
        this.word("null");
        return { t: "null", start, end: this.i };
      default:
        return this.number();
    }
  }

  word(w: string): void {
    if (this.s.startsWith(w, this.i)) this.i += w.length;
    else throw new JsonError("Syntax", `unexpected text at ${this.i}`);
  }

  object(depth: number): Node {
    if (depth > this.maxDepth) throw new JsonError("TooDeep", `more than ${this.maxDepth} containers`);
    const start = this.i;
    this.i++;
    const members: [string, Node][] = [];
    this.ws();
    if (this.s[this.i] === "}") {
      this.i++;
      return { t: "obj", members, start, end: this.i };
    }
    for (;;) {
      this.ws();
      if (this.s[this.i] !== '"') throw new JsonError("Syntax", `expected a key at ${this.i}`);
      const k = this.string();
      this.ws();
      if (this.s[this.i] !== ":") throw new JsonError("Syntax", `expected : at ${this.i}`);
      this.i++;
      this.ws();
      members.push([k, this.value(depth)]);
      this.ws();
      const c = this.s[this.i];
      this.i++;
      if (c === "}") return { t: "obj", members, start, end: this.i };
      if (c !== ",") throw new JsonError("Syntax", `expected , or } at ${this.i - 1}`);
    }
  }

  array(depth: number): Node {
    if (depth > this.maxDepth) throw new JsonError("TooDeep", `more than ${this.maxDepth} containers`);
    const start = this.i;
    this.i++;
    const items: Node[] = [];
    this.ws();
    if (this.s[this.i] === "]") {
      this.i++;
      return { t: "arr", items, start, end: this.i };
    }
    for (;;) {
      this.ws();
      items.push(this.value(depth));
      this.ws();
      const c = this.s[this.i];
      this.i++;
      if (c === "]") return { t: "arr", items, start, end: this.i };
      if (c !== ",") throw new JsonError("Syntax", `expected , or ] at ${this.i - 1}`);
    }
  }

  hex4(): number {
    const h = this.s.slice(this.i, this.i + 4);
    if (!/^[0-9A-Fa-f]{4}$/.test(h)) throw new JsonError("InvalidEscape", `\\u needs four hex digits at ${this.i}`);
    this.i += 4;
    return parseInt(h, 16);
  }

  string(): string {
    this.i++; // the opening quote
    let out = "";
    for (;;) {
      if (this.i >= this.s.length) throw new JsonError("Syntax", "unterminated string");
      const c = this.s.charCodeAt(this.i);
      if (c === 0x22) {
        this.i++;
        return out;
      }
      if (c < 0x20) throw new JsonError("UnescapedControl", `U+${c.toString(16).padStart(4, "0")} at ${this.i}`);
      if (c !== 0x5c) {
        out += this.s[this.i];
        this.i++;
        continue;
      }
      const e = this.s[this.i + 1];
      this.i += 2;
      const simple: Record<string, string> = { '"': '"', "\\": "\\", "/": "/", b: "\b", f: "\f", n: "\n", r: "\r", t: "\t" };
      if (e !== undefined && e in simple) {
        out += simple[e];
        continue;
      }
      if (e !== "u") throw new JsonError("InvalidEscape", `\\${e ?? ""} at ${this.i - 2}`);
      const u = this.hex4();
      const paired = u >= 0xd800 && u <= 0xdbff && this.s.startsWith("\\u", this.i) && /^[dD][c-fC-F]/.test(this.s.slice(this.i + 2, this.i + 4));
      if (this.loneSurrogates && u >= 0xd800 && u <= 0xdfff && !paired) {
        out += String.fromCharCode(u);
        continue;
      }
      if (u >= 0xdc00 && u <= 0xdfff) throw new JsonError("LoneSurrogate", `low surrogate alone at ${this.i - 6}`);
      if (u >= 0xd800 && u <= 0xdbff) {
        // The low half must follow at once, as another \u escape.
        if (this.s[this.i] !== "\\" || this.s[this.i + 1] !== "u") {
          throw new JsonError("LoneSurrogate", `high surrogate alone at ${this.i - 6}`);
        }
        this.i += 2;
        const lo = this.hex4();
        if (lo < 0xdc00 || lo > 0xdfff) throw new JsonError("LoneSurrogate", `high surrogate alone at ${this.i - 12}`);
        out += String.fromCharCode(u, lo);
        continue;
      }
      out += String.fromCharCode(u);
    }
  }

  number(): Node {
    const m = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/.exec(this.s.slice(this.i, this.i + 400));
    const rest = this.s.slice(this.i, this.i + 9);
    if (m === null || m[0] === "" || m[0] === "-") {
      if (/^(-?Infinity|NaN|\+)/.test(rest)) throw new JsonError("NotJsonNumber", `at ${this.i}`);
      throw new JsonError("Syntax", `unexpected text at ${this.i}`);
    }
    const start = this.i;
    this.i += m[0].length;
    // A leading zero followed by digits ("01") stops the match after "0"; say what it is.
    if (m[1] === "0" && /[0-9]/.test(this.s[this.i] ?? "")) throw new JsonError("NotJsonNumber", `leading zero at ${start}`);
    return { t: "num", lex: m[0], start, end: this.i };
  }
}

/** Whether any object in the tree has two members with one key. */
export function hasDuplicate(n: Node): boolean {
  if (n.t === "obj") {
    const seen = new Set<string>();
    for (const [k, v] of n.members) {
      if (seen.has(k) || hasDuplicate(v)) return true;
      seen.add(k);
    }
  } else if (n.t === "arr") {
    return n.items.some(hasDuplicate);
  }
  return false;
}

/** A plain JavaScript value for reading the CASE's own members. Objects have no prototype, so a
 * key named "__proto__" is an ordinary member. Numbers become doubles (the caller checks they are
 * integers where it needs one); the last of duplicate members wins (callers that care check
 * `hasDuplicate` first). */
export function plain(n: Node): unknown {
  switch (n.t) {
    case "null":
      return null;
    case "bool":
    case "str":
      return n.v;
    case "num":
      return Number(n.lex);
    case "arr":
      return n.items.map(plain);
    case "obj": {
      const o = Object.create(null) as Record<string, unknown>;
      for (const [k, v] of n.members) o[k] = plain(v);
      return o;
    }
  }
}

/** The member `key` of an object node (the last, if repeated). */
export function member(n: Node, key: string): Node | undefined {
  if (n.t !== "obj") return undefined;
  let found: Node | undefined;
  for (const [k, v] of n.members) if (k === key) found = v;
  return found;
}
