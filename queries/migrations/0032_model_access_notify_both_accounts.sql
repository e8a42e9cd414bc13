-- notify_model_access_changed told the gateways of one account per changed row: the new row's,
-- or the old row's when there was no new one. A row of model_access or account_upstream_keys
-- moved to another account (an UPDATE of account_id, by hand: the gateway never does it) left
-- the old account's cached grants and upstream keys in every gateway until the cache's
-- five-minute bound. Now an UPDATE that changes the account notifies both.
CREATE OR REPLACE FUNCTION notify_model_access_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        PERFORM pg_notify('tollgate_model_access_changed', OLD.account_id::text);
    END IF;
    IF TG_OP <> 'DELETE' AND (TG_OP = 'INSERT' OR NEW.account_id IS DISTINCT FROM OLD.account_id) THEN
        PERFORM pg_notify('tollgate_model_access_changed', NEW.account_id::text);
    END IF;
    RETURN NULL;
END
$$;
