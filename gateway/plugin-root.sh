#!/bin/sh
# Usage: plugin-root.sh <state dir>
# Links the channel plugins baked into the image (/opt/openclaw/gateway-plugins.txt, written by
# link-plugins.mjs: @openclaw/discord, @openclaw/whatsapp) into the state folder's managed npm
# root: OpenClaw recovers official npm install records from <state>/npm (package.json +
# node_modules/<plugin>), so the plugins load as trusted installs with no network
# (docs/decisions/0085-chat-channel-plugins.md). Rewritten on every start, so a new image's
# plugin versions replace the previous ones. Run by the entrypoint and the build's warm-up.
set -eu

OPENCLAW_APP=/opt/openclaw
PLUGINS_LIST="$OPENCLAW_APP/gateway-plugins.txt"
NPM_ROOT="$1/npm"
[ -s "$PLUGINS_LIST" ] || exit 0

deps=""
while read -r name version; do
  [ -n "$name" ] || continue
  link="$NPM_ROOT/node_modules/$name"
  mkdir -p "$(dirname "$link")"
  [ -L "$link" ] || rm -rf "$link"
  ln -sfn "$OPENCLAW_APP/node_modules/$name" "$link"
  deps="$deps${deps:+,}\"$name\":\"$version\""
done <"$PLUGINS_LIST"
printf '{"name":"agent-gateway-plugins","private":true,"dependencies":{%s}}\n' "$deps" >"$NPM_ROOT/package.json.tmp.$$"
mv "$NPM_ROOT/package.json.tmp.$$" "$NPM_ROOT/package.json"
