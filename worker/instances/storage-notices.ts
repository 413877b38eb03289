import { formatBytes } from "../../app/server/agents/instances.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { env } from "../../app/server/platform/env.server.ts";
import { sendJob } from "../../app/server/platform/jobs.server.ts";

// The storage emails (decision 0217), sent through the send-email job like every other mail.

export type StorageNotice =
  | { kind: "warning"; level: 80 | 95; usedBytes: number; limitBytes: number }
  | { kind: "grace"; usedBytes: number; limitBytes: number; until: Date };

export function noticeText(name: string, notice: StorageNotice): { subject: string; text: string } {
  const used = formatBytes(notice.usedBytes);
  const limit = formatBytes(notice.limitBytes);
  const files = new URL("/files", env().APP_URL).toString();
  if (notice.kind === "warning") {
    return {
      subject: `Your agent's storage is ${notice.level} % full`,
      text:
        `Hello ${name},\n\nYour agent uses ${used} of its ${limit} storage (${notice.level} % ` +
        `or more). When it is full the agent keeps answering but cannot save anything new. ` +
        `Free some space or upgrade your storage: ${files}\n`,
    };
  }
  return {
    subject: "Your agent's storage limit is going down",
    text:
      `Hello ${name},\n\nYour storage limit goes back to ${limit}, and your agent uses ${used}. ` +
      `Nothing is deleted: until ${notice.until.toISOString().slice(0, 10)} the current limit ` +
      `stays; after that your agent cannot save anything new until its data fits. ` +
      `Free some space or upgrade your storage: ${files}\n`,
  };
}

export async function sendStorageNotice(userId: string, notice: StorageNotice): Promise<void> {
  const [user] = await db()<{ email: string; name: string }[]>`
    select email, name from users where id = ${userId}`;
  if (!user) return;
  await sendJob("send-email", { to: user.email, ...noticeText(user.name, notice) });
}
