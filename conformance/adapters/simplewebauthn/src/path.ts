// The scope language's `path` rule and its `prefix` text (docs/SPEC.md §14.4, "Path constraints"),
// for this adapter's standing-grant checks.
//
// A path argument is read as an absolute POSIX path and compared name by name; whatever two
// readers of one path could read two ways is refused rather than guessed: repeated `/`, a
// trailing `/` and `.` names are dropped (POSIX reads them so); a `..` name anywhere, `\`, `%`, a
// control character (NUL included), a relative path, a leading `//` and more than 4096 bytes are
// refused. A rule's directory must already be in that normal form, and a `prefix` rule's text
// must not hold `/` or `\`: either makes the grant unreadable.

export const MAX_PATH_BYTES = 4096;

export class PathRefused extends Error {}

/** The names of `text` read as an absolute path, root first; throws PathRefused. */
export function pathNames(text: string): string[] {
  if (Buffer.byteLength(text, "utf8") > MAX_PATH_BYTES) throw new PathRefused("longer than 4096 bytes");
  // Unicode Cc: C0, DEL and C1.
  if (/[\u0000-\u001f\u007f-\u009f]/u.test(text)) throw new PathRefused("a control character");
  if (text.includes("\\")) throw new PathRefused("a backslash");
  if (text.includes("%")) throw new PathRefused("a percent sign");
  if (!text.startsWith("/")) throw new PathRefused("not absolute");
  if (text.startsWith("//")) throw new PathRefused("a leading //");
  const names: string[] = [];
  for (const name of text.slice(1).split("/")) {
    if (name === "" || name === ".") continue;
    if (name === "..") throw new PathRefused("a .. name");
    names.push(name);
  }
  return names;
}

const normalForm = (names: string[]): string => "/" + names.join("/");

/** The names of a `path` rule's directory; throws PathRefused unless written in normal form. */
export function pathUnder(text: string): string[] {
  const names = pathNames(text);
  if (normalForm(names) !== text) throw new PathRefused(`not in normal form (write ${normalForm(names)})`);
  return names;
}

/** Whether the argument is the directory `under` or inside it, whole names compared. */
export function pathCovers(under: string, value: unknown): boolean {
  if (typeof value !== "string") return false;
  let names: string[];
  try {
    names = pathNames(value);
  } catch (e) {
    if (e instanceof PathRefused) return false;
    throw e;
  }
  const dir = pathUnder(under);
  return dir.every((name, i) => names[i] === name);
}

/** Whether a `prefix` rule's text is one a grant may hold: not empty, no `/` or `\`. */
export const prefixTextReadable = (prefix: unknown): boolean =>
  typeof prefix === "string" && prefix !== "" && !prefix.includes("/") && !prefix.includes("\\");
