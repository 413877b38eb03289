import type postgres from "postgres";

export type Queryable = postgres.Sql | postgres.TransactionSql;

/** Lets pg-boss enqueue inside one of our transactions (the job exists iff the tx commits). */
export function txExecutor(t: Queryable) {
  return {
    executeSql: async (text: string, values: unknown[] = []) => ({
      rows: await t.unsafe(text, values as never[]),
    }),
  };
}
