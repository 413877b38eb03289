// How plans, credits and add-ons work on a server without payments (decision 0100), shared by
// /pricing and /billing so both say the same thing.

/** Who to ask: the configured contact as a link when it is an email address or a URL. */
export function OperatorContact({ contact }: { contact: string | null }) {
  if (!contact) return <>the operator of this server</>;
  const href = contact.includes("@") && !contact.includes("/") ? `mailto:${contact}` : contact;
  const linkable = href.startsWith("mailto:") || /^https?:\/\//.test(href);
  return linkable ? (
    <a href={href} className="text-indigo-700 underline" data-testid="operator-contact">
      {contact}
    </a>
  ) : (
    <span data-testid="operator-contact">{contact}</span>
  );
}

export interface SelfHostedFacts {
  contact: string | null;
  defaultPlan: string;
}

/** The pricing page's explanation in self-hosted mode (no prices are charged here). */
export function SelfHostedPricing({ facts }: { facts: SelfHostedFacts }) {
  return (
    <section
      data-testid="self-hosted"
      className="space-y-2 rounded-lg border border-indigo-200 bg-indigo-50 p-5 text-sm"
    >
      <h2 className="text-lg font-semibold">This server takes no payments</h2>
      <p>
        Plans and credits are given by <OperatorContact contact={facts.contact} />, not bought.{" "}
        {facts.defaultPlan === "none" ? (
          <>New accounts have no plan until the operator assigns one: ask them.</>
        ) : (
          <>
            Every account starts on the <strong>{facts.defaultPlan}</strong> plan; ask the operator
            for a bigger one, for credits, or for an add-on.
          </>
        )}{" "}
        The prices below are what the hosted service charges, for comparison.
      </p>
    </section>
  );
}

/** The billing page's "your plan here" explanation in self-hosted mode. */
export function SelfHostedPlan({
  facts,
  plan,
  source,
  agentThreads,
  ramGb,
}: {
  facts: SelfHostedFacts;
  plan: string;
  source: string;
  agentThreads: number | null;
  ramGb: number;
}) {
  const from =
    source === "assigned"
      ? "assigned to you by the operator"
      : source === "default"
        ? "this server's plan for every account"
        : source === "subscription"
          ? "from a subscription bought earlier"
          : null;
  return (
    <div data-testid="self-hosted" className="space-y-2 text-sm">
      <p>
        This server takes no payments: plans and credits come from{" "}
        <OperatorContact contact={facts.contact} />.
      </p>
      {plan === "free" ? (
        <p data-testid="self-hosted-plan">
          You have no plan yet, so no agent can be started. Ask the operator to assign one.
        </p>
      ) : (
        <p data-testid="self-hosted-plan">
          Your plan is <strong>{plan}</strong>
          {from ? ` (${from})` : ""}: up to {agentThreads === null ? "unlimited" : agentThreads}{" "}
          agent thread
          {agentThreads === 1 ? "" : "s"} with {ramGb} GB RAM. Ask the operator to change it.
        </p>
      )}
      <p>
        AI calls through the platform are paid from credits, which the operator grants; or add your
        own provider key below and calls use it instead.
      </p>
    </div>
  );
}
