-- name: ListenAPIKeyChanged :exec
-- Subscribes the connection to revocations and cap changes of API keys.
LISTEN tollgate_api_key_changed;

-- name: ListenModelAccessChanged :exec
-- Subscribes the connection to changes of accounts' model lists.
LISTEN tollgate_model_access_changed;

-- name: ListenCreditRelease :exec
-- Subscribes the connection to the gateway processes' requests to release idle credit holds
-- of an account, and to their answers (impl/billing).
LISTEN tollgate_credit_release;

-- name: NotifyCreditRelease :exec
-- Sends a message to every gateway process listening on tollgate_credit_release.
SELECT pg_notify('tollgate_credit_release', @payload::text);
