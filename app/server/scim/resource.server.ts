import type postgres from "postgres";
import { db } from "../platform/db.server.ts";
import { listResponse } from "./filter.server.ts";
import { scimBase } from "./schema.server.ts";

// What Users and Groups share: ids (UUIDs: anything else is not found, without a query), their
// location and `meta`, a reference to another resource, and a listed page.

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const isScimId = (id: string) => UUID.test(id);

type Kind = "User" | "Group";

export const locationOf = (kind: Kind, id: string) => `${scimBase()}/${kind}s/${id}`;

/** A member or group entry pointing at another resource. */
export const reference = (kind: Kind, id: string, display: string) => ({
  value: id,
  display,
  $ref: locationOf(kind, id),
});

export const metaOf = (kind: Kind, row: { id: string; created_at: Date; updated_at: Date }) => ({
  resourceType: kind,
  created: row.created_at.toISOString(),
  lastModified: row.updated_at.toISOString(),
  location: locationOf(kind, row.id),
});

/**
 * A ListResponse of the organisation's rows of `table` that `where` (an `and …` fragment, or
 * empty) keeps, from `startIndex` (1-based), at most `count`, turned into resources.
 */
export async function listPage<R extends object>(
  table: "scim_users" | "scim_groups",
  organisationId: string,
  where: postgres.PendingQuery<postgres.Row[]>,
  page: { startIndex: number; count: number },
  toResource: (row: R) => Promise<unknown>,
) {
  const sql = db();
  const [total] = await sql<{ n: number }[]>`
    select count(*)::int as n from ${sql(table)}
    where organisation_id = ${organisationId} ${where}`;
  const rows = await sql<R[]>`
    select * from ${sql(table)} where organisation_id = ${organisationId} ${where}
    order by created_at, id offset ${page.startIndex - 1} limit ${page.count}`;
  const resources = [];
  for (const row of rows) resources.push(await toResource(row));
  return listResponse(resources, total?.n ?? 0, page.startIndex);
}
