import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { extract } from "tar-stream";
import { openStream } from "../../app/server/platform/sealed-stream.server.ts";

// A restore larger than the target's storage limit is refused before anything changes
// (decision 0217): the backup is read once to add up its state's bytes (entries under
// `state/`, as unpackInto writes them), before the safety backup or a new volume is made.

/** The bytes of a sealed backup's state files. */
export async function stateBytesOf(sealed: Readable): Promise<number> {
  const reader = extract();
  let bytes = 0;
  const reading = pipeline(Readable.from(openStream(sealed)), reader);
  for await (const entry of reader) {
    if (/^state\//.test(entry.header.name)) bytes += entry.header.size ?? 0;
    entry.resume();
  }
  await reading;
  return bytes;
}
