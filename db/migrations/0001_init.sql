-- Rate-limit counters shared by every web replica (rate-limiter-flexible's PostgreSQL layout).
create table rate_limits (
  key varchar(255) primary key,
  points integer not null default 0,
  expire bigint
);
create index rate_limits_expire_idx on rate_limits (expire);
