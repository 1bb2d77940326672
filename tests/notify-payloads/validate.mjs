// Validate the notification payloads the service delivered (written by the Rust test
// `notify::slack_teams_and_the_webhook_each_get_the_notice_without_any_parameter` into the
// directory given as the first argument) with the official libraries:
//
// - teams.json: its Adaptive Card is parsed by Microsoft's `adaptivecards` package; any parse
//   event (unknown element, bad value) or validation failure fails the check, and so does a card
//   that is not version 1.5 or that has no Action.OpenUrl.
// - slack.json: written out as a TypeScript object literal typed with Block Kit's `KnownBlock[]`
//   from `@slack/types` and compiled by `tsc --strict --noEmit`: a wrong block shape, an unknown
//   member (excess property check) or a wrong literal fails it.
import { readFileSync, writeFileSync, mkdtempSync, rmSync } from "node:fs";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { execFileSync } from "node:child_process";
import { createRequire } from "node:module";

// The package's ES module build imports paths without extensions, which Node refuses; its
// bundled UMD build is the same library.
const AC = createRequire(import.meta.url)("adaptivecards/dist/adaptivecards.js");

const dir = process.argv[2];
if (!dir) {
  console.error("usage: node validate.mjs PAYLOAD_DIR");
  process.exit(2);
}
const here = dirname(fileURLToPath(import.meta.url));
let failed = false;
const fail = (what) => {
  console.error(`FAIL ${what}`);
  failed = true;
};

// Teams
const teams = JSON.parse(readFileSync(join(dir, "teams.json"), "utf8"));
const attachment = teams.attachments?.[0];
if (teams.type !== "message" || attachment?.contentType !== "application/vnd.microsoft.card.adaptive") {
  fail("teams: not a message with an Adaptive Card attachment");
}
const content = attachment?.content ?? {};
if (content.version !== "1.5") fail(`teams: card version ${content.version}, not 1.5`);
const context = new AC.SerializationContext();
const card = new AC.AdaptiveCard();
card.parse(content, context);
for (let i = 0; i < context.eventCount; i++) {
  const e = context.getEventAt(i);
  fail(`teams: parse event ${e.event} (phase ${e.phase}): ${e.message}`);
}
const validation = card.validateProperties();
for (const e of validation.validationEvents) {
  fail(`teams: validation event ${e.event}: ${e.message}`);
}
// The parser is lenient about unknown members: the library's own serialization of what it
// read must give back every body element and fact as sent.
const reread = card.toJSON();
if (JSON.stringify(reread.body.map((e) => e.type)) !== JSON.stringify(content.body.map((e) => e.type))) {
  fail("teams: the library read back other body elements than were sent");
}
const facts = (c) => JSON.stringify(c.body.filter((e) => e.type === "FactSet").map((e) => e.facts));
if (facts(reread) !== facts(content)) fail(`teams: facts read back as ${facts(reread)}`);
const open = card.getActionAt(0);
if (!(open instanceof AC.OpenUrlAction) || !open.url) fail("teams: no Action.OpenUrl with a url");
if (card.version?.toString() !== "1.5") fail(`teams: parsed version ${card.version}`);
console.log(`teams: Adaptive Card ${card.version} parsed, ${card.getItemCount()} elements, action ${open?.getJsonTypeName()}`);

// Slack
const slack = JSON.parse(readFileSync(join(dir, "slack.json"), "utf8"));
const check = mkdtempSync(join(here, ".check-"));
writeFileSync(
  join(check, "slack.ts"),
  `import type { KnownBlock } from "@slack/types";\n` +
    `export const message: { text: string; blocks: KnownBlock[] } = ${JSON.stringify(slack, null, 2)};\n`,
);
try {
  execFileSync(
    process.execPath,
    [join(here, "node_modules/typescript/bin/tsc"), "--strict", "--noEmit", "--skipLibCheck", "false",
     "--module", "nodenext", "--moduleResolution", "nodenext", "--target", "es2022", join(check, "slack.ts")],
    { stdio: "inherit", cwd: here },
  );
  console.log(`slack: ${slack.blocks.length} blocks type-check as KnownBlock[] under tsc --strict`);
} catch {
  fail("slack: tsc --strict refused the Block Kit message");
} finally {
  rmSync(check, { recursive: true, force: true });
}
if (failed) process.exit(1);
console.log("notification payloads: OK");
