import { skillNameParams, useSkillSchema } from "../schemas/skills.ts";
import { liveCredentialOf } from "../server/accounts/credential-watch.server.ts";
import { guardLive, REVOKED } from "../server/agents/live-access.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";
import { logger } from "../server/platform/logger.server.ts";
import { prepareSkillUse, runSkill } from "../server/skills/use.server.ts";

// Use a skill: one turn of the caller's agent with that skill. docs/decisions/0110-skills-api.md

const sse = (event: string, data: unknown) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;

export const { loader, action } = apiRoute({
  POST: endpoint({
    summary: "Use a skill on your agent: its reply to `input`",
    description:
      '`{input, agentId?, sessionId?, stream?}` → `{skill, version, agentId, sessionId, reply, timestamp}`. 404 when the skill is unknown or not installed on the agent, 400 when the agent lacks what the skill requires (named) or input is missing, 502 when the gateway does not answer. `stream: true` answers server-sent events: `delta` `{text}` as the reply grows, then `done` with the result or `error` `{error}` (also `{error: "credential revoked"}` when the credential is revoked mid-stream, which ends it). Metered like any agent turn.',
    auth: "user",
    permission: "agents.chat",
    rateLimit: "chat",
    params: skillNameParams,
    body: useSkillSchema,
    handler: async ({ auth, params, body }) => {
      const userId = auth.user.id;
      // Everything that answers 404/400/502 is checked before a stream starts.
      const prepared = await prepareSkillUse(userId, params.name, body.agentId);
      if (!body.stream) return runSkill(userId, params.name, body, prepared);
      const encoder = new TextEncoder();
      let stopGuard = () => {};
      // Ended by the turn, a revoked credential or the client going away: nothing more is sent.
      let ended = false;
      const stream = new ReadableStream<Uint8Array>({
        async start(controller) {
          const send = (event: string, data: unknown) => {
            if (!ended) controller.enqueue(encoder.encode(sse(event, data)));
          };
          const end = () => {
            if (ended) return;
            ended = true;
            stopGuard();
            controller.close();
          };
          // The stream lasts as long as its credential (decision 0198); the turn itself runs on.
          const owner = { ownerId: userId, agentId: prepared.agent.id };
          stopGuard = guardLive(liveCredentialOf(auth), owner, () => {
            send("error", { error: REVOKED });
            end();
          });
          try {
            const result = await runSkill(userId, params.name, body, prepared, {
              onDelta: (text) => send("delta", { text }),
            });
            send("done", result);
          } catch (error) {
            logger().warn({ err: error, skill: params.name }, "skill use failed mid-stream");
            send("error", {
              error:
                error instanceof Error && "status" in error
                  ? error.message
                  : "The agent's turn failed",
            });
          } finally {
            end();
          }
        },
        cancel() {
          ended = true;
          stopGuard();
        },
      });
      return new Response(stream, {
        headers: {
          "content-type": "text/event-stream; charset=utf-8",
          "cache-control": "no-cache",
          "x-accel-buffering": "no",
        },
      });
    },
  }),
});
