-- Who and which agent a metered model call was for (issue 48, docs/decisions/0215). A gateway
-- calls the AI endpoint with its instance token only, so a call is attributed from the platform's
-- own record of the chat turns it drove on that instance (ai_turns): the person who sent the
-- turn (a member acting for an organisation, or the person in their own space) and the agent.
-- Rows metered before this migration, and calls no platform turn explains (chat-channel
-- messages, heartbeats, two turns of different people at once), keep both null: "not
-- attributed".
alter table ai_usage
  add column acting_user_id text,
  add column agent_id text;

-- A chat turn the platform sent to a gateway, while it runs (and a little after). No foreign
-- keys: these are records, kept a day, and outlive neither agents nor people in any way that
-- matters (the usage row keeps the ids it was given).
create table ai_turns (
  id text primary key,
  instance_id text not null,
  agent_id text,
  person_id text,
  started_at timestamptz not null default now(),
  ended_at timestamptz
);
create index ai_turns_instance_idx on ai_turns (instance_id, started_at);
create index ai_turns_started_idx on ai_turns (started_at);
