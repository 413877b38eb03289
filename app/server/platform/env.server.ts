import { z } from "zod";
import { resolveSecretFiles } from "./env-files.server.ts";

// Empty values (`OPENAI_API_KEY=` copied from .env.example) mean "unset".
const blank = (v: unknown) => (v === "" ? undefined : v);
const optionalString = z.preprocess(blank, z.string().optional());
const optionalUrl = z.preprocess(blank, z.url().optional());

/** Plans an operator can give (the billing catalog's plan ids) and `none`. */
export const SELF_HOSTED_PLANS = ["none", "solo", "collective", "label", "network"] as const;

// One schema for the whole environment, read once. Local runs get safe defaults; production
// refuses to start without real secrets and names every missing one.
const schema = z.object({
  NODE_ENV: z.enum(["development", "production", "test"]).default("development"),
  HOST: z.string().default("127.0.0.1"),
  PORT: z.coerce.number().int().min(0).max(65535).default(3000),
  APP_URL: z.url().optional(),
  DATABASE_URL: z.string().optional(),
  DATA_DIR: z.string().default(".data"),
  DATABASE_POOL_MAX: z.coerce.number().int().min(1).max(100).default(10),
  /** Connections that hold session locks (lockDb), apart from the query pool. */
  DATABASE_LOCK_POOL_MAX: z.coerce.number().int().min(1).max(100).default(20),
  SESSION_SECRET: z.string().min(32).optional(),
  SEALING_KEY: z
    .string()
    .regex(/^[0-9a-f]{64}$/i, "SEALING_KEY must be 64 hex characters (32 bytes)")
    .optional(),
  SMTP_URL: z.string().optional(),
  /** The `db` role's password for the `app` role (deploy/stack.yml, db/serve.ts); no other
   * process reads it: they get DATABASE_URL. */
  POSTGRES_PASSWORD: optionalString,
  MAIL_FROM: z.string().default("Agent Platform <no-reply@localhost>"),
  LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  TRUSTED_PROXIES: z.string().default(""),
  // Prometheus metrics (issue 51; docs/decisions/0202). GET /metrics answers only with
  // `Authorization: Bearer <METRICS_TOKEN>`, and 404 while it is unset.
  METRICS_TOKEN: z.preprocess(
    blank,
    z.string().min(16, "METRICS_TOKEN must be at least 16 characters").optional(),
  ),
  /** A worker's own /metrics listener (off while unset) and its address (loopback by default). */
  WORKER_METRICS_PORT: z.coerce.number().int().min(0).max(65535).optional(),
  WORKER_METRICS_HOST: z.string().default("127.0.0.1"),
  // AI providers (issue 6). A provider is configured when its key is set, or when its base URL
  // points somewhere else than the vendor (a local OpenAI-compatible server needs no key).
  OPENAI_API_KEY: optionalString,
  OPENAI_BASE_URL: optionalUrl,
  ANTHROPIC_API_KEY: optionalString,
  ANTHROPIC_BASE_URL: optionalUrl,
  GOOGLE_API_KEY: optionalString,
  GOOGLE_BASE_URL: optionalUrl,
  OPENROUTER_API_KEY: optionalString,
  OPENROUTER_BASE_URL: optionalUrl,
  /** Per attempt: until the response headers (non-streaming: until the whole body). */
  AI_TIMEOUT_MS: z.coerce.number().int().min(100).default(60_000),
  /** Extra attempts on the same provider after a transient error. */
  AI_RETRIES: z.coerce.number().int().min(0).max(5).default(1),
  AI_RETRY_DELAY_MS: z.coerce.number().int().min(0).default(250),
  /** Consecutive failures after which a provider is cooled down, and for how long. */
  AI_COOLDOWN_FAILURES: z.coerce.number().int().min(1).default(3),
  AI_COOLDOWN_SECONDS: z.coerce.number().int().min(0).default(60),
  /** pg-boss cron for the refresh-model-catalog job. */
  AI_CATALOG_REFRESH_CRON: z.string().default("17 * * * *"),
  /** pg-boss cron of the sweep of credit holds whose process died (decision 0223). */
  CREDIT_HOLD_SWEEP_CRON: z.string().default("* * * * *"),
  /** How long a process keeps the catalog in memory before reading the database again. */
  AI_CATALOG_CACHE_SECONDS: z.coerce.number().int().min(0).default(30),
  /** Default per-user daily spend limit in USD (table ai_budgets overrides per user). */
  AI_DAILY_LIMIT_USD: z.coerce.number().min(0).default(20),
  /** Credit a web process holds per user at a time and draws calls from (decision 0025). */
  AI_CREDIT_LEASE_USD: z.coerce.number().min(0).default(0.1),
  /** Completion tokens reserved for a call that does not set max_tokens. */
  AI_RESERVE_OUTPUT_TOKENS: z.coerce.number().int().min(1).default(4096),
  // OAuth provider oauth1 (Google) and oauth2 (GitHub). A provider without a client id and
  // secret is off: its sign-in answers 503. The endpoint URLs exist so tests (msw) and
  // self-hosted identity providers can point elsewhere.
  OAUTH1_CLIENT_ID: z.string().optional(),
  OAUTH1_CLIENT_SECRET: z.string().optional(),
  OAUTH1_AUTHORIZE_URL: z.url().default("https://accounts.google.com/o/oauth2/v2/auth"),
  OAUTH1_TOKEN_URL: z.url().default("https://oauth2.googleapis.com/token"),
  OAUTH1_USERINFO_URL: z.url().default("https://openidconnect.googleapis.com/v1/userinfo"),
  OAUTH2_CLIENT_ID: z.string().optional(),
  OAUTH2_CLIENT_SECRET: z.string().optional(),
  OAUTH2_AUTHORIZE_URL: z.url().default("https://github.com/login/oauth/authorize"),
  OAUTH2_TOKEN_URL: z.url().default("https://github.com/login/oauth/access_token"),
  OAUTH2_API_URL: z.url().default("https://api.github.com"),
  // Install-wide OpenID Connect sign-in (issue 49; docs/decisions/0205): off unless the issuer,
  // client id and secret are all set (parseEnv refuses a partial setting).
  OIDC_ISSUER: optionalUrl,
  OIDC_CLIENT_ID: optionalString,
  OIDC_CLIENT_SECRET: optionalString,
  /** The provider's name on the "Sign in with …" button (default: the issuer's host name). */
  OIDC_NAME: optionalString,
  /** Scopes asked for, space-separated; `openid` is always asked for. */
  OIDC_SCOPES: z.string().default("openid email profile"),
  /** The ID-token (or userinfo) claim whose values are recorded as the account's groups. */
  OIDC_GROUPS_CLAIM: z.string().min(1).default("groups"),
  /**
   * DNS servers asked for a domain's verification TXT record (issue 49, decision 0212), as
   * comma-separated `address` or `address:port`; unset: the system's resolvers.
   */
  DNS_RESOLVER: z.preprocess(
    blank,
    z
      .string()
      .regex(
        /^\s*[^,\s]+(\s*,\s*[^,\s]+)*\s*$/,
        "DNS_RESOLVER: comma-separated addresses (address or address:port)",
      )
      .optional(),
  ),
  // Identity (issue 8): the EVM chain (Base) for wallet sign-in, token gating and EAS proofs,
  // the identity network's token issuer, and the gating token. docs/decisions/0050–0055.
  BASE_RPC_URL: z.url().default("https://mainnet.base.org"),
  /** What GET /api/auth/token-gating/verify shows as rpcEndpoint (default: BASE_RPC_URL's origin). */
  BASE_RPC_PUBLIC_URL: optionalUrl,
  BASE_CHAIN_ID: z.coerce.number().int().min(1).default(8453),
  CHAIN_NAME: z.string().default("Base"),
  /** ERC-20 whose balance gates access; unset turns gating off (everyone has access). */
  GATING_TOKEN_ADDRESS: z.preprocess(
    blank,
    z
      .string()
      .regex(/^0x[0-9a-fA-F]{40}$/, "GATING_TOKEN_ADDRESS must be 0x + 40 hex")
      .optional(),
  ),
  /** Integer in the token's smallest unit (decimal digits, no decimals). */
  GATING_MIN_BALANCE: z
    .string()
    .regex(/^\d+$/, "GATING_MIN_BALANCE must be an integer in the token's smallest unit")
    .default("1"),
  GATING_TOKEN_SYMBOL: z.string().default("TOKEN"),
  /** Farcaster Quick Auth issuer; its keys are read from <origin>/.well-known/jwks.json. */
  IDNET_ISSUER_ORIGIN: z.url().default("https://auth.farcaster.xyz"),
  /** EAS contract on the chain (Base's predeploy by default). */
  EAS_CONTRACT_ADDRESS: z
    .string()
    .regex(/^0x[0-9a-fA-F]{40}$/, "EAS_CONTRACT_ADDRESS must be 0x + 40 hex")
    .default("0x4200000000000000000000000000000000000021"),
  /** ENS-compatible registry on the chain (Basenames' registry on Base) for `ens` proofs. */
  ENS_REGISTRY_ADDRESS: z
    .string()
    .regex(/^0x[0-9a-fA-F]{40}$/, "ENS_REGISTRY_ADDRESS must be 0x + 40 hex")
    .default("0xB94704422c2a1e396835A571837Aa5AE53285a95"),
  /** Reverse namespace of primary names on the chain (ENSIP-19: Base = 80002105.reverse). */
  ENS_REVERSE_SUFFIX: z.string().default("80002105.reverse"),
  // Outgoing events (user.created, …): comma-separated endpoint URLs and the Standard Webhooks
  // signing secret (whsec_<base64>). Endpoints without a secret refuse to start.
  WEBHOOK_ENDPOINTS: z
    .string()
    .default("")
    .transform((s) =>
      s
        .split(",")
        .map((u) => u.trim())
        .filter(Boolean),
    )
    .pipe(z.array(z.url({ protocol: /^https?$/ }))),
  WEBHOOK_SIGNING_SECRET: z
    .string()
    .regex(/^whsec_[A-Za-z0-9+/=]{16,}$/, "WEBHOOK_SIGNING_SECRET must look like whsec_<base64>")
    .optional(),
  // Payments (issue 7): Stripe. Without STRIPE_SECRET_KEY the payment endpoints answer 503
  // (storage upgrade: 500, as the contract says) and the pricing page shows prices only.
  STRIPE_SECRET_KEY: optionalString,
  STRIPE_WEBHOOK_SECRET: optionalString,
  /** Stripe's API origin; tests and stripe-mock point it elsewhere. */
  STRIPE_API_BASE: z.url().default("https://api.stripe.com"),
  /** Stripe price ids, one per sellable item of the catalog (app/server/billing/catalog.server.ts). */
  STRIPE_PRICE_SOLO: optionalString,
  STRIPE_PRICE_COLLECTIVE: optionalString,
  STRIPE_PRICE_LABEL: optionalString,
  STRIPE_PRICE_NETWORK: optionalString,
  STRIPE_PRICE_ADDON_AUDIT_LOGS: optionalString,
  STRIPE_PRICE_ADDON_SLACK: optionalString,
  STRIPE_PRICE_ADDON_SALESFORCE: optionalString,
  STRIPE_PRICE_ADDON_API_ACCESS: optionalString,
  STRIPE_PRICE_ADDON_CUSTOM_INTEGRATION: optionalString,
  STRIPE_PRICE_ADDON_ACCOUNT_MANAGER: optionalString,
  STRIPE_PRICE_ENTERPRISE_SUITE: optionalString,
  STRIPE_PRICE_API_STARTER: optionalString,
  STRIPE_PRICE_API_PRO: optionalString,
  STRIPE_PRICE_API_SCALE: optionalString,
  STRIPE_PRICE_CREDITS_50: optionalString,
  STRIPE_PRICE_CREDITS_200: optionalString,
  STRIPE_PRICE_CREDITS_500: optionalString,
  STRIPE_PRICE_STORAGE_50GB: optionalString,
  // One extra gateway seat a month, sold as a quantity on an organisation's plan subscription.
  STRIPE_PRICE_SEAT: optionalString,
  // Self-hosted mode (no STRIPE_SECRET_KEY): operators assign plans. DEFAULT_PLAN is the plan of
  // every user the operator has not assigned one (a plan id of the billing catalog, or `none`:
  // nobody hosts agents until assigned); unset, it is `solo` without a processor and `none` with
  // one. docs/decisions/0100-self-hosted-mode.md
  DEFAULT_PLAN: z.preprocess(blank, z.enum(SELF_HOSTED_PLANS).optional()),
  /** Who users of a server without payments ask for a plan or credits (email or URL). */
  OPERATOR_CONTACT: optionalString,
  // Agent runtime (issue 4): gateway containers, lifecycle, reconcile.
  /** Runtime driver: docker, process (gateways as local processes; laptops without Docker) or
   * auto (Docker when its engine answers, else process; production never picks process
   * unless told). docs/decisions/0037-process-driver.md */
  RUNTIME_DRIVER: z.enum(["auto", "docker", "process", "swarm"]).default("auto"),
  /** Swarm driver: each node's engine, JSON {"<node id or hostname>": "unix:///… | tcp://…"}
   * (the manager's own node needs none). docs/decisions/0145-swarm-driver-and-placement.md */
  SWARM_NODE_ENGINES: z.preprocess(
    (v) => (typeof v === "string" && v.trim() ? JSON.parse(v) : undefined),
    z.record(z.string(), z.string()).optional(),
  ),
  /** The process driver's OpenClaw package folder (default: installed under DATA_DIR). */
  RUNTIME_OPENCLAW_DIR: optionalString,
  /** Gateway image the worker runs (built by gateway/build.sh). */
  AGENT_GATEWAY_IMAGE: z.string().default("agent-gateway:2026.9.6"),
  // OpenClaw versions no instance is created on or updated to (comma-separated, decision 0161).
  GATEWAY_BLOCKED_VERSIONS: z.string().default(""),
  /** The shared bridge whose gateway address the containers reach the platform at (created
   * when missing); each gateway sits on a network of its own (decision 0195). */
  RUNTIME_NETWORK: z.string().default("agent-platform"),
  /** The IPv4 range the gateways' own networks are cut from, /28 each (Docker driver). */
  RUNTIME_TENANT_SUBNETS: z
    .string()
    .regex(/^\d{1,3}(\.\d{1,3}){3}\/\d{1,2}$/, "an IPv4 range such as 10.213.0.0/16")
    .default("10.213.0.0/16"),
  /** The platform's OpenAI-compatible endpoint as seen from a container; default: the
   * network's gateway address and PORT (the web must listen there, see README). */
  RUNTIME_PLATFORM_AI_URL: optionalUrl,
  /** Model an instance's gateway uses (through the platform endpoint) unless one is chosen. */
  RUNTIME_DEFAULT_MODEL: z.string().default("openai/gpt-4o-mini"),
  /** Upper bound of CPUs per gateway container (clamped to the engine's CPUs). */
  RUNTIME_MAX_CPUS: z.preprocess(blank, z.coerce.number().min(0.1).optional()),
  /** Agents' own hosts, <id>.<AGENTS_DOMAIN> (wildcard DNS to the web); unset: the path form
   * /agents/<id>/ui/ under APP_URL (docs/decisions/0115-agent-ingress.md). */
  AGENTS_DOMAIN: optionalString,
  /** How long a lifecycle request waits for the worker's job before answering 502. */
  INSTANCE_ACTION_TIMEOUT_MS: z.coerce.number().int().min(100).default(60_000),
  /** How long provisioning and updates wait for a gateway's /healthz. */
  GATEWAY_HEALTH_TIMEOUT_MS: z.coerce.number().int().min(1000).default(180_000),
  /**
   * A booting gateway weighs this many times its plan's CPU shares until it answers /healthz
   * (decision 0250; Docker driver; 8 measured). 1, the default for now, boots at the plan's
   * weight: the other engines on the same host (the test swarm's) are not weighed alike.
   */
  BOOT_CPU_WEIGHT: z.coerce.number().int().min(1).max(64).default(1),
  /** pg-boss cron of the reconcile job (desired vs observed state of every instance). */
  // Comma-separated emails of operators besides the first account and those granted in /ops;
  // an address counts once its account has verified it (docs/decisions/0196).
  OPERATOR_EMAILS: z.string().default(""),
  RECONCILE_CRON: z.string().default("* * * * *"),
  /** The pass that removes Control UI devices a dead web process left paired (decision 0170). */
  CONTROL_UI_SWEEP_CRON: z.string().default("*/10 * * * *"),
  // Deletes audit-log entries past their retention (90 days, a year with the add-on).
  AUDIT_PURGE_CRON: z.string().default("41 3 * * *"),
  /**
   * Hard storage limits (decision 0216): the btrfs filesystem deploy/host-storage.sh prepares;
   * unset or unprepared, volumes are unlimited and the worker says so at start and in /ops.
   */
  STORAGE_ROOT: optionalString,
  /** Every instance's storage before upgrades, in GB (a small install or a test sets 1). */
  STORAGE_BASE_GB: z.coerce.number().positive().default(5),
  /** pg-boss cron of the pass that samples storage usage, applies limits and sends warnings. */
  STORAGE_SAMPLE_CRON: z.string().default("* * * * *"),
  /** pg-boss cron of the sweep of OpenClaw's stale temporary folders in gateways (0224). */
  TMP_SWEEP_CRON: z.string().default("23 * * * *"),
  /** How long a lowered limit waits while the data is above it (days; decision 0217). */
  STORAGE_GRACE_DAYS: z.coerce.number().min(0).default(14),
  /** How old an instance's measured storage may get before reconcile measures again (ms). */
  STORAGE_MEASURE_INTERVAL_MS: z.coerce.number().int().min(0).default(600_000),
  /** Where backups are stored: a local folder (BACKUP_DIR, default DATA_DIR/backups) or S3. */
  BACKUP_STORE: z.enum(["local", "s3"]).default("local"),
  BACKUP_DIR: z.preprocess(blank, z.string().optional()),
  /** S3-compatible storage (any endpoint: AWS, MinIO, R2, …); path-style by default. */
  BACKUP_S3_ENDPOINT: z.preprocess(blank, z.url().optional()),
  BACKUP_S3_REGION: z.string().default("us-east-1"),
  BACKUP_S3_BUCKET: z.preprocess(blank, z.string().optional()),
  BACKUP_S3_PREFIX: z.preprocess(blank, z.string().optional()),
  BACKUP_S3_ACCESS_KEY_ID: z.preprocess(blank, z.string().optional()),
  BACKUP_S3_SECRET_ACCESS_KEY: z.preprocess(blank, z.string().optional()),
  BACKUP_S3_FORCE_PATH_STYLE: z
    .enum(["true", "false"])
    .default("true")
    .transform((v) => v === "true"),
  /** pg-boss cron of the scheduled backups (each plan's interval and retention: decision 0140). */
  BACKUP_CRON: z.string().default("17 * * * *"),
  /** Largest agent export archive an import accepts (bytes). */
  EXPORT_MAX_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .default(512 * 1024 ** 2),
  /** Public keys (base64url, comma-separated) of other installations whose exports are trusted. */
  EXPORT_TRUSTED_KEYS: z
    .string()
    .default("")
    .transform((v) =>
      v
        .split(",")
        .map((k) => k.trim())
        .filter(Boolean),
    ),
  /** How long POST …/restore waits for the worker before answering 202 (still running). */
  BACKUP_RESTORE_WAIT_MS: z.coerce.number().int().min(0).default(300_000),
  /** Worker's live-sample interval (container stats and state into the instances table). */
  INSTANCE_SAMPLE_INTERVAL_MS: z.coerce.number().int().min(0).default(10_000),
  /** Worker's check of the container engine (recorded in runtime_engines; 0 disables). */
  ENGINE_CHECK_INTERVAL_MS: z.coerce.number().int().min(0).default(2_000),
  /** How long a stopping worker lets in-flight jobs finish before it releases them. */
  WORKER_STOP_GRACE_MS: z.coerce.number().int().min(1000).default(10_000),
  /** Multiplies every rate-limit scope's points (1 in production; the benchmark sets it high). */
  RATE_LIMIT_SCALE: z.coerce.number().int().min(1).default(1),
  // Web replicas keep who a key or session belongs to in memory, invalidated through
  // PostgreSQL NOTIFY (docs/decisions/0120-credential-cache.md). Test files that write those
  // rows behind the services' backs turn it off (test/setup/per-file.ts).
  CREDENTIAL_CACHE: z
    .enum(["on", "off"])
    .default("on")
    .transform((v) => v === "on"),
  /**
   * Backstop interval at which open live sockets and event streams recheck their credential
   * (a NOTIFY closes them at once; docs/decisions/0198-live-sockets-recheck-their-credential.md).
   */
  LIVE_RECHECK_MS: z.coerce.number().int().min(10).default(5_000),
  /**
   * Caps per person and web process on long-lived connections (docs/decisions/0220): live agent
   * sockets (/agent/<id>), agent event streams (GET /api/agents/:id/events), and the agent
   * ingress's concurrent requests and sockets (per user, and per agent's gateway). One more is
   * refused with 429 {error} (a socket before its upgrade).
   */
  LIVE_SOCKETS_PER_USER: z.coerce.number().int().min(1).default(50),
  PROGRESS_STREAMS_PER_USER: z.coerce.number().int().min(1).default(5),
  INGRESS_CONNECTIONS_PER_USER: z.coerce.number().int().min(1).default(64),
  INGRESS_CONNECTIONS_PER_AGENT: z.coerce.number().int().min(1).default(32),
  /** How long POST /api/agents/provision waits for a new instance (warm pool: it is running). */
  AGENT_PROVISION_WAIT_MS: z.coerce.number().int().min(0).default(10_000),
  /** Keep-alive comment (and re-read) interval of the agent event stream (decision 0158). */
  PROGRESS_KEEPALIVE_MS: z.coerce.number().int().min(100).default(15_000),
  /** How long a chat sent while the agent is starting waits for it (decision 0137). */
  AGENT_CHAT_START_WAIT_MS: z.coerce.number().int().min(0).default(120_000),
  /**
   * The host's chat-turn budget (decision 0251): at most this many turns per CPU of the engine
   * host (a Swarm node) run at once; one more is refused at once with 503 and Retry-After
   * instead of queueing on gateways past their bounds. 0 turns the budget off.
   */
  AGENT_TURNS_PER_CPU: z.coerce.number().min(0).default(4),
  /** The same wait for a message sent over the live socket (a first start can take minutes). */
  AGENT_LIVE_START_WAIT_MS: z.coerce.number().int().min(0).default(600_000),
  /** How long PUT /api/agents/:id/config waits for the gateway to take the change (`applied`). */
  AGENT_CONFIG_APPLY_WAIT_MS: z.coerce.number().int().min(0).default(5_000),
  /** Worker's chat recorder: gateway connections per running instance (0 disables). */
  AGENT_MESSAGE_RECORDER: z.enum(["on", "off"]).default("on"),
  /**
   * Scale-to-zero (decision 0164): idle instances are put to sleep by the sleep-idle-instances
   * job (cron SLEEP_CRON) after their plan's idle period; SLEEP_IDLE_SECONDS, when set, replaces
   * every plan's period (tests, small installations). "off" keeps every gateway running.
   */
  AGENT_SLEEP: z.enum(["on", "off"]).default("on"),
  /**
   * How an agent sleeps (decision 0178): "freeze" pauses its gateway and pushes its memory out
   * to the host's swap (a wake is an unpause); "stop" stops it (a wake is a boot). "auto"
   * freezes where the engine can (Docker, cgroup v1 with swap accounting) and stops elsewhere,
   * or when a freeze fails (no swap).
   */
  AGENT_SLEEP_MODE: z.enum(["auto", "freeze", "stop"]).default("auto"),
  SLEEP_CRON: z.string().default("* * * * *"),
  SLEEP_IDLE_SECONDS: z.preprocess(blank, z.coerce.number().int().min(0).optional()),
  /** How often each worker peeks at sleeping agents' Telegram bots for a waiting message. */
  SLEEP_WATCH_INTERVAL_MS: z.coerce.number().int().min(0).default(5_000),
  /** How long a chat to a sleeping agent waits for the wake to begin (the boot waits on). */
  AGENT_WAKE_WAIT_MS: z.coerce.number().int().min(0).default(30_000),
  /**
   * At most this many gateways boot at once per engine node, wakes (decision 0221) and
   * reconcile's restarts (0240) together; later ones wait their turn in order (a wake's agent
   * detail says how many are ahead). Unset: the worker's core count.
   */
  WAKE_CONCURRENCY: z.preprocess(blank, z.coerce.number().int().min(1).max(64).optional()),
  /**
   * A full host (decision 0222): memory is tight when the engine host's MemAvailable is under this
   * share of its RAM. Then the warm pool is emptied first, idle agents sleep after
   * SLEEP_TIGHT_IDLE_SECONDS (coldest first) instead of their plan's period, and a wake waits in
   * line until its gateway fits, keeping MEMORY_RESERVE_MIB free (0 turns all of it off).
   */
  MEMORY_TIGHT_PERCENT: z.coerce.number().min(0).max(90).default(15),
  SLEEP_TIGHT_IDLE_SECONDS: z.coerce.number().int().min(0).default(120),
  MEMORY_RESERVE_MIB: z.coerce.number().int().min(0).default(512),
  /** How long a wake waits for room before it fails with "the host has no room" (decision 0222). */
  WAKE_ROOM_WAIT_MS: z.coerce.number().int().min(0).default(120_000),
  /**
   * How long a provision that would start a new gateway waits in line for room on the host (or,
   * on Swarm, on a node) before it fails with "the host has no memory free" (decision 0231).
   * Under the provision job's 600 s expiry.
   */
  PROVISION_ROOM_WAIT_MS: z.coerce.number().int().min(0).max(540_000).default(300_000),
  /**
   * Warm pool: pre-started, paired generic gateways that provisioning adopts (0 = off). Unset,
   * each worker keeps 1 when it drives Docker on a host with ≥ 4 GiB available, else 0
   * (worker/instances/pool-size.ts, decision 0159).
   */
  RUNTIME_POOL_SIZE: z.coerce.number().int().min(0).max(50).optional(),
  /** pg-boss cron of the fill-pool job (also sent after each adoption). */
  RUNTIME_POOL_CRON: z.string().default("* * * * *"),
  /**
   * A tenant gateway outside the pool runs a dry run: before a cold provisioning reports ready,
   * and after every boot (start, restart, repair, update, healed crash; decisions 0038, 0087).
   */
  RUNTIME_COLD_WARMUP: z.enum(["on", "off"]).default("on"),
  /** A pooled gateway ready this long is warmed up again (0 = never; decision 0038). */
  RUNTIME_POOL_REWARM_MINUTES: z.coerce.number().int().min(0).default(25),
  // Channel provisioning (issue 9): the channels' APIs that check tokens, and the streaming
  // provider (Mux) that creates each agent's live stream. docs/decisions/0083-channel-provisioning.md
  TELEGRAM_API_URL: z.url().default("https://api.telegram.org"),
  DISCORD_API_URL: z.url().default("https://discord.com/api/v10"),
  MUX_API_URL: z.url().default("https://api.mux.com"),
  /** Mux access token id and secret (Basic auth); provisioning answers 503 without them. */
  MUX_TOKEN_ID: optionalString,
  MUX_TOKEN_SECRET: optionalString,
  /** Timeout of each call to the channels' and the streaming provider's APIs. */
  PROVISION_HTTP_TIMEOUT_MS: z.coerce.number().int().min(100).default(10_000),
  // Money on chain (issue 22): hosted wallets, splits, escrow over the chain client of
  // BASE_RPC_URL / BASE_CHAIN_ID. docs/decisions/0125–0128.
  /** Hosted-wallet driver: builtin (keys sealed in the database; decision 0125). */
  HOSTED_WALLET_DRIVER: z.enum(["builtin"]).default("builtin"),
  /** The stablecoin wallets hold and pay in (USDC on Base by default). */
  PAYMENTS_TOKEN_ADDRESS: z
    .string()
    .regex(/^0x[0-9a-fA-F]{40}$/, "PAYMENTS_TOKEN_ADDRESS must be 0x + 40 hex")
    .default("0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"),
  /** Platform fee kept from a settled booking, in basis points of its amount (decision 0127). */
  PAYMENTS_PLATFORM_FEE_BPS: z.coerce.number().int().min(0).max(10_000).default(500),
  /** How long a request waits for a sent transfer's receipt before answering it as pending. */
  PAYMENTS_CONFIRM_TIMEOUT_MS: z.coerce.number().int().min(100).default(60_000),
});

