-- Single sign-on per organisation (issue 49, docs/decisions/0210): one connection per
-- organisation, OpenID Connect or SAML 2.0, found at sign-in by its slug. The OIDC client secret
-- is sealed (AES-256-GCM, like channel tokens); a SAML IdP's certificate is public. The group
-- mapping is {"<group>": "<role>"}; a group of none of them gives `default_role`.
create table organisation_sso (
  organisation_id text primary key references users (id) on delete cascade,
  slug text not null unique check (slug ~ '^[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?$'),
  protocol text not null check (protocol in ('oidc', 'saml')),
  enabled boolean not null default true,
  oidc_issuer text,
  oidc_client_id text,
  oidc_client_secret_sealed text,
  saml_idp_entity_id text,
  saml_sso_url text,
  saml_idp_certificate text,
  groups_attribute text not null default 'groups',
  group_roles jsonb not null default '{}',
  default_role text not null default 'member'
    check (default_role in ('admin', 'member', 'viewer', 'billing')),
  updated_by text references users (id) on delete set null,
  updated_at timestamptz not null default now(),
  check (protocol <> 'oidc' or (oidc_issuer is not null and oidc_client_id is not null
    and oidc_client_secret_sealed is not null)),
  check (protocol <> 'saml' or (saml_idp_entity_id is not null and saml_sso_url is not null
    and saml_idp_certificate is not null))
);

-- Who an organisation's identity provider says a person is: the subject (OIDC `<issuer>#<sub>`,
-- SAML NameID) within that organisation's connection, bound to one account.
create table sso_identities (
  organisation_id text not null references users (id) on delete cascade,
  subject text not null,
  user_id text not null references users (id) on delete cascade,
  email text not null,
  groups text[],
  created_at timestamptz not null default now(),
  last_sign_in_at timestamptz not null default now(),
  primary key (organisation_id, subject),
  unique (organisation_id, user_id)
);
create index sso_identities_user on sso_identities (user_id);

-- SAML: the AuthnRequest ids we sent and await an answer to (InResponseTo), and the assertion
-- ids we accepted, kept until they expire so a replayed assertion is refused.
create table saml_requests (
  id text primary key,
  organisation_id text not null references users (id) on delete cascade,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null
);
create table saml_seen_assertions (
  organisation_id text not null references users (id) on delete cascade,
  assertion_id text not null,
  expires_at timestamptz not null,
  primary key (organisation_id, assertion_id)
);
create index saml_seen_assertions_expiry on saml_seen_assertions (expires_at);
create index saml_requests_expiry on saml_requests (expires_at);
