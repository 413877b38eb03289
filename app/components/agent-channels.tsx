import { Form } from "@remix-run/react";
import type { channelsPage } from "../server/agents/chat-page.server.ts";
import type { FormReply } from "../server/platform/form-action.server.ts";
import { AgentTabs } from "./agent-tabs.tsx";
import { Card, Notice } from "./forms.tsx";
import { HlsPlayer } from "./hls-player.tsx";
import { WhatsAppLinkPanel } from "./whatsapp-link.tsx";

// The channels tab (app/routes/agents.$id.channels.tsx): AI provider keys and channel tokens,
// the chat apps with WhatsApp's QR link, and the live stream.

export type ChannelsPageData = Awaited<ReturnType<typeof channelsPage>>;

export interface ChannelsAnswer {
  message: string;
  whatsapp?: { linked: boolean; qrDataUrl: string | null };
}

export function AgentChannels({
  d,
  reply,
}: {
  d: ChannelsPageData;
  reply: FormReply<ChannelsAnswer> | undefined;
}) {
  return (
    <div className="space-y-6">
      <h1 className="text-2xl font-semibold">Channels and keys of {d.agent.name}</h1>
      <AgentTabs agentId={d.agent.id} />
      {reply?.error ? (
        <Notice tone="error">{reply.error}</Notice>
      ) : reply?.value ? (
        <Notice>{reply.value.message}</Notice>
      ) : null}
      <Card title="Credentials">
        <ul className="text-sm" data-testid="credentials">
          {Object.entries(d.credentials).map(([key, configured]) => (
            <li key={key}>
              {key}: {configured ? "configured" : "not configured"}
            </li>
          ))}
        </ul>
        <Form method="post" className="mt-3 flex flex-wrap items-end gap-2">
          <input type="hidden" name="intent" value="credential" />
          <label className="text-sm">
            Credential{" "}
            <select name="key" className="rounded border px-2 py-1">
              {/* From the loader: server modules do not reach the browser bundle. */}
              {Object.keys(d.credentials).map((k) => (
                <option key={k}>{k}</option>
              ))}
            </select>
          </label>
          <label className="text-sm">
            Value{" "}
            <input
              name="value"
              type="password"
              autoComplete="off"
              className="rounded border px-2 py-1"
            />
          </label>
          <button type="submit" className="rounded-md border px-3 py-1 text-sm">
            Save
          </button>
        </Form>
      </Card>

      <Card title="Channels and live stream">
        <Form method="post" className="space-y-2 text-sm">
          <input type="hidden" name="intent" value="channels" />
          {[
            ["chatapp1Token", "Telegram bot token"],
            ["chatapp2BotToken", "Discord bot token"],
            ["chatapp3Token", "WhatsApp (a reference of yours; the phone is linked by QR below)"],
          ].map(([name, label]) => (
            <label key={name} className="block">
              {label}{" "}
              <input
                name={name}
                type="password"
                autoComplete="off"
                className="rounded border px-2 py-1"
              />
            </label>
          ))}
          <button type="submit" className="rounded-md border px-3 py-1">
            Save channels
          </button>
        </Form>
        {d.whatsapp ? (
          <WhatsAppLinkPanel
            status={d.whatsapp.status}
            statusError={d.whatsapp.error}
            result={reply?.value?.whatsapp}
          />
        ) : null}
        {d.stream ? (
          <div className="mt-4 space-y-1 text-sm" data-testid="stream">
            <p>
              RTMP server: <code>{d.stream.rtmpServer}</code>
            </p>
            <p>
              Stream key: <code>{d.stream.streamKey}</code>
            </p>
            <p>
              Playback: <a href={d.stream.playbackUrl}>{d.stream.playbackUrl}</a>
            </p>
            <HlsPlayer src={d.stream.playbackUrl} className="w-full max-w-xl" />
          </div>
        ) : (
          <p className="mt-2 text-sm text-slate-600">No live stream yet: save a channel first.</p>
        )}
      </Card>
    </div>
  );
}
