-- OpenID Connect sign-in (issue 49, docs/decisions/0205): the install-wide provider's links live
-- in oauth_accounts under provider 'oidc', keyed by issuer and subject. `groups` is the groups
-- claim of the link's latest sign-in (null: the provider sent none), kept for the organisation
-- role mapping of a later part; OAuth providers leave it null.
alter table oauth_accounts add column groups text[];
alter table oauth_accounts add column groups_updated_at timestamptz;
