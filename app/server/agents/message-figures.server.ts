import { db } from "../platform/db.server.ts";

// Turns and their figures, from the recorded agent_messages (agent-messages.server.ts). One
// definition of a turn and its figures, for agent stats and the metrics endpoints alike:
// callers compose `turnsQuery` and `turnFigureColumns` with their own grouping.

/** A reply not seen within this long after a user message counts as a failed turn. */
export const REPLY_GRACE_MS = 5 * 60_000;

export interface TurnScope {
  agentId?: string;
  userId?: string;
  /** Only turns whose user message came at or after this. */
  since?: Date;
}

/**
 * The turns of the scope, as a subquery: a turn is a user message; it succeeded when the
 * agent's next message in the same session followed it; its response time is the gap between
 * the two. Columns: agent_id, user_id, created_at, replied_at (null while unanswered).
 */
export function turnsQuery(scope: TurnScope) {
  const sql = db();
  const none = sql``;
  return sql`
    select agent_id, user_id, created_at,
      case when next_sender = 'agent' then next_at end as replied_at
    from (
      select agent_id, user_id, sender, created_at,
        lead(sender) over w as next_sender, lead(created_at) over w as next_at
      from agent_messages
      where true
        ${scope.agentId === undefined ? none : sql`and agent_id = ${scope.agentId}`}
        ${scope.userId === undefined ? none : sql`and user_id = ${scope.userId}`}
        ${scope.since === undefined ? none : sql`and created_at >= ${scope.since}`}
      window w as (partition by agent_id, session_key order by created_at, id)) ordered
    where sender = 'user'`;
}

/** The aggregate columns over rows of `turnsQuery` (read them with `messageFiguresOf`). */
export function turnFigureColumns() {
  return db()`count(*)::int as processed,
    count(*) filter (where created_at > now() - interval '1 hour')::int as last_hour,
    count(replied_at)::int as answered,
    count(*) filter (where replied_at is not null
      or created_at < now() - make_interval(secs => ${REPLY_GRACE_MS / 1000}))::int as judged,
    avg(extract(epoch from (replied_at - created_at)) * 1000)::float8 as avg_ms`;
}

/**
 * When the time-bound figures of rows of `turnsQuery` next change with no new message (ms since
 * epoch, null: never): a turn leaves the last hour, or an unanswered one outgrows the grace and
 * counts as judged. Lets a reader keep the figures until then (agent stats).
 */
export function turnFiguresChangeAt() {
  const grace = db()`make_interval(secs => ${REPLY_GRACE_MS / 1000})`;
  return db()`(extract(epoch from least(
      min(created_at) filter (where created_at > now() - interval '1 hour') + interval '1 hour',
      min(created_at) filter (where replied_at is null and created_at >= now() - ${grace})
        + ${grace}
    )) * 1000)::float8 as change_at`;
}

export interface TurnFigureRow {
  processed: number;
  last_hour: number;
  answered: number;
  judged: number;
  avg_ms: number | null;
}

export interface MessageFigures {
  /** Turns (user messages) in the scope. */
  processed: number;
  lastHour: number;
  /** Turns the agent answered. */
  answered: number;
  /** ms, or null when no turn was answered. */
  averageResponseMs: number | null;
  /** percent, or null when no turn can be judged yet. */
  successRate: number | null;
}

export function messageFiguresOf(row: TurnFigureRow | undefined): MessageFigures {
  return {
    processed: row?.processed ?? 0,
    lastHour: row?.last_hour ?? 0,
    answered: row?.answered ?? 0,
    averageResponseMs: row?.avg_ms == null ? null : Math.round(row.avg_ms),
    successRate: row && row.judged > 0 ? (100 * row.answered) / row.judged : null,
  };
}

/** The figures of the scope's turns (agent stats: one agent, all time). */
export async function messageFigures(scope: TurnScope): Promise<MessageFigures> {
  const [row] = await db()<TurnFigureRow[]>`
    select ${turnFigureColumns()} from (${turnsQuery(scope)}) turns`;
  return messageFiguresOf(row);
}
