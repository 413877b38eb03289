import type { MetaFunction } from "@remix-run/node";

export const meta: MetaFunction = () => [{ title: "Agent Platform — host your AI agents" }];

const features = [
  {
    title: "Your own agent gateway",
    text: "Each account gets an isolated container running the real OpenClaw gateway, started, stopped, updated and repaired for you.",
  },
  {
    title: "Connected to your channels",
    text: "Bring a Telegram, Discord or WhatsApp bot and your agent answers there; talk to it here too.",
  },
  {
    title: "One AI layer, metered",
    text: "OpenAI, Anthropic, Google and OpenRouter behind one endpoint, with exact per-token costs — or bring your own key.",
  },
  {
    title: "Built for teams and programs",
    text: "Sign in with email, OAuth or your wallet; drive everything from the web or with API keys.",
  },
];

export default function Index() {
  return (
    <div className="space-y-10">
      <section className="space-y-4">
        <h1 className="text-4xl font-bold tracking-tight">Host AI agents that work for you</h1>
        <p className="max-w-2xl text-lg text-slate-600">
          Provision, configure, run and talk to hosted AI agents — and pay only for what they use.
        </p>
      </section>
      <ul className="grid gap-4 sm:grid-cols-2">
        {features.map((f) => (
          <li key={f.title} className="rounded-lg border border-slate-200 bg-white p-5 shadow-sm">
            <h2 className="font-semibold">{f.title}</h2>
            <p className="mt-2 text-sm text-slate-600">{f.text}</p>
          </li>
        ))}
      </ul>
    </div>
  );
}
