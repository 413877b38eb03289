import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { extract, pack } from "tar-stream";

// Files of a gateway's state that the gateway rebuilds itself, left out of backups as OpenClaw's
// own backup leaves them out (its volatile paths): the Control UI's unpacked assets and the
// plugin source captures. They were 137 MB of a fresh gateway's ~140 MB volume (decision 0180).

export const REGENERABLE = ["state/cache/control-ui-assets", "state/tmp/plugin-captures"];

/** Whether a tar entry of exportVolume's shape (`state/…`) is one the gateway rebuilds. */
export function isRegenerable(name: string): boolean {
  const path = name.replace(/\/+$/, "");
  return REGENERABLE.some((root) => path === root || path.startsWith(`${root}/`));
}

/** The volume's tar without its regenerable entries (owners, modes and PAX records kept). */
export function withoutRegenerable(tar: NodeJS.ReadableStream): Readable {
  const reader = extract();
  const kept = pack();
  const reading = pipeline(tar, reader);
  reading.catch(() => {}); // awaited below; a failure also ends the loop
  void (async () => {
    try {
      for await (const entry of reader) {
        if (isRegenerable(entry.header.name)) entry.resume();
        else await pipeline(entry, kept.entry(entry.header));
      }
      await reading;
      kept.finalize();
    } catch (error) {
      // Both ends: the source (Docker's archive, and with it its helper container) is let go too.
      reader.destroy(error as Error);
      kept.destroy(error as Error);
    }
  })();
  // tar-stream packs are streamx streams; Readable.from gives a Node stream.
  return Readable.from(kept);
}
