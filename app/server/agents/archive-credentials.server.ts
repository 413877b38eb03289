import { createReadStream, createWriteStream } from "node:fs";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { extract, pack } from "tar-stream";
import { DomainError } from "../platform/errors.server.ts";
import { agentRecordsSchema } from "./backup-records.server.ts";
import { CHANNELS, type Channel, GATEWAY_CHANNEL } from "./channels.server.ts";

// Channel credentials never travel in an agent export (decision 0200): a bot token or a linked
// WhatsApp session belongs to the account that set it up, and an archive imported into another
// account must not bring it along. The export leaves them out of its payload, and an import
// leaves out whatever a hand-made archive carries, before anything is stored. What goes:
// - records.json: `channels` (the user's tokens, sealed as at rest) emptied;
// - the gateway's config (state/openclaw.json): its `channels` section (bot tokens, and any
//   other channel's secrets) removed; its rotated copies (openclaw.json.bak…) dropped whole;
// - state/credentials/**: OpenClaw's channel credentials (WhatsApp Web's session and keys,
//   pairing allowlists, legacy OAuth imports), and state/secrets.json (file-backed secrets).
// The channels that had something are named, so the export can say what to connect again.

const CONFIG = "state/openclaw.json";
const DROPPED = [
  /^state\/openclaw\.json\..+/,
  /^state\/credentials(\/|$)/,
  /^state\/secrets\.json$/,
];
const BY_GATEWAY_NAME = new Map(CHANNELS.map((c) => [GATEWAY_CHANNEL[c], c]));
const JSON_LIMIT = 16 * 1024 * 1024;

const malformed = (what: string) => new DomainError(400, `Archive payload is malformed: ${what}`);

async function text(entry: AsyncIterable<unknown>, what: string): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of entry) {
    size += (chunk as Buffer).length;
    if (size > JSON_LIMIT) throw malformed(`${what} is too large`);
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString("utf8");
}

function parse(body: string, what: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch {
    throw malformed(`${what} is not JSON`);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw malformed(`${what} is not an object`);
  }
  return value as Record<string, unknown>;
}

/**
 * Copies the payload tar at `from` (records.json and state/…) to `to` without any channel
 * credential; returns the channels that had one, in the platform's names.
 */
export async function withoutChannelCredentials(from: string, to: string): Promise<Channel[]> {
  const found = new Set<Channel>();
  const reader = extract();
  const out = pack();
  const reading = pipeline(createReadStream(from), reader);
  reading.catch(() => {}); // awaited below; a failure also ends the loop
  // tar-stream packs are streamx streams; Readable.from gives pipeline a Node stream.
  const writing = pipeline(Readable.from(out), createWriteStream(to, { mode: 0o600 }));
  writing.catch(() => {});
  try {
    for await (const entry of reader) {
      const { header } = entry;
      const name = header.name.replace(/^\.\//, "");
      if (DROPPED.some((pattern) => pattern.test(name))) {
        const whatsapp = /^state\/credentials\/whatsapp\/./.test(name);
        if (whatsapp && header.type === "file") found.add("chatapp3");
        entry.resume();
        continue;
      }
      if (name === "records.json") {
        const raw = parse(await text(entry, name), name);
        const records = agentRecordsSchema.safeParse(raw);
        if (!records.success) throw malformed("records.json does not match its format");
        for (const c of records.data.channels) found.add(c.channel);
        const body = Buffer.from(JSON.stringify({ ...raw, channels: [] }));
        await new Promise<void>((resolve, reject) =>
          out.entry({ ...header, size: body.length }, body, (e) => (e ? reject(e) : resolve())),
        );
        continue;
      }
      if (name === CONFIG && header.type === "file") {
        const config = parse(await text(entry, name), "the gateway's config");
        const channels = config.channels;
        if (channels && typeof channels === "object") {
          for (const key of Object.keys(channels)) {
            const channel = BY_GATEWAY_NAME.get(key);
            if (channel) found.add(channel);
          }
        }
        const { channels: _secrets, ...rest } = config;
        const body = Buffer.from(`${JSON.stringify(rest, null, 2)}\n`);
        await new Promise<void>((resolve, reject) =>
          out.entry({ ...header, size: body.length }, body, (e) => (e ? reject(e) : resolve())),
        );
        continue;
      }
      await pipeline(entry, out.entry(header));
    }
    await reading;
    out.finalize();
    await writing;
  } catch (error) {
    reader.destroy();
    out.destroy();
    await Promise.allSettled([reading, writing]);
    if (error instanceof DomainError) throw error;
    throw malformed("not a readable tar");
  }
  return CHANNELS.filter((c) => found.has(c));
}
