#!/bin/sh
# The platform image's roles (deploy/stack.yml): web, worker, db; anything else runs as given
# (`docker run agent-platform node db/migrate.ts`). exec: the role's process gets the signals.
set -e
case "${1:-web}" in
  web) exec node /app/server.ts ;;
  worker) exec node /app/worker/index.ts ;;
  db) exec node /app/db/serve.ts ;;
  *) exec "$@" ;;
esac
