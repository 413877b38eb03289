#!/bin/sh
# Entrypoint of the agent-gateway image (runs under busybox sh as uid 1000).
#
# - Creates the state, workspace and cache folders inside the volume.
# - On first start (no config in the volume) writes the default config from
#   /etc/agent-gateway/openclaw.default.json. An existing config is never touched.
# - Links the channel plugins baked into the image (@openclaw/discord, @openclaw/whatsapp) into
#   the state folder's managed npm root (plugin-root.sh), where OpenClaw loads them offline.
# - The gateway token comes only from OPENCLAW_GATEWAY_TOKEN; it is never written to disk.
# - The gateway runs with settle-memory.cjs preloaded: one memory-reducing GC once started.
# - Arguments are an openclaw command line (default: gateway run --bind lan --port 18789);
#   a first argument that is a program on PATH (sh, node, ...) is run as is.
set -eu

OPENCLAW_ENTRY=/opt/openclaw/node_modules/openclaw/openclaw.mjs
CONFIG_TEMPLATE=/etc/agent-gateway/openclaw.default.json

die() {
  echo "agent-gateway: $*" >&2
  exit 64
}

STATE_DIR="${OPENCLAW_STATE_DIR:-$HOME/.openclaw}"
CONFIG_PATH="${OPENCLAW_CONFIG_PATH:-$STATE_DIR/openclaw.json}"
WORKSPACE_DIR="${OPENCLAW_WORKSPACE_DIR:-$STATE_DIR/workspace}"
CACHE_DIR="${XDG_CACHE_HOME:-$STATE_DIR/cache}"

umask 077
mkdir -p "$STATE_DIR" "$WORKSPACE_DIR" "$CACHE_DIR" ||
  die "cannot create $STATE_DIR (mount a volume writable by uid $(id -u))"
[ -w "$STATE_DIR" ] || die "$STATE_DIR is not writable by uid $(id -u)"

if [ ! -e "$CONFIG_PATH" ]; then
  mkdir -p "$(dirname "$CONFIG_PATH")"
  cp "$CONFIG_TEMPLATE" "$CONFIG_PATH.tmp.$$"
  mv "$CONFIG_PATH.tmp.$$" "$CONFIG_PATH"
  echo "agent-gateway: first start, wrote default config to $CONFIG_PATH" >&2
fi

/usr/local/lib/agent-gateway/plugin-root.sh "$STATE_DIR"

if [ "$#" -eq 0 ]; then
  set -- gateway run --bind lan --port 18789
fi

# A program on PATH (sh, node, openclaw, ...) runs as is; anything else is an openclaw command.
case "$1" in
  -*) ;;
  *)
    if command -v "$1" >/dev/null 2>&1; then
      exec "$@"
    fi
    ;;
esac

if [ "$1" = "gateway" ] && [ -z "${OPENCLAW_GATEWAY_TOKEN:-}" ]; then
  die "OPENCLAW_GATEWAY_TOKEN is not set; the gateway token is taken only from the environment"
fi

if [ "$1" = "gateway" ]; then
  # One memory-reducing GC once the gateway has started and gone quiet (settle-memory.cjs,
  # decision 0154); AGENT_GATEWAY_SETTLE_MEMORY=0 turns it off.
  export AGENT_GATEWAY_SETTLE_MEMORY="${AGENT_GATEWAY_SETTLE_MEMORY:-1}"
  exec node --require /usr/local/lib/agent-gateway/settle-memory.cjs "$OPENCLAW_ENTRY" "$@"
fi
exec node "$OPENCLAW_ENTRY" "$@"
