#!/usr/bin/env bash
# Smoke test of the agent-gateway image, hardened the way the platform runs it: --init, no
# capabilities, no-new-privileges, pids/memory/CPU limits, a user-defined bridge network, no
# published port, a named volume, a random gateway token, a stable hostname (see README:
# the gateway's state lease is tied to it). Waits (polling, bounded) for
# /healthz from the host over the bridge network, checks the token auth of the HTTP API,
# prints the gateway version, start time and idle memory, then removes the container,
# network and volume (the image stays).
#
# Usage: gateway/smoke.sh [image]   (default agent-gateway:latest)
# Env:   SMOKE_TIMEOUT_S  seconds to wait for /healthz (default 180)
set -euo pipefail

IMAGE="${1:-agent-gateway:latest}"
TIMEOUT_S="${SMOKE_TIMEOUT_S:-180}"
PORT=18789
RUN_ID="smoke-$(date +%s)-$$"
NAME="agent-gateway-$RUN_ID"
NETWORK="agent-gateway-$RUN_ID"
VOLUME="agent-gateway-$RUN_ID"

log() { echo "smoke.sh: $*"; }
fail() {
  echo "smoke.sh: FAIL: $*" >&2
  if docker container inspect "$NAME" >/dev/null 2>&1; then
    echo "smoke.sh: container state: $(docker inspect -f '{{.State.Status}} exit={{.State.ExitCode}} oom={{.State.OOMKilled}}' "$NAME")" >&2
    echo "smoke.sh: last gateway log lines:" >&2
    docker logs --tail 40 "$NAME" 2>&1 | sed 's/^/  | /' >&2
  fi
  exit 1
}
cleanup() {
  docker rm -f -v "$NAME" >/dev/null 2>&1 || true
  docker network rm "$NETWORK" >/dev/null 2>&1 || true
  docker volume rm "$VOLUME" >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

now_ms() { date +%s%3N; }

# HTTP GET from the host; prints "<status> <body>". curl when present, else busybox wget.
http_get() {
  local url="$1" auth="${2:-}"
  if command -v curl >/dev/null 2>&1; then
    local args=(-sS -m 15 -o /dev/stdout -w ' %{http_code}')
    [ -z "$auth" ] || args+=(-H "Authorization: Bearer $auth")
    local out
    out="$(curl "${args[@]}" "$url" 2>/dev/null)" || return 1
    echo "${out##* } ${out% *}"
  else
    # busybox wget cannot show the status of an error response: 200 or failure only.
    local body
    if [ -n "$auth" ]; then
      body="$(busybox wget -q -O - --header "Authorization: Bearer $auth" "$url" 2>/dev/null)" || return 1
    else
      body="$(busybox wget -q -O - "$url" 2>/dev/null)" || return 1
    fi
    echo "200 $body"
  fi
}

command -v docker >/dev/null 2>&1 || fail "docker CLI is not on PATH"
docker image inspect "$IMAGE" >/dev/null 2>&1 || fail "image $IMAGE not found (run gateway/build.sh)"
command -v curl >/dev/null 2>&1 || command -v busybox >/dev/null 2>&1 || fail "need curl or busybox on the host"

TOKEN="$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')"
LABEL_VERSION="$(docker image inspect -f '{{ index .Config.Labels "agent-gateway.openclaw-version" }}' "$IMAGE")"
LABEL_NODE="$(docker image inspect -f '{{ index .Config.Labels "agent-gateway.node-version" }}' "$IMAGE")"
log "image $IMAGE (openclaw $LABEL_VERSION, node $LABEL_NODE)"

docker network create --driver bridge "$NETWORK" >/dev/null
docker volume create "$VOLUME" >/dev/null

t_run="$(now_ms)"
docker run --detach --name "$NAME" \
  --init --cap-drop ALL --security-opt no-new-privileges \
  --pids-limit 512 --memory 2g --cpus 1 \
  --network "$NETWORK" --hostname "$NAME" \
  --volume "$VOLUME:/home/node/.openclaw" \
  --env "OPENCLAW_GATEWAY_TOKEN=$TOKEN" \
  --label agent-gateway.smoke=1 \
  "$IMAGE" >/dev/null || fail "docker run failed"

IP="$(docker inspect -f "{{ (index .NetworkSettings.Networks \"$NETWORK\").IPAddress }}" "$NAME")"
[ -n "$IP" ] || fail "the container has no address on $NETWORK"
BASE_URL="http://$IP:$PORT"
log "container $NAME at $IP on network $NETWORK (no published port); waiting for $BASE_URL/healthz"

deadline=$(($(date +%s) + TIMEOUT_S))
while :; do
  if reply="$(http_get "$BASE_URL/healthz")" && [ "${reply%% *}" = 200 ]; then
    break
  fi
  [ "$(docker inspect -f '{{.State.Running}}' "$NAME")" = true ] || fail "the gateway container stopped before /healthz answered"
  [ "$(date +%s)" -lt "$deadline" ] || fail "no /healthz after ${TIMEOUT_S}s"
  sleep 0.2
done
t_health="$(now_ms)"
started_at="$(docker inspect -f '{{.State.StartedAt}}' "$NAME")"
from_start_ms=$((t_health - $(date -d "$started_at" +%s%3N)))
log "/healthz -> ${reply#* } after $(((t_health - t_run) / 1000)).$(((t_health - t_run) % 1000 / 100)) s from docker run ($((from_start_ms / 1000)).$((from_start_ms % 1000 / 100)) s from container start)"

# Token auth of the HTTP API (chat-completions endpoints are enabled by the default config).
reply="$(http_get "$BASE_URL/v1/models" "$TOKEN")" || fail "GET /v1/models with the token failed"
[ "${reply%% *}" = 200 ] || fail "GET /v1/models with the token answered ${reply%% *}"
if command -v curl >/dev/null 2>&1; then
  reply="$(http_get "$BASE_URL/v1/models")" || fail "GET /v1/models without a token failed"
  [ "${reply%% *}" = 401 ] || fail "GET /v1/models without a token answered ${reply%% *}, expected 401"
  log "/v1/models: 200 with the token, 401 without"
else
  log "/v1/models: 200 with the token"
fi

# The token must come from the environment only, never land in the volume.
if docker exec "$NAME" grep -rqsF "$TOKEN" /home/node/.openclaw; then
  fail "the gateway token was written into the state volume"
fi
docker exec "$NAME" test -s /home/node/.openclaw/openclaw.json || fail "no default config in the volume"

VERSION="$(docker exec "$NAME" node openclaw.mjs --version 2>&1)" || fail "openclaw --version failed: $VERSION"
case "$VERSION" in
  *"$LABEL_VERSION"*) ;;
  *) fail "openclaw --version says '$VERSION', the image label says $LABEL_VERSION" ;;
esac
# The channel plugins are linked into the state's managed npm root, resolving to the image's copies.
for plugin in discord whatsapp; do
  docker exec "$NAME" test -f "/home/node/.openclaw/npm/node_modules/@openclaw/$plugin/openclaw.plugin.json" ||
    fail "the $plugin plugin is not linked into /home/node/.openclaw/npm"
  docker exec "$NAME" grep -qF "\"@openclaw/$plugin\"" /home/node/.openclaw/npm/package.json ||
    fail "@openclaw/$plugin is missing from /home/node/.openclaw/npm/package.json"
done
log "channel plugins linked: $(docker exec "$NAME" cat /home/node/.openclaw/npm/package.json)"
log "gateway version: $VERSION (container user $(docker exec "$NAME" id -u):$(docker exec "$NAME" id -g))"

MEM="$(docker stats --no-stream --format '{{.MemUsage}} pids={{.PIDs}}' "$NAME")"
log "memory just after /healthz: $MEM"

log "OK"
