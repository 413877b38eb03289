-- Decision 0088: from the credit leases (decision 0025) until 2026-11-24, each metering flush took
-- a user's AI spend off ai_accounts.balance_micro_usd twice: in its own UPDATE and again through
-- the ledger trigger (credit_ledger_ai_accounts). The ledger was right throughout, and the
-- balance is by design its sum (0003_ai.sql): balances that drifted are re-derived from it.
update ai_accounts a
set balance_micro_usd = l.total, updated_at = now()
from (select user_id, sum(amount_micro_usd) as total from credit_ledger group by user_id) l
where l.user_id = a.user_id and a.balance_micro_usd <> l.total;
