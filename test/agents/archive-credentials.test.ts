import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { extract, pack } from "tar-stream";
import { describe, expect, it } from "vitest";
import { withoutChannelCredentials } from "../../app/server/agents/archive-credentials.server.ts";
import { RECORDS_VERSION } from "../../app/server/agents/backup-records.server.ts";
import { seal } from "../../app/server/platform/crypto.server.ts";

// What leaves an agent's archive payload (decision 0200): every channel credential, in the
// platform's records and in the gateway's state; everything else byte for byte.

const TELEGRAM = "123456:telegram-bot-token-secret";
const DISCORD = "discord-bot-token-secret";
const WHATSAPP = "whatsapp-noise-key-secret";

async function tarOf(files: Array<[string, string]>): Promise<Buffer> {
  const p = pack();
  for (const [name, body] of files) p.entry({ name, mode: 0o600 }, body);
  p.finalize();
  const chunks: Buffer[] = [];
  for await (const chunk of p) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

async function filesOf(bytes: Buffer): Promise<Map<string, string>> {
  const files = new Map<string, string>();
  const reader = extract();
  Readable.from([bytes]).pipe(reader);
  for await (const entry of reader) {
    const chunks: Buffer[] = [];
    for await (const chunk of entry) chunks.push(chunk as Buffer);
    files.set(entry.header.name, Buffer.concat(chunks).toString("utf8"));
  }
  return files;
}

const records = {
  version: RECORDS_VERSION,
  agent: {
    id: "agt_a",
    name: "Ada",
    gateway_agent_id: "main",
    model: "m",
    tier: "solo",
    config: {},
  },
  activeSession: null,
  channels: [
    { channel: "chatapp1", sealed: seal(TELEGRAM), details: { userId: "42" } },
    { channel: "chatapp2", sealed: seal(DISCORD), details: {} },
  ],
  messages: [],
};
const config = {
  gateway: { mode: "local", auth: { mode: "token" } },
  channels: {
    telegram: { enabled: true, botToken: TELEGRAM },
    discord: { enabled: true, token: DISCORD },
    whatsapp: { enabled: true },
  },
  plugins: { entries: { discord: { enabled: true } } },
};

describe("channel credentials out of an archive payload", () => {
  it("empties the records' channels, strips the config's, drops credential files; names the channels", async () => {
    const dir = mkdtempSync(join(tmpdir(), "archive-credentials-"));
    const from = join(dir, "in.tar");
    const to = join(dir, "out.tar");
    writeFileSync(
      from,
      await tarOf([
        ["records.json", JSON.stringify(records)],
        ["state/openclaw.json", JSON.stringify(config)],
        ["state/openclaw.json.bak", JSON.stringify(config)],
        ["state/openclaw.json.bak.1", JSON.stringify(config)],
        ["state/credentials/whatsapp/default/creds.json", `{"noiseKey":"${WHATSAPP}"}`],
        ["state/credentials/telegram-allowFrom.json", '["42"]'],
        ["state/secrets.json", `{"discord":"${DISCORD}"}`],
        ["state/workspace/MEMORY.md", "- likes green tea\n"],
      ]),
    );
    expect(await withoutChannelCredentials(from, to)).toEqual(["chatapp1", "chatapp2", "chatapp3"]);
    const out = readFileSync(to);
    for (const secret of [TELEGRAM, DISCORD, WHATSAPP, "v1."]) {
      expect(out.includes(Buffer.from(secret)), secret).toBe(false);
    }
    const files = await filesOf(out);
    expect([...files.keys()]).toEqual([
      "records.json",
      "state/openclaw.json",
      "state/workspace/MEMORY.md",
    ]);
    expect(JSON.parse(files.get("records.json") as string)).toEqual({ ...records, channels: [] });
    const { channels: _gone, ...rest } = config;
    expect(JSON.parse(files.get("state/openclaw.json") as string)).toEqual(rest);
    expect(files.get("state/workspace/MEMORY.md")).toBe("- likes green tea\n");
  });

  it("refuses a payload whose records or config cannot be read (400)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "archive-credentials-"));
    for (const files of [
      [["records.json", "{not json"]],
      [["records.json", JSON.stringify({ ...records, channels: "all" })]],
      [["state/openclaw.json", "{not json"]],
    ] as Array<Array<[string, string]>>) {
      const from = join(dir, "bad.tar");
      writeFileSync(from, await tarOf(files));
      await expect(withoutChannelCredentials(from, join(dir, "out.tar"))).rejects.toMatchObject({
        status: 400,
        message: expect.stringMatching(/^Archive payload is malformed/),
      });
    }
  });
});
