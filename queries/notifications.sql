-- name: ListenAPIKeyChanged :exec
-- Subscribes the connection to revocations and cap changes of API keys.
LISTEN tollgate_api_key_changed;

-- name: ListenModelAccessChanged :exec
-- Subscribes the connection to changes of accounts' model lists.
LISTEN tollgate_model_access_changed;
