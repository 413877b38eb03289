import { randomUUID } from "node:crypto";
import type { TransactionSql } from "postgres";
import { db } from "../platform/db.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { logger } from "../platform/logger.server.ts";

// The chat turns the platform drives on a gateway (decision 0215): the gateway's model calls
// carry only its instance token, so the metering flush attributes each call to the person and
// agent of the turn that was running on that instance when it was made (metering.server.ts).
// Recording is best effort: a failed write leaves the turn's calls unattributed, never the chat
// failed.

/** Turns are kept this long: the flush attributes calls within seconds of their turn. */
const KEEP_TURNS = "1 day";

export interface TurnOf {
  instanceId: string;
  agentId: string | null;
  personId: string | null;
}

/**
 * Decides, inside the transaction that records the turn, whether it may run: throws a
 * DomainError to refuse it (the agents area's host turn budget, decision 0251).
 */
export type TurnAdmission = (sql: TransactionSql) => Promise<void>;

/**
 * Records a turn starting, once `admit` lets it; the returned function records its end. A
 * refusal is thrown; a failed write only leaves the turn unrecorded (and unbudgeted).
 */
export async function startTurn(turn: TurnOf, admit?: TurnAdmission): Promise<() => Promise<void>> {
  const id = `trn_${randomUUID()}`;
  try {
    await db().begin(async (sql) => {
      await admit?.(sql);
      await sql`insert into ai_turns (id, instance_id, agent_id, person_id)
        values (${id}, ${turn.instanceId}, ${turn.agentId}, ${turn.personId})`;
    });
  } catch (error) {
    if (error instanceof DomainError) throw error;
    logger().warn({ err: error }, "a chat turn could not be recorded for attribution");
    return async () => {};
  }
  return async () => {
    try {
      await db()`update ai_turns set ended_at = now() where id = ${id}`;
      // Old turns go here, a few rows at a time, rather than in a job of their own.
      await db()`delete from ai_turns where id in (
        select id from ai_turns where started_at < now() - ${KEEP_TURNS}::interval limit 100)`;
    } catch (error) {
      logger().warn({ err: error }, "a chat turn's end could not be recorded");
    }
  };
}
