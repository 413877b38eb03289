-- Seats sold through the payment processor (issue 48, docs/decisions/0215): the quantity of the
-- seat price on an organisation's subscription, as Stripe last said it was (written only from a
-- subscription read from Stripe, like every other column of the row). A lowered quantity takes
-- effect at the end of the period already paid: until then the previous count is kept.
alter table subscriptions
  add column seat_quantity integer not null default 0 check (seat_quantity >= 0),
  add column seats_kept integer not null default 0 check (seats_kept >= 0),
  add column seats_kept_until timestamptz;

-- Who receives an organisation's invoices and is its processor customer's email: a member,
-- its first owner when none is chosen (null after that member's account is gone).
create table organisation_billing (
  organisation_id text primary key references users (id) on delete cascade,
  contact_user_id text references users (id) on delete set null,
  updated_at timestamptz not null default now()
);
