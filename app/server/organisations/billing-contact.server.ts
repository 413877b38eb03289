import { db } from "../platform/db.server.ts";
import { DomainError } from "../platform/errors.server.ts";

// An organisation's billing contact (decision 0215): the member whose email the payment
// processor's customer carries (invoices, receipts). Its first owner unless one was chosen. A
// leaf module (platform only): billing/checkout.server.ts asks it for an organisation's customer.

export interface BillingContact {
  userId: string;
  email: string;
  name: string;
}

/** The chosen contact while still a member, else the first owner; undefined for no such org. */
export async function billingContactOf(
  organisationId: string,
): Promise<BillingContact | undefined> {
  const [row] = await db()<{ id: string; email: string; name: string }[]>`
    select u.id, u.email, u.name
    from organisation_members m join users u on u.id = m.user_id
    left join organisation_billing b on b.organisation_id = m.organisation_id
    where m.organisation_id = ${organisationId} and u.email is not null
      and (m.user_id = b.contact_user_id or m.role = 'owner')
    order by (m.user_id = b.contact_user_id) desc nulls last, m.created_at, m.user_id
    limit 1`;
  return row && { userId: row.id, email: row.email, name: row.name };
}

/** Chooses the contact (a member); the caller checks billing.manage. */
export async function chooseBillingContact(organisationId: string, userId: string) {
  const [member] = await db()`
    select 1 from organisation_members
    where organisation_id = ${organisationId} and user_id = ${userId}`;
  if (!member) throw new DomainError(404, "userId: not a member of this organisation");
  await db()`insert into organisation_billing (organisation_id, contact_user_id)
    values (${organisationId}, ${userId})
    on conflict (organisation_id) do update
      set contact_user_id = excluded.contact_user_id, updated_at = now()`;
}
