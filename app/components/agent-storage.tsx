import { Link } from "@remix-run/react";
import type { StorageView } from "../server/agents/storage.server.ts";
import { Notice } from "./forms.tsx";

// The agent page's storage: used / limit as the kernel measured it, the 80 % and 95 % warnings
// and "storage full" (decisions 0216, 0217).

const GiB = 1024 ** 3;
const MiB = 1024 ** 2;

export function bytesText(n: number): string {
  return n >= GiB ? `${Number((n / GiB).toFixed(2))} GB` : `${Number((n / MiB).toFixed(1))} MB`;
}

/** What the banner says: full, past a warning level, or a lowering under way; null: nothing. */
export function storageMessage(storage: StorageView): { id: string; text: string } | null {
  if (storage.full) {
    return {
      id: "storage-full",
      text: "Storage full: your agent keeps answering but cannot save anything new. Free some space or upgrade your storage.",
    };
  }
  if (storage.warning) {
    return {
      id: "storage-warning",
      text: `Storage ${storage.warning} % full (${bytesText(storage.usedBytes)} of ${bytesText(storage.limitBytes ?? 0)}). Free some space or upgrade your storage.`,
    };
  }
  if (storage.graceUntil) {
    return {
      id: "storage-grace",
      text: `Your storage limit goes down on ${storage.graceUntil.slice(0, 10)}: until then your data may stay above it. Nothing is deleted.`,
    };
  }
  return null;
}

/** The banner above the page, with the way to more storage. */
export function StorageNotice({ storage }: { storage: StorageView }) {
  const message = storageMessage(storage);
  if (!message) return null;
  return (
    <div data-testid={message.id}>
      <Notice tone="error">
        {message.text}{" "}
        <Link to="/files" className="underline">
          Storage
        </Link>
      </Notice>
    </div>
  );
}

/** The figure for the details card. */
export function StorageFigure({ storage }: { storage: StorageView }) {
  return (
    <span data-testid="agent-storage">
      {storage.limitBytes === null
        ? `${bytesText(storage.usedBytes)} used (no limit on this host)`
        : `${bytesText(storage.usedBytes)} of ${bytesText(storage.limitBytes)} (${storage.percent} %)${storage.full ? " — storage full" : ""}`}
    </span>
  );
}
