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

-- name: NotifyAPIKeyChannel :exec
-- Sends payload on tollgate_api_key_changed as a key's trigger would: the change feed's
-- heartbeat, which proves the notifications reach its listening connection (impl/changefeed).
SELECT pg_notify('tollgate_api_key_changed', @payload::text);
