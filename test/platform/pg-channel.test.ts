import { afterAll, describe, expect, it } from "vitest";
import { db } from "../../app/server/platform/db.server.ts";
import { env } from "../../app/server/platform/env.server.ts";
import {
  type ChannelListener,
  listenChannel,
} from "../../app/server/platform/pg-channel.server.ts";

// Two listeners on one channel, as the credential cache and the live connections' watch are in
// one web process (and every replica's are): neither takes the other's heartbeat for a message
// (issue 53, decision 0220: it emptied the credential cache and rechecked every open socket
// once a second).

const CHANNEL = "channel_test";
const stops: ChannelListener[] = [];
afterAll(async () => {
  for (const listener of stops) await listener.stop();
});

describe("a channel listener", () => {
  it("passes on messages but no listener's heartbeats", async () => {
    const url = env().DATABASE_URL as string;
    const heard: string[] = [];
    const a = listenChannel(url, CHANNEL, {
      heartbeatMs: 50,
      onMessage: (payload) => heard.push(payload),
      onReset: () => {},
    });
    stops.push(a.listener);
    await a.ready;
    const b = listenChannel(url, CHANNEL, {
      heartbeatMs: 50,
      onMessage: () => {},
      onReset: () => {},
    });
    stops.push(b.listener);
    await b.ready; // its first heartbeat is sent (a hears it before anything sent after)
    await expect.poll(() => b.listener.live()).toBe(true);
    await db()`select pg_notify(${CHANNEL}, 'u:usr_1')`;
    await expect.poll(() => heard.includes("u:usr_1")).toBe(true);
    expect(heard).toEqual(["u:usr_1"]);
    expect(a.listener.live()).toBe(true);
  });
});
