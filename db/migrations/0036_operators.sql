-- Operators and suspension (issue 18). `is_operator` is set for the first account of a fresh
-- install and by operators in the console (never through the public API); OPERATOR_EMAILS
-- names more at run time. A suspended account's sessions and API keys stop resolving and its
-- agents are stopped. decision 0104.
alter table users add column is_operator boolean not null default false;
alter table users add column suspended_at timestamptz;
alter table users add column suspended_reason text;

-- An install upgraded with accounts in it and no operator: its oldest account becomes one,
-- as on a fresh install.
update users set is_operator = true
where id = (select id from users order by created_at, id limit 1)
  and not exists (select 1 from users where is_operator);