export type Env = Omit<z.infer<typeof schema>, "DEFAULT_PLAN"> & {
  APP_URL: string;
  DEFAULT_PLAN: (typeof SELF_HOSTED_PLANS)[number];
};

/** What each process kind cannot run without in production: the app's web and worker, or the
 * image's `db` role (db/serve.ts), which holds none of the app's secrets. */
const requiredInProduction = {
  app: ["DATABASE_URL", "SESSION_SECRET", "SEALING_KEY", "APP_URL"],
  db: ["POSTGRES_PASSWORD"],
} as const;

const settings: ReadonlySet<string> = new Set(Object.keys(schema.shape));

/** Parses `source`; a secret may be given as `<NAME>_FILE` (env-files.server.ts). */
export function parseEnv(
  source: Record<string, string | undefined>,
  role: keyof typeof requiredInProduction = "app",
): Env {
  // Empty values (`SESSION_SECRET=` copied from .env.example) mean "unset", for every variable.
  const given = Object.fromEntries(
    Object.entries(resolveSecretFiles(source, settings)).filter(([, v]) => v !== ""),
  );
  const result = schema.safeParse(given);
  if (!result.success) {
    const lines = result.error.issues.map((i) => `  ${i.path.join(".")}: ${i.message}`);
    throw new Error(`Invalid configuration:\n${lines.join("\n")}`);
  }
  const env = result.data;
  if (env.NODE_ENV === "production") {
    const missing = requiredInProduction[role].filter((k) => !env[k]);
    if (missing.length > 0) {
      throw new Error(
        `Refusing to start in production without: ${missing.join(", ")} (see .env.example)`,
      );
    }
  }
  if (env.WEBHOOK_ENDPOINTS.length > 0 && !env.WEBHOOK_SIGNING_SECRET) {
    throw new Error(
      "WEBHOOK_ENDPOINTS is set but WEBHOOK_SIGNING_SECRET is not (see .env.example)",
    );
  }
  const oidc = [env.OIDC_ISSUER, env.OIDC_CLIENT_ID, env.OIDC_CLIENT_SECRET];
  if (oidc.some(Boolean) && !oidc.every(Boolean)) {
    throw new Error(
      "OIDC sign-in needs all of OIDC_ISSUER, OIDC_CLIENT_ID and OIDC_CLIENT_SECRET (see .env.example)",
    );
  }
  if (env.BACKUP_STORE === "s3" && !env.BACKUP_S3_BUCKET) {
    throw new Error("BACKUP_STORE=s3 needs BACKUP_S3_BUCKET (see .env.example)");
  }
  if (env.STRIPE_SECRET_KEY && env.DEFAULT_PLAN && env.DEFAULT_PLAN !== "none") {
    // With a processor plans are bought; a free default plan would give away what it sells.
    throw new Error(
      `DEFAULT_PLAN=${env.DEFAULT_PLAN} is for servers without payments; unset it or set STRIPE_SECRET_KEY= (see .env.example)`,
    );
  }
  return {
    ...env,
    APP_URL: env.APP_URL ?? `http://localhost:${env.PORT}`,
    DEFAULT_PLAN: env.DEFAULT_PLAN ?? (env.STRIPE_SECRET_KEY ? "none" : "solo"),
  };
}

let cached: Env | undefined;

export function env(): Env {
  cached ??= parseEnv(process.env);
  return cached;
}

/** Tests change process.env between files; this drops the cached copy. */
export function resetEnvCache(): void {
  cached = undefined;
}

let operatorEmailCache: { raw: string; set: Set<string> } | undefined;

/** OPERATOR_EMAILS as a set of lower-cased addresses. */
export function operatorEmails(): Set<string> {
  const raw = env().OPERATOR_EMAILS;
  if (operatorEmailCache?.raw !== raw) {
    const set = new Set(
      raw
        .split(",")
        .map((e) => e.trim().toLowerCase())
        .filter(Boolean),
    );
    operatorEmailCache = { raw, set };
  }
  return operatorEmailCache.set;
}
