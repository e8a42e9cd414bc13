-- 0025: account names are unique without regard to letter case. Names are what operators type
-- in every admin command, and "Acme" beside "acme" is two tenants a person cannot tell apart
-- (a credit grant or a key given to the wrong one). The UNIQUE of 0001 compared names exactly;
-- the index below compares lower(name).
--
-- A database that already holds names differing only in case cannot take the index: the
-- migration then fails before changing anything, naming each group of such accounts with their
-- ids, and the gateway does not start until they are renamed (there is no admin command for
-- it: UPDATE accounts SET name = '<new name>' WHERE id = '<id>'), after which it runs again.
-- Which account keeps the name is the operator's choice, not the migration's: renaming a tenant
-- changes what every command and the console call it.
DO $$
DECLARE
    groups text;
BEGIN
    SELECT string_agg(g.names, '; ' ORDER BY g.names) INTO groups
    FROM (SELECT string_agg(format('%L (id %s)', name, id), ', ' ORDER BY created_at, id) AS names
          FROM accounts GROUP BY lower(name) HAVING count(*) > 1) g;
    IF groups IS NOT NULL THEN
        RAISE EXCEPTION 'account names must differ by more than letter case, and these accounts have the same name but for case: %. Rename all but one of each group (UPDATE accounts SET name = ''<new name>'' WHERE id = ''<id>''), then start the gateway or run tollgate migrate again.', groups;
    END IF;
END
$$;

CREATE UNIQUE INDEX accounts_name_lower_key ON accounts (lower(name));
